package repo

import (
	"context"
	"fmt"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
)

// Sink writes a backup into a repository. Nothing is final before the manifest, so
// DDL during the backup is reconciled as in a directory: a stale copy is forgotten
// (Remove), a renamed one re-keyed (Rename), and the tablespace copied again.
type Sink struct {
	r    *Repo
	opts WriterOptions
	id   string
	w    *Writer
	// resume, if set, is the interrupted backup Open continues (Resume).
	resume *Entry
}

var (
	_ sink.Sink      = (*Sink)(nil)
	_ sink.Resumable = (*Sink)(nil)
)

// NewSink returns the end for a backup into r, checking the options.
func NewSink(r *Repo, o WriterOptions) (*Sink, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	return &Sink{r: r, opts: o}, nil
}

// SetBase records, before Open, the backup an incremental applies on: its in-progress
// marker names it, so that expire keeps the base while the incremental runs.
func (s *Sink) SetBase(id string) { s.opts.Base = id }

// Name is the repository and, once open, the backup's id.
func (s *Sink) Name() string {
	if s.id == "" {
		return s.r.Location()
	}
	return s.r.Location() + " as " + s.id
}

// Caps: rewritable until the manifest; pages copied again are stored apart; nothing
// goes to the server's disks.
func (s *Sink) Caps() sink.Caps {
	o := s.opts.withDefaults()
	st := manifest.Storage{Format: manifest.StorageRepository, PartSize: o.PartSize}
	if c := o.Pipeline.Compression; c != codec.None && c != "" {
		st.Compression, st.Level = string(c), o.Pipeline.Level
	}
	if o.Pipeline.Encrypted() {
		st.Encryption = "age"
	}
	return sink.Caps{Rewrite: true, Patch: true, PatchApart: true, Remote: true, Memory: o.MaxMemory, Storage: st}
}

// Resume makes Open continue the interrupted backup e (Repo.Interrupted) instead of
// starting a new one: the backup keeps e's id.
func (s *Sink) Resume(e Entry) { s.resume = &e }

// Open starts backup id in the repository, or continues the interrupted one Resume
// named (the backup then keeps that one's id).
func (s *Sink) Open(ctx context.Context, id string) error {
	var w *Writer
	var err error
	if s.resume != nil {
		id = s.resume.ID
		w, err = s.r.ResumeBackup(ctx, *s.resume, s.opts)
	} else {
		w, err = s.r.NewBackup(ctx, id, s.opts)
	}
	if err != nil {
		return err
	}
	s.id, s.w = id, w
	return nil
}

// Create starts a file of the backup.
func (s *Sink) Create(rel string, o sink.FileOptions) (sink.File, error) {
	return s.w.CreateSpace(rel, o.Space, o.Keep)
}

// CopyFrom records the copy's start LSN in every object's index.
func (s *Sink) CopyFrom(lsn uint64) { s.w.SetSince(lsn) }

// Held is what the interrupted attempts stored of rel, if it is the same file.
func (s *Sink) Held(rel string, space *manifest.Space) []sink.Held { return s.w.Held(rel, space) }

// HeldSince is the lowest start LSN of the interrupted attempts whose ranges are held.
func (s *Sink) HeldSince() uint64 { return s.w.HeldSince() }

// Kept is what a resumed backup kept of its interrupted attempts.
func (s *Sink) Kept() Kept {
	if s.w == nil {
		return Kept{}
	}
	return s.w.Kept()
}

// Remove forgets a stale copy.
func (s *Sink) Remove(rel string) error { return s.w.Remove(rel) }

// Rename re-keys a copy.
func (s *Sink) Rename(from, to string) error { return s.w.Rename(from, to) }

// Commit writes the manifest last.
func (s *Sink) Commit(ctx context.Context, m *manifest.Manifest) error { return s.w.Commit(ctx, m) }

// Abort stops the uploads; the partial backup has no manifest.
func (s *Sink) Abort(err error) string {
	if s.w != nil {
		s.w.Abort(err)
	}
	return fmt.Sprintf("the partial backup %s has no manifest, so it is not listed as restorable; ferry expire removes it", s.id)
}

// Drain waits until every object sealed so far is uploaded.
func (s *Sink) Drain(ctx context.Context) error { return s.w.Drain(ctx) }

// Patch stores pages copied again as extra parts, applied over the file's on restore
// (Caps().PatchApart).
func (s *Sink) Patch(round int, rel string, off int64, p []byte) (uint32, error) {
	return 0, s.w.Patch(round, rel, off, p)
}
