//go:build e2e

package redo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateFixture captures a fixture from a live server: the checkpoint must parse
// and whole mini-transactions must follow it. With FERRY_REDO_GEN_FIXTURE=1
// (testdata/gen.sh) it replaces the files in testdata; otherwise it writes to a temp
// dir, so every run checks the capture against today's server.
func TestGenerateFixture(t *testing.T) {
	out := t.TempDir()
	if os.Getenv("FERRY_REDO_GEN_FIXTURE") == "1" {
		out = "."
	}
	s := startServer(t, "4M")
	s.exec(t, "CREATE DATABASE fx")
	s.exec(t, "CREATE TABLE fx.t1 (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB")
	s.exec(t, "INSERT INTO fx.t1 VALUES (1,'one'),(2,'two'),(3,'three')")
	s.exec(t, "RENAME TABLE fx.t1 TO fx.t2")
	s.exec(t, "DROP TABLE fx.t2")
	s.exec(t, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")
	flushed, _, err := s.LSNs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l, err := openLog(s.logPath())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	cp, err := ParseCheckpoint(l.head, l.hdr.FirstLSN)
	if err != nil {
		t.Fatal(err)
	}
	n := min(flushed-cp.LSN, l.ring.capacity-lapMargin)
	data, err := l.readLSN(alignedBuf(int(n)+2*align), cp.LSN, int(n))
	if err != nil {
		t.Fatal(err)
	}
	end := wholeMtrs(t, data, cp.LSN, l.ring)
	write(t, filepath.Join(out, fixtureHead), l.head)
	write(t, filepath.Join(out, fixtureMtrs), data[:end])
	write(t, filepath.Join(out, fixtureMeta), []byte(fmt.Sprintf("size=%d\n", l.size)))
	t.Logf("fixture: checkpoint %+v, %d bytes of mtrs (flushed %d)", cp, end, flushed)
}

// wholeMtrs returns the length of the longest run of valid mini-transactions
// at the start of data that is at most fixtureMax bytes.
func wholeMtrs(t *testing.T, data []byte, lsn uint64, g ring) int {
	pos := 0
	for pos < len(data) {
		m := parseMtr(data[pos:], lsn+uint64(pos), g.seqBit, 0)
		if m.status != mtrOK || pos+m.size > fixtureMax {
			break
		}
		pos += m.size
	}
	if pos == 0 {
		t.Fatal("no valid mini-transaction at the checkpoint LSN")
	}
	return pos
}

// write writes a testdata file.
func write(t *testing.T, name string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
