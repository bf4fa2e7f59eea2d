package redo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// pipeLog writes a linear log of about 20 MiB (several scan chunks, mini-transactions
// cut at their boundaries) and returns its path.
func pipeLog(t *testing.T, tail []byte) string {
	t.Helper()
	head, _, err := CheckpointLog(5_000_000, []FileName{{SpaceID: 7, Name: "./a.ibd"}}, "ferry test")
	if err != nil {
		t.Fatal(err)
	}
	b := head
	for i := 0; len(b) < 20<<20; i++ {
		b = append(b, frame(writeRecord(7, uint32(i), 1+(i*7919)%6000), 1, nil)...)
	}
	b = append(b, tail...)
	path := filepath.Join(t.TempDir(), "ib_logfile0")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// scanSerial is ScanLinear with the one-goroutine scan.
func scanSerial(t *testing.T, path string, fn func(MTR) error) (LinearLog, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, StartOffset)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	var ll LinearLog
	ll.Header, _ = ParseHeader(head)
	ll.Checkpoint, _ = ParseCheckpoint(head, ll.Header.FirstLSN)
	s := scanner{r: f, off: StartOffset, lsn: ll.Header.FirstLSN, g: linear(ll.Header.FirstLSN), nonce: ll.Header.nonceLen()}
	err = s.run(ll.Checkpoint.LSN, fn)
	ll.EndLSN, ll.MTRs = s.lsn, s.n
	return ll, err
}

// TestScanPipelined: the two-goroutine scan hands out the same mini-transactions, in
// the same order and with the same bytes, as the one-goroutine scan, across chunk
// boundaries; it ends at the same LSN and count at the log's end, at a truncated
// mini-transaction (with the same error), and where the callback fails.
func TestScanPipelined(t *testing.T) {
	type seen struct {
		start, end uint64
		recs       []byte
	}
	collect := func(out *[]seen, failAt int) func(MTR) error {
		return func(m MTR) error {
			if len(*out) == failAt {
				return errStop
			}
			*out = append(*out, seen{m.Start, m.End, bytes.Clone(m.Recs)})
			return nil
		}
	}
	truncated := frame(writeRecord(7, 1, 100), 1, nil)
	for _, c := range []struct {
		name   string
		tail   []byte
		failAt int
	}{
		{"to the log's end", make([]byte, 512), -1},
		{"a truncated mini-transaction", truncated[:len(truncated)-3], -1},
		{"the callback fails in a later chunk", nil, 9000},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := pipeLog(t, c.tail)
			var want, got []seen
			wll, werr := scanSerial(t, path, collect(&want, c.failAt))
			gll, gerr := ScanLinear(path, nil, "", collect(&got, c.failAt))
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("error %v, want %v", gerr, werr)
			}
			if gll.EndLSN != wll.EndLSN || gll.MTRs != wll.MTRs {
				t.Errorf("ends at LSN %d after %d mini-transactions, want %d after %d", gll.EndLSN, gll.MTRs, wll.EndLSN, wll.MTRs)
			}
			if len(want) < 1000 || len(got) != len(want) {
				t.Fatalf("%d mini-transactions, want %d (and many)", len(got), len(want))
			}
			for i := range want {
				if got[i].start != want[i].start || got[i].end != want[i].end || !bytes.Equal(got[i].recs, want[i].recs) {
					t.Fatalf("mini-transaction %d: LSN %d-%d, want %d-%d (or its records differ)", i, got[i].start, got[i].end, want[i].start, want[i].end)
				}
			}
		})
	}
}

var errStop = errors.New("stop")
