package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
)

// Sink writes a backup as an xbstream: each file once, in order. DDL during the backup
// cannot undo what was sent; the engine expresses it with mariadb-backup's markers
// (<name>.del, <name>.new) that ferry restore and mariadb-backup --prepare apply.
type Sink struct {
	out  io.Writer
	opts Options
	w    *Writer
	mu   sync.Mutex
	sent sink.Sent // every file started in the stream
}

var _ sink.Sink = (*Sink)(nil)

// NewSink returns the end for a stream written to out, checking the options' memory
// budget.
func NewSink(out io.Writer, o Options) (*Sink, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	return &Sink{out: out, opts: o, sent: sink.Sent{}}, nil
}

// Name is "stream".
func (s *Sink) Name() string { return "stream" }

// Caps: written in order, once; nothing goes to the server's disks.
func (s *Sink) Caps() sink.Caps {
	st := manifest.Storage{Format: manifest.StorageXbstream}
	if s.opts.Compression != codec.None && s.opts.Compression != "" {
		st.Compression, st.Level = string(s.opts.Compression), s.opts.Level
	}
	if s.opts.Encrypted() {
		st.Encryption = "age"
	}
	return sink.Caps{Remote: true, Memory: s.opts.MaxMemory, Storage: st}
}

// Open starts the stream's encoder.
func (s *Sink) Open(context.Context, string) error {
	w, err := NewWriter(s.out, s.opts)
	s.w = w
	return err
}

// Create starts a file in the stream; a metadata file is never compressed.
func (s *Sink) Create(rel string, o sink.FileOptions) (sink.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent.Has(rel) {
		return nil, fmt.Errorf("stream: %s would be sent twice (internal error)", rel)
	}
	create := s.w.Create
	if o.Meta {
		create = s.w.CreateUncompressed
	}
	f, err := create(rel)
	if err != nil {
		return nil, err
	}
	s.sent.Add(rel)
	return &streamFile{f}, nil
}

// streamFile is a file of the stream as the engine sees it. The engine keeps its files
// until the copy ends; a closed one lets go of its writer, so that what stays per file
// is a pointer.
type streamFile struct{ f *File }

var errClosed = errors.New("stream: file already closed (internal error)")

func (f *streamFile) WriteAt(p []byte, off int64) error {
	if f.f == nil {
		return errClosed
	}
	return f.f.WriteAt(p, off)
}

func (f *streamFile) Close(int64) error {
	if f.f == nil {
		return errClosed
	}
	err := f.f.Close()
	f.f = nil
	return err
}

var errNotRewritable = errors.New("a stream cannot change files already sent (internal error)")

// Remove is not possible in a stream.
func (s *Sink) Remove(string) error { return errNotRewritable }

// Rename is not possible in a stream.
func (s *Sink) Rename(string, string) error { return errNotRewritable }

// Commit records how each file was stored, sends the manifest as the last file and
// flushes the stream.
func (s *Sink) Commit(_ context.Context, m *manifest.Manifest) error {
	for i := range m.Files {
		if st, ok := s.w.StoredAs(m.Files[i].Path); ok && st.Name != m.Files[i].Path {
			m.Files[i].Stored, m.Files[i].StoredSize = st.Name, st.Size
		}
	}
	// MarshalIndent sizes its output at twice the compact form, so the newline is
	// appended in place (json.Encoder, which grows its buffer as it goes, peaked 190 MB
	// higher at 100,000 tables).
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	f, err := s.Create(manifest.FileName, sink.FileOptions{Meta: true})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := f.WriteAt(b, 0); err != nil {
		f.Close(0)
		return err
	}
	if err := f.Close(int64(len(b))); err != nil {
		return err
	}
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("%w (is the reading end of the stream still there?)", err)
	}
	return nil
}

// Abort: the partial stream has no manifest.
func (s *Sink) Abort(error) string {
	return "the partial stream has no manifest, so restore will refuse it"
}

// Patch is not supported: Caps().Patch is not set.
func (s *Sink) Patch(int, string, int64, []byte) (uint32, error) { return 0, sink.ErrNoPatch }

// Drain implements sink.Sink: a stream never re-copies pages, so it has nothing to wait for.
func (s *Sink) Drain(context.Context) error { return nil }
