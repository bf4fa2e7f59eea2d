package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/storage"
)

// testLink describes one backup of a test chain: base "" is a full backup.
type testLink struct {
	id, base  string
	end, from uint64 // its EndLSN; an incremental's BaseToLSN
	uid       string
	start     time.Time // its StartTime, if set
}

// storeLink commits a small backup described by l, ending at time end.
func storeLink(t *testing.T, r *Repo, l testLink, end time.Time) *manifest.Manifest {
	t.Helper()
	w, err := r.NewBackup(context.Background(), l.id, WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("backup " + l.id)
	f, _ := w.Create("xtrabackup_checkpoints")
	if err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: 1, Type: manifest.TypeFull, StartTime: l.start, EndTime: end, EndLSN: l.end, Server: manifest.Server{UID: l.uid},
		Storage: manifest.Storage{Format: "repository"},
		Files:   []manifest.File{{Path: "xtrabackup_checkpoints", Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)), Kind: manifest.KindMeta}}}
	if l.base != "" {
		m.Type, m.Incremental = manifest.TypeIncremental, &manifest.Incremental{BaseID: l.base, BaseToLSN: l.from, FromLSN: l.from - 10, Method: "redo"}
	}
	if err := w.Commit(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// storeChain stores links in order, a day apart, ending two days before now.
func storeChain(t *testing.T, r *Repo, links ...testLink) {
	t.Helper()
	start := time.Now().Add(-time.Duration(len(links)+2) * 24 * time.Hour)
	for i, l := range links {
		storeLink(t, r, l, start.Add(time.Duration(i)*24*time.Hour))
	}
}

func chainIDs(chain []*manifest.Manifest) string {
	var out []string
	for _, m := range chain {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

func TestChainFollowsBases(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	storeChain(t, r,
		testLink{id: "20260101t000000z-f1", end: 100, uid: "u"},
		testLink{id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 100, end: 200, uid: "u"},
		testLink{id: "20260103t000000z-i2", base: "20260102t000000z-i1", from: 200, end: 300, uid: "u"},
		testLink{id: "20260104t000000z-f2", end: 400, uid: "u"},
	)
	for id, want := range map[string]string{
		"20260103t000000z-i2": "20260101t000000z-f1 20260102t000000z-i1 20260103t000000z-i2",
		"20260102t000000z-i1": "20260101t000000z-f1 20260102t000000z-i1",
		"20260101t000000z-f1": "20260101t000000z-f1",
		"latest":              "20260104t000000z-f2",
	} {
		chain, err := r.Chain(context.Background(), id, nil)
		if err != nil || chainIDs(chain) != want {
			t.Errorf("Chain(%s) = %q, %v; want %q", id, chainIDs(chain), err, want)
		}
	}
}

// TestChainRefusesBrokenLinks: each way a chain can break is refused with one line
// naming the backups, and errors.Is ErrBrokenChain.
func TestChainRefusesBrokenLinks(t *testing.T) {
	full := testLink{id: "20260101t000000z-f1", end: 100}
	cases := []struct {
		name  string
		links []testLink
		setup func(t *testing.T, r *Repo, dir string)
		want  string
	}{
		{"missing base", []testLink{{id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 100, end: 200}}, nil,
			"backup 20260102t000000z-i1 needs its base 20260101t000000z-f1, which is not in the repository (expired or deleted?)"},
		{"incomplete base", []testLink{full, {id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 100, end: 200}},
			func(t *testing.T, r *Repo, dir string) {
				// The base lost its manifest (a delete interrupted, or never written): debris.
				if err := os.Remove(filepath.Join(dir, "backups", "20260101t000000z-f1", manifestName)); err != nil {
					t.Fatal(err)
				}
			},
			"needs its base 20260101t000000z-f1, which is incomplete"},
		{"lsn gap", []testLink{full, {id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 90, end: 200}}, nil,
			"the chain is broken between 20260101t000000z-f1 and 20260102t000000z-i1: 20260102t000000z-i1 applies on LSN 90, 20260101t000000z-f1 ends at LSN 100"},
		{"other server", []testLink{{id: "20260101t000000z-f1", end: 100, uid: "a"}, {id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 100, end: 200, uid: "b"}}, nil,
			"different servers"},
		{"cycle", []testLink{
			{id: "20260101t000000z-i0", base: "20260102t000000z-i1", from: 200, end: 100},
			{id: "20260102t000000z-i1", base: "20260101t000000z-i0", from: 100, end: 200}}, nil,
			"loops"},
		{"no base id", []testLink{{id: "20260102t000000z-i1", base: "x", from: 100, end: 200}},
			func(t *testing.T, r *Repo, dir string) {
				rewrite(t, r, "20260102t000000z-i1", func(m *manifest.Manifest) { m.Incremental.BaseID = "" })
			},
			"backup 20260102t000000z-i1 is incremental but names no base backup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _ := storage.NewFS(dir)
			r, _ := Init(context.Background(), st, "test")
			storeChain(t, r, c.links...)
			if c.setup != nil {
				c.setup(t, r, dir)
			}
			_, err := r.Chain(context.Background(), "20260102t000000z-i1", nil)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBrokenChain) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line with %q", err, c.want)
			}
		})
	}
}

