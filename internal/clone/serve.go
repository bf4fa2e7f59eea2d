package clone

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/mariadb"
)

// Defaults of ServeConfig.
const (
	DefaultMemory = defaults.CloneMemory // raw bytes of frames not yet acknowledged, per clone
	DefaultGrace  = defaults.CloneGrace  // how long a clone waits for a lost recipient to reconnect
)

// ServeConfig configures ferry serve.
type ServeConfig struct {
	Listen   string
	Security Security
	// Backup holds the connection to the donor server and the copy options; Sink
	// and Monitor are set per clone.
	Backup    backup.Config
	MaxRate   int64   // bytes/s on the wire for every clone (the recipient may ask for less)
	MaxImpact float64 // share of the donor's write throughput a clone may cost (0: not watched)
	Memory    int64   // see DefaultMemory
	Grace     time.Duration
	Once      bool        // serve one clone, then return its result
	Stats     *ServeStats // if set, counts the clones served
	Log       *slog.Logger
	// Ready, if set, is called with the listening address.
	Ready func(addr string)
}

// donor serves clones of the server it is attached to.
type donor struct {
	cfg  ServeConfig
	key  []byte
	tls  *tls.Config
	info donorInfo
	est  int64 // the size estimate, when taken once before the clone (Donate)

	mu   sync.Mutex
	cur  *session
	done chan error // results of sessions, for --once
}

// donorInfo is what the welcome tells about the donor server.
type donorInfo struct {
	family   string // mariadb.Info.Family
	version  string
	datadir  string
	serverID uint32
	uid      string // @@server_uid
	port     int
	exclude  []string // path prefixes (absolute) not copied: binary and relay logs
}

// Serve listens for recipients and sends each a hot copy of the server's datadir.
func Serve(ctx context.Context, cfg ServeConfig) error {
	if cfg.Memory <= 0 {
		cfg.Memory = DefaultMemory
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	tcfg, err := cfg.Security.serverTLS()
	if err != nil {
		return err
	}
	d := &donor{cfg: cfg, key: cfg.Security.key(), tls: tcfg, done: make(chan error, 1)}
	if d.info, err = probeDonor(ctx, cfg.Backup.Conn, cfg.Log); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	context.AfterFunc(ctx, func() { ln.Close() })
	cfg.Log.Info("serving clones", "listen", ln.Addr().String(), "server", d.info.version, "datadir", d.info.datadir,
		"auth", cfg.Security.Describe())
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	go acceptLoop(ctx, ln, cfg.Log, func(c net.Conn, release func()) { d.handle(ctx, c, release) })
	select {
	case <-ctx.Done():
		d.stopCurrent(errors.New("ferry serve was stopped"))
		return nil
	case err := <-d.done:
		return err
	}
}

// probeDonor checks the server ferry serve is attached to before accepting anyone:
// the backup's own probe, whichever the server's family (backup.Detect).
func probeDonor(ctx context.Context, c mariadb.ConnConfig, log *slog.Logger) (donorInfo, error) {
	s, err := backup.Detect(c, log, backup.RedoArchiveOff).Connect(ctx)
	if err != nil {
		return donorInfo{}, err
	}
	defer s.Close()
	info := s.Info()
	di := donorInfo{family: info.Family, version: info.Version, datadir: info.Datadir, uid: info.Vars["server_uid"]}
	id, err := strconv.ParseUint(info.Vars["server_id"], 10, 32)
	if err != nil {
		return donorInfo{}, fmt.Errorf("the server reports server_id %q: %w", info.Vars["server_id"], err)
	}
	di.serverID = uint32(id)
	di.port, _ = strconv.Atoi(info.Vars["port"])
	for _, k := range []string{"log_bin_basename", "relay_log_basename"} {
		if v := info.Vars[k]; v != "" {
			di.exclude = append(di.exclude, v)
		}
	}
	return di, nil
}

// systemFiles identifies the system tablespace files in the datadir (nil if none is
// found there).
func (d *donor) systemFiles() map[string]fileID {
	paths, _ := filepath.Glob(filepath.Join(d.info.datadir, "ibdata*"))
	var out map[string]fileID
	for _, p := range paths {
		ino, birth, err := backup.FileIdentity(p)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]fileID{}
		}
		out[filepath.Base(p)] = fileID{Inode: ino, BirthNS: birth}
	}
	return out
}

// currentLSN is the server's current LSN, 0 if it cannot be read (a recipient then
// learns it from the backup's refusal of a base past it).
func (d *donor) currentLSN(ctx context.Context) uint64 {
	conn, err := d.cfg.Backup.Conn.Resolve()
	if err != nil {
		return 0
	}
	db, err := mariadb.Open(ctx, conn)
	if err != nil {
		return 0
	}
	defer db.Close()
	_, cur, err := mariadb.LSNSource{DB: db}.LSNs(ctx)
	if err != nil {
		return 0
	}
	return cur
}

