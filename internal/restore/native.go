package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Recovery says how a copy's redo is applied.
type Recovery string

// Recovery modes.
const (
	// RecoveryAuto applies the redo natively and falls back to the server's recovery
	// when ferry cannot (the default).
	RecoveryAuto Recovery = ""
	// RecoveryNative applies the redo natively and fails instead of falling back.
	RecoveryNative Recovery = "native"
	// RecoveryServer runs the stock server's crash recovery.
	RecoveryServer Recovery = "server"
)

// ParseRecovery reads a recovery mode: auto, native or server.
func ParseRecovery(s string) (Recovery, error) {
	switch s {
	case "", "auto":
		return RecoveryAuto, nil
	case "native", "server":
		return Recovery(s), nil
	}
	return "", fmt.Errorf("recovery %q: want auto, native or server", s)
}

// applyNative rolls the copy in dir forward with ferry's own redo apply. done is false
// when the copy needs the server's recovery instead (auto mode; the reason is logged).
func applyNative(ctx context.Context, dir string, opts ServerOptions, mode Recovery, partial bool, ahead *apply.Ahead, memory int, log *slog.Logger) (done bool, err error) {
	if mode == RecoveryServer {
		return false, nil
	}
	cfg, err := nativeConfig(dir, opts, partial, log)
	cfg.Ahead, cfg.Memory = ahead, memory
	if err == nil {
		faultpoint.At(ctx, "native-apply", 1)
		var res apply.Result
		res, err = apply.Dir(ctx, cfg)
		if err == nil {
			log.Info("prepare: redo applied natively; the copy needs no recovery", "redo_bytes", res.RedoBytes,
				"pages", res.Pages, "batches", res.Batches, "end_lsn", res.EndLSN, "took", res.Took.Round(1e6),
				"check", res.Check.Round(1e6), "roll", res.Roll.Round(1e6), "parsed_ahead", res.ParsedAhead,
				"spaces", res.Spaces, "scanned_all", res.Scanned)
			return true, nil
		}
	}
	if errors.Is(err, apply.ErrKey) {
		return false, setting.Errorf("prepare: %w: %s %s is not the source's key file, or %s is wrong", err, setting.KeyFile, keyFileOf(opts), setting.KeyPasswordFile)
	}
	if mode == RecoveryNative || !errors.Is(err, apply.ErrNotApplied) {
		return false, fmt.Errorf("prepare: %w", err)
	}
	log.Warn("prepare: the stock server recovers the copy instead of ferry", "reason", err)
	return false, nil
}

// parseAhead starts parsing the redo log of the backup pre while the restore copies
// its files, on a core the copy leaves idle, when the log can be read before the copy
// (a backup directory, or a chain whose newest link is one) and will be applied
// natively; nil otherwise. The apply uses the result only if the copy's log is the
// same (apply.Ahead).
func parseAhead(ctx context.Context, pre *Backup, cfg Config) *apply.Ahead {
	if pre == nil || pre.Prepared || pre.Dir == "" || cfg.Recovery == RecoveryServer || pre.IsMySQL() {
		return nil
	}
	opts, err := pre.Options(cfg.Keys)
	if err != nil {
		return nil // the restore reports it
	}
	pageSize := 16384
	for _, o := range opts.Layout {
		if o.Name == "innodb_page_size" {
			if pageSize, err = apply.SizeValue(o.Value); err != nil {
				return nil
			}
		}
	}
	memory, _ := applyMemory(cfg.UseMemory)
	return apply.ParseAhead(ctx, filepath.Join(pre.Dir, "ib_logfile0"), pageSize, memory)
}

// applyMemory is the memory for recovery (--use-memory, e.g. "256M"; "": the default)
// as the native apply's bytes of redo records per batch (0: its default, 256 MiB):
// what mariadbd gets as its buffer pool when it recovers the copy instead. A log whose
// records fit one batch is parsed once.
func applyMemory(useMemory string) (int, error) {
	if useMemory == "" {
		return 0, nil
	}
	n, err := optfile.ParseSize(useMemory)
	if err != nil || n < 1<<20 || n > 1<<40 {
		return 0, setting.Errorf("%s %q: give the memory for recovery as a size from 1M to 1T, like 256M or 2G", setting.UseMemory, useMemory)
	}
	return int(n), nil
}

// Following is a Source whose Caps().FollowLog is set: its redo log is written into the staging directory while
// Fill runs, as it arrives (a clone's, a stream's): the restore parses the log as it lands, so
// that only the pages are left to roll once the copy is complete.
type Following interface {
	// LogFeed is the feed of the log Fill will write in staging (nil: none).
	LogFeed(staging string) *apply.Feed
}

// followAhead starts parsing the log a Following source writes into staging, unless
// the copy is recovered by the server; nil otherwise. Its page size is not known
// before the copy: the parse assumes the default, and the apply parses the log again
// if the copy's is another. The caller fails the feed once the source is filled, so
// that a log the source never completed does not keep the parse waiting.
func followAhead(ctx context.Context, staging string, cfg Config) (*apply.Ahead, *apply.Feed) {
	if cfg.Recovery == RecoveryServer {
		return nil, nil
	}
	feed := cfg.Source.(Following).LogFeed(staging)
	if feed == nil {
		return nil, nil
	}
	memory, _ := applyMemory(cfg.UseMemory)
	return apply.FollowAhead(ctx, feed, 0, memory), feed
}

// LogName is a copy's redo log, as a source that follows it writes it (Following).
const LogName = "ib_logfile0"

// errLogNotFilled ends the feed of a log its source did not complete.
var errLogNotFilled = errors.New("the copy was filled without its redo log complete")

// keyFileOf names this host's key file, for messages.
func keyFileOf(opts ServerOptions) string { return opts.keyFiles.KeyFile }

// nativeConfig is the apply configuration for a copy in dir with the backup's options.
func nativeConfig(dir string, opts ServerOptions, partial bool, log *slog.Logger) (apply.Config, error) {
	keys, alg, err := opts.LogKeys()
	if err != nil {
		return apply.Config{}, err
	}
	// A backup of a server encrypting at rest is taken to have innodb_encrypt_tables on:
	// tables with ENCRYPTED=DEFAULT and encryption metadata are written encrypted.
	cfg := apply.Config{Dir: dir, Partial: partial, Keys: keys, Algorithm: alg, Log: log, PageSize: 16384, EncryptTables: opts.Encrypted()}
	for _, o := range opts.Layout {
		switch o.Name {
		case "innodb_page_size":
			if cfg.PageSize, err = apply.SizeValue(o.Value); err != nil {
				return cfg, err
			}
		case "innodb_compression_level":
			if cfg.CompressionLevel, err = strconv.Atoi(o.Value); err != nil {
				return cfg, fmt.Errorf("innodb_compression_level %q: %w", o.Value, err)
			}
		case "innodb_checksum_algorithm":
			if !strings.Contains(o.Value, "crc32") {
				return cfg, fmt.Errorf("%w: innodb_checksum_algorithm=%s (ferry writes crc32 checksums)", apply.ErrNotApplied, o.Value)
			}
		}
	}
	for _, o := range opts.Layout {
		if o.Name == "innodb_data_file_path" {
			if cfg.DataFiles, err = apply.ParseDataFilePath(o.Value, cfg.PageSize); err != nil {
				return cfg, err
			}
		}
	}
	return cfg, nil
}
