package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/safepath"
	"golang.org/x/sys/unix"
)

// RepoSource is a backup in a repository. It is downloaded straight into a staging
// directory beside the datadir (every object checked, decrypted and decompressed in
// parallel, nothing stored twice). The staging directory is named after the backup and
// kept when the restore fails, so that a run with Resume continues it without
// downloading again what it already holds and verifies.
type RepoSource struct {
	Repo       *repo.Repo
	BackupID   string // an id, or "latest"
	Resume     bool
	Identities []age.Identity
	// Parallel is how many objects are downloaded at once (default 8: downloads wait
	// on the network, not the cores).
	Parallel int
	m        *manifest.Manifest // loaded by Inspect
	lock     *os.File           // holds the staging directory's lock (lockStaging)
}

// Name implements Source.
func (s *RepoSource) Name() string {
	if s.m != nil {
		return s.Repo.Location() + " " + s.m.ID
	}
	return s.Repo.Location() + " " + s.BackupID
}

// Inspect implements Source: it loads and checks the backup's manifest.
func (s *RepoSource) Inspect(ctx context.Context) (*Backup, error) {
	m, err := s.Repo.Load(ctx, s.BackupID, s.Identities)
	if err != nil {
		return nil, err
	}
	s.m = m
	return &Backup{Manifest: m, ServerVersion: m.Server.Version, Settings: m.Server.Settings, Source: s.Name()}, nil
}

// Staging implements Source: the backup's own staging directory, kept on failure, and
// locked while this process runs.
func (s *RepoSource) Staging(datadir string) (string, bool, error) {
	if s.m == nil {
		return "", false, errors.New("internal error: repository source used before Inspect")
	}
	dir, lock, err := repoStaging(datadir, s.m.ID, s.Resume)
	s.lock = lock
	return dir, true, err
}

// repoStaging returns the staging directory of backup id beside datadir, and its lock:
// new, or with resume the one an interrupted restore left.
func repoStaging(datadir, id string, resume bool) (string, *os.File, error) {
	dir := placeFor(datadir).path("restore-" + id)
	_, err := os.Lstat(dir)
	switch {
	case err == nil:
		lock, err := lockStaging(dir)
		if err != nil {
			return "", nil, err
		}
		if !resume {
			lock.Close()
			return "", nil, fmt.Errorf("an interrupted restore of backup %s is in %s: run again with --resume to continue it (what it holds is verified, not downloaded again), or remove that directory", id, dir)
		}
		if err := checkResumable(dir, id); err != nil {
			lock.Close()
			return "", nil, err
		}
		return dir, lock, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", filepath.Dir(dir), filecopy.WrapWriteErr(err))
	}
	// Mkdir, not MkdirAll: of two restores started at once, one creates it.
	if err := os.Mkdir(dir, 0o750); err != nil {
		return "", nil, fmt.Errorf("create staging directory %s: %w", dir, filecopy.WrapWriteErr(err))
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return "", nil, err
	}
	lock, err := lockStaging(dir)
	return dir, lock, err
}

// lockStaging takes an exclusive lock on the staging directory dir until the file
// returned is closed or this process ends (however it ends), so that a second restore
// (a --resume started while the first still runs) never writes there too.
func lockStaging(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("staging directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another ferry restore is running in %s: wait for it to end, or stop it and run this again with --resume", dir)
		}
		return nil, fmt.Errorf("lock the staging directory %s: %w", dir, err)
	}
	return f, nil
}

// checkResumable accepts for --resume only a real directory (no link) that holds ferry's
// journal of the same backup and no symbolic link anywhere.
func checkResumable(dir, id string) error {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: --resume continues only a restore ferry left there; remove it", dir)
	}
	if err := checkJournal(dir, id); err != nil {
		return err
	}
	if mariadb.DatadirInUse(dir) {
		return fmt.Errorf("a mariadbd still runs on %s (left by a restore killed during its recovery or replay): stop it, then run this again with --resume", dir)
	}
	if err := safepath.CheckTree(dir); err != nil {
		return fmt.Errorf("cannot resume the restore in %s: %w", dir, err)
	}
	return nil
}

