package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/safepath"
	"github.com/ferry-backup/ferry/internal/setting"
	"golang.org/x/sys/unix"
)

// DataDirs says where the DATA DIRECTORY tablespaces of a backup go. By default each
// goes back to the path it had on the source, which must be free.
type DataDirs struct {
	Map    []DirMap // a tablespace under Old goes under New instead
	Inside bool     // put them inside the datadir as ordinary tablespaces (no link)
}

// DirMap is one --data-directory-map OLD=NEW.
type DirMap struct{ Old, New string }

// ParseDirMap reads OLD=NEW (both absolute directories).
func ParseDirMap(s string) (DirMap, error) {
	old, nw, ok := strings.Cut(s, "=")
	if !ok || !filepath.IsAbs(old) || !filepath.IsAbs(nw) {
		return DirMap{}, setting.Errorf("%s %q: want OLD=NEW, two absolute directories (e.g. /disk1/mysql=/disk2/mysql)", setting.DataDirectoryMap, s)
	}
	return DirMap{filepath.Clean(old), filepath.Clean(nw)}, nil
}

// linkExt is a DATA DIRECTORY table's link file in the datadir: the absolute path of
// its tablespace.
const linkExt = ".isl"

// remoteSpace is a DATA DIRECTORY tablespace in a backup: its link db/t.isl, the copy
// db/t.ibd beside it, and the path it had on the source.
type remoteSpace struct {
	link, rel, source string
}

// readLinks lists the link files of the database directories of dir (a backup or a
// staging datadir). Each must hold an absolute path to a .ibd of the same table.
func readLinks(dir string) ([]remoteSpace, error) {
	links, err := filepath.Glob(filepath.Join(dir, "*", "*"+linkExt))
	if err != nil {
		return nil, err
	}
	var out []remoteSpace
	for _, l := range links {
		rel, _ := filepath.Rel(dir, l)
		rs, err := readLink(l, filepath.ToSlash(rel))
		if err != nil {
			return nil, err
		}
		out = append(out, rs)
	}
	return out, nil
}

func readLink(path, rel string) (remoteSpace, error) {
	f, err := filecopy.OpenRead(path)
	if err != nil {
		return remoteSpace{}, err
	}
	defer f.Close()
	b := make([]byte, safepath.MaxLen+1)
	n, _ := io.ReadFull(f, b)
	src := strings.TrimRight(string(b[:n]), "\r\n")
	ibd := strings.TrimSuffix(rel, linkExt) + ".ibd"
	if n > safepath.MaxLen || !filepath.IsAbs(src) || filepath.Clean(src) != src || !strings.HasSuffix(src, "/"+filepath.Base(ibd)) {
		return remoteSpace{}, fmt.Errorf("DATA DIRECTORY link %s holds %q, not the absolute path of %s: the backup was tampered with or damaged", rel, src, filepath.Base(ibd))
	}
	return remoteSpace{link: rel, rel: ibd, source: src}, nil
}

// target is where the tablespace goes under the policy; "" means inside the datadir.
func (d DataDirs) target(rs remoteSpace) string {
	if d.Inside {
		return ""
	}
	for _, m := range d.Map {
		if rest, ok := strings.CutPrefix(rs.source, m.Old+"/"); ok {
			return filepath.Join(m.New, rest)
		}
	}
	return rs.source
}

// checkFree refuses a target path that holds a file: the tablespace would replace it.
func (d DataDirs) checkFree(spaces []remoteSpace) error {
	for _, rs := range spaces {
		t := d.target(rs)
		if t == "" {
			continue
		}
		if _, err := os.Lstat(t); err == nil {
			table := strings.Replace(strings.TrimSuffix(rs.rel, ".ibd"), "/", ".", 1)
			return setting.Errorf("table %s was created with DATA DIRECTORY and its tablespace %s exists: pass %s %s=NEWDIR to put it elsewhere, or %s to keep it inside the datadir", table, t, setting.DataDirectoryMap, filepath.Dir(filepath.Dir(rs.source)), setting.NoDataDirectory)
		}
	}
	return nil
}

// manifestSpaces lists the DATA DIRECTORY tablespaces a ferry manifest records.
func manifestSpaces(m *manifest.Manifest) []remoteSpace {
	var out []remoteSpace
	for _, f := range m.Files {
		if f.Remote != "" {
			out = append(out, remoteSpace{link: strings.TrimSuffix(f.Path, ".ibd") + linkExt, rel: f.Path, source: f.Remote})
		}
	}
	return out
}

// checkDataDirs refuses, before anything is written, a backup whose DATA DIRECTORY
// tablespaces would land on existing files.
func (b *Backup) checkDataDirs(d DataDirs) error {
	if b.Manifest != nil {
		return d.checkFree(manifestSpaces(b.Manifest))
	}
	return checkLinks(b.Dir, d)
}

// checkLinks refuses, before anything is copied, a backup directory whose DATA
// DIRECTORY tablespaces would land on existing files.
func checkLinks(dir string, d DataDirs) error {
	spaces, err := readLinks(dir)
	if err != nil {
		return err
	}
	return d.checkFree(spaces)
}

// asideExt marks a link set aside during recovery; a run killed meanwhile leaves it,
// and the next run puts it back first.
const asideExt = ".ferry-aside"

