// Package verify checks a backup in a repository without restoring it: every object is
// read again and every byte checked against the manifest (object, stored and decoded
// CRC-32Cs, decryption, decompression), and every page of every InnoDB tablespace is
// validated as the copy validated it. An incremental is verified with its whole chain
// (repo.Chain): every backup down to its full one, and the links between them.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
)

// Config configures a verification.
type Config struct {
	Repo       *repo.Repo
	BackupID   string // an id or "latest"
	Identities []age.Identity
	Parallel   int // objects read at once
	Log        *slog.Logger
	Progress   io.Writer
	Terminal   bool
}

// Report is what a verification checked: of the backup and, for an incremental, of
// every backup of its chain.
type Report struct {
	ID          string
	Chain       []string // the backups verified, oldest first: the full one, incrementals, ID
	Files       int
	Objects     int
	StoredBytes int64
	RawBytes    int64
	Pages       int64 // InnoDB pages validated (in tablespaces and deltas)
	// Lock is the S3 Object Lock the backup's manifest records (nil: none); while it
	// holds, the retention the server keeps on the manifest was checked against it.
	Lock *manifest.Lock
	// LockNotHere: the repository has no Object Lock, so it does not hold the lock the
	// manifest records (a copy of a locked backup, ferry copy).
	LockNotHere bool
}

// Run verifies one backup and, for an incremental, every backup it applies on down to
// its full backup, and the links between them (repo.Chain). The first problem found
// is returned, naming the backup and object (and file and page) at fault.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	chain, err := cfg.Repo.Chain(ctx, cfg.BackupID, cfg.Identities)
	if err != nil {
		return nil, err
	}
	rep := &Report{ID: chain[len(chain)-1].ID, Lock: chain[len(chain)-1].Lock}
	for _, m := range chain {
		if err := checkObjects(ctx, cfg.Repo, m); err != nil {
			return nil, err
		}
		if err := cfg.Repo.CheckLock(ctx, m, time.Now()); errors.Is(err, repo.ErrLockNotHere) {
			rep.LockNotHere = true
		} else if err != nil {
			return nil, err
		}
		rep.Chain = append(rep.Chain, m.ID)
		rep.Files, rep.Objects = rep.Files+len(m.Files), rep.Objects+len(m.Objects)
		rep.StoredBytes, rep.RawBytes = rep.StoredBytes+m.StoredSize(), rep.RawBytes+m.TotalSize()
	}
	cfg.Log.Info("verifying", "backup", rep.ID, "chain", rep.Chain, "from", cfg.Repo.Location(), "objects", rep.Objects, "stored_bytes", rep.StoredBytes)
	prog := progress.New(progress.Options{Label: "verify", Total: rep.RawBytes, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	defer prog.Finish()
	h := newHeld()
	for _, m := range chain {
		n, err := readAll(ctx, cfg, m, prog.Add, h)
		rep.Pages += n
		if err != nil {
			return nil, fmt.Errorf("backup %s failed verification: %w", m.ID, err)
		}
	}
	if err := checkRebuilt(chain, h); err != nil {
		return nil, err
	}
	return rep, nil
}

// readAll reads every object of backup m, referenced or not, every blob and patch,
// checking every page it can and noting in h the pages its deltas hold; it returns
// the pages checked.
func readAll(ctx context.Context, cfg Config, m *manifest.Manifest, progress func(int64), h *held) (int64, error) {
	var pages atomic.Int64
	err := cfg.Repo.ReadBackup(ctx, m, repo.ReadOptions{Identities: cfg.Identities, Parallel: cfg.Parallel, Unreferenced: true, Round: repo.AllRounds},
		func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
			n, err := checkBlob(f, b, r, progress, h.note(m.ID, f))
			pages.Add(n)
			return err
		})
	return pages.Load(), err
}

// checkObjects makes sure every object of the manifest is stored with its size, so a
// missing object is reported by name before anything is read.
func checkObjects(ctx context.Context, r *repo.Repo, m *manifest.Manifest) error {
	for _, o := range m.Objects {
		key := repo.ObjectKey(m.ID, o.Key)
		oi, err := r.Storage().Stat(ctx, key)
		if errors.Is(err, storage.ErrNotExist) {
			return fmt.Errorf("backup %s failed verification: object %s is missing: %w", m.ID, key, repo.ErrDamaged)
		}
		if err != nil {
			return err
		}
		if oi.Size != o.Size {
			return fmt.Errorf("backup %s failed verification: object %s has %d bytes, the manifest says %d: %w", m.ID, key, oi.Size, o.Size, repo.ErrDamaged)
		}
	}
	return nil
}

// checkBlob reads a blob's bytes and validates the pages of a tablespace or a delta
// whose space the manifest describes (the copy read its page 0), passing to note (if
// not nil) the number of each page a delta holds; it returns the pages checked. Other
// files are checked by their checksums alone (ReadBackup).
func checkBlob(f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64), note func(uint32)) (int64, error) {
	switch {
	case f.Space != nil && f.Kind == manifest.KindInnoDB:
		return checkPages(f, b, r, progress)
	case f.Space != nil && f.Kind == manifest.KindDelta:
		return checkDelta(f, b, r, progress, note)
	}
	n, err := io.Copy(io.Discard, r)
	progress(n)
	return 0, err
}

// checker returns the page checker of f's tablespace and its page size, after making
// sure blob b starts on a page.
func checker(f *manifest.File, b *manifest.Blob) (*innodb.Checker, int64, error) {
	s := f.Space
	c := innodb.NewChecker(innodb.SpaceHeader{SpaceID: s.ID, Flags: innodb.SpaceFlags(s.Flags), CryptData: s.Crypt}, s.System)
	ps := int64(c.PageSize())
	if b.RawOffset%ps != 0 {
		return nil, 0, fmt.Errorf("%s: a stored range starts at byte %d, not on a page boundary (%d-byte pages)", f.Path, b.RawOffset, ps)
	}
	return c, ps, nil
}

// checkPages validates every page of a blob of a tablespace.
func checkPages(f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64)) (int64, error) {
	s := f.Space
	c, ps, err := checker(f, b)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, ps*64)
	var pages int64
	off := b.RawOffset
	for {
		n, err := io.ReadFull(r, buf)
		for i := int64(0); i+ps <= int64(n); i += ps {
			pageNo := uint32((off+i)/ps) + s.FirstPage
			if cerr := c.Check(buf[i:i+ps], pageNo); cerr != nil {
				return pages, fmt.Errorf("%w: %s: page %d is not valid: %v", repo.ErrDamaged, f.Path, pageNo, cerr)
			}
			pages++
		}
		off += int64(n)
		progress(int64(n))
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return pages, nil
		}
		if err != nil {
			return pages, err
		}
	}
}
