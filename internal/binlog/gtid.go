package binlog

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// GTID is a MariaDB global transaction id, domain-server-seq.
type GTID struct {
	Domain uint32
	Server uint32
	Seq    uint64
}

// String gives D-S-N.
func (g GTID) String() string { return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq) }

// ParseGTID reads one D-S-N.
func ParseGTID(s string) (GTID, error) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 3 {
		return GTID{}, fmt.Errorf("GTID %q is not domain-server-sequence (e.g. 0-1-12345)", s)
	}
	d, err1 := strconv.ParseUint(parts[0], 10, 32)
	sv, err2 := strconv.ParseUint(parts[1], 10, 32)
	n, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return GTID{}, fmt.Errorf("GTID %q is not domain-server-sequence (e.g. 0-1-12345)", s)
	}
	return GTID{Domain: uint32(d), Server: uint32(sv), Seq: n}, nil
}

// State is a binlog GTID state: the last sequence number of every domain and server,
// as @@gtid_binlog_state and a file's Gtid_list event hold it.
type State map[[2]uint32]uint64

// ParseState reads a comma-separated list of GTIDs ("" is the empty state).
func ParseState(s string) (State, error) {
	st := State{}
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		g, err := ParseGTID(f)
		if err != nil {
			return nil, err
		}
		st.Add(g)
	}
	return st, nil
}

// Add records g as its domain and server's last.
func (s State) Add(g GTID) { s[[2]uint32{g.Domain, g.Server}] = g.Seq }

// Clone copies the state.
func (s State) Clone() State { return maps.Clone(s) }

// Equal says whether both states hold the same GTIDs.
func (s State) Equal(o State) bool { return maps.Equal(s, o) }

// String lists the state's GTIDs in domain and server order.
func (s State) String() string {
	keys := slices.SortedFunc(maps.Keys(s), func(a, b [2]uint32) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = GTID{Domain: k[0], Server: k[1], Seq: s[k]}.String()
	}
	return strings.Join(out, ",")
}

// DomainSeq is the highest sequence number the state holds for a domain (any server).
func (s State) DomainSeq(domain uint32) (uint64, bool) {
	var n uint64
	found := false
	for k, v := range s {
		if k[0] == domain && (!found || v > n) {
			n, found = v, true
		}
	}
	return n, found
}
