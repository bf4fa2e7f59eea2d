package sst

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/restore"
)

// addressTag is the path the joiner puts after its address in "ready": the donor
// checks it, so two ferry versions that cannot talk fail with one clear line.
const addressTag = "ferry-1"

// DefaultPort is where a joiner listens when its address has no port, as the stock
// methods do.
const DefaultPort = "4444"

// Env is what an SST process works with besides its arguments and settings.
type Env struct {
	Out     io.Writer // stdout: mariadbd reads the protocol lines there
	Log     *slog.Logger
	Version string // ferry's version
}

// Join is the joiner's side: listen, tell mariadbd "ready", take the donor's copy into
// a staging directory beside the datadir, prepare it and swap it in (the old datadir is
// kept aside), or, on an IST, take only the position and leave the datadir alone; then
// print the position ("uuid:seqno domain"), last, only on success.
func Join(ctx context.Context, a Args, c Config, env Env) error {
	srv, err := loadServer(ctx, a)
	if err != nil {
		return err
	}
	if err := srv.checkLayout(); err != nil {
		return err
	}
	sec, err := c.security()
	if err != nil {
		return err
	}
	// A random value per SST salts the secret's key: only the donor learns it, from the
	// address mariadbd hands it, so guesses cannot be prepared for every transfer.
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	salt := hex.EncodeToString(nonce)
	sec.Salt = []byte(salt)
	if err := writable(srv.datadir); err != nil {
		return err
	}
	addr, err := listenAddress(a.Address)
	if err != nil {
		return err
	}
	ctx, cancel := watchParent(ctx, a.Parent)
	defer cancel(nil)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s for the SST: %w (another SST running, or the port taken?)", addr, err)
	}
	defer ln.Close()
	ready := ln.Addr().String()
	if _, err := fmt.Fprintf(env.Out, "ready %s/%s/%s\n", ready, addressTag, salt); err != nil {
		return fmt.Errorf("tell mariadbd the SST address: %w", err)
	}
	env.Log.Info("waiting for the donor", "listen", ready, "datadir", srv.datadir, "auth", sec.Describe(), "initial_timeout", c.InitialTimeout)
	t0 := time.Now()
	// Checked before the copy replaces the datadir: a copy without a Galera position
	// would leave the node at no position; the old binary logs go aside then too.
	beforeSwap := func(c mariadb.Coordinates) error {
		if g := c.Galera; g == nil || !g.Known() {
			return errors.New("the donor's copy carries no Galera position: is the donor a Galera node (wsrep_on, a provider)?")
		}
		return srv.binlogsAside(env.Log)
	}
	res, err := clone.Clone(ctx, clone.Config{From: "the SST donor", Listener: ln, FirstWait: c.InitialTimeout, Security: sec,
		Datadir: srv.datadir, InPlace: &restore.InPlace{Local: srv.local()}, BeforeSwap: beforeSwap, Streams: c.Streams,
		Compress: c.Compress, MaxRate: c.MaxRate, MaxImpact: c.MaxImpact, Mariadbd: c.Mariadbd, UseMemory: srv.recoveryMemory(c.UseMemory),
		Version: env.Version, Grace: c.Grace, Log: env.Log, Progress: io.Discard})
	if err != nil {
		return err
	}
	pos, err := received(res, env.Log)
	if err != nil {
		return err
	}
	if res.Bypass == "" {
		srv.oldDatadir(res, c, env.Log)
		env.Log.Info("SST complete: the copy is prepared and in place", "position", pos.String(), "took", time.Since(t0).Round(time.Millisecond))
	}
	_, err = fmt.Fprintln(env.Out, pos.Line())
	return err
}

// writable checks that this process can create files in the datadir, where the copy
// is built: better said before "ready" than after the transfer.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".ferry-sst-check-")
	if err != nil {
		return fmt.Errorf("the SST cannot write in the datadir %s (it runs as mariadbd's user): %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// received is the position the joiner reports: the donor's IST position, or the
// copy's own, read on the donor under BLOCK_COMMIT (wsrep-lib then reads the same
// from the InnoDB data).
func received(res *clone.Result, log *slog.Logger) (mariadb.WsrepPosition, error) {
	if res.Bypass != "" {
		pos, err := mariadb.ParseWsrepPosition(res.Bypass)
		if err != nil {
			return pos, fmt.Errorf("the donor's IST message: %w", err)
		}
		log.Info("IST: no copy needed, the datadir is left as it is", "position", pos.String())
		return pos, nil
	}
	g := res.Coordinates.Galera
	if g == nil || !g.Known() {
		return mariadb.WsrepPosition{}, errors.New("the donor's copy carries no Galera position: is the donor a Galera node (wsrep_on, a provider)?")
	}
	return *g, nil
}

// binlogsAside puts the joiner's old binary logs aside when they live outside the
// datadir (inside it, they go with the old datadir).
func (s server) binlogsAside(log *slog.Logger) error {
	aside, err := s.binlogAside(time.Now().Format("20060102T150405"))
	if err != nil {
		return err
	}
	if aside != "" {
		log.Info("the old binary logs were moved aside: the node starts a new binary log from the copy", "kept_in", aside)
	}
	return nil
}

// oldDatadir removes the joiner's old datadir if [sst] remove-old-datadir asks for it,
// or says where it is kept.
func (s server) oldDatadir(res *clone.Result, c Config, log *slog.Logger) {
	switch {
	case res.MovedAside == "":
	case c.RemoveOld:
		if err := os.RemoveAll(res.MovedAside); err != nil {
			log.Warn("could not remove the old datadir ([sst] remove-old-datadir)", "path", res.MovedAside, "err", err)
		}
	default:
		log.Info("the old datadir is kept; remove it when the node is back in sync (or set [sst] remove-old-datadir=ON)", "kept_in", res.MovedAside)
	}
}

// listenAddress is the joiner's --address as host:port: a missing port is 4444, and a
// path or a "user:secret@" prefix is dropped.
func listenAddress(s string) (string, error) {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	host, port, err := splitAddress(s)
	if err != nil {
		return "", err
	}
	if port == "" {
		port = DefaultPort
	}
	return net.JoinHostPort(host, port), nil
}

// splitAddress splits "host[:port][/path]" (host may be "[v6]").
func splitAddress(s string) (host, port string, err error) {
	rest := s
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 {
			return "", "", fmt.Errorf("SST address %q: unclosed '['", s)
		}
		host, rest = rest[1:end], rest[end+1:]
	} else {
		i := strings.IndexAny(rest, ":/")
		if i < 0 {
			i = len(rest)
		}
		host, rest = rest[:i], rest[i:]
	}
	if strings.HasPrefix(rest, ":") {
		rest = rest[1:]
		i := strings.Index(rest, "/")
		if i < 0 {
			i = len(rest)
		}
		port = rest[:i]
	}
	if host == "" {
		return "", "", fmt.Errorf("SST address %q has no host", s)
	}
	if port != "" {
		if _, err := net.LookupPort("tcp", port); err != nil {
			return "", "", fmt.Errorf("SST address %q: bad port %q", s, port)
		}
	}
	return host, port, nil
}

// watchParent cancels ctx when mariadbd (pid) is gone: a joiner whose server died, or
// a donor whose server was stopped, has nobody left to report to.
func watchParent(ctx context.Context, pid int) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if pid <= 0 {
		return ctx, cancel
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				cancel(fmt.Errorf("mariadbd (pid %d) that started this SST is gone", pid))
				return
			}
		}
	}()
	return ctx, cancel
}
