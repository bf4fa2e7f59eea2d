package backuptest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// Tablespace is the fake server's table db/t.ibd (a real full_crc32 tablespace) as
// tablespace space: the space id rewritten in every page and in page 0's header, and
// each page's CRC-32C made valid again. Another space id makes another table.
func Tablespace(t testing.TB, space uint32) []byte {
	t.Helper()
	b := testdb.PageFixture(t, "fcrc32.after.gz")
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for off := 0; off+PageSize <= len(b); off += PageSize {
		p := b[off : off+PageSize]
		if binary.BigEndian.Uint32(p[PageSize-4:]) == 0 && allZero(p) {
			continue
		}
		binary.BigEndian.PutUint32(p[34:], space) // FIL_PAGE_SPACE_ID
		if off == 0 {
			binary.BigEndian.PutUint32(p[38:], space) // FSP_SPACE_ID
		}
		binary.BigEndian.PutUint32(p[PageSize-4:], crc32.Checksum(p[:PageSize-4], castagnoli))
	}
	return b
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// SpaceID is the space id page 0 of a tablespace file names.
func SpaceID(b []byte) uint32 { return binary.BigEndian.Uint32(b[38:]) }

// The DDL of the fake server: each changes the datadir as the statement does and
// logs, at the server's current LSN (End, which moves on), the file-level records the
// real server writes for it, which every redo copy running hears of as the real
// copies read them (redo.Config.OnFileOp). Paths are relative to the datadir.

// CreateTable writes a new tablespace file (CREATE TABLE): FILE_CREATE.
func (s *Server) CreateTable(rel string, data []byte) error {
	if err := s.write(rel, data); err != nil {
		return err
	}
	s.log(redo.FileOp{Kind: redo.FileCreate, SpaceID: SpaceID(data), Name: "./" + rel})
	return nil
}

// RenameTable moves a tablespace file (RENAME TABLE): FILE_RENAME.
func (s *Server) RenameTable(from, to string) error {
	id, err := s.spaceOf(from)
	if err != nil {
		return err
	}
	s.log(redo.FileOp{Kind: redo.FileRename, SpaceID: id, Name: "./" + from, NewName: "./" + to})
	return os.Rename(filepath.Join(s.Datadir, from), filepath.Join(s.Datadir, to))
}

// DropTable deletes a tablespace file (DROP TABLE): FILE_DELETE.
func (s *Server) DropTable(rel string) error {
	id, err := s.spaceOf(rel)
	if err != nil {
		return err
	}
	s.log(redo.FileOp{Kind: redo.FileDelete, SpaceID: id, Name: "./" + rel})
	return os.Remove(filepath.Join(s.Datadir, rel))
}

// RebuildTable rewrites a table into a new tablespace (ALTER TABLE ... FORCE,
// OPTIMIZE), data holding the new space id, the way InnoDB does it: the new file is
// created under a temporary name, the old one renamed aside, the new one renamed into
// place and the old one deleted.
func (s *Server) RebuildTable(rel string, data []byte) error {
	old, err := s.spaceOf(rel)
	if err != nil {
		return err
	}
	dir := filepath.Dir(rel)
	tmp, aside := filepath.Join(dir, "#sql-alter-1-1.ibd"), filepath.Join(dir, "#sql-backup-1-1.ibd")
	if err := s.CreateTable(tmp, data); err != nil {
		return err
	}
	if err := s.RenameTable(rel, aside); err != nil {
		return err
	}
	if err := s.RenameTable(tmp, rel); err != nil {
		return err
	}
	if id := SpaceID(data); id == old {
		return fmt.Errorf("rebuild of %s: the new tablespace has the old space id %d", rel, id)
	}
	return s.DropTable(aside)
}

// log logs op at the server's current LSN, which moves on past it.
func (s *Server) log(op redo.FileOp) {
	s.mu.Lock()
	op.LSN = s.End
	s.End += 100
	s.mu.Unlock()
	s.logOp(op)
}

func (s *Server) write(rel string, data []byte) error {
	p := filepath.Join(s.Datadir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o640)
}

func (s *Server) spaceOf(rel string) (uint32, error) {
	b, err := os.ReadFile(filepath.Join(s.Datadir, rel))
	if err != nil {
		return 0, err
	}
	if len(b) < PageSize {
		return 0, fmt.Errorf("%s holds no page 0", rel)
	}
	return SpaceID(b), nil
}
