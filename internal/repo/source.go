package repo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/directio"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/progress"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/safepath"
)

// Source is a backup in a repository, as a restore reads it (restore.Source). It is downloaded straight into a staging
// directory beside the datadir (every object checked, decrypted and decompressed in
// parallel, nothing stored twice). The staging directory is named after the backup and
// kept when the restore fails, so that a run with Resume continues it without
// downloading again what it already holds and verifies.
type Source struct {
	Repo       *Repo
	BackupID   string // an id, or "latest"
	Resume     bool
	Identities []age.Identity
	// Parallel is how many objects are downloaded at once (default 8: downloads wait
	// on the network, not the cores).
	Parallel int
	// Manifest, if set, is the backup's manifest already loaded, validated and checked
	// against Identities (by Chain): Inspect does not read it again.
	Manifest *manifest.Manifest
	m        *manifest.Manifest // loaded by Inspect
	lock     *os.File           // holds the staging directory's lock (restore.ResumeStaging)
	bufs     sync.Pool          // of *[]byte: writeBlob's aligned buffers, reused blob after blob
	tree     *safepath.Tree     // the staging directory, each of its directories checked once
}

// Name implements restore.Source.
func (s *Source) Name() string {
	if s.m != nil {
		return s.Repo.Location() + " " + s.m.ID
	}
	return s.Repo.Location() + " " + s.BackupID
}

// Caps implements restore.Source: a repository backup tells its manifest before any data
// moves, and a failed restore keeps what it downloaded for --resume.
func (s *Source) Caps() restore.Caps { return restore.Caps{Inspect: true, Resume: true} }

// Inspect implements restore.Source: it loads and checks the backup's manifest.
func (s *Source) Inspect(ctx context.Context) (*restore.Backup, error) {
	m := s.Manifest
	if m == nil {
		var err error
		if m, err = s.Repo.Load(ctx, s.BackupID, s.Identities); err != nil {
			return nil, err
		}
	}
	s.m = m
	return &restore.Backup{Manifest: m, ServerVersion: m.Server.Version, Settings: m.Server.Settings, Source: s.Name()}, nil
}

// Staging implements restore.Source: the backup's own staging directory, kept on failure, and
// locked while this process runs.
func (s *Source) Staging(datadir string) (string, error) {
	if s.m == nil {
		return "", errors.New("internal error: repository source used before Inspect")
	}
	dir, lock, err := restore.ResumeStaging(datadir, s.m.ID, s.Resume)
	s.lock = lock
	return dir, err
}

// Fill implements restore.Source: it downloads what staging does not already hold (verified)
// and writes the manifest last.
func (s *Source) Fill(ctx context.Context, staging string, env restore.Env) (*restore.Backup, error) {
	if s.m == nil {
		if _, err := s.Inspect(ctx); err != nil {
			return nil, err
		}
	}
	if err := restore.StartOverAfterReplay(staging, env.Log); err != nil {
		return nil, err
	}
	m := wanted(s.m, env)
	s.tree = safepath.NewTree(staging)
	parallel := cmp.Or(s.Parallel, defaults.Downloads)
	j, err := restore.OpenJournal(staging, m.ID)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	if j.Filled(m) {
		return s.filled(staging, j.Objects(), env)
	}
	skip, err := j.Verified(ctx, m, parallel)
	if err != nil {
		return nil, err
	}
	if err := restore.LayOut(staging, m, parallel); err != nil {
		return nil, err
	}
	env.Log.Info("restoring from the repository", "backup", m.ID, "from", s.Repo.Location(), "staging", staging,
		"objects", len(m.Objects), "already_verified", len(skip), "parallel", parallel)
	_, patched := Patched(m)
	prog := env.Reporter(m.TotalSize() + patched - j.SkippedBytes())
	err = s.Repo.ReadBackup(ctx, m, ReadOptions{Identities: s.Identities, Parallel: parallel,
		Skip: func(obj string) bool { return skip[obj] }, Done: j.Add},
		func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
			return s.writeBlob(f, b, r, prog.Add)
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
	if err := restore.MarkFilled(staging, m); err != nil {
		return nil, err
	}
	b, err := restore.Open(staging)
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
func (s *Source) filled(staging string, verified int, env restore.Env) (*restore.Backup, error) {
	b, err := restore.Open(staging)
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
func wanted(m *manifest.Manifest, env restore.Env) *manifest.Manifest {
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
func (s *Source) applyPatches(ctx context.Context, m *manifest.Manifest, staging string, parallel int, prog *progress.Reporter) error {
	rounds, _ := Patched(m)
	for round := 1; round <= rounds; round++ {
		err := s.Repo.ReadBackup(ctx, m, ReadOptions{Identities: s.Identities, Parallel: parallel, Round: round},
			func(f *manifest.File, b *manifest.Blob, r io.Reader) error {
				return s.writeBlob(f, b, r, prog.Add)
			})
		if err != nil {
			return fmt.Errorf("apply the pages copied again in round %d: %w", round, err)
		}
	}
	return nil
}

// writeBlob writes a blob's decoded bytes at its offset in the staging copy of f, with
// aligned O_DIRECT writes (a small blob's through the page cache, as a directory
// restore's small files: one open less, and no write waiting on the disk; the restore
// syncs everything before it renames the staging directory); a sparse file keeps its holes (the range is punched first,
// so a rewrite after an interrupted recovery leaves no old bytes).
func (s *Source) writeBlob(f *manifest.File, b *manifest.Blob, r io.Reader, progress func(int64)) error {
	p, err := s.tree.Join(f.Path)
	if err != nil {
		return err
	}
	t, err := filecopy.Open(p, f.Sparse, b.RawSize > directFrom)
	if err != nil {
		return err
	}
	defer t.Close()
	if f.Sparse {
		if err := t.PunchHole(b.RawOffset, b.RawSize); err != nil {
			return err
		}
	}
	bp := s.buffer()
	defer s.bufs.Put(bp)
	n := filecopy.BufferFor(b.RawSize, blobBuffer) // a small file's blob: its size, rounded to a block
	buf := (*bp)[:min((n+filecopy.BlockSize-1)&^(filecopy.BlockSize-1), blobBuffer)]
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

// directFrom is the size above which a blob is written with O_DIRECT.
const directFrom = 1 << 20

// blobBuffer is the size of writeBlob's buffers: a larger blob is written in pieces of it.
const blobBuffer = 1 << 20

// buffer returns an aligned buffer of blobBuffer bytes, reused from an earlier blob if
// one is free: a restore of tens of thousands of small files allocated (and cleared) one
// per file.
func (s *Source) buffer() *[]byte {
	if bp, ok := s.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := directio.AlignedBuffer(blobBuffer)
	return &b
}

var (
	_ restore.Source  = (*Source)(nil)
	_ restore.Resumer = (*Source)(nil)
)

// ResumeDir implements restore.Resumer: the backup's own staging directory.
func (s *Source) ResumeDir(datadir string) string {
	if s.m == nil {
		return ""
	}
	return restore.ResumeStagingPath(datadir, s.m.ID)
}
