package restore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/safepath"
	"github.com/ferry-backup/ferry/internal/setting"
	"golang.org/x/sync/errgroup"
)

// journalName is the file in a repository restore's staging directory that lists the
// objects already written there; a resumed restore re-reads their ranges from the
// staging copy and skips those that still match their checksums. It also records the
// phases the restore finished (phase lines), for a resumed run to skip them. Its name
// starts with ".": applying an incremental leaves such files of the copy alone.
const journalName = ".ferry-restore.journal"

// phasePrefix starts a journal line that records a phase, not an object (objects are
// named objects/...).
const phasePrefix = "@"

const journalHeader = "ferry restore journal of backup "

// Journal records the objects of one backup restored into a staging directory, and
// the phases the restore finished there.
type Journal struct {
	mu           sync.Mutex
	f            *os.File
	done         map[string]bool // objects listed
	phases       []string        // phases recorded, in order
	skippedBytes int64           // raw bytes of the objects verified and skipped
}

// OpenJournal opens (or starts) the journal of backup id in dir. A journal of another
// backup is refused: the directory is someone else's staging copy.
func OpenJournal(dir, id string) (*Journal, error) {
	path := filepath.Join(dir, journalName)
	j := &Journal{done: map[string]bool{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		lines := strings.Split(string(b), "\n")
		if lines[0] != journalHeader+id {
			return nil, fmt.Errorf("%s belongs to another restore (%q): remove the directory or restore that backup", dir, lines[0])
		}
		for _, l := range lines[1:] {
			switch {
			case strings.HasPrefix(l, phasePrefix):
				j.phases = append(j.phases, strings.TrimPrefix(l, phasePrefix))
			case l != "":
				j.done[l] = true
			}
		}
	}
	j.f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("restore journal: %w", err)
	}
	if len(b) == 0 {
		if _, err := j.f.WriteString(journalHeader + id + "\n"); err != nil {
			return nil, fmt.Errorf("restore journal: %w", err)
		}
	}
	return j, nil
}

// checkJournal makes sure dir holds the journal ferry started for backup id.
func checkJournal(dir, id string) error {
	f, err := filecopy.OpenRead(filepath.Join(dir, journalName))
	if err != nil {
		return setting.Errorf("%s holds no ferry restore journal (%v): %s continues only a restore ferry left there; remove the directory", dir, err, setting.Resume)
	}
	defer f.Close()
	head := make([]byte, len(journalHeader)+len(id)+1)
	n, _ := io.ReadFull(f, head)
	if string(head[:n]) != journalHeader+id+"\n" {
		return fmt.Errorf("the journal in %s is not that of a restore of backup %s: remove the directory or restore the backup it names", dir, id)
	}
	return nil
}

