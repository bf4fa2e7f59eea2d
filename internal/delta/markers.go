package delta

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/safepath"
)

// applyMarkers applies the DDL markers of inc in mariadb-backup's order: .del, then
// .ren (through temporary names, so that swaps work), then .new.
func (a *applier) applyMarkers(f *incFiles) error {
	for _, m := range f.dels {
		if err := a.removeTablespace(ibdName(m), "DDL marker "+m); err != nil {
			return err
		}
	}
	if err := a.applyRenames(f.rens); err != nil {
		return err
	}
	for _, m := range f.news {
		if err := a.copyNew(m); err != nil {
			return err
		}
	}
	return nil
}

// removeTablespace removes target/rel if it exists.
func (a *applier) removeTablespace(rel, why string) error {
	p, err := safepath.Join(a.target, rel)
	if err != nil {
		return fmt.Errorf("apply incremental: %s: %w", why, err)
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("apply incremental: %s: %w", why, err)
	}
	a.touched(p)
	a.stats.Removed++
	a.log.Debug("tablespace removed", "file", rel, "reason", why)
	return nil
}

type rename struct{ from, tmp, to string }

// applyRenames renames each <old>.ibd of target to the name its .ren marker holds.
// A marker whose table is not in target is skipped: the delta of the new name finds
// or creates its file by space id.
func (a *applier) applyRenames(markers []string) error {
	var rs []rename
	for _, m := range markers {
		r, ok, err := a.prepareRename(m)
		if err != nil {
			return fmt.Errorf("apply incremental: DDL marker %s: %w", m, err)
		}
		if !ok {
			a.log.Debug("rename marker skipped: table not in target", "marker", m)
			continue
		}
		if err := os.Rename(r.from, r.tmp); err != nil {
			return fmt.Errorf("apply incremental: DDL marker %s: %w", m, err)
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		if err := a.finishRename(r.tmp, r.to); err != nil {
			return err
		}
		a.log.Debug("tablespace renamed", "from", r.from, "to", r.to, "reason", "DDL marker")
	}
	return nil
}

// prepareRename reads a .ren marker; ok is false if its table is not in target.
func (a *applier) prepareRename(m string) (r rename, ok bool, err error) {
	to, err := readRenTarget(a.inc, m)
	if err != nil {
		return r, false, err
	}
	from, err := safepath.Join(a.target, ibdName(m))
	if err != nil {
		return r, false, err
	}
	if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	} else if err != nil {
		return r, false, err
	}
	return rename{from: from, tmp: from + ".ferry-ren", to: to}, true, nil
}

// finishRename moves tmp to target/rel (creating its directory).
func (a *applier) finishRename(tmp, rel string) error {
	p, err := safepath.MkdirParents(a.target, rel, 0o750)
	if err != nil {
		return fmt.Errorf("apply incremental: rename to %s: %w", rel, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("apply incremental: rename to %s: %w", rel, err)
	}
	a.touched(tmp)
	a.touched(p)
	a.stats.Renamed++
	return nil
}

// readRenTarget returns the tablespace name a .ren marker holds ("db/new", with or
// without "./" and ".ibd").
func readRenTarget(inc, m string) (string, error) {
	b, err := readSmall(inc, m, safepath.MaxLen)
	if err != nil {
		return "", err
	}
	name := strings.TrimPrefix(strings.TrimSpace(string(b)), "./")
	if !strings.HasSuffix(name, ".ibd") {
		name += ".ibd"
	}
	if err := safepath.Check(name); err != nil || name == ".ibd" || !strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: names %q, not a table \"db/table\"", ErrCorrupt, name)
	}
	return name, nil
}

// readSmall reads inc/rel, refusing a file longer than max bytes.
func readSmall(inc, rel string, max int64) ([]byte, error) {
	f, err := openIn(inc, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is longer than %d bytes", ErrCorrupt, rel, max)
	}
	return b, nil
}

// openIn opens root/rel for reading without following a symbolic link.
func openIn(root, rel string) (*os.File, error) {
	p, err := safepath.Join(root, rel)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	return f, nil
}

// copyNew replaces target <t>.ibd with the whole tablespace <t>.new of inc.
func (a *applier) copyNew(m string) error {
	rel := ibdName(m)
	if err := a.copyFile(m, rel+".ferry-new"); err != nil {
		return err
	}
	tmp, err := safepath.Join(a.target, rel+".ferry-new")
	if err != nil {
		return fmt.Errorf("apply incremental: %s: %w", m, err)
	}
	dst, err := safepath.Join(a.target, rel)
	if err != nil {
		return fmt.Errorf("apply incremental: %s: %w", m, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("apply incremental: %s: %w", m, err)
	}
	a.stats.Created++
	a.log.Debug("tablespace replaced", "file", rel, "reason", "DDL marker "+m)
	return nil
}

// copyFile copies inc/src to target/dst (creating directories, replacing a file
// there) and syncs it.
func (a *applier) copyFile(src, dst string) error {
	in, err := openIn(a.inc, src)
	if err != nil {
		return fmt.Errorf("apply incremental: copy %s: %w", src, err)
	}
	defer in.Close()
	p, err := safepath.MkdirParents(a.target, dst, 0o750)
	if err != nil {
		return fmt.Errorf("apply incremental: copy %s: %w", src, err)
	}
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o640)
	if err != nil {
		return fmt.Errorf("apply incremental: copy %s: %w", src, err)
	}
	_, err = io.Copy(out, in)
	if err == nil && !a.noSync {
		err = out.Sync()
	}
	err = errors.Join(err, out.Close())
	if err != nil {
		return fmt.Errorf("apply incremental: copy %s to %s: %w", src, p, err)
	}
	a.touched(p)
	return nil
}
