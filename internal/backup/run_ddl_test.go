package backup_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/backup/backuptest"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/sink"
)

// ddlDuringBackup runs, on the fake server, the DDL of TestRunDDL: db/old.ibd renamed
// to db/new.ibd, db/gone.ibd dropped, db/t.ibd rebuilt into a new tablespace and
// db/created.ibd created. Each statement changes the datadir and logs its file-level
// records (FILE_CREATE, FILE_RENAME, FILE_DELETE) as the real server does.
func ddlDuringBackup(srv *backuptest.Server, rebuilt, created []byte) error {
	if err := srv.RenameTable("db/old.ibd", "db/new.ibd"); err != nil {
		return err
	}
	if err := srv.DropTable("db/gone.ibd"); err != nil {
		return err
	}
	if err := srv.RebuildTable("db/t.ibd", rebuilt); err != nil {
		return err
	}
	return srv.CreateTable("db/created.ibd", created)
}

// onCreate is an end that calls do once, as the copy of one file starts.
type onCreate struct {
	sink.Sink
	rel  string
	do   func()
	done bool
}

func (c *onCreate) Create(rel string, o sink.FileOptions) (sink.File, error) {
	if rel == c.rel && !c.done {
		c.done = true
		c.do()
	}
	return c.Sink.Create(rel, o)
}

// recordingEnd records the files created, renamed and removed in the end.
type recordingEnd struct {
	sink.Sink
	mu  sync.Mutex
	ops []string
}

func (r *recordingEnd) add(op string) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

func (r *recordingEnd) Create(rel string, o sink.FileOptions) (sink.File, error) {
	r.add("create " + rel)
	return r.Sink.Create(rel, o)
}

func (r *recordingEnd) Rename(from, to string) error {
	r.add("rename " + from + " " + to)
	return r.Sink.Rename(from, to)
}

// count is how many of the recorded operations start with prefix.
func (r *recordingEnd) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, op := range r.ops {
		if strings.HasPrefix(op, prefix) {
			n++
		}
	}
	return n
}

// TestRunDDL: tables renamed, dropped, rebuilt (a new space id at the same path) and
// created while the backup runs, between the scan and BLOCK_DDL: after the data copy
// (at FLUSH), in its middle (as the copy of ibdata1 starts, the .ibd files listed
// but maybe not read yet), or between the copy and a re-copy round (whose tracker
// named pages of the renamed, dropped and rebuilt tables); with the tracker's redo
// kept or with a re-copy round. The backup holds, under each name, exactly the
// tablespace the server holds there at the end (same bytes, so the same space id;
// size and CRC-32C in the manifest), nothing of the dropped or temporary names, and
// no file the manifest does not list. When the DDL ran after the copy, the renamed
// table's copy is moved under BLOCK_DDL, not copied again, and the rebuilt and created
// ones are copied whole.
func TestRunDDL(t *testing.T) {
	t.Parallel()
	rebuilt, created := backuptest.Tablespace(t, 1003), backuptest.Tablespace(t, 1004)
	for _, at := range []string{"flush", "copy", "round"} {
		for _, rounds := range []bool{false, true} {
			if at == "round" && !rounds {
				continue
			}
			name := at
			if rounds {
				name += ", re-copy round"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := backuptest.New(t)
				for rel, space := range map[string]uint32{"db/old.ibd": 1001, "db/gone.ibd": 1002} {
					if err := os.WriteFile(filepath.Join(srv.Datadir, rel), backuptest.Tablespace(t, space), 0o640); err != nil {
						t.Fatal(err)
					}
				}
				if rounds {
					b := srv.Checkpoint
					srv.Script = []backuptest.Copy{
						{Start: b, Pages: []redo.PageID{{Space: 1001, Page: 3}, {Space: 1002, Page: 3}, {Space: 1003, Page: 2}}},
						{Start: b + farLSN},
					}
				}
				cfg, dir := runConfig(t, srv)
				end := &recordingEnd{Sink: cfg.Sink}
				cfg.Sink = end
				ddl := func() {
					if err := ddlDuringBackup(srv, rebuilt, created); err != nil {
						t.Error(err)
					}
				}
				switch at {
				case "round":
					srv.OnOpen = func(n int) {
						if n == 1 {
							ddl()
						}
					}
				case "flush":
					srv.OnStage = func(_ context.Context, s mariadb.Stage) error {
						if s == mariadb.StageFlush {
							ddl()
						}
						return nil
					}
				default:
					cfg.Sink = &onCreate{Sink: cfg.Sink, rel: "ibdata1", do: ddl}
				}
				res, err := backup.Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				checkReleased(t, srv)
				if rounds && res.Rounds != 1 || !rounds && res.Rounds != 0 {
					t.Fatalf("%d re-copy rounds", res.Rounds)
				}
				m, err := manifest.Read(dir)
				if err != nil {
					t.Fatal(err)
				}
				checkBackupIsServer(t, srv, dir, m)
				if at == "flush" && (end.count("create db/new.ibd") != 0 || end.count("rename db/old.ibd ") != 1 ||
					end.count("create db/t.ibd") != 2 || end.count("create db/created.ibd") != 1) {
					t.Fatalf("the end saw %q: want db/old.ibd's copy renamed, db/t.ibd copied twice, db/created.ibd once", end.ops)
				}
			})
		}
	}
}

// checkBackupIsServer: every file of the server's datadir but its redo log is in the
// backup with the same bytes, and the manifest's size and CRC-32C; the manifest lists
// no data file the server does not have, and the backup holds no file the manifest
// does not list.
func checkBackupIsServer(t *testing.T, srv *backuptest.Server, dir string, m *manifest.Manifest) {
	t.Helper()
	listed := map[string]manifest.File{}
	for _, f := range m.Files {
		listed[f.Path] = f
	}
	server := filesUnder(t, srv.Datadir)
	for _, rel := range server {
		if rel == "ib_logfile0" {
			continue
		}
		want, err := os.ReadFile(filepath.Join(srv.Datadir, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatalf("the server's %s is not in the backup: %v", rel, err)
		}
		f, ok := listed[rel]
		if !bytes.Equal(got, want) || !ok || f.Size != int64(len(want)) || f.CRC32C != checksum.Hex(checksum.Sum(want)) {
			t.Fatalf("%s: the backup's copy equals the server's %v; manifest entry %+v (want %d bytes CRC %s)",
				rel, bytes.Equal(got, want), f, len(want), checksum.Hex(checksum.Sum(want)))
		}
	}
	for rel, f := range listed {
		if f.Kind != manifest.KindMeta && f.Kind != manifest.KindRedo && !slices.Contains(server, rel) {
			t.Errorf("the manifest lists %s (%s), which the server does not have", rel, f.Kind)
		}
	}
	for _, rel := range filesUnder(t, dir) {
		if _, ok := listed[rel]; !ok && rel != manifest.FileName {
			t.Errorf("the backup holds %s, which its manifest does not list", rel)
		}
	}
}

// filesUnder lists the regular files under root, relative to it, sorted.
func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
