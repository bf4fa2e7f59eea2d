package safepath

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Tree is Join and MkdirParents for many files below one root (a restore's thousands of
// tables in a few hundred database directories): each directory on the way is checked
// once, not once per file. The file itself is not looked at when its directory was
// checked before: open it with O_NOFOLLOW, as filecopy does, so a link is refused.
// A Tree is safe for concurrent use.
type Tree struct {
	root string
	mu   sync.Mutex
	dirs map[string]bool // directories below root (relative) found or made safe
}

// NewTree returns a Tree of the files below root.
func NewTree(root string) *Tree { return &Tree{root: root, dirs: map[string]bool{}} }

// Join is Join(root, rel), without looking again at a directory checked before.
func (t *Tree) Join(rel string) (string, error) {
	if p, ok, err := t.known(rel); ok || err != nil {
		return p, err
	}
	p, err := Join(t.root, rel)
	if err == nil {
		t.remember(rel)
	}
	return p, err
}

// MkdirParents is MkdirParents(root, rel, perm), without looking again at a directory
// made or checked before.
func (t *Tree) MkdirParents(rel string, perm fs.FileMode) (string, error) {
	if p, ok, err := t.known(rel); ok || err != nil {
		return p, err
	}
	p, err := MkdirParents(t.root, rel, perm)
	if err == nil {
		t.remember(rel)
	}
	return p, err
}

// known returns rel's path if its directory was checked before.
func (t *Tree) known(rel string) (string, bool, error) {
	if err := Check(rel); err != nil {
		return "", false, err
	}
	name := strings.TrimPrefix(rel, "./")
	t.mu.Lock()
	ok := t.dirs[path.Dir(name)]
	t.mu.Unlock()
	if !ok {
		return "", false, nil
	}
	return filepath.Join(t.root, filepath.FromSlash(name)), true, nil
}

// remember notes that rel's directory exists and holds no link on its way.
func (t *Tree) remember(rel string) {
	dir := path.Dir(strings.TrimPrefix(rel, "./"))
	t.mu.Lock()
	t.dirs[dir] = true
	t.mu.Unlock()
}