// withLinksAside runs recovery on dir with its link files renamed away, so that the
// server opens the copies inside dir (the redo names were localized) and never a
// source's live tablespace through a link; the links are put back afterwards.
func withLinksAside(dir string, recover func() error) error {
	if err := restoreAsideLinks(dir); err != nil {
		return err
	}
	spaces, err := readLinks(dir)
	if err != nil {
		return err
	}
	for _, rs := range spaces {
		p := filepath.Join(dir, rs.link)
		if err := os.Rename(p, p+asideExt); err != nil {
			return fmt.Errorf("prepare: set aside %s: %w", rs.link, err)
		}
	}
	rerr := recover()
	if err := restoreAsideLinks(dir); err != nil && rerr == nil {
		rerr = err
	}
	return rerr
}

// restoreAsideLinks puts back the links a recovery set aside.
func restoreAsideLinks(dir string) error {
	aside, err := filepath.Glob(filepath.Join(dir, "*", "*"+linkExt+asideExt))
	if err != nil {
		return err
	}
	for _, p := range aside {
		if err := os.Rename(p, strings.TrimSuffix(p, asideExt)); err != nil {
			return fmt.Errorf("put back DATA DIRECTORY link %s: %w", p, err)
		}
	}
	return nil
}

// writeLink writes a link file holding path, as the server writes one (no newline).
func writeLink(link, path string) error {
	if err := os.WriteFile(link, []byte(path), 0o640); err != nil {
		return fmt.Errorf("write DATA DIRECTORY link %s: %w", link, err)
	}
	return nil
}

// localizeRedo rewrites the absolute tablespace names of dir's ib_logfile0 in place
// (redo.LocalizeFileNames), through a shared mapping of the file. An encrypted log
// is first checked against the key file (redo.CheckKey).
func localizeRedo(dir string, opts ServerOptions) (int, error) {
	keys, alg, err := opts.LogKeys()
	if err != nil {
		return 0, err
	}
	path := filepath.Join(dir, "ib_logfile0")
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, fmt.Errorf("prepare: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("prepare: map %s: %w", path, err)
	}
	n, lerr := 0, redo.CheckKey(b, keys, alg)
	switch {
	case errors.Is(lerr, redo.ErrNeedKey):
		lerr = setting.Errorf("the backup's redo log is encrypted (innodb_encrypt_log=ON): pass %s with the source's file_key_management key file on this host", setting.KeyFile)
	case errors.Is(lerr, redo.ErrWrongKey):
		lerr = setting.Errorf("the key file %s (%s) does not decrypt the backup's redo log, encrypted with key id 1 by %s: it is not the source's key file, or %s is wrong", opts.keyFiles.KeyFile, setting.KeyFile, mariadb.FileKeyManagement, setting.KeyPasswordFile)
	case lerr == nil:
		n, lerr = redo.LocalizeFileNames(b, keys, alg)
	}
	if n > 0 {
		if err := unix.Msync(b, unix.MS_SYNC); err != nil && lerr == nil {
			lerr = err
		}
	}
	if err := unix.Munmap(b); err != nil && lerr == nil {
		lerr = err
	}
	if lerr != nil {
		return n, fmt.Errorf("prepare: redo log of %s: %w", dir, lerr)
	}
	return n, nil
}

// placed is a tablespace moved out of staging: from where, to where.
type placed struct{ from, to string }

// placeRemote moves each DATA DIRECTORY tablespace of staging to where the policy
// sends it and points its link there, or (Inside) drops the link so that the server
// opens the copy in the datadir. It returns what it moved, so that a failed swap can
// move it back.
func placeRemote(staging string, d DataDirs, owner ownerIDs) ([]placed, error) {
	spaces, err := readLinks(staging)
	if err != nil {
		return nil, err
	}
	if err := d.checkFree(spaces); err != nil {
		return nil, err
	}
	var done []placed
	for _, rs := range spaces {
		t, from := d.target(rs), filepath.Join(staging, rs.rel)
		if t == "" {
			err = os.Remove(filepath.Join(staging, rs.link))
		} else if err = placeOne(from, t, owner); err == nil {
			done = append(done, placed{from, t})
			err = writeLink(filepath.Join(staging, rs.link), t)
		}
		if err != nil {
			unplace(done)
			return nil, err
		}
	}
	return done, nil
}

// placeOne moves a tablespace out of staging to path (created, never replaced):
// renamed on the same filesystem, copied and synced otherwise.
func placeOne(from, to string, owner ownerIDs) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
		return fmt.Errorf("create DATA DIRECTORY %s: %w", filepath.Dir(to), err)
	}
	if err := moveFile(from, to); err != nil {
		return fmt.Errorf("move tablespace to %s: %w", to, err)
	}
	if owner.set {
		if err := os.Lchown(to, owner.uid, owner.gid); err != nil {
			return fmt.Errorf("set owner of %s: %w", to, err)
		}
	}
	return nil
}

// moveFile renames from to to, never over an existing file; across filesystems it
// copies, syncs the copy and removes from (a failed copy leaves no partial to).
func moveFile(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if err == nil || !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	if _, _, err := filecopy.CopyPlain(context.Background(), from, to, nil); err != nil {
		os.Remove(to)
		return err
	}
	if err := manifest.SyncFile(to); err != nil {
		os.Remove(to)
		return err
	}
	return os.Remove(from)
}

// unplace moves placed tablespaces back into staging.
func unplace(done []placed) {
	for _, p := range done {
		if os.Rename(p.to, p.from) != nil {
			if _, _, err := filecopy.CopyPlain(context.Background(), p.to, p.from, nil); err == nil {
				os.Remove(p.to)
			}
		}
	}
}
