package backup

import (
	"context"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/repo"
)

// repoStore writes the backup into a repository. Nothing is final before the manifest,
// so DDL during the backup is reconciled as in a directory: a stale copy is forgotten
// (remove), a renamed one re-keyed (rename), and the tablespace copied again.
type repoStore struct {
	ctx context.Context
	w   *repo.Writer
}

func (s repoStore) rewritable() bool { return true }

func (s repoStore) create(rel string, _ bool) (storeFile, error) { return s.w.Create(rel) }

func (s repoStore) createSmall(rel string) (storeFile, error) { return s.w.Create(rel) }

func (s repoStore) remove(rel string) error { return s.w.Remove(rel) }

func (s repoStore) rename(from, to string) error { return s.w.Rename(from, to) }

func (s repoStore) commit(m *manifest.Manifest) error { return s.w.Commit(s.ctx, m) }
