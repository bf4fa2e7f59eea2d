package restore

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/redo"
)

func TestCreatedNames(t *testing.T) {
	ops := []redo.FileOp{
		{Kind: redo.FileCreate, SpaceID: 3, Name: "./old/before.ibd", LSN: 90},
		{Kind: redo.FileModify, SpaceID: 3, Name: "./old/before.ibd", LSN: 120},
		{Kind: redo.FileCreate, SpaceID: 5, Name: "./bank/accounts.ibd", LSN: 100},
		{Kind: redo.FileCreate, SpaceID: 6, Name: "./ddl/#sql-alter-1.ibd", LSN: 110},
		{Kind: redo.FileRename, SpaceID: 6, Name: "./ddl/#sql-alter-1.ibd", NewName: "./ddl/t1.ibd", LSN: 130},
		{Kind: redo.FileCreate, SpaceID: 7, Name: "./ddl/gone.ibd", LSN: 140},
		{Kind: redo.FileDelete, SpaceID: 7, Name: "./ddl/gone.ibd", LSN: 150},
		{Kind: redo.FileRename, SpaceID: 8, Name: "./a/x.ibd", NewName: "./a/y.ibd", LSN: 160},
	}
	got := createdNames(ops, 100)
	want := []string{"./bank/accounts.ibd", "./ddl/t1.ibd"}
	if !slices.Equal(got, want) {
		t.Errorf("createdNames = %q, want %q", got, want)
	}
}

func TestLocalTablespace(t *testing.T) {
	for name, want := range map[string]string{
		"./db/t.ibd":      "db/t.ibd",
		"./db/t#P#p0.ibd": "db/t#P#p0.ibd",
		"/abs/db/t.ibd":   "",
		"./undo001":       "",
		"./db/sub/t.ibd":  "",
		"./../etc/x.ibd":  "",
		"./db/..":         "",
		".//t.ibd":        "",
		"./db/t.frm":      "",
		"db/t.ibd":        "",
	} {
		got, ok := localTablespace(name)
		if got != want || ok != (want != "") {
			t.Errorf("localTablespace(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestPlaceholdersRemoved(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "have"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "have", "t.ibd"), []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	made, err := placeholders(dir, []string{"./have/t.ibd", "./have/u.ibd", "./new/v.ibd", "/abs/w.ibd"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "have", "u.ibd"), filepath.Join(dir, "new"), filepath.Join(dir, "new", "v.ibd")}
	if !slices.Equal(made, want) {
		t.Fatalf("made %q, want %q", made, want)
	}
	if fi, err := os.Stat(want[2]); err != nil || fi.Size() != placeholderSize {
		t.Fatalf("placeholder: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "have", "t.ibd")); string(b) != "data" {
		t.Errorf("a file of the copy was touched: %q", b)
	}
	if err := removePlaceholders(made); err != nil {
		t.Fatal(err)
	}
	for _, p := range made {
		if exists(p) {
			t.Errorf("%s left", p)
		}
	}
	if !exists(filepath.Join(dir, "have", "t.ibd")) {
		t.Error("a file of the copy was removed")
	}
}

func TestCheckRebuilt(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"db", "other"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	page := make([]byte, 16384)
	page[37] = 5 // space id
	write := func(rel string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write("db/t.ibd", page)
	write("other/zero.ibd", make([]byte, 16384)) // not wanted
	want := func(p string) bool { return p != "other/zero.ibd" }
	if err := checkRebuilt(dir, want); err != nil {
		t.Fatalf("a built tablespace refused: %v", err)
	}
	write("db/u.ibd", make([]byte, 65536))
	if err := checkRebuilt(dir, want); err == nil || !strings.Contains(err.Error(), "db/u.ibd") {
		t.Fatalf("an all-zero tablespace passed: %v", err)
	}
}
