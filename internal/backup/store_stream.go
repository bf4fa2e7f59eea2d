package backup

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/stream"
)

// streamStore writes the backup as an xbstream. DDL during the backup cannot undo what
// was sent: it is expressed with mariadb-backup's markers (<name>.del, <name>.new) that
// ferry restore and mariadb-backup --prepare apply.
type streamStore struct {
	w    *stream.Writer
	mu   sync.Mutex
	sent map[string]bool // every file started in the stream
}

func newStreamStore(out io.Writer, o stream.Options) (*streamStore, error) {
	w, err := stream.NewWriter(out, o)
	if err != nil {
		return nil, err
	}
	return &streamStore{w: w, sent: map[string]bool{}}, nil
}

func (s *streamStore) rewritable() bool { return false }

func (s *streamStore) create(rel string, _ bool) (storeFile, error) {
	return s.start(rel, s.w.Create)
}

func (s *streamStore) createSmall(rel string) (storeFile, error) {
	return s.start(rel, s.w.CreateUncompressed)
}

func (s *streamStore) start(rel string, create func(string) (*stream.File, error)) (storeFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent[rel] {
		return nil, fmt.Errorf("stream: %s would be sent twice (internal error)", rel)
	}
	f, err := create(rel)
	if err != nil {
		return nil, err
	}
	s.sent[rel] = true
	return streamFile{f}, nil
}

type streamFile struct{ f *stream.File }

func (f streamFile) WriteAt(p []byte, off int64) error { return f.f.WriteAt(p, off) }
func (f streamFile) Close(int64) error                 { return f.f.Close() }

func (s *streamStore) remove(string) error { return errNotRewritable }

func (s *streamStore) rename(string, string) error { return errNotRewritable }

var errNotRewritable = fmt.Errorf("a stream cannot change files already sent (internal error)")

// commit records how each file was stored, sends the manifest as the last file and
// flushes the stream.
func (s *streamStore) commit(m *manifest.Manifest) error {
	stored := s.w.Stored()
	for i := range m.Files {
		if st, ok := stored[m.Files[i].Path]; ok && st.Name != m.Files[i].Path {
			m.Files[i].Stored, m.Files[i].StoredSize = st.Name, st.Size
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	if _, err := writeWhole(s, manifest.FileName, append(b, '\n'), manifest.KindMeta); err != nil {
		return err
	}
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("%w (is the reading end of the stream still there?)", err)
	}
	return nil
}
