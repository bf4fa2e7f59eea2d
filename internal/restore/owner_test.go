package restore

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeAccounts is a host whose users are the given ones (name to uid = gid); uid 0 is
// root.
func fakeAccounts(users map[string]string) accounts {
	byID := map[string]string{"0": "root"}
	for n, id := range users {
		byID[id] = n
	}
	lookup := func(name string) (*user.User, error) {
		if id, ok := users[name]; ok {
			return &user.User{Username: name, Uid: id, Gid: id}, nil
		}
		if name == "root" {
			return &user.User{Username: "root", Uid: "0", Gid: "0"}, nil
		}
		return nil, user.UnknownUserError(name)
	}
	return accounts{
		user: lookup,
		group: func(name string) (*user.Group, error) {
			u, err := lookup(name)
			if err != nil {
				return nil, user.UnknownGroupError(name)
			}
			return &user.Group{Name: name, Gid: u.Gid}, nil
		},
		userByID: func(id string) (*user.User, error) {
			if n, ok := byID[id]; ok {
				return &user.User{Username: n, Uid: id, Gid: id}, nil
			}
			return nil, errors.New("no such uid")
		},
		groupByID: func(id string) (*user.Group, error) {
			if n, ok := byID[id]; ok {
				return &user.Group{Name: n, Gid: id}, nil
			}
			return nil, errors.New("no such gid")
		},
	}
}

// TestResolveOwner: --owner, else the existing datadir's owner (unless root), else the
// mysql user when the host has one, else the parent's owner; the description says
// which was used. (It needs no root: it only reads owners.)
func TestResolveOwner(t *testing.T) {
	dir := t.TempDir()
	me := os.Getuid()
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o750); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(existing)
	myUID := int(st.Sys().(*syscall.Stat_t).Uid)
	fresh := filepath.Join(dir, "new")
	withMysql := fakeAccounts(map[string]string{"mysql": "102", "backup": "34"})
	noMysql := fakeAccounts(map[string]string{"backup": "34"})
	for _, c := range []struct {
		name, spec, datadir string
		acc                 accounts
		uid                 int
		desc                string
	}{
		{"--owner", "backup", fresh, withMysql, 34, "backup (as given)"},
		{"new datadir, mysql user", "", fresh, withMysql, 102, "mysql:mysql (the mysql user)"},
		{"new datadir, no mysql user", "", fresh, noMysql, myUID, "(the owner of " + dir + "; this host has no mysql user)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := resolveOwnerWith(c.spec, c.datadir, c.acc)
			if err != nil {
				t.Fatal(err)
			}
			if !o.set || o.uid != c.uid || !strings.Contains(o.String(), c.desc) {
				t.Errorf("owner %+v, want uid %d described %q", o, c.uid, c.desc)
			}
		})
	}
	// The existing datadir's owner counts unless it is root: a root-owned datadir
	// (an empty mount point) is one the service cannot write either.
	o, _ := resolveOwnerWith("", existing, withMysql)
	if me == 0 {
		if o.uid != 102 {
			t.Errorf("a root-owned existing datadir gave uid %d, want the mysql user's", o.uid)
		}
		if err := os.Chown(existing, 34, 34); err != nil {
			t.Fatal(err)
		}
		if o, _ := resolveOwnerWith("", existing, withMysql); o.uid != 34 || o.String() != "backup:backup (the datadir's owner)" {
			t.Errorf("an existing datadir of uid 34 gave %+v", o)
		}
	} else if o.uid != me || !strings.Contains(o.String(), "the datadir's owner") {
		t.Errorf("an existing datadir of uid %d gave %+v", me, o)
	}
	if _, err := resolveOwnerWith("nosuch", fresh, withMysql); err == nil || !strings.Contains(cliText(err), "--owner nosuch") {
		t.Errorf("an unknown --owner user: %v", err)
	}
}