// Fill implements Source: it downloads what staging does not already hold (verified)
// and writes the manifest last.
func (s *RepoSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	if s.m == nil {
		if _, err := s.Inspect(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := startOverAfterReplay(staging, env.Log); err != nil {
		return nil, err
	}
	m := wanted(s.m, env)
	parallel := cmp.Or(s.Parallel, defaults.Downloads)
	j, err := openJournal(staging, m.ID)
	if err != nil {
		return nil, err
	}
	defer j.close()
	if hasPhase(j.phases, filledPhase(m)) {
		return s.filled(staging, len(j.done), env)
	}
	skip, err := j.verified(ctx, m, parallel)
	if err != nil {
		return nil, err
	}
	if err := layOut(staging, m); err != nil {
		return nil, err
	}
	env.Log.Info("restoring from the repository", "backup", m.ID, "from", s.Repo.Location(), "staging", staging,
		"objects", len(m.Objects), "already_verified", len(skip), "parallel", parallel)
	_, patched := repo.Patched(m)
	prog := env.Reporter(m.TotalSize() + patched - j.skippedBytes)
	err = s.Repo.ReadBackup(ctx, m, repo.ReadOptions{Identities: s.Identities, Parallel: parallel,
		Skip: func(obj string) bool { return skip[obj] }, Done: j.add},
		func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
			return writeBlob(staging, f, b, r, prog.Add)
		})
	if err == nil {
		err = s.applyPatches(ctx, m, staging, parallel, prog)
	}
	prog.Finish()
	if err != nil {
		return nil, fmt.Errorf("restore %s from %s: %w", m.ID, s.Repo.Location(), err)
	}
	if err := manifest.Write(staging, m); err != nil {
		return nil, err
	}
	if err := addPhase(staging, filledPhase(m)); err != nil {
		return nil, err
	}
	b, err := Open(staging)
	if err != nil {
		return nil, err
	}
	b.Source = s.Name()
	env.Log.Info("backup downloaded and verified", "files", len(m.Files), "bytes", m.TotalSize())
	return b, nil
}

// filled is the backup a resumed restore had already downloaded and verified into
// staging: nothing is downloaded again (a recovery that had started on it changed
// it, and recovery starts over on what it left: crash recovery is restartable).
func (s *RepoSource) filled(staging string, verified int, env Env) (*Backup, error) {
	b, err := Open(staging)
	if err != nil {
		return nil, err
	}
	b.Source = s.Name()
	env.Log.Info("resume: the backup was already downloaded and verified: nothing is downloaded again", "backup", s.m.ID, "staging", staging,
		"already_verified", verified)
	return b, nil
}

// wanted is m with only the files the restore needs (env.Want): the objects that hold
// none of their blobs are then never read.
func wanted(m *manifest.Manifest, env Env) *manifest.Manifest {
	if env.Want == nil {
		return m
	}
	c := *m
	c.Files = nil
	var bytes int64
	for _, f := range m.Files {
		if env.Want(f.Path) {
			c.Files = append(c.Files, f)
			bytes += f.Size
		}
	}
	env.Log.Info("restoring only the files the tables need", "files", len(c.Files), "of", len(m.Files), "bytes", bytes, "of", m.TotalSize())
	return &c
}

// applyPatches writes the pages the backup copied again over the files' blobs, round
// by round. They are never skipped on a resume: a blob downloaded again would undo
// them.
func (s *RepoSource) applyPatches(ctx context.Context, m *manifest.Manifest, staging string, parallel int, prog *progress.Reporter) error {
	rounds, _ := repo.Patched(m)
	for round := 1; round <= rounds; round++ {
		err := s.Repo.ReadBackup(ctx, m, repo.ReadOptions{Identities: s.Identities, Parallel: parallel, Round: round},
			func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
				return writeBlob(staging, f, b, r, prog.Add)
			})
		if err != nil {
			return fmt.Errorf("apply the pages copied again in round %d: %w", round, err)
		}
	}
	return nil
}

// layOut creates every file of the backup in dir at its size (so that parts can be
// written in any order) and removes files that are not the backup's (left by a
// recovery that an earlier, interrupted run had started).
func layOut(dir string, m *manifest.Manifest) error {
	want := map[string]bool{journalName: true}
	for _, f := range m.Files {
		want[f.Path] = true
		p, err := safepath.MkdirParents(dir, f.Path, 0o750)
		if err != nil {
			return filecopy.WrapWriteErr(err)
		}
		fh, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640)
		if err != nil {
			return fmt.Errorf("create %s: %w", p, filecopy.WrapWriteErr(err))
		}
		err = fh.Truncate(f.Size)
		if err == nil && f.Sparse {
			err = punchUncovered(fh, f)
		}
		fh.Close()
		if err != nil {
			return fmt.Errorf("size %s: %w", p, filecopy.WrapWriteErr(err))
		}
	}
	return removeStrays(dir, want)
}

// punchUncovered makes every range of a sparse file that no blob covers a hole again:
// zeros in the backup, where an earlier run's recovery, deltas or replay may have
// written pages that a resumed restore, which re-checks only the blobs, would keep.
func punchUncovered(fh *os.File, f manifest.File) error {
	punch := func(from, to int64) error {
		if to <= from {
			return nil
		}
		return unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
	}
	var end int64
	for _, b := range f.Blobs { // in order, not overlapping
		if err := punch(end, b.RawOffset); err != nil {
			return err
		}
		end = max(end, b.RawOffset+b.RawSize)
	}
	return punch(end, f.Size)
}

// removeStrays deletes the files under dir that want does not name.
func removeStrays(dir string, want map[string]bool) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), scratchPrefix) {
			return filepath.SkipDir // a chain's incremental, kept for --resume
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if want[filepath.ToSlash(rel)] || rel == manifest.FileName {
			return nil
		}
		return os.Remove(p)
	})
}

// writeBlob writes a blob's decoded bytes at its offset in the staging copy of f, with
// aligned O_DIRECT writes; a sparse file keeps its holes (the range is punched first,
// so a rewrite after an interrupted recovery leaves no old bytes).
func writeBlob(dir string, f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64)) error {
	p, err := safepath.Join(dir, f.Path)
	if err != nil {
		return err
	}
	t, err := filecopy.Open(p, f.Sparse, true)
	if err != nil {
		return err
	}
	defer t.Close()
	if f.Sparse {
		if err := t.PunchHole(b.RawOffset, b.RawSize); err != nil {
			return err
		}
	}
	buf := directio.AlignedBuffer(1 << 20)
	off := b.RawOffset
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if werr := t.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
			progress(int64(n))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
