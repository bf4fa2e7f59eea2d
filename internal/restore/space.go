package restore

import (
	"context"
	"io/fs"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// recoveryMargin is what recovery may write beyond the backup's files: ibtmp1, Aria's
// logs, undo and system tablespace growth from the rollback.
const recoveryMargin = 64 << 20

// sizer is a Source that knows what it will write better than its newest backup's
// manifest does (a directory: its files' allocated blocks, none if they are moved; a
// chain: its full backup and every link's scratch copy).
type sizer interface {
	size(want func(string) bool) (int64, error)
}

// checkSpace refuses, before anything is written, a restore of b (as the source's
// Inspect told it) into datadir that the datadir's filesystem cannot hold with its
// recovery. A stream's size is known only once it is read: a full disk then stops it
// with one line.
func checkSpace(src Source, b *Backup, datadir string, want func(string) bool) error {
	need := manifestNeed(b.Manifest, want)
	if s, ok := src.(sizer); ok {
		n, err := s.size(want)
		if err != nil {
			return err
		}
		need = n
	}
	if r, ok := src.(Resumer); ok {
		need -= allocatedUnder(r.ResumeDir(datadir))
	}
	where := placeFor(datadir).path("")
	return diskspace.Check(where, need+need/100+recoveryMargin, "the restored datadir and its recovery")
}

// manifestNeed is the room the files of m that want names take once written: a sparse
// file in a repository only its stored ranges.
func manifestNeed(m *manifest.Manifest, want func(string) bool) int64 {
	if m == nil {
		return 0
	}
	var n int64
	for _, f := range m.Files {
		if want != nil && !want(f.Path) {
			continue
		}
		if !f.Sparse || len(f.Blobs) == 0 {
			n += f.Size
			continue
		}
		for _, b := range f.Blobs {
			n += b.RawSize
		}
	}
	return n
}

// size implements sizer: moved files take no new room.
func (s *DirSource) size(want func(string) bool) (int64, error) {
	if s.Move {
		return 0, nil
	}
	return s.allocated(want)
}

// allocated is the room the backup directory's datadir files take (a sparse file its
// allocated blocks).
func (s *DirSource) allocated(want func(string) bool) (int64, error) {
	files, err := s.files(context.TODO())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range files {
		if want == nil || want(f.Path) {
			n += min(f.Size, allocatedUnder(filepath.Join(s.b.Dir, filepath.FromSlash(f.Path))))
		}
	}
	return n, nil
}

// allocatedUnder is the disk space the files under path take (0 if it does not exist).
func allocatedUnder(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n += diskspace.Allocated(p, 0)
		}
		return nil
	})
	return n
}

// size implements sizer: the full backup written into staging, and the scratch copy
// of each incremental that cannot be read where it is (a stream, a repository backup).
func (c *ChainSource) size(want func(string) bool) (int64, error) {
	var n int64
	for i, b := range c.inspected {
		if c.Links[i].Caps().Local {
			if s, ok := c.Links[i].(sizer); ok && i == 0 {
				m, _ := s.size(nil)
				n += m
			}
			continue // an incremental directory is applied from where it is
		}
		n += manifestNeed(b.Manifest, nil)
	}
	return n, nil
}

// ResumeDir implements Resumer: the full backup's.
func (c *ChainSource) ResumeDir(datadir string) string {
	if r, ok := c.Links[0].(Resumer); ok {
		return r.ResumeDir(datadir)
	}
	return ""
}
