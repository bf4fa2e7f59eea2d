// Package mariadb is ferry's SQL side: connecting as MariaDB clients do, probing the
// server, the BACKUP STAGE lock sequence, binlog/GTID coordinates, and running a
// private mariadbd for prepare.
package mariadb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/go-sql-driver/mysql"
)

// ConnConfig holds the connection options a MariaDB client takes. The password never
// comes from the command line: it is read from PasswordFile, MYSQL_PWD or the [client]
// group of DefaultsFile.
type ConnConfig struct {
	Host         string
	Port         int
	Socket       string
	User         string
	Password     string
	PasswordFile string
	DefaultsFile string
}

// ClientGroups are the option-file groups the connection is read from: the MariaDB
// clients' ([client], [client-server], [client-mariadb], [mariadb-client]) and
// mariabackup's ([xtrabackup], [mariabackup], [mariadb-backup]), where host, port,
// socket, user and password mean what they mean to ferry. As for MariaDB's programs,
// a later line of the file wins.
var ClientGroups = []string{"client", "client-server", "client-mariadb", "mariadb-client", "xtrabackup", "mariabackup", "mariadb-backup"}

// Resolve fills unset fields from DefaultsFile's ClientGroups, the password file and
// MYSQL_PWD, then applies the same defaults as the mariadb client.
func (c ConnConfig) Resolve() (ConnConfig, error) {
	if c.DefaultsFile != "" {
		opts, err := optfile.Read(c.DefaultsFile, ClientGroups...)
		if err != nil {
			return c, setting.Errorf("%s: %w", setting.DefaultsFile, err)
		}
		c.applyDefaults(opts)
	}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return c, fmt.Errorf("read password file: %w", err)
		}
		c.Password = strings.TrimRight(string(b), "\r\n")
	}
	if c.Password == "" {
		c.Password = os.Getenv("MYSQL_PWD")
	}
	if c.User == "" {
		c.User = "root"
	}
	if c.Host == "" && c.Socket == "" {
		c.Socket = "/run/mysqld/mysqld.sock"
	}
	if c.Port == 0 {
		c.Port = 3306
	}
	return c, nil
}

func (c *ConnConfig) applyDefaults(opts map[string]string) {
	set := func(dst *string, key string) {
		if v, ok := opts[key]; ok && *dst == "" {
			*dst = v
		}
	}
	set(&c.Host, "host")
	set(&c.Socket, "socket")
	set(&c.User, "user")
	set(&c.Password, "password")
	if v, ok := opts["port"]; ok && c.Port == 0 {
		c.Port, _ = strconv.Atoi(v)
	}
}

// Where describes the server address for messages.
func (c ConnConfig) Where() string {
	if c.Host != "" {
		return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	}
	return "socket " + c.Socket
}

// DSN returns a go-sql-driver DSN for the config.
func (c ConnConfig) DSN() string {
	cfg := mysql.NewConfig()
	cfg.User = c.User
	cfg.Passwd = c.Password
	if c.Host != "" {
		cfg.Net = "tcp"
		cfg.Addr = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	} else {
		cfg.Net = "unix"
		cfg.Addr = c.Socket
	}
	cfg.Timeout = 10 * time.Second
	cfg.InterpolateParams = true
	cfg.AllowNativePasswords = true
	return cfg.FormatDSN()
}

// Open connects and pings, turning driver errors into one-line messages that say what
// to fix.
func Open(ctx context.Context, c ConnConfig) (*sql.DB, error) {
	db, err := sql.Open("mysql", c.DSN())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, connectError(c, err)
	}
	return db, nil
}

// ErrRefused marks a connection the server refused for a reason no retry mends: the
// account (its password, its host, its lock, its authentication plugin) or the
// database. Every other connection error may pass: the server was down, busy or out
// of connections.
var ErrRefused = errors.New("the server refused the connection")

// ErrConnect marks every error of a connection to the server that failed, refused or
// not (ErrRefused), and an account without the privileges the verb needs.
var ErrConnect = errors.New("cannot connect to the server")

// Unreachable marks err, which says that the server went away or could not be
// reached, with ErrConnect; its message stays as it is.
func Unreachable(err error) error { return &connError{err.Error(), []error{err, ErrConnect}} }

