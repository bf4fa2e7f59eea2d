package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/procs"
	"github.com/ferry-backup/ferry/internal/storage"
	"golang.org/x/sync/errgroup"
)

// Status of a backup in a repository.
const (
	StatusComplete   = "complete"   // its manifest is there: restorable
	StatusRunning    = "running"    // no manifest yet and its ferry is still at work
	StatusIncomplete = "incomplete" // no manifest and nothing is writing it: debris
)

// StaleAfter is how long an incomplete backup of another host must have written
// nothing before it is taken for dead (its ferry cannot be asked directly).
const StaleAfter = time.Hour

// Entry is one backup of a repository.
type Entry struct {
	ID       string
	Status   string
	Manifest *manifest.Manifest // complete backups
	Marker   *Marker            // unfinished backups, if the marker is there
	// Objects, StoredSize and LastWrite are counted by listing an unfinished backup's
	// objects; a complete one has them in its manifest.
	Objects    int
	StoredSize int64
	LastWrite  time.Time
	// Err is why the manifest could not be read (Survey only; List fails instead).
	Err error
}

// List returns every backup of the repository, oldest first (see order).
func (r *Repo) List(ctx context.Context) ([]Entry, error) {
	return r.list(ctx, false)
}

// Survey is List for a check of the whole repository: a backup whose manifest cannot
// be read (damaged, of a newer format) is listed with its Err instead of failing the
// listing.
func (r *Repo) Survey(ctx context.Context) ([]Entry, error) {
	return r.list(ctx, true)
}

func (r *Repo) list(ctx context.Context, keepErrors bool) ([]Entry, error) {
	ids, err := r.st.Prefixes(ctx, backupsDir)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, id := range ids {
		g.Go(func() error {
			e, err := r.entry(gctx, id)
			if err != nil && keepErrors && gctx.Err() == nil {
				e, err = Entry{ID: id, Err: err}, nil
			}
			out[i] = e
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	order(out)
	return out, nil
}

// order sorts entries oldest first. An id starts with its backup's start time, but
// only to the second, and a short backup can start in the second the one before it
// started: within one second, backups sort by their manifests' start times (an
// unfinished one, which has none, first), then by id.
func order(es []Entry) {
	start := func(e Entry) time.Time {
		if e.Manifest != nil {
			return e.Manifest.StartTime
		}
		return time.Time{}
	}
	sort.SliceStable(es, func(a, b int) bool {
		sa, _, _ := strings.Cut(es[a].ID, "-")
		sb, _, _ := strings.Cut(es[b].ID, "-")
		if sa != sb {
			return sa < sb
		}
		if ta, tb := start(es[a]), start(es[b]); !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return es[a].ID < es[b].ID
	})
}

// entry describes one backup.
func (r *Repo) entry(ctx context.Context, id string) (Entry, error) {
	e := Entry{ID: id}
	m, err := r.Manifest(ctx, id)
	if err == nil {
		e.Status, e.Manifest = StatusComplete, m
		e.Objects, e.StoredSize, e.LastWrite = len(m.Objects), m.StoredSize(), m.EndTime
		return e, nil
	}
	if !errors.Is(err, ErrNoBackup) {
		return e, err
	}
	err = r.st.List(ctx, backupPrefix(id), func(oi storage.ObjectInfo) error {
		e.Objects++
		e.StoredSize += oi.Size
		if oi.Modified.After(e.LastWrite) {
			e.LastWrite = oi.Modified
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	var mk Marker
	if err := getJSON(ctx, r.st, backupPrefix(id)+markerName, &mk); err == nil {
		e.Marker = &mk
	} else if !errors.Is(err, storage.ErrNotExist) {
		return e, err
	}
	e.Status = StatusIncomplete
	if e.Marker != nil && stillRunning(*e.Marker, e.LastWrite) {
		e.Status = StatusRunning
	}
	return e, nil
}

// stillRunning tells whether the ferry that started a backup may still be writing it:
// on this host, whether its process lives; elsewhere, whether it wrote recently.
func stillRunning(mk Marker, lastWrite time.Time) bool {
	host, _ := os.Hostname()
	if mk.Host == host {
		return procs.IsFerry(mk.PID)
	}
	return time.Since(lastWrite) < StaleAfter
}

// Describe is one line about an entry, for logs.
func (e Entry) Describe() string {
	return fmt.Sprintf("%s (%s, %d objects, %d bytes)", e.ID, e.Status, e.Objects, e.StoredSize)
}

// ChainIn is the chain of backup id (as Chain resolves it: oldest first, links
// checked) among the entries of a listing, read from storage no further. Its manifests
// are not validated here.
func ChainIn(list []Entry, id string) ([]*manifest.Manifest, error) {
	get := fromList(list)
	unreadable := map[string]error{}
	var head *manifest.Manifest
	for _, e := range list {
		if e.Err != nil {
			unreadable[e.ID] = e.Err
		}
		if e.ID == id {
			head = e.Manifest
		}
	}
	if head == nil {
		return nil, fmt.Errorf("%w %q: it has no manifest", ErrNoBackup, id)
	}
	return follow(head, func(child *manifest.Manifest) (*manifest.Manifest, error) {
		if err := unreadable[child.Incremental.BaseID]; err != nil {
			return nil, brokenf("backup %s needs its base %s, whose manifest cannot be read: %v", child.ID, child.Incremental.BaseID, err)
		}
		return get(child)
	})
}
