package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/codec"
)

// TestMoreOpenUnitsThanBlocks: far more units open at once than the pool has blocks,
// each left holding a partial block between writes, as idle parts of a repository
// backup do. Every write must still finish (the pool used to run out with every block
// a partial one and no block in flight: a deadlock), and every unit must decode to
// what was written.
func TestMoreOpenUnitsThanBlocks(t *testing.T) {
	for _, c := range []struct {
		name string
		comp codec.Compression
	}{{"zstd", codec.Zstd}, {"lz4", codec.LZ4}} {
		t.Run(c.name, func(t *testing.T) {
			const bs = 64 << 10
			o := Options{Compression: c.comp, Workers: 1, BlockSize: bs, OpenFiles: 1}
			o.MaxMemory = o.MinMemory() // 7 blocks
			e, err := NewEncoder(o)
			if err != nil {
				t.Fatal(err)
			}
			const units = 40
			sinks := make([]bytes.Buffer, units)
			want := make([][]byte, units)
			done := make(chan error, 1)
			go func() { done <- writeInterleaved(e, sinks, want) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("writes to more open units than the pool has blocks hang: the block budget deadlocked")
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range sinks {
				r, err := codec.NewReader(c.comp, &sinks[i])
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(got, want[i]) {
					t.Fatalf("unit %d: %d bytes back, want %d (%v)", i, len(got), len(want[i]), err)
				}
			}
		})
	}
}

// writeInterleaved opens one unit per sink and writes to them in turns, a third of a
// block at a time, so each holds a partial block between its writes; then closes them.
func writeInterleaved(e *Encoder, sinks []bytes.Buffer, want [][]byte) error {
	bs := e.Options().BlockSize
	us := make([]*Unit, len(sinks))
	for i := range us {
		u, err := e.Start(fmt.Sprint("unit ", i), &sinks[i], true)
		if err != nil {
			return err
		}
		us[i] = u
	}
	for round := range 5 {
		for i, u := range us {
			p := bytes.Repeat([]byte{byte(i), byte(round)}, bs/6)
			if _, err := u.Write(p); err != nil {
				return err
			}
			want[i] = append(want[i], p...)
		}
	}
	for _, u := range us {
		if err := u.Close(); err != nil {
			return err
		}
	}
	return nil
}
