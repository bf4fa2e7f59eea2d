package restore

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerIDs is the uid/gid restored files get; apply is a no-op unless running as root.
type ownerIDs struct {
	uid, gid int
	set      bool
}

// resolveOwner picks the owner: explicit user[:group], else the datadir's owner, else
// its parent directory's owner.
func resolveOwner(spec, datadir string) (ownerIDs, error) {
	if os.Geteuid() != 0 {
		return ownerIDs{}, nil
	}
	if spec != "" {
		return parseOwner(spec)
	}
	for _, p := range []string{datadir, filepath.Dir(datadir)} {
		if fi, err := os.Stat(p); err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			return ownerIDs{uid: int(st.Uid), gid: int(st.Gid), set: true}, nil
		}
	}
	return ownerIDs{}, nil
}

func parseOwner(spec string) (ownerIDs, error) {
	name, group, _ := strings.Cut(spec, ":")
	u, err := user.Lookup(name)
	if err != nil {
		return ownerIDs{}, fmt.Errorf("--owner %s: %w", spec, err)
	}
	o := ownerIDs{set: true}
	o.uid, _ = strconv.Atoi(u.Uid)
	o.gid, _ = strconv.Atoi(u.Gid)
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return ownerIDs{}, fmt.Errorf("--owner %s: %w", spec, err)
		}
		o.gid, _ = strconv.Atoi(g.Gid)
	}
	return o, nil
}

func (o ownerIDs) apply(dir string) error {
	if !o.set {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, o.uid, o.gid); err != nil {
			return fmt.Errorf("set owner of %s: %w", p, err)
		}
		return nil
	})
}

// chown sets the owner of path itself (not what it holds).
func (o ownerIDs) chown(path string) error {
	if !o.set {
		return nil
	}
	if err := os.Lchown(path, o.uid, o.gid); err != nil {
		return fmt.Errorf("set owner of %s: %w", path, err)
	}
	return nil
}
