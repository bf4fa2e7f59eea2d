// Package sst makes ferry a Galera State Snapshot Transfer method: mariadbd runs
// wsrep_sst_ferry (a shim that runs `ferry sst`) as the joiner, which listens and
// receives, and as the donor, which connects and sends a hot copy over clone's
// transport. The line protocol on stdout, the arguments and the environment are
// mariadbd 10.11's (docs/galera.md).
package sst

import (
	"fmt"
	"strconv"
	"strings"
)

// Roles of an SST process.
const (
	RoleJoiner = "joiner"
	RoleDonor  = "donor"
)

// Args are the arguments mariadbd passes an SST method, as separate argv words.
type Args struct {
	Role                string
	Address             string // joiner: where to listen; donor: the joiner's "ready" address
	Datadir             string
	DefaultsFile        string
	DefaultsExtraFile   string
	DefaultsGroupSuffix string
	Parent              int  // mariadbd's pid: the method gives up when it is gone
	Progress            bool // report "total"/"complete" lines
	Binlog              string
	BinlogIndex         string
	GTID                string // donor: uuid:seqno of the group (SST) or of the joiner (--bypass)
	GTIDDomainID        uint32
	Bypass              bool // donor: IST; send no copy
	LocalPort           int  // donor: its own client port
	Socket              string
	// Mysqld is everything after --mysqld-args: mariadbd's own argv.
	Mysqld []string
}

// valued are the options that take a value (the next word, or after '=').
var valued = map[string]bool{
	"role": true, "address": true, "datadir": true, "defaults-file": true, "defaults-extra-file": true,
	"defaults-group-suffix": true, "parent": true, "progress": true, "binlog": true, "binlog-index": true,
	"gtid": true, "gtid-domain-id": true, "local-port": true, "socket": true,
	// legacy options current servers do not send; accepted and ignored
	"host": true, "port": true, "user": true, "password": true, "log-basename": true,
	"innodb-data-home-dir": true, "innodb-log-group-home-dir": true, "innodb-undo-directory": true,
	"aria-log-dir-path": true, "innodb-buffer-pool-filename": true, "innodb-force-recovery": true,
}

// maxArgs bounds what is parsed: mariadbd's command lines are short.
const maxArgs = 4096

// ParseArgs reads mariadbd's SST arguments. Unknown options are ignored (with their
// value, when the next word is not an option), so a newer server's additions do not
// break the method; --role and --address are required and checked.
func ParseArgs(argv []string) (Args, error) {
	var a Args
	if len(argv) > maxArgs {
		return a, fmt.Errorf("%d arguments: more than an SST method is ever given", len(argv))
	}
	for i := 0; i < len(argv); i++ {
		w := argv[i]
		if w == "--mysqld-args" {
			a.Mysqld = append([]string(nil), argv[i+1:]...)
			break
		}
		if !strings.HasPrefix(w, "--") {
			continue // a stray word
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if name == "bypass" {
			a.Bypass = true
			continue
		}
		if !hasVal && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") && (valued[name] || !knownFlag(name)) {
			i++
			val = argv[i]
		}
		if err := a.set(name, val); err != nil {
			return a, err
		}
	}
	return a, a.check()
}

// knownFlag tells whether name is an option that never takes a value.
func knownFlag(name string) bool { return name == "bypass" }

func (a *Args) set(name, val string) error {
	var err error
	switch name {
	case "role":
		a.Role = val
	case "address":
		a.Address = val
	case "datadir":
		a.Datadir = val
	case "defaults-file":
		a.DefaultsFile = val
	case "defaults-extra-file":
		a.DefaultsExtraFile = val
	case "defaults-group-suffix":
		a.DefaultsGroupSuffix = val
	case "parent":
		a.Parent, err = strconv.Atoi(val)
	case "progress":
		a.Progress = val == "1"
	case "binlog":
		a.Binlog = val
	case "binlog-index":
		a.BinlogIndex = val
	case "gtid":
		a.GTID = val
	case "gtid-domain-id":
		var d uint64
		d, err = strconv.ParseUint(val, 10, 32)
		a.GTIDDomainID = uint32(d)
	case "local-port":
		a.LocalPort, err = strconv.Atoi(val)
	case "socket":
		a.Socket = val
	}
	if err != nil {
		return fmt.Errorf("--%s %q: not a number", name, val)
	}
	return nil
}

func (a Args) check() error {
	switch {
	case a.Role != RoleJoiner && a.Role != RoleDonor:
		return fmt.Errorf("--role %q: an SST method is run as joiner or donor (is this mariadbd's wsrep_sst_ferry?)", a.Role)
	case a.Address == "":
		return fmt.Errorf("no --address: mariadbd gives the %s one (wsrep_sst_receive_address or wsrep_node_address)", a.Role)
	case a.Datadir == "" && a.datadirFromMysqld() == "":
		return fmt.Errorf("no --datadir")
	}
	return nil
}

// MysqldOption is the last value of a mariadbd option in its argv ("" if not set),
// with '-' and '_' alike in the name, as mariadbd reads them; ok tells whether it was
// given at all (a bare --log-bin has no value but is set).
func (a Args) MysqldOption(name string) (val string, ok bool) {
	want := normal(name)
	for _, w := range a.Mysqld {
		if !strings.HasPrefix(w, "--") {
			continue
		}
		n, v, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		n = strings.TrimPrefix(normal(n), "loose_")
		if n == want {
			val, ok = v, true
		}
		if n == "skip_"+want {
			val, ok = "", false
		}
	}
	return val, ok
}

func normal(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }

func (a Args) datadirFromMysqld() string {
	v, _ := a.MysqldOption("datadir")
	return v
}
