package backup

import (
	"fmt"

	"github.com/ferry-backup/ferry/internal/manifest"
	"golang.org/x/sys/unix"
)

// fileIdentity returns the inode and birth time (Unix nanoseconds, 0 where the
// filesystem or the kernel keeps none) of the open file fd.
func fileIdentity(fd int) (inode uint64, birthNS int64, err error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		var fs unix.Stat_t
		if ferr := unix.Fstat(fd, &fs); ferr != nil {
			return 0, 0, fmt.Errorf("statx: %w; fstat: %w", err, ferr)
		}
		return fs.Ino, 0, nil
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		birthNS = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return st.Ino, birthNS, nil
}

// sameFile tells whether path is still the file whose identity sp recorded when it
// was copied: same inode and same birth time. Without a birth time (a filesystem that
// keeps none) an inode number proves nothing, as a new file may reuse it: false.
func sameFile(path string, sp *manifest.Space) bool {
	if sp == nil || sp.Identity == nil || sp.Identity.BirthNS == 0 {
		return false
	}
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil || st.Mask&unix.STATX_BTIME == 0 {
		return false
	}
	return st.Ino == sp.Identity.Inode && st.Btime.Sec*1e9+int64(st.Btime.Nsec) == sp.Identity.BirthNS
}

// baseSpaces indexes the tablespaces of a base's manifest by space id: its
// tablespace copies, the deltas of an incremental base and the tablespaces it sent
// whole. The system tablespace is left out: it is never replaced.
func baseSpaces(m *manifest.Manifest) map[uint32]manifest.Space {
	out := map[uint32]manifest.Space{}
	for _, f := range m.Files {
		if f.Space == nil || f.Space.System || (f.Kind != manifest.KindInnoDB && f.Kind != manifest.KindDelta) {
			continue
		}
		out[f.Space.ID] = *f.Space
	}
	return out
}

// replaced says why the tablespace file now read (its page 0 header and identity in
// now) is not the one the base holds, so that a delta of the pages above the base's
// LSN would not rebuild it (docs/incremental.md, "A tablespace replaced since the
// base"); "" when it is the base's file. fileOps says the redo since the base
// deletes or creates a file of its space id.
//
// With the base's manifest (spaces not nil) the file is replaced when its space id is
// not in the base (created, imported or re-created since), the redo since the base
// deletes or creates a file of its space id, its flags differ, the base
// recorded no identity for it (a base taken by an older ferry: nothing to compare),
// its inode or birth time differ (the file was deleted and another put in its place:
// DISCARD and IMPORT TABLESPACE keep the space id but not the file), page 0's LSN went
// back, or the tablespace shrank. Without one (a mariadb-backup base, or only an LSN
// given) the file is taken as replaced when page 0 carries LSN 0 (a file InnoDB
// imported and has not written since) or, by the redo, was deleted or created since.
func replaced(spaces map[uint32]manifest.Space, now manifest.Space, fileOps bool) string {
	id := now.Identity
	if spaces == nil {
		switch {
		case id != nil && id.LSN == 0:
			return "page 0 carries LSN 0: a file imported since the base"
		case fileOps:
			return fmt.Sprintf("the redo since the base deletes or creates space id %d", now.ID)
		}
		return ""
	}
	old, ok := spaces[now.ID]
	switch {
	case !ok:
		return fmt.Sprintf("space id %d is not in the base: created, imported or re-created since", now.ID)
	case fileOps: // whatever the file's identity says (an inode is soon reused)
		return fmt.Sprintf("the redo since the base deletes or creates space id %d", now.ID)
	case old.Flags != now.Flags:
		return fmt.Sprintf("its flags changed from %#x to %#x since the base", old.Flags, now.Flags)
	case old.Identity == nil:
		return "the base records no identity for it (taken by an older ferry): it cannot be compared"
	case id == nil:
		return "its identity could not be read"
	}
	b := old.Identity
	switch {
	case b.Inode != id.Inode:
		return fmt.Sprintf("another file than the base's (inode %d, was %d): discarded and imported, or re-created", id.Inode, b.Inode)
	case b.BirthNS != 0 && id.BirthNS != 0 && b.BirthNS != id.BirthNS:
		return "another file than the base's (created at another time): discarded and imported, or re-created"
	case id.LSN < b.LSN:
		return fmt.Sprintf("page 0's LSN %d is below the base's %d: another file", id.LSN, b.LSN)
	case id.Pages < b.Pages:
		return fmt.Sprintf("it holds %d pages, the base's %d: truncated or replaced", id.Pages, b.Pages)
	}
	return ""
}