// rewrite changes the stored manifest of backup id.
func rewrite(t *testing.T, r *Repo, id string, edit func(m *manifest.Manifest)) {
	t.Helper()
	m, err := r.Manifest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if err := putJSON(context.Background(), r.st, backupPrefix(id)+manifestName, m); err != nil {
		t.Fatal(err)
	}
}

func TestChainTooLong(t *testing.T) {
	var chain []*manifest.Manifest
	byID := map[string]*manifest.Manifest{}
	for i := range MaxChain + 1 {
		m := &manifest.Manifest{ID: string(rune('a'+i%26)) + strings.Repeat("x", i/26), EndLSN: uint64(i + 1)}
		if i > 0 {
			m.Type, m.Incremental = manifest.TypeIncremental, &manifest.Incremental{BaseID: chain[i-1].ID, BaseToLSN: uint64(i)}
		}
		chain = append(chain, m)
		byID[m.ID] = m
	}
	get := func(child *manifest.Manifest) (*manifest.Manifest, error) { return byID[child.Incremental.BaseID], nil }
	if got, err := follow(chain[MaxChain-1], get); err != nil || len(got) != MaxChain {
		t.Fatalf("a chain of %d: %d, %v", MaxChain, len(got), err)
	}
	if _, err := follow(chain[MaxChain], get); err == nil || !strings.Contains(err.Error(), "longer than 1000") {
		t.Fatalf("a chain of %d: %v", MaxChain+1, err)
	}
}

// TestChainChecksEveryKey: an encrypted chain is loaded only with a key that opens it.
func TestChainChecksEveryKey(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	key, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	o := WriterOptions{Pipeline: pipeline.Options{Compression: codec.Zstd, Workers: 1, OpenFiles: 2, Recipients: []age.Recipient{key.Recipient()}}, PartSize: 1 << 20}
	writeBackup(t, r, "20260101t000000z-f1", map[string][]byte{"a": []byte("aaa")}, o)
	storeLink(t, r, testLink{id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 0, end: 200}, time.Now())
	if _, err := r.Chain(context.Background(), "latest", []age.Identity{other}); !errors.Is(err, codec.ErrWrongKey) || !strings.Contains(err.Error(), "20260101t000000z-f1") {
		t.Fatalf("wrong key: %v", err)
	}
	if chain, err := r.Chain(context.Background(), "latest", []age.Identity{key}); err != nil || len(chain) != 2 {
		t.Fatalf("right key: %v", err)
	}
}

func TestNewestBase(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	if _, err := r.NewestBase(context.Background(), ""); !errors.Is(err, ErrNoBase) || !strings.Contains(err.Error(), "take a full backup first") {
		t.Fatalf("empty repository: %v", err)
	}
	storeChain(t, r,
		testLink{id: "20260101t000000z-f1", end: 100, uid: "a"},
		testLink{id: "20260102t000000z-i1", base: "20260101t000000z-f1", from: 100, end: 200, uid: "a"},
		testLink{id: "20260103t000000z-g1", end: 300, uid: "b"},
	)
	for uid, want := range map[string]string{"a": "20260102t000000z-i1", "b": "20260103t000000z-g1", "": "20260103t000000z-g1"} {
		m, err := r.NewestBase(context.Background(), uid)
		if err != nil || m.ID != want {
			t.Errorf("NewestBase(%q) = %v, %v; want %s", uid, m, err, want)
		}
	}
	// Two backups started in one second: the id's random part sorts the later first.
	second := time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC)
	storeLink(t, r, testLink{id: "20260104t000000z-f9", end: 400, uid: "b", start: second.Add(100 * time.Millisecond)}, second.Add(400*time.Millisecond))
	storeLink(t, r, testLink{id: "20260104t000000z-a1", base: "20260104t000000z-f9", from: 400, end: 500, uid: "b", start: second.Add(600 * time.Millisecond)}, second.Add(900*time.Millisecond))
	if m, err := r.NewestBase(context.Background(), "b"); err != nil || m.ID != "20260104t000000z-a1" {
		t.Errorf("NewestBase after two backups in one second = %v, %v; want the later one", m, err)
	}
	if _, err := r.NewestBase(context.Background(), "c"); !errors.Is(err, ErrNoBase) {
		t.Fatalf("another server: %v", err)
	}
	if err := r.Delete(context.Background(), "20260101t000000z-f1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NewestBase(context.Background(), "a"); !errors.Is(err, ErrBrokenChain) || !strings.Contains(err.Error(), "take a full backup") {
		t.Fatalf("broken chain: %v", err)
	}
}

