package clone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/stream"
	"golang.org/x/sys/unix"
)

// DefaultStreams is the number of parallel connections of a clone.
const DefaultStreams = 4

// Config configures ferry clone.
type Config struct {
	From      string // donor address host:port
	Security  Security
	Datadir   string
	Replace   bool // move a non-empty datadir aside (kept) and clone in its place
	Owner     string
	Compress  string
	MaxRate   int64
	MaxImpact float64
	Streams   int
	Grace     time.Duration
	// Start runs the local mariadbd (with DefaultsFile, "" for the host's my.cnf) on the
	// clone; Replicate then makes it a replica of the donor. Local connects to it.
	Start        bool
	Replicate    bool
	DefaultsFile string
	Local        mariadb.ConnConfig
	Repl         mariadb.Replica // user and password; host and port default to the donor's
	StartTimeout time.Duration
	Mariadbd     string
	UseMemory    string
	DataDirs     restore.DataDirs // where DATA DIRECTORY tablespaces go on this host
	Keys         keyfile.Files    // this host's key files, for a donor encrypting data at rest
	Version      string
	Log          *slog.Logger
	Progress     io.Writer
	Terminal     bool
}

// Result tells what a clone did.
type Result struct {
	Datadir     string
	MovedAside  string // the old datadir, kept
	Donor       string
	DonorPort   int
	Replica     mariadb.Replica // the position and primary to replicate from
	Server      *mariadb.Server // the started server, with Start
	Replicating bool
	Options     restore.ServerOptions // what the clone's server must be started with
}

