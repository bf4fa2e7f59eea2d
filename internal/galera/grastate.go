// Package galera is what ferry knows of a Galera node's own state: its saved state
// file (grastate.dat) and the recovery of its position from the InnoDB data.
package galera

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// StateFile is the node's saved state, in its datadir.
const StateFile = "grastate.dat"

// maxStateFile bounds a grastate.dat read: it holds a few short lines.
const maxStateFile = 64 << 10

// State is grastate.dat: the cluster history the node's data belongs to and its seqno
// (-1 while the node runs or after a crash), and whether the node may bootstrap a new
// primary component.
type State struct {
	UUID            string
	Seqno           int64
	SafeToBootstrap bool
}

// Bytes is the file as Galera 4 writes it.
func (s State) Bytes() []byte {
	safe := 0
	if s.SafeToBootstrap {
		safe = 1
	}
	return fmt.Appendf(nil, "# GALERA saved state\nversion: 2.1\nuuid:    %s\nseqno:   %d\nsafe_to_bootstrap: %d\n", s.UUID, s.Seqno, safe)
}

// WriteState writes grastate.dat in dir for a node whose data is at p: the node then
// asks the cluster for the write-sets after p (IST) instead of a full copy, if a donor's
// gcache still holds them. It never claims the node may bootstrap.
func WriteState(dir string, p mariadb.WsrepPosition) error {
	if !p.Known() {
		return fmt.Errorf("no Galera position to write to %s (%s)", StateFile, p)
	}
	return xtrabackup.WriteFileSync(filepath.Join(dir, StateFile), State{UUID: p.UUID, Seqno: p.Seqno}.Bytes())
}

// ReadState reads dir's grastate.dat.
func ReadState(dir string) (State, error) {
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxStateFile {
		return State{}, fmt.Errorf("%s is %d bytes: not a Galera state file", path, len(b))
	}
	s := State{Seqno: -1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.HasPrefix(strings.TrimSpace(k), "#") {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "uuid":
			s.UUID = v
		case "seqno":
			if s.Seqno, err = strconv.ParseInt(v, 10, 64); err != nil {
				return State{}, fmt.Errorf("%s: bad seqno %q", path, v)
			}
		case "safe_to_bootstrap":
			s.SafeToBootstrap = v == "1"
		}
	}
	if _, err := mariadb.ParseWsrepPosition(fmt.Sprintf("%s:%d", s.UUID, s.Seqno)); err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
