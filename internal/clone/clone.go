package clone

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/mysql"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/stream"
	"golang.org/x/sys/unix"
)

// DefaultStreams is the number of parallel connections of a clone.
const DefaultStreams = defaults.CloneStreams

// Config configures ferry clone.
type Config struct {
	From string // donor address host:port
	// Listener, if set, is where the donor connects to this host instead (a Galera SST
	// joiner listens; From then only names the donor in messages). FirstWait bounds
	// the wait for its first connection.
	Listener  net.Listener
	FirstWait time.Duration
	Security  Security
	Datadir   string
	Replace   bool // move a non-empty datadir aside (kept) and clone in its place
	// Resume continues the interrupted clone whose staging directory is found: the
	// donor sends the pages changed since its copy began of the tablespaces it received
	// whole, and the other files whole (docs/clone.md, "Resuming a clone").
	Resume    bool
	Owner     string
	Compress  string
	MaxRate   int64
	MaxImpact float64
	Streams   int
	Grace     time.Duration
	// Start runs the local mariadbd (with DefaultsFile, "" for the host's my.cnf) on the
	// clone; Replicate then makes it a replica of the donor. Local connects to it.
	Start     bool
	Replicate bool
	// FromSource makes the clone a replica of the source the donor replicates from,
	// at the donor's gtid_slave_pos, instead of a replica of the donor.
	FromSource   bool
	DefaultsFile string
	Local        mariadb.ConnConfig
	Repl         mariadb.Replica // user and password; host and port default to the donor's
	StartTimeout time.Duration
	Mariadbd     string
	UseMemory    string
	Recovery     restore.Recovery // how the copy's redo is applied
	DataDirs     restore.DataDirs // where DATA DIRECTORY tablespaces go on this host
	InPlace      *restore.InPlace // swap the datadir's contents, not the directory (see restore.InPlace)
	// BeforeSwap checks the prepared copy's coordinates before it replaces the datadir
	// (restore.Config.BeforeSwap).
	BeforeSwap func(mariadb.Coordinates) error
	Keys       keyfile.Files // this host's key files, for a donor encrypting data at rest
	Version    string
	Log        *slog.Logger
	Progress   io.Writer
	Terminal   bool
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
	Coordinates mariadb.Coordinates   // the copy's position, read on the donor under BLOCK_COMMIT
	Owner       string                // run as root: who owns the files and why
	// MySQL is set when the donor is a MySQL server: the clone is started with mysqld
	// and replicates with MySQL's statements.
	MySQL bool
	// Version is the donor server's version.
	Version string
	// Bypass is what a donor that sent no copy said instead (a Galera IST); nothing
	// else is set then, and the datadir was not touched.
	Bypass string
}

// Clone copies the donor's running server into a staging directory beside the datadir,
// prepares it, swaps it in and, as asked, starts it and makes it a replica.
func Clone(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	datadir, err := filepath.Abs(cfg.Datadir)
	if err != nil || cfg.Datadir == "" {
		return nil, setting.Errorf("%s is required", setting.Datadir)
	}
	if cfg.Replicate && (!cfg.Start || cfg.Repl.User == "") {
		return nil, setting.Errorf("%s needs %s and %s (with %s)", setting.Replicate, setting.Start, setting.ReplUser, setting.ReplPasswordFile)
	}
	conns, host, err := cfg.connector(ctx)
	if err != nil {
		return nil, err
	}
	defer conns.close()
	bc, w, err := conns.connect(ctx, "")
	if err != nil {
		return nil, err
	}
	if w.Bypass != "" {
		if f, err := jsonFrame(start{}); err == nil {
			bc.send(f) // the donor waits for it before it reports its part done
		}
		bc.c.Close()
		return &Result{Datadir: datadir, Donor: cfg.From, Bypass: w.Bypass}, nil
	}
	first := &firstConn{bc: bc}
	unlock, staging, err := claimStaging(datadir, cfg.Log, cfg.Resume)
	if err != nil {
		first.abort(err)
		return nil, err
	}
	defer unlock()
	src := &source{cfg: cfg, conns: conns, first: first, w: w, staging: staging, journaled: cfg.Listener == nil}
	if cfg.Resume {
		if src.offer, err = pickResume(cfg.Log, staging, w); err != nil {
			first.abort(err)
			return nil, err
		}
	}
	rcfg := restore.Config{Source: src, Datadir: datadir, Replace: cfg.Replace, Owner: cfg.Owner, Mariadbd: cfg.Mariadbd,
		UseMemory: cfg.UseMemory, Recovery: cfg.Recovery, Log: cfg.Log, Progress: cfg.Progress, Terminal: cfg.Terminal, DataDirs: cfg.DataDirs, Keys: cfg.Keys,
		InPlace: cfg.InPlace, BeforeSwap: cfg.BeforeSwap, FromSource: cfg.FromSource}
	res, err := restore.Restore(ctx, rcfg)
	if err != nil {
		first.abort(err)
		return nil, err
	}
	if m := res.Backup.Manifest; m != nil {
		cfg.Log.Info("clone prepared", "datadir", res.Datadir, "redo_kept", m.LastLSN-m.StartLSN, "gtid", res.Coordinates.ReplicaGTID())
	}
	out := &Result{Datadir: res.Datadir, MovedAside: res.MovedAside, Donor: cfg.From, DonorPort: w.Port, Options: res.Options,
		Coordinates: res.Coordinates, Owner: res.Owner, MySQL: res.Backup.IsMySQL(), Version: w.ServerVersion}
	out.Replica = cfg.Repl
	out.Replica.GTID = res.Coordinates.ReplicaGTID()
	primary, port := host, w.Port
	if cfg.FromSource { // restore refused a copy without exactly one source
		src := res.Coordinates.Sources[0]
		out.Replica.GTID, primary, port = res.Coordinates.GTIDSlavePos, src.Host, src.Port
	}
	out.Replica.Host = cmp.Or(out.Replica.Host, primary)
	out.Replica.Port = cmp.Or(out.Replica.Port, port)
	if !cfg.Start {
		return out, nil
	}
	return out, startAndReplicate(ctx, cfg, out, w)
}

