package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// MaxChain is the most backups one chain (a full backup and the incrementals on it)
// may hold; a longer one is refused as damaged rather than followed.
const MaxChain = 1000

// ErrBrokenChain marks an incremental backup that cannot be restored from the
// repository: a base missing, unfinished, or not the one it was taken on.
var ErrBrokenChain = errors.New("broken incremental chain")

// ErrNoBase means the repository holds no complete backup an incremental could apply on.
var ErrNoBase = errors.New("no complete backup of this server")

// chainError is a one-line message about a chain that errors.Is ErrBrokenChain.
type chainError struct{ msg string }

func (e *chainError) Error() string        { return e.msg }
func (e *chainError) Is(target error) bool { return target == ErrBrokenChain }

func brokenf(format string, args ...any) error {
	return &chainError{msg: fmt.Sprintf(format, args...)}
}

// IsIncremental tells whether backup m applies on a base backup.
func IsIncremental(m *manifest.Manifest) bool {
	return m.Type == manifest.TypeIncremental || m.Incremental != nil
}

// baseGetter returns the base of an incremental backup, or a chain error saying why
// it is not there.
type baseGetter func(child *manifest.Manifest) (*manifest.Manifest, error)

// Chain resolves backup id (or "latest") to the backups a restore of it needs, oldest
// first: the full backup, the incrementals on it, and the backup itself (alone for a
// full backup). Each is validated and, encrypted, checked against ids as Load does.
// A base that is missing or unfinished, a link whose LSNs do not meet, a loop or a
// chain longer than MaxChain is an ErrBrokenChain error of one line.
func (r *Repo) Chain(ctx context.Context, id string, ids []age.Identity) ([]*manifest.Manifest, error) {
	chain, err := r.links(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, m := range chain {
		if err := r.CheckKey(ctx, m, ids); err != nil {
			return nil, fmt.Errorf("backup %s: %w", m.ID, err)
		}
	}
	return chain, nil
}

// links is Chain without the key check: the chain of backup id (or "latest"), oldest
// first, its links checked and each manifest validated.
func (r *Repo) links(ctx context.Context, id string) ([]*manifest.Manifest, error) {
	head, err := r.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	chain, err := follow(head, func(child *manifest.Manifest) (*manifest.Manifest, error) {
		return r.base(ctx, child)
	})
	if err != nil {
		return nil, err
	}
	for _, m := range chain {
		if err := Validate(m); err != nil {
			return nil, err
		}
	}
	return chain, nil
}

// NewestBase returns the newest complete backup (full or incremental) of the server
// whose @@server_uid is serverUID (of any server if it is ""), for an incremental to
// apply on. Its chain must be whole: an incremental on a broken chain could never be
// restored. ErrNoBase if there is none.
func (r *Repo) NewestBase(ctx context.Context, serverUID string) (*manifest.Manifest, error) {
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := len(list) - 1; i >= 0; i-- {
		m := list[i].Manifest
		if m == nil || serverUID != "" && m.Server.UID != serverUID {
			continue
		}
		if _, err := follow(m, fromList(list)); err != nil {
			return nil, fmt.Errorf("%w; an incremental on %s could not be restored: take a full backup", err, m.ID)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w in %s: take a full backup first", ErrNoBase, r.Location())
}

// follow walks from head through its bases to a full backup and returns the chain,
// oldest first.
func follow(head *manifest.Manifest, get baseGetter) ([]*manifest.Manifest, error) {
	chain := []*manifest.Manifest{head}
	seen := map[string]bool{head.ID: true}
	for m := head; IsIncremental(m); {
		if m.Incremental == nil || m.Incremental.BaseID == "" {
			return nil, brokenf("backup %s is incremental but names no base backup in the repository: it cannot be restored from it", m.ID)
		}
		baseID := m.Incremental.BaseID
		if seen[baseID] {
			return nil, brokenf("the chain of backup %s loops: %s is its own base through %s (the repository is damaged)", head.ID, baseID, m.ID)
		}
		if len(chain) >= MaxChain {
			return nil, brokenf("the chain of backup %s is longer than %d backups (the repository is damaged)", head.ID, MaxChain)
		}
		base, err := get(m)
		if err != nil {
			return nil, err
		}
		if err := link(m, base); err != nil {
			return nil, err
		}
		seen[baseID] = true
		chain = append(chain, base)
		m = base
	}
	slices.Reverse(chain)
	return chain, nil
}

// link checks that incremental child applies on base: it was taken from base's end
// LSN, on the same server.
func link(child, base *manifest.Manifest) error {
	inc := child.Incremental
	if inc.BaseToLSN != base.ChainLSN() {
		return brokenf("the chain is broken between %s and %s: %s applies on LSN %d, %s ends at LSN %d (not the backup it was taken on)",
			base.ID, child.ID, child.ID, inc.BaseToLSN, base.ID, base.ChainLSN())
	}
	if child.Server.UID != "" && base.Server.UID != "" && child.Server.UID != base.Server.UID {
		return brokenf("the chain is broken between %s and %s: they are backups of different servers (server_uid %s and %s)",
			base.ID, child.ID, base.Server.UID, child.Server.UID)
	}
	return nil
}

// base reads the manifest of child's base; a base without one is told apart: never
// there (or deleted), or unfinished.
func (r *Repo) base(ctx context.Context, child *manifest.Manifest) (*manifest.Manifest, error) {
	id := child.Incremental.BaseID
	m, err := r.Manifest(ctx, id)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, ErrNoBackup) {
		return nil, fmt.Errorf("backup %s: its base: %w", child.ID, err)
	}
	e, err := r.entry(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("backup %s: its base: %w", child.ID, err)
	}
	return nil, unfinishedBase(child.ID, e)
}

// fromList finds bases among the entries of a listing.
func fromList(list []Entry) baseGetter {
	byID := make(map[string]Entry, len(list))
	for _, e := range list {
		byID[e.ID] = e
	}
	return func(child *manifest.Manifest) (*manifest.Manifest, error) {
		e, ok := byID[child.Incremental.BaseID]
		if !ok {
			e = Entry{ID: child.Incremental.BaseID}
		}
		if e.Manifest != nil {
			return e.Manifest, nil
		}
		return nil, unfinishedBase(child.ID, e)
	}
}

// unfinishedBase says why base e of backup id, which has no manifest, cannot serve.
func unfinishedBase(id string, e Entry) error {
	switch {
	case e.Objects == 0 && e.Marker == nil:
		return brokenf("backup %s needs its base %s, which is not in the repository (expired or deleted?)", id, e.ID)
	case e.Status == StatusRunning:
		return brokenf("backup %s needs its base %s, which is still running: wait for it to finish", id, e.ID)
	}
	return brokenf("backup %s needs its base %s, which is incomplete (interrupted before its manifest)", id, e.ID)
}
