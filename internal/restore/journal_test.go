package restore

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
)

func TestJournalPhases(t *testing.T) {
	dir := t.TempDir()
	if err := addPhase(dir, "x"); err != nil || readPhases(dir) != nil {
		t.Fatalf("a directory without a journal recorded a phase: %v %v", err, readPhases(dir))
	}
	j, err := OpenJournal(dir, "B1")
	if err != nil {
		t.Fatal(err)
	}
	j.Add("objects/00000000")
	j.Close()
	for _, p := range []string{phaseFilled + "abc", phaseReplaying} {
		if err := addPhase(dir, p); err != nil {
			t.Fatal(err)
		}
	}
	j, err = OpenJournal(dir, "B1")
	if err != nil {
		t.Fatal(err)
	}
	j.Add("objects/00000001")
	j.Close()
	if !j.done["objects/00000000"] || len(j.done) != 1 || !slices.Equal(j.phases, []string{phaseFilled + "abc", phaseReplaying}) {
		t.Fatalf("objects %v, phases %q", j.done, j.phases)
	}
	log := slog.New(slog.DiscardHandler)
	if left, err := startOverAfterReplay(dir, log); err != nil || left != nil {
		t.Fatalf("a replay started: phases left %q (%v), want none", left, err)
	}
	if err := checkJournal(dir, "B1"); err != nil {
		t.Fatal(err)
	}
	j, err = OpenJournal(dir, "B1")
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if len(j.phases) != 0 || len(j.done) != 2 {
		t.Fatalf("after the start over: objects %v, phases %q; want both objects and no phase", j.done, j.phases)
	}
}

func TestFilledPhaseNamesTheFiles(t *testing.T) {
	a := &manifest.Manifest{Files: []manifest.File{{Path: "ibdata1"}, {Path: "db/t.ibd"}}}
	b := &manifest.Manifest{Files: []manifest.File{{Path: "ibdata1"}, {Path: "db/u.ibd"}}}
	if pa, pb := filledPhase(a), filledPhase(b); pa == pb || pa != filledPhase(a) {
		t.Fatal("the filled phase does not tell the files apart")
	}
}

func TestChainResumeAt(t *testing.T) {
	backup := func(id string) *Backup { return &Backup{Manifest: &manifest.Manifest{ID: id}} }
	c := &ChainSource{inspected: []*Backup{backup("F"), backup("I1"), backup("I2")}, resumable: true}
	c.Links = make([]Source, 3)
	env := Env{Log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		phases []string
		want   int
	}{
		{nil, 0},
		{[]string{phaseFilled + "x"}, 0},
		{[]string{phaseFilled + "x", phaseApplying + "I1", phaseApplied + "I1"}, 1},
		{[]string{phaseFilled + "x", phaseApplying + "I1", phaseApplied + "I1", phaseApplying + "I2", phaseApplied + "I2"}, 2},
		{[]string{phaseFilled + "x", phaseApplying + "I1", phaseApplied + "I1", phaseApplying + "I2"}, 0}, // cut in the middle
		{[]string{phaseFilled + "x", phaseApplying + "X1", phaseApplied + "X1"}, 0},                       // another chain
	} {
		dir := t.TempDir()
		j, err := OpenJournal(dir, "F")
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		for _, p := range tc.phases {
			addPhase(dir, p)
		}
		got, err := c.resumeAt(dir, env)
		if err != nil || got != tc.want {
			t.Errorf("phases %q: resume after %d links (%v), want %d", tc.phases, got, err, tc.want)
		}
		if got == 0 && len(tc.phases) > 1 && len(readPhases(dir)) != 0 {
			t.Errorf("phases %q: starting over left the phases %q", tc.phases, readPhases(dir))
		}
	}
}

func TestReplayStoppedCleanlyIsKept(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir, "B1")
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, p := range []string{phaseFilled + "x", phaseReplaying + " f:1 f:9", phaseReplayStopped} {
		addPhase(dir, p)
	}
	log := slog.New(slog.DiscardHandler)
	if left, err := startOverAfterReplay(dir, log); err != nil || len(left) != 3 {
		t.Fatalf("a replay stopped cleanly was started over: %q %v", left, err)
	}
	if phase, ok := resumedReplay(dir); !ok || phase != phaseReplaying+" f:1 f:9" {
		t.Fatalf("resumedReplay = %q %v", phase, ok)
	}
	addPhase(dir, phaseReplaying+" f:1 f:9") // resumed, then killed
	if _, ok := resumedReplay(dir); ok {
		t.Fatal("a replay resumed and cut short again is taken for stopped cleanly")
	}
	if left, _ := startOverAfterReplay(dir, log); left != nil {
		t.Fatalf("phases left %q, want none", left)
	}
}

func TestStagingLockedWhileARestoreRuns(t *testing.T) {
	datadir := filepath.Join(t.TempDir(), "data")
	dir, lock, err := repoStaging(datadir, "B1", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := repoStaging(datadir, "B1", true); err == nil || !strings.Contains(err.Error(), "another ferry restore is running in "+dir) {
		t.Fatalf("a second restore into a staging directory in use: %v", err)
	}
	lock.Close() // the first restore ended
	if _, _, err := repoStaging(datadir, "B1", false); err == nil || !strings.Contains(cliText(err), "--resume") {
		t.Fatalf("a new restore over an interrupted one: %v", err)
	}
	j, err := OpenJournal(dir, "B1")
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, lock, err = repoStaging(datadir, "B1", true)
	if err != nil {
		t.Fatalf("--resume of an interrupted restore: %v", err)
	}
	lock.Close()
}