// Add records that every blob of an object was written and checked. A line cut short
// by a kill names no object and is ignored.
func (j *Journal) Add(object string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.WriteString(object + "\n"); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// Close closes the journal's file.
func (j *Journal) Close() { j.f.Close() }

// Objects is how many objects the journal lists.
func (j *Journal) Objects() int { return len(j.done) }

// SkippedBytes is the raw bytes of the objects Verified found whole.
func (j *Journal) SkippedBytes() int64 { return j.skippedBytes }

// Filled tells whether an earlier run wrote and verified every file of m (MarkFilled).
func (j *Journal) Filled(m *manifest.Manifest) bool { return hasPhase(j.phases, filledPhase(m)) }

// MarkFilled records in the journal in dir that every file of m is written and
// verified, once they are synced.
func MarkFilled(dir string, m *manifest.Manifest) error { return addPhase(dir, filledPhase(m)) }

// StartOverAfterReplay readies the journal in dir for a resumed fill: if a binlog
// replay had started on the copy and did not stop cleanly, its phases are forgotten
// and the copy is checked against the backup's objects again.
func StartOverAfterReplay(dir string, log *slog.Logger) error {
	_, err := startOverAfterReplay(dir, log)
	return err
}

// Verified returns the journal's objects whose blobs all still match their CRC-32C in
// the staging copy: what a resumed restore need not download again. An object a
// recovery had already changed, or whose write was cut short, is downloaded again.
func (j *Journal) Verified(ctx context.Context, m *manifest.Manifest, parallel int) (map[string]bool, error) {
	if len(j.done) == 0 {
		return map[string]bool{}, nil
	}
	dir := filepath.Dir(j.f.Name())
	byObj := map[string][]blobOf{}
	for i := range m.Files {
		for k := range m.Files[i].Blobs {
			b := &m.Files[i].Blobs[k]
			if j.done[b.Object] {
				byObj[b.Object] = append(byObj[b.Object], blobOf{&m.Files[i], b})
			}
		}
	}
	out := map[string]bool{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for obj, blobs := range byObj {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			if !blobsMatch(dir, blobs) {
				return nil
			}
			mu.Lock()
			out[obj] = true
			for _, b := range blobs {
				j.skippedBytes += b.b.RawSize
			}
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

type blobOf struct {
	f *manifest.File
	b *manifest.Blob
}

// blobsMatch reads each blob's range from the staging copy and compares its CRC-32C.
func blobsMatch(dir string, blobs []blobOf) bool {
	buf := make([]byte, 1<<20)
	for _, bo := range blobs {
		p, err := safepath.Join(dir, bo.f.Path)
		if err != nil {
			return false
		}
		f, err := filecopy.OpenRead(p)
		if err != nil {
			return false
		}
		h := crc32.New(checksum.Table)
		n, err := io.CopyBuffer(h, io.NewSectionReader(f, bo.b.RawOffset, bo.b.RawSize), buf)
		f.Close()
		if err != nil || n != bo.b.RawSize || checksum.Hex(h.Sum32()) != bo.b.CRC32C {
			return false
		}
	}
	return true
}

// Phases of a restore from a repository, recorded in the journal once finished, so
// that a resumed run does not repeat them (the copy no longer matches the objects'
// checksums once a delta, a recovery or a replay changed it).
const (
	// phaseFilled: every object is written and verified and the manifest written
	// (followed by a checksum of the files' names, see filledPhase).
	phaseFilled = "filled "
	// phaseApplying ID / phaseApplied ID: an incremental of a chain is being applied,
	// was applied.
	phaseApplying = "applying "
	phaseApplied  = "applied "
	// phaseReplaying FROM UNTIL: the binlog replay started on the copy (point in
	// time); phaseReplayStopped: it was stopped cleanly, and goes on from there
	// (replay_resume.go).
	phaseReplaying     = "replaying"
	phaseReplayStopped = "replay-stopped"
)

// filledPhase is the phase that records m's files all written and verified: it names
// them (by a checksum of their paths), so that a table restore resumed for other
// tables does not take the copy for complete.
func filledPhase(m *manifest.Manifest) string {
	h := crc32.New(checksum.Table)
	for _, f := range m.Files {
		io.WriteString(h, f.Path+"\n")
	}
	return phaseFilled + checksum.Hex(h.Sum32())
}

// readPhases returns the phases recorded in the journal in dir (none if it has no
// journal).
func readPhases(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, phasePrefix); ok {
			out = append(out, p)
		}
	}
	return out
}

// hasPhase tells whether phase is among phases.
func hasPhase(phases []string, phase string) bool {
	return slices.Contains(phases, phase)
}

// addPhase records in the journal in dir that phase is finished (or started): the
// files are synced first, then the line, so that a recorded phase is on disk with
// what it made. A directory without a journal (a restore that is not resumed) records
// nothing.
func addPhase(dir, phase string) error {
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_WRONLY|os.O_APPEND, 0o640)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	defer f.Close()
	if err := filecopy.SyncFS(dir); err != nil {
		return err
	}
	if _, err := f.WriteString(phasePrefix + phase + "\n"); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// resetPhases forgets the phases recorded in the journal in dir and keeps its objects
// (which a resumed run checks against their checksums anyway): the restore starts
// over from what still verifies.
func resetPhases(dir string) error {
	path := filepath.Join(dir, journalName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, phasePrefix) {
			keep = append(keep, l)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(keep, "\n")+"\n"), 0o640); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	return nil
}

// startOverAfterReplay forgets the phases of the journal in dir if a binlog replay had
// started on the copy and was not stopped cleanly (see replay_resume.go): such a
// replay cannot tell which transactions it applied, so the copy is checked against the
// backup's objects again (those the recovery and the replay changed are downloaded
// again) and recovered and replayed from the start. It returns the phases left.
func startOverAfterReplay(dir string, log *slog.Logger) ([]string, error) {
	phases := readPhases(dir)
	if !slices.ContainsFunc(phases, func(p string) bool { return strings.HasPrefix(p, phaseReplaying) }) {
		return phases, nil
	}
	if _, ok := resumedReplay(dir); ok {
		return phases, nil
	}
	log.Warn("resume: the binlog replay had started on the copy and did not stop cleanly, so it is not continued: the copy is checked against the backup again (what recovery and replay changed is downloaded again), then recovered and replayed from the start", "staging", dir)
	return nil, resetPhases(dir)
}
