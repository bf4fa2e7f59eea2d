package restore

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// The replay's last commit is logged as every time ferry prints (the host's zone,
// with its offset), and reads back through --to-time's parser as the same instant.
func TestLogAppliedTime(t *testing.T) {
	commit := time.Date(2026, 11, 25, 8, 59, 7, 0, time.UTC)
	p := &binlog.Plan{Groups: 10, Last: &binlog.Group{GTID: binlog.GTID{Domain: 0, Server: 1, Seq: 42}, Time: commit}}
	var buf bytes.Buffer
	logApplied(slog.New(slog.NewTextHandler(&buf, nil)), p, time.Second)
	m := regexp.MustCompile(`last_commit="([^"]*)"`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatalf("no last_commit in %q", buf.String())
	}
	if m[1] != timefmt.Format(commit) {
		t.Fatalf("last_commit %q, want %q (the host's zone with its offset)", m[1], timefmt.Format(commit))
	}
	back, err := timefmt.Parse(m[1], time.Local)
	if err != nil || !back.Equal(commit) {
		t.Fatalf("%q reads back as %v (%v), want %v", m[1], back, err, commit)
	}
}
