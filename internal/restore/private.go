package restore

import (
	"context"
	"database/sql"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// PrivateServer is a server running privately on a restore's prepared copy, after
// recovery: the point-in-time replay applies the archived binlog through it, and the
// table export reads the tables through it.
type PrivateServer interface {
	// DB is a connection pool to it.
	DB() *sql.DB
	// LogErrors is the error lines of its log, for a message.
	LogErrors() string
	// Shutdown stops it cleanly.
	Shutdown(ctx context.Context) error
}

// Starter is how a restore starts its private server, the sibling of its Recoverer:
// the replay and the export reach the server only through it, so that a test drives
// them without one. Config.Starter nil is the stock one: mariadbd on a socket in a
// private directory, reachable by nothing else.
type Starter interface {
	StartPrivate(ctx context.Context, cfg mariadb.PrivateConfig) (PrivateServer, error)
}

// stockStarter starts the stock mariadbd.
type stockStarter struct{}

// StartPrivate implements Starter.
func (stockStarter) StartPrivate(ctx context.Context, cfg mariadb.PrivateConfig) (PrivateServer, error) {
	p, err := mariadb.StartPrivate(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// starter is cfg.Starter, or the stock one.
func (cfg Config) starter() Starter {
	if cfg.Starter != nil {
		return cfg.Starter
	}
	return stockStarter{}
}
