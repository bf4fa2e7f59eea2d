package testdb

import (
	"os"
	"path/filepath"
	"testing"
)

// ConfigureMySQL writes the my.cnf of a MySQL server without starting one: for a
// program that makes its datadir and starts it with s.ConfigFile (ferry clone
// --start). Adopt then attaches to the server it started.
func ConfigureMySQL(t testing.TB, opt MySQLOptions) *Server {
	t.Helper()
	if opt.Basedir == "" {
		opt.Basedir = NeedMySQL80(t)
	}
	if opt.RedoCapacity == "" {
		opt.RedoCapacity = "8M"
	}
	base := ShortDir(t)
	s := &Server{opt: Options{Datadir: opt.Datadir, ServerID: opt.ServerID, NoBinlog: opt.NoBinlog, Args: opt.Args, Config: opt.Config},
		mysql: &opt, base: base, Datadir: opt.Datadir, Socket: filepath.Join(base, "mysql.sock"),
		PidFile: filepath.Join(base, "mysqld.pid"), ErrorLog: filepath.Join(base, "error.log"),
		ConfigFile: filepath.Join(base, "my.cnf"), Port: freePort(t)}
	if s.Datadir == "" {
		s.Datadir = filepath.Join(base, "data")
	}
	if err := os.WriteFile(s.ConfigFile, []byte(s.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cleanup(t) })
	return s
}