// estimate is roughly what a clone writes on the recipient: the datadir without its
// binary and relay logs and a Galera node's own files, plus the redo the copy may collect.
func (d *donor) estimate() int64 {
	var n int64
	filepath.WalkDir(d.info.datadir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		for _, x := range d.info.exclude {
			if strings.HasPrefix(p, x) {
				return nil
			}
		}
		if galeraOwn(e.Name()) {
			return nil
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// galeraOwn tells a Galera node's own files, which a copy never carries: its gcache
// (often gigabytes), its saved state and view.
func galeraOwn(name string) bool {
	return name == "galera.cache" || name == "grastate.dat" || name == "gvwstate.dat" || strings.HasPrefix(name, "gcache.page.")
}

// handle authenticates one connection and attaches it to a new or running clone;
// release (which may be called more than once) is called once the peer is no longer
// a stranger, or is refused.
func (d *donor) handle(ctx context.Context, c net.Conn, release func()) {
	defer release()
	peer := c.RemoteAddr().String()
	tc := tls.Server(c, d.tls)
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		d.cfg.Log.Warn("rejected a connection: TLS handshake failed", "peer", peer, "err", err)
		c.Close()
		return
	}
	d.attach(ctx, newBufConn(tc), peer, release)
}

// attach authenticates the recipient on an established TLS connection and starts a new
// clone for it or adds the connection to its running one; authenticated is called
// once the peer is no longer a stranger.
func (d *donor) attach(ctx context.Context, bc *bufConn, peer string, authenticated func()) {
	h, err := d.authenticate(bc)
	if err != nil {
		d.cfg.Log.Warn("rejected a connection", "peer", peer, "err", err)
		time.Sleep(time.Second) // one guess per second and connection
		bc.send(&frame{typ: frameError, payload: []byte(err.Error())})
		bc.c.Close()
		return
	}
	bc.c.SetDeadline(time.Time{})
	authenticated()
	bc.grow()
	if h.Session == "" {
		d.newClone(ctx, bc, h, peer)
		return
	}
	d.join(bc, h, peer, nil)
}

// authenticate reads the hello and checks the recipient's proof of the token.
func (d *donor) authenticate(bc *bufConn) (hello, error) {
	var h hello
	f, err := readFrameMax(bc.r, maxHandshake)
	if err != nil {
		return h, fmt.Errorf("no hello: %w", err)
	}
	if err := decodeJSON(f, &h); err != nil {
		return h, err
	}
	if h.Protocol != protocolVersion {
		return h, fmt.Errorf("protocol mismatch: the donor runs ferry %s (clone protocol %d), the recipient ferry %s (protocol %d): use the same ferry version on both hosts", d.cfg.Backup.Version, protocolVersion, h.Ferry, h.Protocol)
	}
	if d.key != nil && !checkProof(d.key, bc.c.ConnectionState(), roleRecipient, h.Proof) {
		return h, errors.New("wrong token: the two hosts do not share the same secret (ferry clone and serve: the token file; a Galera SST: wsrep_sst_auth, the same on every node)")
	}
	return h, nil
}

// welcome is the donor's answer on an authenticated connection of session id.
func (d *donor) welcome(bc *bufConn, id string, estimate int64, lsn uint64) error {
	w := welcome{Session: id, Ferry: d.cfg.Backup.Version, ServerVersion: d.info.version, Family: d.info.family, ServerID: d.info.serverID,
		Port: d.info.port, Datadir: d.info.datadir, Estimate: estimate, ServerUID: d.info.uid, Resume: true, LSN: lsn}
	if estimate > 0 { // a new clone, not another stream
		w.System = d.systemFiles()
	}
	w.Host, _ = os.Hostname()
	return d.sendWelcome(bc, w)
}

// sendWelcome sends w with the donor's token proof.
func (d *donor) sendWelcome(bc *bufConn, w welcome) error {
	if d.key != nil {
		p, err := proof(d.key, bc.c.ConnectionState(), roleDonor)
		if err != nil {
			return err
		}
		w.Proof = p
	}
	f, err := jsonFrame(w)
	if err != nil {
		return err
	}
	return bc.send(f)
}

func newSessionID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stopCurrent ends the running clone, if any, and waits for its backup to stop.
func (d *donor) stopCurrent(cause error) {
	d.mu.Lock()
	s := d.cur
	d.mu.Unlock()
	if s != nil {
		s.fail(cause)
		<-s.finished
	}
}

// refuse sends a one-line reason and closes the connection.
func refuse(bc *bufConn, msg string) {
	bc.send(&frame{typ: frameError, payload: []byte(msg)})
	bc.c.Close()
}