// connector is how this recipient reaches the donor: it dials From, or accepts on
// Listener. host is the donor's host, for replication.
func (cfg Config) connector(ctx context.Context) (connector, string, error) {
	h := hello{Protocol: protocolVersion, Ferry: cfg.Version, Compress: cfg.Compress, MaxRate: cfg.MaxRate, MaxImpact: cfg.MaxImpact,
		Streams: cfg.Streams}
	if cfg.Listener != nil {
		tcfg, err := cfg.Security.serverTLS()
		if err != nil {
			return nil, "", err
		}
		return newAcceptor(ctx, cfg.Listener, tcfg, cfg.Security.key(), h, cfg.FirstWait, cfg.Log), "", nil
	}
	host, _, err := net.SplitHostPort(cfg.From)
	if err != nil {
		return nil, "", setting.Errorf("%s %q: use host:port of the donor's ferry serve", setting.From, cfg.From)
	}
	tcfg, err := cfg.Security.clientTLS(host)
	if err != nil {
		return nil, "", err
	}
	return &dialer{addr: cfg.From, tls: tcfg, key: cfg.Security.key(), h: h}, host, nil
}

// firstConn is the first connection of a clone, made before the restore starts: the
// restore's receive takes it, or, if the restore fails before, abort tells the donor why.
type firstConn struct {
	mu sync.Mutex
	bc *bufConn
}

func (f *firstConn) take() *bufConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	bc := f.bc
	f.bc = nil
	return bc
}

func (f *firstConn) abort(err error) {
	bc := f.take()
	if bc == nil {
		return
	}
	if fr, ferr := jsonFrame(start{Abort: err.Error()}); ferr == nil {
		bc.send(fr)
	}
	bc.c.Close()
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

// claimStaging locks the clone's staging path on the datadir's filesystem (beside it,
// or inside it when it is a mount point or its parent is not writable, as for a Galera
// joiner running as mariadbd's user: see restore.StagingPath), so two clones cannot
// share it, and clears what an interrupted clone left there unless it is to be resumed.
func claimStaging(datadir string, log *slog.Logger, resume bool) (func(), string, error) {
	lockPath, staging := restore.StagingPath(datadir, "clone.lock"), restore.StagingPath(datadir, "clone")
	parent := filepath.Dir(staging)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, "", fmt.Errorf("create %s: %w", parent, err)
	}
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		return nil, "", fmt.Errorf("another ferry clone is running into %s (it holds %s)", datadir, lockPath)
	}
	if _, err := os.Stat(staging); err == nil && !resume {
		log.Warn("removing the staging directory of an interrupted clone; starting over", "staging", staging)
		if err := os.RemoveAll(staging); err != nil {
			lf.Close()
			return nil, "", fmt.Errorf("remove the staging directory of an interrupted clone %s: %w", staging, err)
		}
	}
	return func() { os.Remove(lockPath); lf.Close() }, staging, nil
}