// Clone copies the donor's running server into a staging directory beside the datadir,
// prepares it, swaps it in and, as asked, starts it and makes it a replica.
func Clone(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	datadir, err := filepath.Abs(cfg.Datadir)
	if err != nil || cfg.Datadir == "" {
		return nil, errors.New("--datadir is required")
	}
	host, _, err := net.SplitHostPort(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("--from %q: use host:port of the donor's ferry serve", cfg.From)
	}
	tcfg, err := cfg.Security.clientTLS(host)
	if err != nil {
		return nil, err
	}
	if cfg.Replicate && (!cfg.Start || cfg.Repl.User == "") {
		return nil, errors.New("--replicate needs --start and --repl-user (with --repl-password-file)")
	}
	unlock, staging, err := claimStaging(datadir, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer unlock()
	d := &dialer{addr: cfg.From, tls: tcfg, key: cfg.Security.key(),
		h: hello{Protocol: protocolVersion, Ferry: cfg.Version, Compress: cfg.Compress, MaxRate: cfg.MaxRate, MaxImpact: cfg.MaxImpact}}
	var w welcome
	src := &restore.StreamSource{Label: "clone of " + cfg.From, Dir: staging,
		Unpack: func(ctx context.Context, dir string, _ restore.Env) (*stream.Unpacked, error) {
			got, wl, err := receive(ctx, cfg, d, dir)
			w = wl
			return got, err
		}}
	rcfg := restore.Config{Source: src, Datadir: datadir, Replace: cfg.Replace, Owner: cfg.Owner, Mariadbd: cfg.Mariadbd,
		UseMemory: cfg.UseMemory, Log: cfg.Log, Progress: cfg.Progress, Terminal: cfg.Terminal, DataDirs: cfg.DataDirs, Keys: cfg.Keys}
	res, err := restore.Restore(ctx, rcfg)
	if err != nil {
		return nil, err
	}
	if m := res.Backup.Manifest; m != nil {
		cfg.Log.Info("clone prepared", "datadir", res.Datadir, "redo_kept", m.LastLSN-m.StartLSN, "gtid", res.Coordinates.ReplicaGTID())
	}
	out := &Result{Datadir: res.Datadir, MovedAside: res.MovedAside, Donor: cfg.From, DonorPort: w.Port, Options: res.Options}
	out.Replica = cfg.Repl
	out.Replica.GTID = res.Coordinates.ReplicaGTID()
	if out.Replica.Host == "" {
		out.Replica.Host = host
	}
	if out.Replica.Port == 0 {
		out.Replica.Port = w.Port
	}
	if !cfg.Start {
		return out, nil
	}
	return out, startAndReplicate(ctx, cfg, out, w)
}

func (cfg Config) withDefaults() Config {
	if cfg.Streams <= 0 {
		cfg.Streams = DefaultStreams
	}
	if cfg.Compress == "" {
		cfg.Compress = CompressAuto
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// claimStaging locks the clone's staging path beside datadir, so two clones cannot
// share it, and clears what an interrupted clone left there.
func claimStaging(datadir string, log *slog.Logger) (func(), string, error) {
	parent, base := filepath.Dir(datadir), filepath.Base(datadir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, "", fmt.Errorf("create %s: %w", parent, err)
	}
	lockPath := filepath.Join(parent, "."+base+".ferry-clone.lock")
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		return nil, "", fmt.Errorf("another ferry clone is running into %s (it holds %s)", datadir, lockPath)
	}
	staging := filepath.Join(parent, "."+base+".ferry-clone")
	if _, err := os.Stat(staging); err == nil {
		log.Warn("removing the staging directory of an interrupted clone; starting over", "staging", staging)
		if err := os.RemoveAll(staging); err != nil {
			lf.Close()
			return nil, "", fmt.Errorf("remove the staging directory of an interrupted clone %s: %w", staging, err)
		}
	}
	return func() { os.Remove(lockPath); lf.Close() }, staging, nil
}

// receive runs the clone's connections into dir and returns what they wrote.
func receive(ctx context.Context, cfg Config, d *dialer, dir string) (*stream.Unpacked, welcome, error) {
	bc, w, err := d.dial(ctx, "")
	if err != nil {
		return nil, w, err
	}
	if err := checkRecipient(ctx, cfg, w, dir); err != nil {
		if f, ferr := jsonFrame(start{Abort: err.Error()}); ferr == nil {
			bc.send(f)
		}
		bc.c.Close()
		return nil, w, err
	}
	dec, err := newDecoder()
	if err != nil {
		return nil, w, err
	}
	cfg.Log.Info("cloning", "donor", cfg.From, "server", w.ServerVersion, "datadir", w.Datadir, "estimate_mib", w.Estimate>>20,
		"streams", cfg.Streams, "compress", cfg.Compress, "staging", dir)
	prog := progress.New(progress.Options{Label: "clone", Total: w.Estimate, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	defer prog.Finish()
	rctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r := &receiver{dir: dir, dec: dec, log: cfg.Log, prog: prog.Add, ctx: rctx, fail: fail, dial: d.dial, grace: cfg.Grace,
		files: map[uint64]*rfile{}, byPath: map[string]*rfile{}, committed: make(chan struct{}), commitWait: 5 * time.Second}
	f, err := jsonFrame(start{})
	if err == nil {
		err = bc.send(f)
	}
	if err != nil {
		bc.c.Close()
		return nil, w, fmt.Errorf("start the clone: %w", err)
	}
	go r.run(bc, w.Session)
	for i := 1; i < cfg.Streams; i++ {
		go func() {
			c, _, err := d.dial(rctx, w.Session)
			if err != nil {
				cfg.Log.Warn("an extra stream could not connect; going on with fewer", "err", err)
				return
			}
			r.run(c, w.Session)
		}()
	}
	select {
	case <-r.committed:
		fail(errFinished)
	case <-rctx.Done():
		return nil, w, context.Cause(rctx)
	}
	if err := writeManifest(dir, r.manifest); err != nil {
		return nil, w, err
	}
	return r.unpacked(), w, nil
}

// checkRecipient refuses a clone this host cannot take: another MariaDB series than
// the donor's, or too little free disk.
func checkRecipient(ctx context.Context, cfg Config, w welcome, dir string) error {
	bin, err := mariadb.FindMysqld(cfg.Mariadbd)
	if err != nil {
		return err
	}
	local, err := mariadb.MysqldVersion(ctx, bin)
	if err != nil {
		return err
	}
	ds, dr, ok := mariadb.Series(w.ServerVersion)
	if !ok {
		return fmt.Errorf("%w: the donor reports server version %q, which is not a MariaDB version", errProtocol, w.ServerVersion)
	}
	ls, lr, ok := mariadb.Series(local)
	if !ok || ls != ds {
		return fmt.Errorf("the donor runs MariaDB %s but this host's %s is %s: install mariadb-server %s here (or pass --mariadbd)", w.ServerVersion, bin, local, ds)
	}
	if lr != dr {
		cfg.Log.Warn("the donor and this host run different MariaDB releases of one series", "donor", w.ServerVersion, "local", local)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	need := w.Estimate + w.Estimate/20 + 64<<20
	if free < need {
		return fmt.Errorf("not enough free disk for the clone in %s: about %d MiB needed, %d MiB free; free space or clone to another filesystem", filepath.Dir(dir), need>>20, free>>20)
	}
	return nil
}
