// Package verify checks a backup in a repository without restoring it: every object is
// read again and every byte checked against the manifest (object, stored and decoded
// CRC-32Cs, decryption, decompression), and every page of every InnoDB tablespace is
// validated as the copy validated it.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

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

// Report is what a verification checked.
type Report struct {
	ID          string
	Files       int
	Objects     int
	StoredBytes int64
	RawBytes    int64
	Pages       int64 // InnoDB pages validated
}

// Run verifies one backup; the first problem found is returned, naming the object
// (and file and page) at fault.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	m, err := cfg.Repo.Load(ctx, cfg.BackupID, cfg.Identities)
	if err != nil {
		return nil, err
	}
	if err := checkObjects(ctx, cfg.Repo, m); err != nil {
		return nil, err
	}
	rep := &Report{ID: m.ID, Files: len(m.Files), Objects: len(m.Objects), StoredBytes: m.StoredSize(), RawBytes: m.TotalSize()}
	cfg.Log.Info("verifying", "backup", m.ID, "from", cfg.Repo.Location(), "objects", rep.Objects, "stored_bytes", rep.StoredBytes)
	prog := progress.New(progress.Options{Label: "verify", Total: rep.RawBytes, Terminal: cfg.Terminal, Out: cfg.Progress, Log: cfg.Log})
	var pages atomic.Int64
	err = cfg.Repo.ReadBackup(ctx, m, repo.ReadOptions{Identities: cfg.Identities, Parallel: cfg.Parallel, Unreferenced: true, Round: repo.AllRounds},
		func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
			n, err := checkPages(f, b, r, prog.Add)
			pages.Add(n)
			return err
		})
	prog.Finish()
	if err != nil {
		return nil, fmt.Errorf("backup %s failed verification: %w", m.ID, err)
	}
	rep.Pages = pages.Load()
	return rep, nil
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

// checkPages reads a blob's bytes and, for a tablespace whose page 0 the copy read,
// validates every page; it returns the pages checked.
func checkPages(f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64)) (int64, error) {
	if f.Space == nil || f.Kind != manifest.KindInnoDB {
		n, err := io.Copy(io.Discard, r)
		progress(n)
		return 0, err
	}
	s := f.Space
	c := innodb.NewChecker(innodb.SpaceHeader{SpaceID: s.ID, Flags: innodb.SpaceFlags(s.Flags), CryptData: s.Crypt}, s.System)
	ps := int64(c.PageSize())
	if b.RawOffset%ps != 0 {
		return 0, fmt.Errorf("%s: a stored range starts at byte %d, not on a page boundary (%d-byte pages)", f.Path, b.RawOffset, ps)
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
