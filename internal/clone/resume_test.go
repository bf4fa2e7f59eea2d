package clone

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// journalFixture writes a journal of an interrupted clone of server "uid-a" from LSN
// 1000 into a new staging directory, with the files it names.
func journalFixture(t *testing.T, extra ...journalLine) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"db/a.ibd", "db/b.ibd", "ibdata1"} {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o750)
		if err := os.WriteFile(full, make([]byte, 65536), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	j := newJournal(dir, welcome{ServerUID: "uid-a", Host: "db1", Port: 3306, Datadir: "/var/lib/mysql"})
	for i, p := range []string{"db/a.ibd", "db/b.ibd", "ibdata1"} {
		sp := &manifest.Space{ID: uint32(i + 5), System: p == "ibdata1", Identity: &manifest.Identity{Inode: uint64(100 + i), BirthNS: 7}}
		if err := j.done(p, 65536, closeInfo{StartLSN: 1000, Space: sp}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.add(extra...); err != nil {
		t.Fatal(err)
	}
	return dir
}

func offered(o *resumeOffer) string {
	var ps []string
	for _, f := range o.Files {
		ps = append(ps, f.Path)
	}
	return strings.Join(ps, ",")
}

// TestDecideResume: a journal of the same server resumes with the files still whole
// (following renames and removes); anything that cannot be resumed safely starts
// over with the reason.
func TestDecideResume(t *testing.T) {
	good := welcome{ServerUID: "uid-a", Resume: true, Host: "db1", Port: 3306, Datadir: "/var/lib/mysql"}
	dir := journalFixture(t, journalLine{Renamed: "db/b.ibd", To: "db/c.ibd"}, journalLine{Removed: "ibdata1"})
	os.Rename(filepath.Join(dir, "db/b.ibd"), filepath.Join(dir, "db/c.ibd"))
	st, err := readJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	o, why := decideResume(st, good, dir)
	if o == nil || offered(o) != "db/a.ibd,db/c.ibd" || o.StartLSN != 1000 || o.ServerUID != "uid-a" {
		t.Fatalf("offer %+v (%s), want db/a.ibd and db/c.ibd from LSN 1000", o, why)
	}

	// The donor's system tablespace is the file the interrupted clone copied.
	whole := journalFixture(t)
	stWhole, _ := readJournal(whole)
	same := good
	same.System = map[string]fileID{"ibdata1": {Inode: 102, BirthNS: 7}}
	if o, why := decideResume(stWhole, same, whole); o == nil || offered(o) != "db/a.ibd,db/b.ibd,ibdata1" {
		t.Fatalf("offer %+v (%s), want every file", o, why)
	}

	// A file cut short since it was journaled is left out (sent whole).
	os.Truncate(filepath.Join(dir, "db/a.ibd"), 100)
	if o, _ := decideResume(st, good, dir); o == nil || offered(o) != "db/c.ibd" {
		t.Fatalf("a truncated file was offered: %+v", o)
	}

	for name, c := range map[string]struct {
		st   func() *journalState
		w    welcome
		want string
	}{
		"no journal":                 {func() *journalState { return nil }, good, "no tablespace received whole"},
		"another server":             {func() *journalState { s, _ := readJournal(journalFixture(t)); return s }, welcome{ServerUID: "uid-b", Resume: true, Host: "db1", Port: 3306, Datadir: "/var/lib/mysql"}, "another server"},
		"another datadir":            {func() *journalState { s, _ := readJournal(journalFixture(t)); return s }, welcome{ServerUID: "uid-a", Resume: true, Host: "db1", Port: 3307, Datadir: "/var/lib/mysql2"}, "another server"},
		"old donor":                  {func() *journalState { s, _ := readJournal(journalFixture(t)); return s }, welcome{ServerUID: "uid-a"}, "cannot resume"},
		"donor behind":               {func() *journalState { s, _ := readJournal(journalFixture(t)); return s }, welcome{ServerUID: "uid-a", Resume: true, Host: "db1", Port: 3306, Datadir: "/var/lib/mysql", LSN: 999}, "restored since"},
		"system tablespace replaced": {func() *journalState { s, _ := readJournal(journalFixture(t)); return s }, welcome{ServerUID: "uid-a", Resume: true, Host: "db1", Port: 3306, Datadir: "/var/lib/mysql", System: map[string]fileID{"ibdata1": {Inode: 999, BirthNS: 8}}}, "another file"},
		"died applying": {func() *journalState {
			s, _ := readJournal(journalFixture(t, journalLine{Phase: phaseApplying}))
			return s
		}, good, "applying"},
		"recovered": {func() *journalState {
			s, _ := readJournal(journalFixture(t, journalLine{Phase: phaseFilled}))
			return s
		}, good, "recovery"},
	} {
		if o, why := decideResume(c.st(), c.w, dir); o != nil || !strings.Contains(why, c.want) {
			t.Errorf("%s: offer %+v, why %q; want none, %q", name, o, why, c.want)
		}
	}
}

// TestReadJournalTornLine: a line cut short by a kill ends the journal; what came
// before counts.
func TestReadJournalTornLine(t *testing.T) {
	dir := journalFixture(t)
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"done":"db/x.ibd","si`)
	f.Close()
	st, err := readJournal(dir)
	if err != nil || len(st.files) != 3 || st.startLSN != 1000 || st.serverUID != "uid-a" {
		t.Fatalf("journal %+v, %v", st, err)
	}
}

// TestResumeBase: the donor's base keeps the offered files (the system tablespace
// only by path, so that one not offered is sent whole) and refuses an offer of
// another server or without a start LSN.
func TestResumeBase(t *testing.T) {
	d := &donor{info: donorInfo{uid: "uid-a"}}
	o := &resumeOffer{ServerUID: "uid-a", StartLSN: 1000, Files: []resumedFile{
		{Path: "db/a.ibd", Space: manifest.Space{ID: 5}}, {Path: "ibdata1", Space: manifest.Space{System: true}}}}
	b, err := d.resumeBase(o)
	if err != nil || b.FromLSN != 1000 || b.ToLSN != 1000 || b.Have["db/a.ibd"].ID != 5 || !b.Have["ibdata1"].System || len(b.Spaces) != 1 {
		t.Fatalf("base %+v, %v", b, err)
	}
	for _, bad := range []*resumeOffer{{ServerUID: "uid-b", StartLSN: 1000}, {ServerUID: "uid-a"}} {
		if _, err := d.resumeBase(bad); err == nil {
			t.Errorf("offer %+v accepted", bad)
		}
	}
}

// TestSettleKeepsResumable: a failed clone keeps its staging directory, saying how to
// continue it, only while its journal can be resumed; otherwise it is removed.
func TestSettleKeepsResumable(t *testing.T) {
	w := welcome{ServerUID: "uid-a", Host: "db1", Port: 3306, Datadir: "/var/lib/mysql"}
	s := &source{w: w, journaled: true}
	cause := errors.New("interrupted")
	dir := journalFixture(t)
	if err := s.Settle(dir, cause); !errors.Is(err, cause) || !strings.Contains(err.Error(), "with resume to continue") {
		t.Fatalf("resumable: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("resumable staging removed: %v", err)
	}
	if err := s.Phase(dir, "recovering"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the journal is left for the datadir: %v", err)
	}
	if err := s.Settle(dir, cause); err != cause {
		t.Fatalf("after recovery began: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging of a recovered copy kept: %v", err)
	}
	empty := t.TempDir() // nothing received whole
	if err := s.Settle(empty, cause); err != cause {
		t.Fatalf("nothing to resume: %v", err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging with nothing to resume kept: %v", err)
	}
}

// TestJournalGroupsFilesReceivedWhole: the lines of files received whole are written in
// groups (not a sync per file), every one of them by the next other line or flush, in
// order, and a file journaled whole and then written again is removed after its line.
func TestJournalGroupsFilesReceivedWhole(t *testing.T) {
	dir := t.TempDir()
	j := newJournal(dir, welcome{ServerUID: "uid-a", Host: "db1", Port: 3306, Datadir: "/var/lib/mysql"})
	sp := func(i int) closeInfo {
		return closeInfo{StartLSN: 1000, Space: &manifest.Space{ID: uint32(i + 5), Identity: &manifest.Identity{Inode: uint64(i), BirthNS: 7}}}
	}
	for i := range journalGroup - 1 {
		if err := j.done(fmt.Sprintf("db/t%d.ibd", i), 65536, sp(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the journal was written before a group was full (err %v)", err)
	}
	if err := j.done("db/last.ibd", 65536, sp(journalGroup)); err != nil { // fills the group
		t.Fatal(err)
	}
	st, err := readJournal(dir)
	if err != nil || st == nil || len(st.files) != journalGroup || st.startLSN != 1000 {
		t.Fatalf("after a full group: %+v, %v; want %d files from LSN 1000", st, err, journalGroup)
	}
	if err := j.done("db/x.ibd", 65536, sp(9999)); err != nil {
		t.Fatal(err)
	}
	if err := j.removed("db/x.ibd"); err != nil { // written again: its Done, then its removal
		t.Fatal(err)
	}
	if err := j.done("db/y.ibd", 65536, sp(9998)); err != nil {
		t.Fatal(err)
	}
	if err := j.flush(); err != nil {
		t.Fatal(err)
	}
	st, err = readJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.files["db/x.ibd"]; ok {
		t.Fatal("a file written again after it was journaled whole is still whole")
	}
	if _, ok := st.files["db/y.ibd"]; !ok || len(st.files) != journalGroup+1 {
		t.Fatalf("after the flush: %d files, db/y.ibd missing or extra", len(st.files))
	}
}
