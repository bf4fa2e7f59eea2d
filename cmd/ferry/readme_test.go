package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// README's "## Code" list has a line for every package under internal/.
func TestReadmeCodeList(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(b), "\n## Code\n")
	if !ok {
		t.Fatal("README.md has no ## Code section")
	}
	list, _, _ = strings.Cut(list, "\n## ")
	listed := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			listed[f[0]] = true
		}
	}
	dirs, err := os.ReadDir(filepath.Join("..", "..", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !listed["internal/"+d.Name()] {
			t.Errorf("README.md's code list has no line for internal/%s", d.Name())
		}
	}
}
