package restore

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

// export starts the stock server privately on the prepared copy and hands it to
// cfg.Export, then shuts it down cleanly.
func export(ctx context.Context, b *Backup, staging, bin string, cfg Config) error {
	var err error
	if bin == "" {
		if bin, err = cfg.recoverer().Server(ctx, b); err != nil {
			return err
		}
	}
	opts, err := b.Options(cfg.Keys)
	if err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(staging, "ib_logfile0"))
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	run, err := cfg.runDir("ferry-export-")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(run)
	args := append(opts.Args(), "--innodb-buffer-pool-size="+cmp.Or(cfg.UseMemory, "256M"), "--innodb-log-file-size="+strconv.FormatInt(fi.Size(), 10))
	pc := mariadb.PrivateConfig{Binary: bin, Datadir: staging, RunDir: run, Args: args, ErrLog: filepath.Join(run, "mariadbd.err")}
	srv, err := cfg.starter().StartPrivate(ctx, pc)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := cfg.Export(ctx, srv.DB(), staging); err != nil {
		srv.Shutdown(context.WithoutCancel(ctx))
		return err
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
