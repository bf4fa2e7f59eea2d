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

	"github.com/ferry-backup/ferry/internal/setting"
	"golang.org/x/sync/errgroup"
)

// ownerIDs is the uid/gid restored files get; apply is a no-op unless running as root.
type ownerIDs struct {
	uid, gid int
	set      bool
	// desc says who the owner is and why, for the restore's start hint, e.g.
	// "mysql:mysql (the mysql user)".
	desc string
}

// String is desc: the owner and where it came from ("" when not running as root).
func (o ownerIDs) String() string { return o.desc }

// accounts looks users and groups up: the system's (os/user), or a test's.
type accounts struct {
	user      func(name string) (*user.User, error)
	group     func(name string) (*user.Group, error)
	userByID  func(uid string) (*user.User, error)
	groupByID func(gid string) (*user.Group, error)
}

// systemAccounts are the host's users and groups.
func systemAccounts() accounts {
	return accounts{user: user.Lookup, group: user.LookupGroup, userByID: user.LookupId, groupByID: user.LookupGroupId}
}

// serviceUser is the account the stock MariaDB service runs mariadbd as.
const serviceUser = "mysql"

// resolveOwner picks the owner of a restore run as root, so that the datadir is one
// the stock service starts: the explicit user[:group]; else the existing datadir's
// owner, unless that is root (an empty mount point, a directory made by hand); else
// the mysql user when the host has one; else the parent directory's owner.
func resolveOwner(spec, datadir string) (ownerIDs, error) {
	if os.Geteuid() != 0 {
		return ownerIDs{}, nil
	}
	return resolveOwnerWith(spec, datadir, systemAccounts())
}

// resolveOwnerWith is resolveOwner with the accounts to look users up in.
func resolveOwnerWith(spec, datadir string, acc accounts) (ownerIDs, error) {
	if spec != "" {
		o, err := parseOwner(spec, acc)
		o.desc = spec + " (as given)"
		return o, err
	}
	if o, ok := ownerOf(datadir, acc); ok && o.uid != 0 {
		o.desc += " (the datadir's owner)"
		return o, nil
	}
	if u, err := acc.user(serviceUser); err == nil {
		o := ownerIDs{set: true}
		o.uid, _ = strconv.Atoi(u.Uid)
		o.gid, _ = strconv.Atoi(u.Gid)
		o.desc = acc.names(o) + " (the " + serviceUser + " user)"
		return o, nil
	}
	for _, p := range []string{datadir, filepath.Dir(datadir)} {
		if o, ok := ownerOf(p, acc); ok {
			o.desc += " (the owner of " + p + "; this host has no " + serviceUser + " user)"
			return o, nil
		}
	}
	return ownerIDs{}, nil
}

// ownerOf is the owner of path, if it exists.
func ownerOf(path string, acc accounts) (ownerIDs, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return ownerIDs{}, false
	}
	st := fi.Sys().(*syscall.Stat_t)
	o := ownerIDs{uid: int(st.Uid), gid: int(st.Gid), set: true}
	o.desc = acc.names(o)
	return o, true
}

// names is user:group of o, by name where the host knows them, else by number.
func (acc accounts) names(o ownerIDs) string {
	u, g := strconv.Itoa(o.uid), strconv.Itoa(o.gid)
	if x, err := acc.userByID(u); err == nil {
		u = x.Username
	}
	if x, err := acc.groupByID(g); err == nil {
		g = x.Name
	}
	return u + ":" + g
}

func parseOwner(spec string, acc accounts) (ownerIDs, error) {
	name, group, _ := strings.Cut(spec, ":")
	u, err := acc.user(name)
	if err != nil {
		return ownerIDs{}, setting.Errorf("%s %s: %w", setting.Owner, spec, err)
	}
	o := ownerIDs{set: true}
	o.uid, _ = strconv.Atoi(u.Uid)
	o.gid, _ = strconv.Atoi(u.Gid)
	if group != "" {
		g, err := acc.group(group)
		if err != nil {
			return ownerIDs{}, setting.Errorf("%s %s: %w", setting.Owner, spec, err)
		}
		o.gid, _ = strconv.Atoi(g.Gid)
	}
	return o, nil
}

// apply sets the owner of dir and of everything in it, ownerWorkers files at a time
// (a datadir of 100,000 tables holds 200,000 files).
func (o ownerIDs) apply(dir string) error {
	if !o.set {
		return nil
	}
	var g errgroup.Group
	g.SetLimit(ownerWorkers)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		g.Go(func() error { return o.chown(p) })
		return nil
	})
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	return err
}

// ownerWorkers is how many chowns apply has in flight.
const ownerWorkers = 8

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
