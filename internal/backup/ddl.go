package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/redo"
)

// ddlEffects summarises the FILE_ records the redo tailer saw since checkpoint A.
type ddlEffects struct {
	created map[uint32]bool   // tablespaces created after A: their copies are re-taken
	deleted map[uint32]bool   // tablespaces dropped after A
	renamed map[uint32]string // final backup-relative name of renamed tablespaces
}

func summarize(ops []redo.FileOp) ddlEffects {
	e := ddlEffects{created: map[uint32]bool{}, deleted: map[uint32]bool{}, renamed: map[uint32]string{}}
	for _, op := range ops {
		switch op.Kind {
		case redo.FileCreate:
			e.created[op.SpaceID] = true
		case redo.FileDelete:
			e.deleted[op.SpaceID] = true
		case redo.FileRename:
			if rel, ok := relName(op.NewName); ok {
				e.renamed[op.SpaceID] = rel
			}
		}
	}
	return e
}

// relName turns a redo file name ("./db/t.ibd", or "/disk/db/t.ibd" for a DATA
// DIRECTORY table, stored in the backup as db/t.ibd) into a backup-relative path.
func relName(name string) (string, bool) {
	clean := filepath.ToSlash(filepath.Clean(name))
	if filepath.IsAbs(name) {
		parts := strings.Split(clean, "/")
		if len(parts) < 3 {
			return "", false
		}
		return strings.Join(parts[len(parts)-2:], "/"), true
	}
	return strings.TrimPrefix(clean, "./"), true
}

// reconcileDDL runs under BLOCK_DDL. It waits until the redo copy has seen every DDL
// so far, then makes the set of copied tablespaces match the server's: renamed files
// are renamed, dropped ones removed, and tablespaces created or re-created during the
// copy (CREATE, TRUNCATE, table rebuilds) are copied again now. Redo from checkpoint A
// brings every copy forward at prepare.
//
// A redo copy that does not parse the log reports no DDL to wait for (its server holds
// DDL off for the whole copy); it is not waited on: it copies whole blocks only, so on
// an idle server it would wait for a block that does not fill.
func (j *job) reconcileDDL(ctx context.Context, current []srcFile) error {
	if j.redoLog().Parsed() {
		_, now, err := j.srv.LSNs(ctx)
		if err != nil {
			return err
		}
		if err := j.tail.t.WaitCopied(ctx, now); err != nil {
			return err
		}
	}
	e := summarize(j.fileOps())
	j.mu.Lock()
	for id := range j.lostSpaces {
		e.created[id] = true // copied whole again, as a tablespace created meanwhile
	}
	j.mu.Unlock()
	return j.ddl.reconcile(ctx, j, current, e)
}

// dirDDL is reconcileDDL for a full backup into an end that can change what it holds:
// renamed copies are renamed, dropped ones removed, and the tablespaces created,
// re-created or renamed during the copy copied again under their names.
type dirDDL struct{}

func (dirDDL) reconcile(ctx context.Context, j *job, current []srcFile, e ddlEffects) error {
	if err := j.applyDropsAndRenames(e); err != nil {
		return err
	}
	recopy, err := j.needsCopy(current, e)
	if err != nil {
		return err
	}
	if err := j.dropStale(current); err != nil {
		return err
	}
	return j.copyChangedByDDL(ctx, recopy, j.copyInnoDB, false)
}

// storedName: a copy is rewritten in place, under its own name.
func (dirDDL) storedName(_ *job, rel string) string { return rel }

// copyChangedByDDL copies again, with copy, the tablespaces DDL created, re-created
// or renamed during the backup (of an incremental, for the log).
func (j *job) copyChangedByDDL(ctx context.Context, files []srcFile, copy func(context.Context, []srcFile) error, incremental bool) error {
	if len(files) > 0 {
		j.log.Info("copying whole again the tablespaces created, re-created or renamed since the server's checkpoint at the backup's start (DDL during the backup or just before it)", "files", len(files), "incremental", incremental)
	}
	return copy(ctx, files)
}

// applyDropsAndRenames removes copies of dropped or re-created tablespaces and moves
// renamed ones to their new names (through temporary names, so swaps work).
func (j *job) applyDropsAndRenames(e ddlEffects) error {
	type move struct{ from, to string }
	var moves []move
	for rel, f := range j.files {
		if f.Kind != "innodb" || !f.Known || !strings.HasSuffix(rel, innodbExt) {
			continue
		}
		if e.deleted[f.SpaceID] || e.created[f.SpaceID] {
			if err := j.removeCopy(rel); err != nil {
				return err
			}
			continue
		}
		if to, ok := e.renamed[f.SpaceID]; ok && to != rel {
			moves = append(moves, move{rel, to})
		}
	}
	for i, m := range moves {
		if err := j.moveCopy(m.from, fmt.Sprintf("%s.ferry-mv%d", m.from, i)); err != nil {
			return err
		}
	}
	for i, m := range moves {
		if err := j.moveCopy(fmt.Sprintf("%s.ferry-mv%d", m.from, i), m.to); err != nil {
			return err
		}
	}
	return nil
}

// needsCopy returns the current tablespaces whose copy is missing or is not the
// tablespace now at that path.
func (j *job) needsCopy(current []srcFile, e ddlEffects) ([]srcFile, error) {
	var out []srcFile
	for _, f := range current {
		if f.System {
			continue
		}
		c, ok := j.files[f.Rel]
		if ok && c.Known && !e.created[c.SpaceID] && sameFile(f.Abs, c.Space) {
			continue // the file copied (a file keeps its space id): no page 0 to read
		}
		id, known, err := spaceID(f.Abs, j.info.PageSize)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok && known && c.Known && c.SpaceID == id && !e.created[id] {
			continue
		}
		if ok {
			if err := j.removeCopy(f.Rel); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// dropStale removes copies of tablespaces no longer on the server.
func (j *job) dropStale(current []srcFile) error {
	live := map[string]bool{}
	for _, f := range current {
		live[f.Rel] = true
	}
	for rel, f := range j.files {
		if f.Kind == "innodb" && strings.HasSuffix(rel, innodbExt) && !live[rel] {
			if err := j.removeCopy(rel); err != nil {
				return err
			}
		}
	}
	return nil
}

func (j *job) removeCopy(rel string) error {
	delete(j.files, rel)
	return j.sink.Remove(rel)
}

func (j *job) moveCopy(from, to string) error {
	if err := j.sink.Rename(from, to); err != nil {
		return err
	}
	f := j.files[from]
	delete(j.files, from)
	f.Rel = to
	j.files[to] = f
	return nil
}

// spaceID reads the space id from page 0; known is false while page 0 is unwritten.
func spaceID(path string, pageSize int) (id uint32, known bool, err error) {
	in, err := directio.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer in.Close()
	buf := directio.AlignedBuffer(max(pageSize, directio.Align))
	n, err := in.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("read page 0 of %s: %w", path, err)
	}
	if n < 64 || innodb.IsZero(buf[:n]) {
		return 0, false, nil
	}
	h, err := innodb.ParseSpaceHeader(buf[:n])
	if err != nil {
		return 0, false, nil
	}
	return h.SpaceID, true, nil
}