// TestExpireKeepsBasesOfKeptIncrementals: a kept incremental keeps its chain up to
// the full backup, and the plan says why; an incremental the policy lets go goes,
// whatever happens to its base; debris goes as before.
func TestExpireKeepsBasesOfKeptIncrementals(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	storeChain(t, r,
		testLink{id: "20260101t000000z-f0", end: 50},
		testLink{id: "20260101t120000z-j1", base: "20260101t000000z-f0", from: 50, end: 60},
		testLink{id: "20260102t000000z-f1", end: 100},
		testLink{id: "20260103t000000z-i1", base: "20260102t000000z-f1", from: 100, end: 200},
		testLink{id: "20260104t000000z-i2", base: "20260103t000000z-i1", from: 200, end: 300},
		testLink{id: "20260105t000000z-i3", base: "20260104t000000z-i2", from: 300, end: 400},
	)
	w, err := r.NewBackup(context.Background(), "20260106t000000z-dd", WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w.Abort(errors.New("killed"))
	plan, err := r.PlanExpire(context.Background(), Policy{KeepLast: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := func(es []Entry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return strings.Join(out, " ")
	}
	if k := got(plan.Keep); k != "20260105t000000z-i3 20260104t000000z-i2 20260103t000000z-i1 20260102t000000z-f1" {
		t.Errorf("keep %s", k)
	}
	if x := got(plan.Expired); x != "20260101t120000z-j1 20260101t000000z-f0" {
		t.Errorf("expired %s", x)
	}
	if d := got(plan.Debris); d != "20260106t000000z-dd" {
		t.Errorf("debris %s", d)
	}
	want := map[string]string{"20260103t000000z-i1": "20260104t000000z-i2", "20260102t000000z-f1": "20260103t000000z-i1"}
	if len(plan.BaseOf) != len(want) {
		t.Errorf("base of %v, want %v", plan.BaseOf, want)
	}
	for id, child := range want {
		if plan.BaseOf[id] != child {
			t.Errorf("base of %v, want %v", plan.BaseOf, want)
		}
	}
}

// TestExpireKeepsBaseOfRunningIncremental: a running incremental's marker names its
// base, which expire keeps.
func TestExpireKeepsBaseOfRunningIncremental(t *testing.T) {
	r, _ := Init(context.Background(), newFS(t), "test")
	storeChain(t, r, testLink{id: "20260101t000000z-f0", end: 50}, testLink{id: "20260102t000000z-f1", end: 100})
	w, err := r.NewBackup(context.Background(), "20260103t000000z-i1", WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 2}, PartSize: 1 << 20, Base: "20260101t000000z-f0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort(errors.New("test over"))
	// A marker written by another host, recently: the backup counts as running.
	var mk Marker
	if err := getJSON(context.Background(), r.st, backupPrefix("20260103t000000z-i1")+markerName, &mk); err != nil {
		t.Fatal(err)
	}
	mk.Host = "elsewhere"
	if err := putJSON(context.Background(), r.st, backupPrefix("20260103t000000z-i1")+markerName, mk); err != nil {
		t.Fatal(err)
	}
	plan, err := r.PlanExpire(context.Background(), Policy{KeepLast: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Expired) != 0 || plan.BaseOf["20260101t000000z-f0"] != "20260103t000000z-i1" || len(plan.Keep) != 3 {
		t.Fatalf("plan: keep %v, expired %v, base of %v", plan.Keep, plan.Expired, plan.BaseOf)
	}
}
