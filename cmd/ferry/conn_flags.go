package main

import (
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/spf13/pflag"
)

// addConnFlags registers the MariaDB client connection options. There is deliberately
// no --password: secrets never go on the command line.
func addConnFlags(fs *pflag.FlagSet, c *mariadb.ConnConfig) {
	fs.StringVar(&c.Host, "host", "", "server host (TCP); default: the local socket")
	fs.IntVar(&c.Port, "port", 0, "server TCP port (default 3306)")
	fs.StringVar(&c.Socket, "socket", "", "server unix socket (default /run/mysqld/mysqld.sock)")
	fs.StringVarP(&c.User, "user", "u", "", "user name (default root)")
	fs.StringVar(&c.PasswordFile, "password-file", "", "file holding the password (else MYSQL_PWD or [client] in --defaults-file)")
	fs.StringVar(&c.DefaultsFile, "defaults-file", "", "option file whose [client] group gives user, password, host, port, socket")
	fs.VarP(noPassword{}, "password", "p", "refused: give the password in a file (--password-file), MYSQL_PWD or [client] of an option file")
	fs.MarkHidden("password")
}

// noPassword is --password, which mariabackup takes and ferry refuses (refusePassword):
// a password on the command line is visible to every user of the machine (ps, /proc).
// Set accepts anything, so that the refusal never echoes the password.
type noPassword struct{}

func (noPassword) String() string   { return "" }
func (noPassword) Type() string     { return "string" }
func (noPassword) Set(string) error { return nil }

// refusePassword is the usage error of a command line that gave --password (or -p),
// or, with given, one whose --password failed to parse (bare, as mariabackup prompts).
func refusePassword(fs *pflag.FlagSet, given bool) error {
	if f := fs.Lookup("password"); given || f != nil && f.Changed {
		return usageErr("--password: no password on the command line, where every user of the machine can read it; put it in a file given to --password-file, in MYSQL_PWD, or in [client] of an option file (--defaults-file)")
	}
	return nil
}

// mariadbdHelp is --mariadbd's help: the server that prepares a backup or runs a clone
// must be of the backed-up server's series.
const mariadbdHelp = "mariadbd of the backed-up server's series: a binary or an installation directory (default: the first of that series on PATH, in /usr/sbin, /usr/local/mysql/bin or /opt/mariadb-SERIES, or mariadbd-SERIES= in the option files)"
