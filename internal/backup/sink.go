package backup

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/diskspace"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/spool"
)

// lockSpool keeps on local disk what the backup copies while it holds BLOCK_DDL and
// BLOCK_COMMIT, on an end that is not Caps().Direct (a stream, a repository, a clone),
// and stores it there once the locks are released: the locks last as long as the
// copy takes from the server's disk, never as long as the end's link takes.
type lockSpool struct {
	files *spool.Files
	mu    sync.Mutex
	opts  map[*spool.File]sink.FileOptions
}

// lockSpoolNeed is what the backup copies under the locks, as far as it is known
// before they are taken: the non-InnoDB files and the Aria logs. Tablespaces DDL
// re-creates meanwhile are copied under BLOCK_DDL too; they are spooled while the
// bound leaves room and written to the end otherwise.
func lockSpoolNeed(p plan) (files int, bytes int64) {
	for _, list := range [][]srcFile{p.DDLStable, p.Commit, p.AriaLogs} {
		for _, f := range list {
			files++
			bytes += f.Size
		}
	}
	return files, bytes
}

// lockSpoolRoom refuses, in one line, a backup whose copies under the locks would not
// fit the spool's bound (what the redo spool leaves of it) or the free space of the
// spool's directory; it returns the bound for the lock spool. An end that is Direct
// needs no room.
func (j *job) lockSpoolRoom(p plan) (int64, error) {
	if j.sink.Caps().Direct {
		return 0, nil
	}
	n, need := lockSpoolNeed(p)
	room := j.spoolLimit
	if j.tail != nil {
		room -= j.tail.spool.Held()
	}
	dir := cmp.Or(j.cfg.Spool.Dir, os.TempDir())
	what := fmt.Sprintf("the %d non-InnoDB files copied under the backup locks (kept there until the locks are released, so that commits never wait on %s)", n, j.sink.Name())
	if need > room {
		return 0, setting.Errorf("%s need %s in %s, and %s leaves %s for them: give %s more, or %s a directory with more space", what, diskspace.Human(need), dir, setting.MaxSpool, diskspace.Human(max(room, 0)), setting.MaxSpool, setting.Tmpdir)
	}
	if err := diskspace.Check(dir, need, what); err != nil {
		return 0, err
	}
	return room, nil
}

// startLockSpool sends what is created from now on into a lock spool bounded by room.
func (j *job) startLockSpool(room int64) {
	if j.sink.Caps().Direct {
		return
	}
	j.held = &lockSpool{files: spool.NewFiles(j.cfg.Spool.Dir, room), opts: map[*spool.File]sink.FileOptions{}}
}

// createHeld creates rel in the lock spool while one is active; ok is false when there
// is none, or when rel does not fit its bound (it is then written to the end, and the
// lock waits on it: slower, but nothing copied so far is thrown away).
func (j *job) createHeld(rel string, o sink.FileOptions) (f sink.File, ok bool) {
	h := j.held
	if h == nil {
		return nil, false
	}
	sf, ok := h.files.Create(rel, o.Size)
	if !ok {
		j.log.Warn("the spool for the copies under the backup locks is full: this file goes straight to the end, and the lock waits for it",
			"file", rel, "bytes", o.Size, "spooled_bytes", h.files.Held(), "spool_dir", cmp.Or(j.cfg.Spool.Dir, os.TempDir()))
		return nil, false
	}
	h.mu.Lock()
	h.opts[sf] = o
	h.mu.Unlock()
	return sf, true
}

// storeLockSpool runs once the locks are released: it stores every file of the lock
// spool at the end, in the order they were created, and frees the spool.
func (j *job) storeLockSpool(ctx context.Context) error {
	h := j.held
	if h == nil {
		return nil
	}
	j.held = nil
	defer h.files.Release()
	t0, list := j.clock.Now(), h.files.List()
	buf := <-j.bufs
	defer func() { j.bufs <- buf }()
	for _, sf := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		out, err := j.sink.Create(sf.Name(), h.opts[sf])
		if err != nil {
			return err
		}
		if err := sf.CopyTo(out, buf); err != nil {
			out.Close(0)
			return fmt.Errorf("store %s: %w", sf.Name(), filecopy.WrapWriteErr(err))
		}
		if err := out.Close(sf.Size()); err != nil {
			return fmt.Errorf("store %s: %w", sf.Name(), filecopy.WrapWriteErr(err))
		}
	}
	j.log.Info("stored what was copied under the backup locks", "files", len(list), "bytes", h.files.Held(),
		"took", j.clock.Since(t0).Round(time.Millisecond), "to", j.sink.Name())
	return nil
}

// heldBytes is what the lock spool holds (0 without one), for the log.
func (j *job) heldBytes() int64 {
	if j.held == nil {
		return 0
	}
	return j.held.files.Held()
}

// releaseLockSpool frees the lock spool after a failure.
func (j *job) releaseLockSpool() {
	if j.held != nil {
		j.held.files.Release()
		j.held = nil
	}
}
