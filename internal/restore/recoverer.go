package restore

import (
	"context"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Recoverer is how a restore reaches the server that makes its copy consistent: it
// finds a server of the backup's series before any data moves, and runs the recovery
// (ferry's native redo apply, or the stock server's crash recovery on a private
// socket). Restore reaches it only through this interface, so that a test drives a
// whole restore without a server; Config.Recoverer nil is the stock one.
type Recoverer interface {
	// Server checks that a server can recover b's copy here and returns its binary
	// (b nil: that one is installed at all; its series is checked once the data tells
	// it).
	Server(ctx context.Context, b *Backup) (string, error)
	// Recover makes the copy in job.Dir consistent.
	Recover(ctx context.Context, job RecoverJob) error
}

// RecoverJob is one recovery of a copy.
type RecoverJob struct {
	Backup *Backup
	Dir    string
	ErrLog string // the server's error log, kept if its recovery fails
	Bin    string // the server, as Recoverer.Server returned it
	// Force is innodb_force_recovery: 0; 1 for a copy that holds only some of the
	// backup's tablespaces (a table restore); 3 keeps the transactions open in the
	// copy open, so that a later link of an incremental chain applies on it.
	Force int
	Ahead *apply.Ahead // the log parsed while the copy was filled (nil: none)
}

// Preparer is the Recoverer of a backup prepared in place (ferry prepare), which
// records the version of the server that prepared it.
type Preparer interface {
	Recoverer
	// Version is the version of the server bin, as Server returned it.
	Version(ctx context.Context, bin string) (string, error)
}

// stockRecoverer is the Recoverer of a restore on a host: the mariadbd found on PATH
// (or the one named), the native apply first unless the mode says otherwise.
type stockRecoverer struct{ cfg Config }

// recoverer is cfg.Recoverer, or the stock one.
func (cfg PrepareConfig) recoverer() Preparer {
	if cfg.Recoverer != nil {
		return cfg.Recoverer
	}
	return stockRecoverer{Config{Mariadbd: cfg.Mariadbd, UseMemory: cfg.UseMemory, Recovery: cfg.Recovery, Keys: cfg.Keys, Log: cfg.Log}}
}

// recoverer is cfg.Recoverer, or the stock one.
func (cfg Config) recoverer() Recoverer {
	if cfg.Recoverer != nil {
		return cfg.Recoverer
	}
	return stockRecoverer{cfg}
}

// Server implements Recoverer.
func (s stockRecoverer) Server(ctx context.Context, b *Backup) (string, error) {
	if b == nil {
		return mariadb.FindMysqld(s.cfg.Mariadbd)
	}
	if b.IsMySQL() {
		return b.mysqlServer(ctx, s.cfg.Mariadbd)
	}
	bin, _, err := b.prepareMariadbd(ctx, s.cfg.Mariadbd)
	return bin, err
}

// Recover implements Recoverer.
func (s stockRecoverer) Recover(ctx context.Context, job RecoverJob) error {
	if job.Backup.IsMySQL() {
		return s.recoverMySQL(ctx, job)
	}
	rec := recovery{b: job.Backup, dir: job.Dir, errLog: job.ErrLog, bin: job.Bin, mem: s.cfg.UseMemory,
		mode: s.cfg.Recovery, keys: s.cfg.Keys, log: s.cfg.Log, force: job.Force, ahead: job.Ahead}
	return rec.run(ctx)
}

// Version implements Preparer.
func (s stockRecoverer) Version(ctx context.Context, bin string) (string, error) {
	return mariadb.MysqldVersion(ctx, bin)
}
