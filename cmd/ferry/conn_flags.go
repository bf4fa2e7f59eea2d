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
}
