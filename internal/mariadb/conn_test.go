package mariadb

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ferry-backup/ferry/internal/setting"
)

// A failed connection is one line saying what to do; the server's error stays inside
// it (errors.As finds its number), and the refusals no retry mends are marked
// ErrRefused while a server that is down, busy or out of connections is not.
func TestConnectError(t *testing.T) {
	c := ConnConfig{Host: "127.0.0.1", Port: 3306, User: "arch"}
	srv := func(n uint16, msg string) error {
		return fmt.Errorf("ping: %w", &mysql.MySQLError{Number: n, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: msg})
	}
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
		want    string // in the message
	}{
		{"password", srv(1045, "Access denied for user 'arch'@'127.0.0.1' (using password: YES)"), true, "check user name and the password"},
		{"no password", srv(1698, "Access denied for user 'arch'@'localhost'"), true, "check user name and the password"},
		{"host", srv(1130, "Host '127.0.0.1' is not allowed to connect to this MariaDB server"), true, "for it (CREATE USER and GRANT), or connect through the socket"},
		{"blocked", srv(1129, "Host '127.0.0.1' is blocked because of many connection errors; unblock with 'mariadb-admin flush-hosts'"), true, "flush-hosts"},
		{"locked", srv(4151, "Access denied, this account is locked"), true, "ACCOUNT UNLOCK"},
		{"expired", srv(1862, "Your password has expired. To log in you must change it using a client that supports expired passwords"), true, "set a new password"},
		{"database", srv(1044, "Access denied for user 'arch'@'%' to database 'x'"), true, "refused the connection"},
		{"unknown database", srv(1049, "Unknown database 'x'"), true, "Unknown database 'x'"},
		{"auth protocol", srv(1251, "Client does not support authentication protocol requested by server; consider upgrading MariaDB client"), true, "mysql_native_password or ed25519"},
		{"old password format", srv(1275, "Server is running in --secure-auth mode, but 'arch'@'%' has a password in the old format; please change the password to the new format"), true, "mysql_native_password or ed25519"},
		{"plugin", fmt.Errorf("connect: %w", mysql.ErrUnknownPlugin), true, "an authentication plugin the client does not support"},
		{"clear text", mysql.ErrCleartextPassword, true, "mysql_clear_password"},
		// Transient: the server's state, not the account's.
		{"too many", srv(1040, "Too many connections"), false, "Too many connections"},
		{"user limit", srv(1203, "User arch already has more than 'max_user_connections' active connections"), false, "max_user_connections"},
		{"shutdown", srv(1053, "Server shutdown in progress"), false, "shutdown"},
		{"down", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, "is it running?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := connectError(c, tc.err)
			if errors.Is(got, ErrRefused) != tc.refused {
				t.Fatalf("%v: refused %v, want %v", got, !tc.refused, tc.refused)
			}
			if msg := got.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.Contains(msg, c.Where()) {
				t.Fatalf("%q: want one line naming the server and containing %q", msg, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("%v does not wrap %v", got, tc.err)
			}
			if cli := setting.Render(got, setting.Names{setting.User: "--user", setting.Socket: "--socket"}); strings.Contains(got.Error(), "user name") && !strings.Contains(cli, "check --user") ||
				strings.Contains(got.Error(), "server socket") && !strings.Contains(cli, "check --socket") {
				t.Fatalf("rendered for the command line: %q", cli)
			}
			var me, orig *mysql.MySQLError
			if errors.As(tc.err, &orig) && (!errors.As(got, &me) || me.Number != orig.Number) {
				t.Fatalf("%v: the server's error %d is not inside it", got, orig.Number)
			}
		})
	}
	if down := connectError(c, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}); !IsConnLost(down) {
		t.Fatalf("%v: not a lost connection", down)
	}
}

// TestResolveGroups: the connection comes from the clients' groups and mariabackup's,
// a later line winning; ferry's own groups and the server's are not read for it.
func TestResolveGroups(t *testing.T) {
	cnf := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(cnf, []byte("[client]\nuser=app\nsocket=/run/a.sock\n[client-server]\nsocket=/run/b.sock\n[mariadb-backup]\nuser=backup\npassword=pw\n[mysqld]\nport=3307\n[ferry]\nuser=nobody\n"), 0o600)
	c, err := ConnConfig{DefaultsFile: cnf}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "backup" || c.Password != "pw" || c.Socket != "/run/b.sock" || c.Port != 3306 {
		t.Errorf("resolved %+v: want user backup with its password from [mariadb-backup], the socket of [client-server], the default port", c)
	}
}
