package backup

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// DDL markers of mariadb-backup's layout, applied before recovery by ferry restore and
// mariadb-backup --prepare: <base>.del removes <base>.ibd, <base>.new replaces it.
const (
	delMarker = ".del"
	newCopy   = ".new"
)

// streamDDL is reconcileDDL for a full backup into a stream, where nothing sent can be
// changed: a copy that is no longer the tablespace at its path gets a .del marker, and
// the tablespace now there (created, re-created or renamed during the copy) is copied
// again, as <base>.new if its name was already used in the stream.
type streamDDL struct{}

func (streamDDL) reconcile(ctx context.Context, j *job, current []srcFile, e ddlEffects) error {
	keep, recopy, err := j.keptCopies(current, e, func(rel string) string { return rel })
	if err != nil {
		return err
	}
	if err := j.sendDeletes(keep); err != nil {
		return err
	}
	return j.copyChangedByDDL(ctx, recopy, j.copyInnoDB, false)
}

// keptCopies splits the server's tablespaces into those whose copy in the backup (named
// by copyOf) is still theirs (same space id, not re-created during the backup; system
// tablespace files always are) and those to copy again.
func (j *job) keptCopies(current []srcFile, e ddlEffects, copyOf func(rel string) string) (map[string]bool, []srcFile, error) {
	keep := map[string]bool{}
	var recopy []srcFile
	for _, f := range current {
		if f.System {
			keep[f.Rel] = true
			continue
		}
		id, known, err := spaceID(f.Abs, j.info.PageSize)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		c, ok := j.files[copyOf(f.Rel)]
		if ok && known && c.Known && c.SpaceID == id && !e.created[id] {
			keep[f.Rel] = true
			continue
		}
		recopy = append(recopy, f)
	}
	return keep, recopy, nil
}

// sendDeletes sends a .del marker for every tablespace copy in the stream that is not
// kept, so that restore drops it.
func (j *job) sendDeletes(keep map[string]bool) error {
	var dels []string
	j.mu.Lock()
	for rel := range j.sent {
		if strings.HasSuffix(rel, innodbExt) && !keep[rel] {
			dels = append(dels, rel)
		}
	}
	j.mu.Unlock()
	sort.Strings(dels)
	for _, rel := range dels {
		f, err := j.writeWhole(strings.TrimSuffix(rel, innodbExt)+delMarker, nil, manifest.KindDDL)
		if err != nil {
			return err
		}
		j.record(copiedFile{Rel: f.Path, Kind: f.Kind})
	}
	return nil
}

// storedName: rel itself, or <base>.new if the stream already carries rel.
func (streamDDL) storedName(j *job, rel string) string {
	if !j.wasSent(rel) {
		return rel
	}
	return strings.TrimSuffix(rel, innodbExt) + newCopy
}