// connError is a connection error's one-line message; it wraps the driver's error
// (a *mysql.MySQLError when the server answered) and ErrRefused when no retry mends it.
type connError struct {
	msg  string
	errs []error
}

func (e *connError) Error() string   { return e.msg }
func (e *connError) Unwrap() []error { return e.errs }

// plugins is what to do about an account whose authentication ferry cannot use.
const plugins = "identify the account with mysql_native_password or ed25519 (ALTER USER ... IDENTIFIED VIA ...)"

// connectError turns a failed connection into one line saying what to fix, keeping
// the driver's error inside it.
func connectError(c ConnConfig, err error) error {
	refused := func(format string, args ...any) error {
		se := setting.Errorf(format, args...)
		return &connError{se.Error(), []error{se, ErrRefused, ErrConnect, err}}
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1045, 1698: // ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR
			return refused("access denied for user %q at %s: check %s and the password (%s, MYSQL_PWD or [client] in %s)", c.User, c.Where(), setting.User, setting.PasswordFile, setting.DefaultsFile)
		case 1130: // ER_HOST_NOT_PRIVILEGED
			return refused("server at %s: %s: no account is for the address ferry connects from: create user %q for it (CREATE USER and GRANT), or connect through the socket", c.Where(), me.Message, c.User)
		case 1129: // ER_HOST_IS_BLOCKED: the message says to flush hosts
			return refused("server at %s: %s", c.Where(), me.Message)
		case 4151: // ER_ACCOUNT_HAS_BEEN_LOCKED
			return refused("server at %s: %s: unlock user %q (ALTER USER ... ACCOUNT UNLOCK) or connect as another user", c.Where(), me.Message, c.User)
		case 1820, 1862: // ER_MUST_CHANGE_PASSWORD(_LOGIN)
			return refused("server at %s: %s: set a new password for user %q (ALTER USER ... IDENTIFIED BY)", c.Where(), me.Message, c.User)
		case 1251, 1275: // ER_NOT_SUPPORTED_AUTH_MODE, ER_SERVER_IS_IN_SECURE_AUTH_MODE
			return refused("server at %s: user %q: %s: %s", c.Where(), c.User, me.Message, plugins)
		case 1044, 1049: // ER_DBACCESS_DENIED_ERROR, ER_BAD_DB_ERROR
			return refused("server at %s refused the connection: %s", c.Where(), me.Message)
		}
		return &connError{fmt.Sprintf("server at %s: %s", c.Where(), me.Message), []error{ErrConnect, err}}
	}
	for _, pe := range []error{mysql.ErrUnknownPlugin, mysql.ErrNativePassword, mysql.ErrOldPassword, mysql.ErrCleartextPassword} {
		if errors.Is(err, pe) {
			return refused("server at %s: user %q: ferry cannot answer the account's authentication (%s): %s", c.Where(), c.User, authWhat(pe), plugins)
		}
	}
	se := setting.Errorf("cannot connect to the server at %s (%v): is it running? check %s or %s/%s", c.Where(), rootCause(err), setting.Socket, setting.Host, setting.Port)
	return &connError{se.Error(), []error{se, ErrConnect, err}}
}

// authWhat names the authentication the driver's error is about, without its advice
// on a DSN ferry's user does not write.
func authWhat(err error) string {
	switch err {
	case mysql.ErrNativePassword:
		return "mysql_native_password, which the server did not allow"
	case mysql.ErrOldPassword:
		return "an old-format password (mysql_old_password)"
	case mysql.ErrCleartextPassword:
		return "a password sent in clear text (mysql_clear_password)"
	}
	return "an authentication plugin the client does not support"
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// IsConnLost reports whether err means the server connection went away (server
// stopped, restarted or killed the session).
func IsConnLost(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1053, 1927, 2006, 2013: // shutdown in progress, connection killed, gone away, lost
			return true
		}
	}
	// A *net.OpError, not any net.Error: a syscall.Errno is a net.Error too, so that
	// would take a missing file for a lost connection.
	var oe *net.OpError
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.As(err, &oe)
}
