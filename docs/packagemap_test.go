// Package docs holds the tests that keep the repository's documentation true to its code.
package docs

import (
	"errors"
	"flag"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md's package map: drop the packages that are gone, add the missing ones with their package doc's first sentence")

// The package map is the fenced block of README.md's "## Code" section: one line per
// package or directory, its path then what it holds.
const (
	readme     = "README.md"
	mapSection = "## Code"
	fence      = "```"
)

// mapEntry is one line of the package map.
type mapEntry struct {
	path string // as written: internal/x, cmd/ferry/, e2e/
	line string
}

// TestPackageMap fails when README.md's package map names a path that does not exist, or
// misses a Go package under internal/ or cmd/. With -update it rewrites the map instead:
// the lines of what exists are kept as written, the missing packages are added with the
// first sentence of their package doc comment.
func TestPackageMap(t *testing.T) {
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, readme))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	start, end, err := mapBlock(lines)
	if err != nil {
		t.Fatal(err)
	}
	var entries []mapEntry
	for _, l := range lines[start:end] {
		if f := strings.Fields(l); len(f) > 0 {
			entries = append(entries, mapEntry{path: f[0], line: l})
		}
	}
	pkgs, err := goPackages(root, "internal", "cmd")
	if err != nil {
		t.Fatal(err)
	}

	var stale []string
	listed := map[string]bool{}
	for _, e := range entries {
		p := strings.TrimSuffix(e.path, "/")
		listed[p] = true
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			stale = append(stale, e.path)
		}
	}
	var missing []string
	for _, p := range pkgs {
		if !listed[p.path] {
			missing = append(missing, p.path)
		}
	}
	if *update {
		if len(stale)+len(missing) == 0 {
			return
		}
		entries = rewrite(entries, stale, pkgs, listed)
		out := slices.Concat(lines[:start], lineTexts(entries), lines[end:])
		if err := os.WriteFile(filepath.Join(root, readme), []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("README.md's package map: removed %v, added %v; check the new lines' wording", stale, missing)
		return
	}
	for _, p := range stale {
		t.Errorf("README.md's package map names %s, which does not exist", p)
	}
	for _, p := range missing {
		t.Errorf("README.md's package map lacks %s", p)
	}
	if t.Failed() {
		t.Log("go test ./docs -run TestPackageMap -update rewrites the map")
	}
}

// goPackage is a Go package of the repository and its package doc's first sentence.
type goPackage struct {
	path, synopsis string
}

// goPackages returns the directories under each of dirs (relative to root, '/'
// separated, in lexical order) that hold a Go package with files other than tests.
func goPackages(root string, dirs ...string) ([]goPackage, error) {
	var pkgs []goPackage
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return err
			}
			if n := e.Name(); n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			p, err := build.ImportDir(path, 0)
			var noGo *build.NoGoError
			switch {
			case errors.As(err, &noGo):
				return nil
			case err != nil:
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pkgs = append(pkgs, goPackage{path: filepath.ToSlash(rel), synopsis: p.Doc})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return pkgs, nil
}

// rewrite drops the stale entries and adds a line for every package not listed: after
// its parent directory's package (internal/storage/storagetest after internal/storage),
// else after the last line of its top directory (internal/, cmd/).
func rewrite(entries []mapEntry, stale []string, pkgs []goPackage, listed map[string]bool) []mapEntry {
	entries = slices.DeleteFunc(entries, func(e mapEntry) bool { return slices.Contains(stale, e.path) })
	for _, p := range pkgs {
		if listed[p.path] {
			continue
		}
		entries = slices.Insert(entries, insertAt(entries, p.path), mapEntry{path: p.path, line: mapLine(p)})
	}
	return entries
}

// insertAt is where the line of path goes: after the last line of its parent directory
// and the parent's subpackages, else after the last line of its top directory, else at
// the end.
func insertAt(entries []mapEntry, path string) int {
	top := path[:strings.Index(path+"/", "/")+1]
	parent, after := -1, -1
	for i, e := range entries {
		ep := strings.TrimSuffix(e.path, "/")
		if dir := filepath.ToSlash(filepath.Dir(path)); ep == dir || strings.HasPrefix(ep, dir+"/") {
			parent = i + 1
		}
		if strings.HasPrefix(e.path, top) {
			after = i + 1
		}
	}
	switch {
	case parent >= 0:
		return parent
	case after >= 0:
		return after
	}
	return len(entries)
}

// mapLine is a new line of the map: the path, then the package doc's first sentence
// without its "Package x" and its full stop.
func mapLine(p goPackage) string {
	what := p.synopsis
	if f := strings.Fields(what); len(f) > 2 && f[0] == "Package" {
		what = strings.TrimPrefix(strings.Join(f[2:], " "), "is ")
	}
	what = strings.TrimSuffix(what, ".")
	if what == "" {
		what = "(no package doc)"
	}
	if len(p.path) >= 19 {
		return p.path + "  " + what // past the column, two spaces as the map's long names have
	}
	return fmt.Sprintf("%-19s %s", p.path, what)
}

func lineTexts(entries []mapEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.line
	}
	return out
}

// mapBlock returns the lines of the package map: those between the fences of the first
// fenced block after the "## Code" heading.
func mapBlock(lines []string) (start, end int, err error) {
	h := slices.Index(lines, mapSection)
	if h < 0 {
		return 0, 0, fmt.Errorf("%s has no %q section", readme, mapSection)
	}
	for i := h + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			break
		}
		if !strings.HasPrefix(lines[i], fence) {
			continue
		}
		if start == 0 {
			start = i + 1
			continue
		}
		return start, i, nil
	}
	return 0, 0, fmt.Errorf("%s: the %q section has no fenced package map", readme, mapSection)
}

// repoRoot is the directory of go.mod above this package's.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	return root
}
