package restore_test

import (
	"bytes"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/delta"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/restore/sourcetest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/stream"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// TestChainSources runs the source contract on incremental chains: a full backup and
// an incremental in the delta format, both directories (checked before any data
// moves, the incremental applied where it is), or the incremental a stream (filled
// into a scratch directory, checked as it is read).
func TestChainSources(t *testing.T) {
	t.Run("Dirs", func(t *testing.T) { sourcetest.Run(t, chainSource(false)) })
	t.Run("DirAndStream", func(t *testing.T) { sourcetest.Run(t, chainSource(true)) })
}

// The chain's LSNs: the full backup's redo starts at chainStart and ends at
// chainBase; the incremental holds every page changed since chainStart, up to
// chainEnd.
const (
	chainStart, chainBase, chainEnd = 1000, 2000, 3000
	chainPage                       = 16384
)

// chainChanged are the pages the incremental changes: one of the system tablespace,
// one of the table (its space id is of the .meta: the file is no real tablespace,
// and applying writes it in place).
var chainChanged = map[string]struct{ space, page uint32 }{"ibdata1": {0, 2}, sourcetest.Damaged: {5, 1}}

// chainSource makes a chain whose restore is files: the full backup holds them with
// the changed pages zeroed (damaged: Damaged with a byte flipped too), the incremental
// holds those pages as deltas and every other file whole.
func chainSource(incStream bool) sourcetest.New {
	return func(t *testing.T, files map[string][]byte, damaged bool) restore.Source {
		base, inc := chainFiles(t, files)
		dir := filepath.Join(t.TempDir(), "full")
		s, err := sink.NewDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		full := sourcetest.Manifest(s.Caps().Storage)
		full.ID, full.Prepared, full.StartLSN, full.EndLSN = "20261128t000000z-00000f01", nil, chainStart, chainBase
		cp := xtrabackup.Checkpoints{BackupType: xtrabackup.TypeFull, ToLSN: chainBase, LastLSN: chainBase}
		if err := sourcetest.WriteBackup(s, full, cp, base, damaged); err != nil {
			t.Fatal(err)
		}
		links := []restore.Source{&restore.DirSource{Dir: dir, Parallel: 2}}
		var buf bytes.Buffer
		incDir := filepath.Join(t.TempDir(), "inc")
		var s2 sink.Sink
		if incStream {
			s2, err = stream.NewSink(&buf, stream.Options{Compression: codec.None, Workers: 1, MaxMemory: 32 << 20, BlockSize: 1 << 20, OpenFiles: 2})
		} else {
			s2, err = sink.NewDir(incDir)
		}
		if err != nil {
			t.Fatal(err)
		}
		m := sourcetest.Manifest(s2.Caps().Storage)
		m.ID, m.Type, m.Prepared, m.StartLSN, m.EndLSN = "20261128t010000z-00000c01", manifest.TypeIncremental, nil, chainBase, chainEnd
		m.Incremental = &manifest.Incremental{BaseID: full.ID, BaseToLSN: chainBase, FromLSN: chainStart, Method: "redo"}
		cp = xtrabackup.Checkpoints{BackupType: xtrabackup.TypeIncremental, FromLSN: chainBase, ToLSN: chainEnd, LastLSN: chainEnd}
		if err := sourcetest.WriteBackup(s2, m, cp, inc, false); err != nil {
			t.Fatal(err)
		}
		if incStream {
			links = append(links, stream.NewSource(bytes.NewReader(buf.Bytes()), "test incremental stream", nil, 32<<20))
		} else {
			links = append(links, &restore.DirSource{Dir: incDir, Parallel: 2})
		}
		return &restore.ChainSource{Links: links}
	}
}

// chainFiles splits files into a full backup and an incremental on it.
func chainFiles(t *testing.T, files map[string][]byte) (base, inc map[string][]byte) {
	base, inc = maps.Clone(files), map[string][]byte{}
	for p, data := range files {
		c, ok := chainChanged[p]
		if !ok {
			if strings.HasSuffix(p, ".ibd") || strings.HasPrefix(p, "ibdata") {
				t.Fatalf("%s: a tablespace the chain does not change would be dropped by the incremental", p)
			}
			inc[p] = data
			continue
		}
		off := int(c.page) * chainPage
		page := data[off : off+chainPage]
		base[p] = bytes.Clone(data)
		clear(base[p][off : off+chainPage])
		var d bytes.Buffer
		w := delta.NewWriter(&d, chainPage)
		if err := w.Add(c.page, page); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		inc[p+".delta"] = d.Bytes()
		inc[p+".meta"] = delta.Meta{PageSize: chainPage, SpaceID: c.space}.Bytes()
	}
	return base, inc
}
