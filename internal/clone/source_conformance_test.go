package clone

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/restore/sourcetest"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestSourceConformance runs the Source suite on a clone's recipient: restore reads
// the donor's copy as the recipient receives it, from a donor's session fed the
// backup as its engine writes it and carried over two TLS connections in memory. A
// clone that journals what it received (one that may be resumed) and a Galera
// joiner's (one that may not) are both run.
func TestSourceConformance(t *testing.T) {
	t.Run("Journaled", func(t *testing.T) { sourcetest.Run(t, cloneSource(true)) })
	t.Run("Joiner", func(t *testing.T) { sourcetest.Run(t, cloneSource(false)) })
}

// cloneSource makes the recipient's source of a clone whose donor sends files; the
// donor's session is stopped, and its goroutines waited for, when the test ends.
func cloneSource(journaled bool) sourcetest.New {
	return func(t *testing.T, files map[string][]byte, damaged bool) restore.Source {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		picker, err := newCodecPicker(CompressAuto, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(context.Background(), "sourcetest", sessionOptions{log: log, memory: 16 << 20, codec: picker, grace: time.Minute})
		d := &pipeDonor{t: t, s: s}
		w := welcome{Session: s.id, ServerVersion: "10.11.19-MariaDB", Estimate: 4 << 20}
		first := d.dial(true)
		conns := connectFunc(func(context.Context, string) (*bufConn, welcome, error) { return d.dial(false), w, nil })
		cfg := Config{From: "donor.test:4444", Mariadbd: fakeMariadbd(t, "10.11.19"), Streams: 2, Grace: time.Second, Log: log, Progress: io.Discard}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			m := sourcetest.Manifest(s.Caps().Storage)
			cp := xtrabackup.Checkpoints{BackupType: xtrabackup.TypeLogApplied, ToLSN: 1, LastLSN: 1}
			if err := sourcetest.WriteBackup(s, m, cp, files, damaged); err != nil && !errors.Is(s.err(), errStopped) {
				t.Errorf("the donor's backup: %v", err)
			}
		}()
		t.Cleanup(d.stop)
		return &source{cfg: cfg, conns: conns, first: &firstConn{bc: first}, w: w, journaled: journaled}
	}
}

// errStopped ends a donor's session when its test ends.
var errStopped = errors.New("sourcetest: the test is over")

// pipeDonor serves a session on connections in memory (net.Pipe, with TLS), as
// ferry serve does: the first reads the recipient's start first.
type pipeDonor struct {
	t     *testing.T
	s     *session
	wg    sync.WaitGroup
	mu    sync.Mutex
	pipes []net.Conn
}

// dial returns the recipient's end of a new connection to the session.
func (d *pipeDonor) dial(first bool) *bufConn {
	cert, err := selfSigned()
	if err != nil {
		d.t.Error(err)
	}
	a, b := net.Pipe()
	d.mu.Lock()
	d.pipes = append(d.pipes, a, b)
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		bc := newBufConn(tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}}))
		if first {
			if _, err := readFrame(bc.r); err != nil { // the recipient's start
				bc.c.Close()
				return
			}
		}
		d.s.serveConn(bc, nil)
	}()
	return newBufConn(tls.Client(b, &tls.Config{InsecureSkipVerify: true}))
}

// stop ends the session and its connections and waits for them.
func (d *pipeDonor) stop() {
	if d.s.committed.Load() {
		d.s.fail(errFinished)
	} else {
		d.s.fail(errStopped)
	}
	d.mu.Lock()
	for _, p := range d.pipes {
		p.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// fakeMariadbd is a program that says it is mariadbd of version, as a recipient
// checks its series against the donor's; it is never started as a server.
func fakeMariadbd(t *testing.T, version string) string {
	p := filepath.Join(t.TempDir(), "mariadbd")
	script := "#!/bin/sh\necho \"mariadbd  Ver " + version + "-MariaDB for Linux on x86_64 (fake)\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
