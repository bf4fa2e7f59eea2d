//go:build e2e

package redo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// loadSetup creates a table whose full-table UPDATE writes ~1 MiB of redo.
func loadSetup(t *testing.T, s *testServer) {
	s.exec(t, "CREATE DATABASE d")
	s.exec(t, "CREATE TABLE d.t (id INT PRIMARY KEY, pad VARCHAR(255)) ENGINE=InnoDB")
	s.exec(t, "INSERT INTO d.t SELECT seq, REPEAT('a', 200) FROM d.seq_1_to_4000")
}

// update rewrites a quarter of the rows of d.t (~1.5 MiB of redo).
func update(s *testServer, i int) error {
	_, err := s.db.Exec(fmt.Sprintf("UPDATE d.t SET pad = REPEAT('%c', 200 + %d) WHERE id %% 4 = %d", 'b'+i%20, i%7, i%4))
	return err
}

// runTailer starts Run in a goroutine and returns its result channel.
func runTailer(ctx context.Context, tl *Tailer) <-chan error {
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	return done
}

func TestTailLiveServer(t *testing.T) {
	s := startServer(t, "4M")
	loadSetup(t, s)
	var out bytes.Buffer
	out.Grow(64 << 20)
	var mu sync.Mutex
	var ops []FileOp
	tl, err := Open(Config{Path: s.logPath(), Out: &out, Server: s, Creator: "Backup ferry test",
		OnFileOp: func(op FileOp) { mu.Lock(); ops = append(ops, op); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	capacity := tl.log.ring.capacity
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	ddl := map[int]string{6: "CREATE TABLE d.c1 (id INT PRIMARY KEY) ENGINE=InnoDB",
		12: "RENAME TABLE d.c1 TO d.c2", 18: "DROP TABLE d.c2"}
	for i := range 24 {
		if q, ok := ddl[i]; ok {
			s.exec(t, q)
		}
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
		// Each update is over a third of the 4 MiB log: the pause lets the tailer read
		// it even when other test packages load both cores (CI runs them in parallel).
		time.Sleep(50 * time.Millisecond)
	}
	stop := stopAtCurrent(ctx, t, s, tl, done)
	a, end := tl.Start().LSN, tl.EndLSN()
	t.Logf("copied %d..%d (%.1f laps of %d), stop %d", a, end, float64(end-a)/float64(capacity), capacity, stop)
	if end < stop || end-a < 3*capacity {
		t.Fatalf("end LSN %d: want >= stop %d and >= 3 laps from %d", end, stop, a)
	}
	ll, err := VerifyLinear(out.Bytes(), nil, "")
	if err != nil {
		t.Fatalf("VerifyLinear: %v", err)
	}
	if ll.EndLSN != end || ll.Header.FirstLSN != a || ll.Checkpoint != tl.Start() || ll.Header.Creator != "Backup ferry test" {
		t.Fatalf("linear log: %+v (end %d, start %+v)", ll, end, tl.Start())
	}
	checkDDLOps(t, ops)
	checkDDLOps(t, ll.FileOps)
}

// checkDDLOps asserts the CREATE/RENAME/DROP of the live test were seen, in order.
func checkDDLOps(t *testing.T, ops []FileOp) {
	t.Helper()
	want := []FileOp{{Kind: FileCreate, Name: "./d/c1.ibd"},
		{Kind: FileRename, Name: "./d/c1.ibd", NewName: "./d/c2.ibd"}, {Kind: FileDelete, Name: "./d/c2.ibd"}}
	var space uint32
	for _, op := range ops {
		w := want[0]
		if op.Kind != w.Kind || op.Name != w.Name || op.NewName != w.NewName || (space != 0 && op.SpaceID != space) {
			continue
		}
		space, want = op.SpaceID, want[1:]
		if len(want) == 0 {
			return
		}
	}
	t.Errorf("file ops %+v: missing %+v", ops, want)
}

// slowServer delays one LSNs call until the server has written more than a
// whole log capacity beyond what the tailer copied: the tailer is lapped.
type slowServer struct {
	*testServer
	tl    *Tailer
	calls int
}

func (s *slowServer) LSNs(ctx context.Context) (uint64, uint64, error) {
	s.calls++
	if s.calls != 3 {
		return s.testServer.LSNs(ctx)
	}
	for {
		f, c, err := s.testServer.LSNs(ctx)
		if err != nil || c > s.tl.Copied()+s.tl.log.ring.capacity {
			return f, c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTailLappedByServer(t *testing.T) {
	s := startServer(t, "4M")
	loadSetup(t, s)
	slow := &slowServer{testServer: s}
	tl, err := Open(Config{Path: s.logPath(), Out: new(bytes.Buffer), Server: slow})
	if err != nil {
		t.Fatal(err)
	}
	slow.tl = tl
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := runTailer(ctx, tl)
	for i := 0; ; i++ {
		select {
		case err := <-done:
			var ow *OverwrittenError
			if !errors.As(err, &ow) || !errors.Is(err, ErrLogOverwritten) {
				t.Fatalf("Run = %v, want *OverwrittenError", err)
			}
			t.Log(err)
			return
		default:
		}
		if err := update(s, i); err != nil {
			t.Fatal(err)
		}
	}
}
