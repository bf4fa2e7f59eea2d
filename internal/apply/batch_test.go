package apply

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnePassOrTwo: a log whose records fit one batch is parsed once; one whose
// records do not, although its bytes are near a batch, is tried once, found too big
// and read twice, in several batches; every way gives the same pages.
func TestOnePassOrTwo(t *testing.T) {
	var mtrs [][][]byte
	for i := range 60 {
		no := uint32(1 + i%(synthPages-1))
		mtrs = append(mtrs, [][]byte{synthWrite(no, 100+16*i, "0123456789a")}) // 16-byte records: 3/4 of the log
	}
	build := func() (string, int64) {
		dir := synthDatadir(t, mtrs...)
		p := filepath.Join(dir, "ib_logfile0")
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size := st.Size() - 4096 // no empty block after the last mini-transaction
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		return dir, size - 12288
	}
	want, records := build()
	res, err := Dir(context.Background(), Config{Dir: want})
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches != 1 || res.Check <= 0 {
		t.Fatalf("a small log: %d batches", res.Batches)
	}
	for _, c := range []struct {
		name    string
		memory  int
		batches func(int) bool
		tried   bool // tried in one batch and found too big
	}{
		// A batch's memory also holds its index: 60 groups, in a slice grown to 64.
		{"records fit", int(records) + 64*groupSize, func(n int) bool { return n == 1 }, false},
		{"records and index one byte too big", int(records)*3/4 + 64*groupSize - 1, func(n int) bool { return n > 1 }, true},
		{"bytes near a batch, records do not fit", int(records)*7/10 + 64*groupSize, func(n int) bool { return n > 1 }, true},
		{"far bigger than a batch", 64, func(n int) bool { return n > 1 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := build()
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			res, err := Dir(context.Background(), Config{Dir: dir, Memory: c.memory, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			if !c.batches(res.Batches) {
				t.Errorf("%d batches", res.Batches)
			}
			if tried := strings.Contains(logged.String(), "do not fit one batch"); tried != c.tried {
				t.Errorf("tried in one batch first and read again: %v, want %v", tried, c.tried)
			}
			for no := uint32(1); no < synthPages; no++ {
				if !bytes.Equal(readSynthPage(t, dir, no), readSynthPage(t, want, no)) {
					t.Errorf("page %d differs from the one-batch apply's", no)
				}
			}
		})
	}
}