// receive runs the clone's connections into dir, starting with bc (welcomed with w,
// started with st), journaling into j, and returns what they wrote.
func receive(ctx context.Context, cfg Config, conns connector, bc *bufConn, w welcome, st start, j *journal, feed *apply.Feed, dir string) (*stream.Unpacked, error) {
	if feed != nil {
		defer feed.Fail(errors.New("the clone ended before its redo log was complete")) // no-op once it is
	}
	if bc == nil {
		return nil, errors.New("the clone's first connection is gone (internal error)")
	}
	if err := checkRecipient(ctx, cfg, w, st.Resume, dir); err != nil {
		if f, ferr := jsonFrame(start{Abort: err.Error()}); ferr == nil {
			bc.send(f)
		}
		bc.c.Close()
		return nil, err
	}
	dec, err := newDecoder()
	if err != nil {
		bc.c.Close()
		return nil, err
	}
	cfg.Log.Info("cloning", "donor", cfg.From, "server", w.ServerVersion, "datadir", w.Datadir, "estimate_mib", w.Estimate>>20,
		"streams", cfg.Streams, "compress", cfg.Compress, "staging", dir)
	prog := progress.New(progress.Options{Label: "clone", Total: w.Estimate, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	defer prog.Finish()
	rctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r := &receiver{dir: dir, dec: dec, log: cfg.Log, prog: prog.Add, ctx: rctx, fail: fail, conns: conns, grace: cfg.Grace,
		files: map[uint64]*rfile{}, byPath: map[string]*rfile{}, committed: make(chan struct{}), commitWait: 5 * time.Second, journal: j, feed: feed}
	f, err := jsonFrame(st)
	if err == nil {
		err = bc.send(f)
	}
	if err != nil {
		bc.c.Close()
		return nil, fmt.Errorf("start the clone: %w", err)
	}
	go r.run(bc, w.Session)
	for i := 1; i < cfg.Streams; i++ {
		go func() {
			c, _, err := conns.connect(rctx, w.Session)
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
		return nil, r.failure()
	}
	if err := writeManifest(dir, r.manifest); err != nil {
		return nil, err
	}
	return r.unpacked(), nil
}

// checkLocalServer refuses a host without a server of the donor's family and series
// (ds, release dr) to recover and run the clone.
func checkLocalServer(ctx context.Context, cfg Config, w welcome, ds, dr string) error {
	find, version, family, pkg := mariadb.FindMysqldFor, mariadb.MysqldVersion, "MariaDB", "mariadb-server "+ds
	if w.Family == mariadb.FamilyMySQL {
		find, version, family, pkg = mysql.FindMysqld, mysql.MysqldVersion, "MySQL", "MySQL "+ds
	}
	bin, err := find(ctx, cfg.Mariadbd, ds)
	if err != nil {
		return err
	}
	local, err := version(ctx, bin)
	if err != nil {
		return err
	}
	ls, lr, ok := mariadb.Series(local)
	if !ok || ls != ds {
		return setting.Errorf("the donor runs %s %s but this host's %s is %s: install %s here (or pass %s)", family, w.ServerVersion, bin, local, pkg, setting.Mariadbd)
	}
	if lr != dr {
		cfg.Log.Warn("the donor and this host run different releases of one series", "donor", w.ServerVersion, "local", local)
	}
	return nil
}

// checkRecipient refuses a clone this host cannot take: another server family or
// series than the donor's, or too little free disk.
func checkRecipient(ctx context.Context, cfg Config, w welcome, resume *resumeOffer, dir string) error {
	ds, dr, ok := mariadb.Series(w.ServerVersion)
	if !ok {
		return fmt.Errorf("%w: the donor reports server version %q, which is not a server version", errProtocol, w.ServerVersion)
	}
	if err := checkLocalServer(ctx, cfg, w, ds, dr); err != nil {
		return err
	}
	// The donor's estimate of the copy, a twentieth more for the redo written while it
	// runs, and 64 MiB for recovery's own files; a resumed clone holds part of it.
	est := w.Estimate
	if resume != nil {
		est = max(est-resume.bytes(), est/10)
	}
	need := est + w.Estimate/20 + 64<<20
	return diskspace.Check(dir, need, fmt.Sprintf("the clone (the donor's estimate, %s, and room for its redo and recovery)", diskspace.Human(w.Estimate)))
}
