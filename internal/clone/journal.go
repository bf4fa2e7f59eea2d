package clone

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// journalName is the file in a clone's staging directory that records what an
// interrupted clone can be resumed from: the donor's server, where the copy's redo
// began, and each tablespace file received whole (docs/clone.md, "Resuming a clone").
// Its name starts with "." so that applying an incremental leaves it alone.
const journalName = ".ferry-clone.journal"

// maxJournal bounds the journal read back (a line per file and per rename).
const maxJournal = 256 << 20

// journalLine is one line of the journal; exactly one of its parts is set.
type journalLine struct {
	// Header: the copy's server (server_uid; host, port and datadir) and start LSN
	// (the first line).
	ServerUID string `json:"server_uid,omitempty"`
	Donor     string `json:"donor,omitempty"`
	StartLSN  uint64 `json:"start_lsn,omitempty"`
	// Done: a tablespace file received whole, synced, of Size bytes then.
	Done  string          `json:"done,omitempty"`
	Size  int64           `json:"size,omitempty"`
	Space *manifest.Space `json:"space,omitempty"`
	// Renamed/To, Removed: DDL during the copy moved or removed a file.
	Renamed string `json:"renamed,omitempty"`
	To      string `json:"to,omitempty"`
	Removed string `json:"removed,omitempty"`
	// Phase: "filled" (the copy is whole: recovery may change it), "applying" (a
	// resumed copy's pages are being written into it).
	Phase string `json:"phase,omitempty"`
}

// Phases of the journal.
const (
	phaseFilled   = "filled"
	phaseApplying = "applying"
)

// journal appends to a staging directory's journal, each line synced. The lines of
// files received whole are written in groups (journalGroup files, or after
// journalGroupAge): one syncfs of the staging filesystem and one journal fsync per
// group instead of two fsyncs per file (a clone of 20,000 tables). A line not yet
// written only means that file is received again by a resumed clone.
type journal struct {
	mu      sync.Mutex
	path    string
	header  journalLine // the first line: the donor's server
	headed  bool        // the header line is written
	files   map[string]bool
	flushMu sync.Mutex    // one group written at a time, in order
	pending []journalLine // lines of files received whole, not yet written
	grouped int           // files among them
	since   time.Time     // when the first pending line was added
}

// journalGroup and journalGroupAge bound a group of journaled files.
const (
	journalGroup    = 256
	journalGroupAge = time.Second
)

// newJournal journals into dir what a clone from the donor that sent w receives.
func newJournal(dir string, w welcome) *journal {
	return &journal{path: filepath.Join(dir, journalName), header: journalLine{ServerUID: w.ServerUID, Donor: donorOf(w)},
		files: map[string]bool{}}
}

// donorOf names the donor's server: its host, port and datadir.
func donorOf(w welcome) string {
	return fmt.Sprintf("%s:%d:%s", w.Host, w.Port, w.Datadir)
}

// add appends lines, synced, after the pending ones; a nil journal records nothing.
func (j *journal) add(lines ...journalLine) error {
	if j == nil {
		return nil
	}
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	if err := j.writePending(); err != nil {
		return err
	}
	return j.write(lines)
}

// write appends lines to the journal file and syncs it.
func (j *journal) write(lines []journalLine) error {
	if len(lines) == 0 {
		return nil
	}
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("journal of the clone: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			f.Close()
			return err
		}
		w.Write(append(b, '\n'))
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal of the clone %s: %w", j.path, err)
	}
	return nil
}

// writePending makes the staging directory's files durable (one syncfs) and then
// writes the pending lines of the files received whole. The caller holds flushMu.
func (j *journal) writePending() error {
	j.mu.Lock()
	lines := j.pending
	j.pending, j.grouped, j.since = nil, 0, time.Time{}
	j.mu.Unlock()
	if len(lines) == 0 {
		return nil
	}
	if err := filecopy.SyncFS(filepath.Dir(j.path)); err != nil {
		return err
	}
	return j.write(lines)
}

// done records a tablespace file received whole, with the header before the first
// one. Its line is written with its group, after the files' bytes are synced.
func (j *journal) done(rel string, size int64, info closeInfo) error {
	if j == nil || info.Space == nil || info.StartLSN == 0 {
		return nil
	}
	j.mu.Lock()
	if !j.headed {
		h := j.header
		h.StartLSN = info.StartLSN
		j.pending = append(j.pending, h)
		j.headed = true
	}
	if len(j.pending) == 0 || j.since.IsZero() {
		j.since = time.Now()
	}
	j.pending = append(j.pending, journalLine{Done: rel, Size: size, Space: info.Space})
	j.grouped++
	j.files[rel] = true
	full := j.grouped >= journalGroup || time.Since(j.since) >= journalGroupAge
	if full {
		j.since, j.grouped = time.Time{}, 0
	}
	j.mu.Unlock()
	if !full {
		return nil
	}
	return j.flush()
}

// flush writes the pending lines now.
func (j *journal) flush() error {
	if j == nil {
		return nil
	}
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	return j.writePending()
}

// renamed records that DDL moved the file from to to.
func (j *journal) renamed(from, to string) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	had := j.files[from] || j.files[to]
	if j.files[from] {
		j.files[to] = true
	} else {
		delete(j.files, to)
	}
	delete(j.files, from)
	j.mu.Unlock()
	if !had {
		return nil
	}
	return j.add(journalLine{Renamed: from, To: to})
}

// removed records that the file rel journaled whole is gone, or about to be written
// again (DDL during the copy); nothing if it was not journaled.
func (j *journal) removed(rel string) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	had := j.files[rel]
	delete(j.files, rel)
	j.mu.Unlock()
	if !had {
		return nil
	}
	return j.add(journalLine{Removed: rel})
}

// journalState is what a journal read back says.
type journalState struct {
	serverUID string
	donor     string // host:port:datadir
	startLSN  uint64
	files     map[string]journalLine // by path, the Done lines
	phases    map[string]bool
}

// readJournal reads the journal of staging (nil, nil if there is none). A torn last
// line (the clone killed while writing it) is ignored.
func readJournal(staging string) (*journalState, error) {
	f, err := os.Open(filepath.Join(staging, journalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() > maxJournal {
		return nil, fmt.Errorf("the journal %s is unreadable or larger than %d bytes", f.Name(), maxJournal)
	}
	st := &journalState{files: map[string]journalLine{}, phases: map[string]bool{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l journalLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			break // torn: the clone died writing it, and nothing came after
		}
		st.apply(l)
	}
	return st, nil
}

func (st *journalState) apply(l journalLine) {
	switch {
	case l.StartLSN != 0 && st.startLSN == 0:
		st.serverUID, st.donor, st.startLSN = l.ServerUID, l.Donor, l.StartLSN
	case l.Done != "" && l.Space != nil:
		st.files[l.Done] = l
	case l.Renamed != "":
		if d, ok := st.files[l.Renamed]; ok {
			delete(st.files, l.Renamed)
			d.Done = l.To
			st.files[l.To] = d
		} else {
			delete(st.files, l.To)
		}
	case l.Removed != "":
		delete(st.files, l.Removed)
	case l.Phase != "":
		st.phases[l.Phase] = true
	}
}
