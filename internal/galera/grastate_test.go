package galera

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/mariadb"
)

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := mariadb.WsrepPosition{UUID: "212ac2f8-e8d6-11f1-a595-4715affe5663", Seqno: 15, Domain: 1}
	if err := WriteState(dir, p); err != nil {
		t.Fatal(err)
	}
	s, err := ReadState(dir)
	if err != nil || s.UUID != p.UUID || s.Seqno != 15 || s.SafeToBootstrap {
		t.Fatalf("read back %+v, %v", s, err)
	}
	if err := WriteState(dir, mariadb.WsrepPosition{UUID: p.UUID, Seqno: -1}); err == nil {
		t.Fatal("a position with seqno -1 was written")
	}
	// Galera's own file for a running or crashed node.
	os.WriteFile(filepath.Join(dir, StateFile), []byte("# GALERA saved state\nversion: 2.1\nuuid:    "+p.UUID+"\nseqno:   -1\nsafe_to_bootstrap: 1\n"), 0o600)
	if s, err := ReadState(dir); err != nil || s.Seqno != -1 || !s.SafeToBootstrap {
		t.Fatalf("crashed node's state %+v, %v", s, err)
	}
	for _, bad := range []string{"uuid: x\nseqno: 1\n", "uuid: " + p.UUID + "\nseqno: many\n", string(make([]byte, maxStateFile+1))} {
		os.WriteFile(filepath.Join(dir, StateFile), []byte(bad), 0o600)
		if _, err := ReadState(dir); err == nil {
			t.Errorf("ReadState accepted %.40q", bad)
		}
	}
}
