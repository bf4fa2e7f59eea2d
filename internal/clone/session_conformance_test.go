package clone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/sink/sinktest"
)

// recipientStored reads what the recipient staged: restorable only once it applied the
// commit, with the manifest the commit carried, and each file's size and CRC-32C as the
// recipient worked them out matching it (restore verifies them).
type recipientStored struct{ r *receiver }

func (s recipientStored) Load(context.Context, string) (*manifest.Manifest, map[string][]byte, error) {
	if err := context.Cause(s.r.ctx); err != nil {
		return nil, nil, fmt.Errorf("the recipient failed: %w", err)
	}
	s.r.mu.Lock()
	m := s.r.manifest
	s.r.mu.Unlock()
	if m == nil {
		return nil, nil, errors.New("the recipient has no manifest: the clone is not complete")
	}
	got := s.r.unpacked()
	if err := sinktest.CheckSums(m, func(p string) (int64, uint32, bool) {
		f, ok := got.Files[p]
		return f.Size, f.CRC, ok
	}); err != nil {
		return nil, nil, err
	}
	files, err := sinktest.ReadTree(s.r.dir)
	return m, files, err
}

// loopback connects a donor's session and a recipient over conns TLS connections in
// memory (net.Pipe), each served as ferry serve and ferry clone serve theirs; they are
// stopped, and waited for, when the test ends.
func loopback(t *testing.T, s *session, r *receiver, conns int) {
	cert, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range conns {
		a, b := net.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.serveConn(newBufConn(tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}})), nil)
		}()
		go func() {
			defer wg.Done()
			r.run(newBufConn(tls.Client(b, &tls.Config{InsecureSkipVerify: true})), s.id)
		}()
	}
	t.Cleanup(func() {
		if s.committed.Load() {
			s.fail(errFinished)
		} else {
			s.fail(errors.New("sinktest: the backup was given up"))
		}
		wg.Wait()
		r.fail(nil)
	})
}

// TestSessionConformance runs the Sink suite on a clone's donor session, its frames
// carried over two connections to a recipient writing its staging directory.
func TestSessionConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Stored) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		picker, err := newCodecPicker(CompressAuto, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(context.Background(), "sinktest", sessionOptions{log: log, memory: 16 << 20, codec: picker, grace: time.Minute})
		dec, err := newDecoder()
		if err != nil {
			t.Fatal(err)
		}
		ctx, fail := context.WithCancelCause(context.Background())
		r := &receiver{dir: t.TempDir(), dec: dec, log: log, prog: func(int64) {}, ctx: ctx, fail: fail, grace: time.Millisecond,
			committed: make(chan struct{}), commitWait: time.Second, files: map[uint64]*rfile{}, byPath: map[string]*rfile{}}
		r.conns = connectFunc(func(context.Context, string) (*bufConn, welcome, error) {
			return nil, welcome{}, remoteError("that clone is over on the donor")
		})
		loopback(t, s, r, 2)
		return s, recipientStored{r}
	})
}
