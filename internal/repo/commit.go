package repo

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/signing"
)

// Remove forgets a file (its copy is stale: DDL dropped or re-created it). What was
// uploaded of it stays unreferenced in the backup's objects.
func (w *Writer) Remove(rel string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.files, rel)
	return nil
}

// Rename moves a file to another path in the backup (DDL renamed the table).
func (w *Writer) Rename(from, to string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.files[from]
	if !ok {
		return fmt.Errorf("repository backup: rename %s: no such file (internal error)", from)
	}
	if _, ok := w.files[to]; ok {
		return fmt.Errorf("repository backup: rename %s to %s: target exists (internal error)", from, to)
	}
	delete(w.files, from)
	f.rel = to
	w.files[to] = f
	return nil
}

// Commit waits for every upload, records where each file is stored in m and uploads
// the manifest as the backup's last object; only then is the backup listed as
// restorable. Every file of m must have been written and closed.
func (w *Writer) Commit(ctx context.Context, m *manifest.Manifest) error {
	w.flushPack()
	w.enqWG.Wait()
	close(w.queue)
	w.upWG.Wait()
	encErr := w.enc.Close()
	if err := w.Err(); err != nil {
		return err
	}
	if encErr != nil {
		return encErr
	}
	if err := w.describe(m); err != nil {
		return err
	}
	m.Lock = w.lock
	if w.o.SignWith != nil {
		msg, err := m.SigningBytes()
		if err != nil {
			return err
		}
		m.Signature = signing.Sign(w.o.SignWith, msg)
	}
	if err := putJSONWith(ctx, w.put, backupPrefix(w.id)+manifestName, m); err != nil {
		return fmt.Errorf("upload the manifest of %s: %w", w.id, err)
	}
	w.o.Log.Info("repository backup stored", "id", w.id, "objects", len(m.Objects), "stored_bytes", m.StoredSize(), "uploaders", w.Uploaders(),
		"object_lock", DescribeLock(w.lock, time.Now()))
	if err := w.repo.st.Delete(ctx, backupPrefix(w.id)+markerName); err != nil {
		w.o.Log.Warn("backup complete, but its in-progress marker could not be removed", "id", w.id, "err", err)
	}
	return nil
}

// describe fills m's blobs and objects from what was written.
func (w *Writer) describe(m *manifest.Manifest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for i := range m.Files {
		f, ok := w.files[m.Files[i].Path]
		if !ok {
			return fmt.Errorf("repository backup: the manifest lists %s, which was not written (internal error)", m.Files[i].Path)
		}
		if !f.closed {
			return fmt.Errorf("repository backup: %s was not closed (internal error)", f.rel)
		}
		m.Files[i].Blobs, m.Files[i].Patches = f.blobs, f.patches
		seen[f.rel] = true
	}
	for rel := range w.files {
		if !seen[rel] {
			return fmt.Errorf("repository backup: %s was written but is not in the manifest (internal error)", rel)
		}
	}
	sort.Slice(w.objects, func(a, b int) bool { return w.objects[a].Key < w.objects[b].Key })
	m.ID, m.Objects = w.id, w.objects
	return nil
}

// Abort stops the uploads of a failed backup (writers still running get its error) and
// waits for those under way to give up, so nothing is written to the repository once it
// returns. Its objects stay, without a manifest: the backup is never listed as
// restorable, and ferry expire removes it.
func (w *Writer) Abort(err error) {
	w.fail(err)
	// Taking the lock waits for the uploads under way; later ones see the context
	// cancelled and write nothing.
	w.puts.Lock()
	w.puts.Unlock() //nolint:staticcheck // SA2001: the critical section is the wait

}
