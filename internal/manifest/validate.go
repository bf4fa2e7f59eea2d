package manifest

import (
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/safepath"
)

// MaxSize bounds a manifest document: a server with a million tables has one of a few
// hundred MiB. A larger one is refused before it is read.
const MaxSize = 1 << 30

// maxFileSize bounds a file's size as a manifest states it (InnoDB's own limit on a
// tablespace is 256 TiB at 64 KiB pages).
const maxFileSize = 1 << 50

// Validate checks what a reader must not trust in a manifest it did not write: every
// file name and stored name is a safe relative path (safepath.Check) listed once,
// every size is within bounds, and the backup id and object keys cannot leave their
// prefix. Every reader of a manifest (prepare, restore, verify, list) runs it first.
func (m *Manifest) Validate() error {
	if m.ID != "" && (strings.Contains(m.ID, "/") || safepath.Check(m.ID) != nil) {
		return fmt.Errorf("manifest: backup id %q is not a plain name: the manifest was tampered with or damaged", m.ID)
	}
	if h := m.Server.Host; len(h) > 255 || strings.IndexFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 || m.Server.Port < 0 || m.Server.Port > 65535 {
		return fmt.Errorf("manifest: server address %q port %d is not a host name and port: the manifest was tampered with or damaged", h, m.Server.Port)
	}
	seen := make(map[string]bool, len(m.Files))
	for i := range m.Files {
		f := &m.Files[i]
		if err := checkFile(f); err != nil {
			return fmt.Errorf("manifest: file %q: %w: the manifest was tampered with or damaged", f.Path, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("manifest: file %q is listed twice: the manifest was tampered with or damaged", f.Path)
		}
		seen[f.Path] = true
	}
	for _, o := range m.Objects {
		if err := safepath.Check(o.Key); err != nil || o.Size < 0 || o.SHA256 != "" && !isSHA256(o.SHA256) {
			return fmt.Errorf("manifest: object %q (%d bytes) is not a valid object: the manifest was tampered with or damaged", o.Key, o.Size)
		}
	}
	return nil
}

func checkFile(f *File) error {
	if err := safepath.Check(f.Path); err != nil {
		return err
	}
	if f.Stored != "" {
		if err := safepath.Check(f.Stored); err != nil {
			return err
		}
	}
	if f.Size < 0 || f.Size > maxFileSize || f.StoredSize < 0 || f.StoredSize > maxFileSize {
		return fmt.Errorf("size %d (stored %d) is out of bounds", f.Size, f.StoredSize)
	}
	for _, b := range append(f.Blobs[:len(f.Blobs):len(f.Blobs)], f.Patches...) {
		if err := safepath.Check(b.Object); err != nil {
			return fmt.Errorf("blob object: %w", err)
		}
		if b.RawOffset < 0 || b.RawSize < 0 || b.RawSize > f.Size || b.RawOffset > f.Size-b.RawSize || b.Offset < 0 || b.StoredSize < 0 {
			return fmt.Errorf("blob %d+%d lies outside the file's %d bytes", b.RawOffset, b.RawSize, f.Size)
		}
	}
	return nil
}

// isSHA256 tells whether s is a SHA-256 in lowercase hex.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
