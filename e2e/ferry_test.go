//go:build e2e

// Package e2e runs the ferry binary against real mariadbd servers started by
// internal/testdb: backup under load, prepare, restore, interop with mariadb-backup,
// and the failure modes a DBA meets.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ferryBin is the binary built once for all tests.
var ferryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ferryBin = filepath.Join(dir, "ferry")
	// testhooks: the tracker-stall hook (FERRY_TEST_TRACKER_STALL) is compiled in for the tests only.
	out, err := exec.Command("go", "build", "-tags", "testhooks", "-o", ferryBin, "../cmd/ferry").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build ferry: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished ferry run.
type result struct {
	stdout, stderr string
	err            error
}

// ferry runs the binary with args and a deadline.
func ferry(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("ferry %s: err=%v\n%s", strings.Join(args, " "), err, tail(errb.String(), 30))
	if err == nil {
		checkNative(t, env, errb.String())
	}
	return result{out.String(), errb.String(), err}
}

// fellBack is what ferry logs when the stock server recovers a copy instead of ferry's
// native redo apply.
const fellBack = "the stock server recovers the copy instead of ferry"

// checkNative fails the test when a restore, prepare or clone that succeeded fell back to the server's
// recovery for a reason other than one the test injected (FERRY_TEST_FAIL) or a page
// format native apply leaves to the server: every e2e restore is then also a test of
// the native apply.
func checkNative(t testing.TB, env []string, stderr string) {
	t.Helper()
	i := strings.Index(stderr, fellBack)
	if i < 0 || slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "FERRY_TEST_FAIL=") }) {
		return
	}
	line, _, _ := strings.Cut(stderr[i:], "\n")
	for _, ok := range nativeGaps {
		if strings.Contains(line, ok) {
			return
		}
	}
	t.Errorf("ferry fell back to the server's recovery: %s", line)
}

// nativeGaps are the reasons native apply gives for what it does not apply yet.
var nativeGaps = []string{"page_compressed algorithm not supported"}

// mustFerry runs ferry and fails the test if it exits non-zero.
func mustFerry(t testing.TB, args ...string) result {
	t.Helper()
	r := ferry(t, nil, args...)
	if r.err != nil {
		t.Fatalf("ferry %s failed: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r
}

// wantFail runs ferry, expects a non-zero exit and a one-line error containing want,
// and no Go panic.
func wantFail(t testing.TB, env []string, want string, args ...string) result {
	t.Helper()
	r := ferry(t, env, args...)
	if r.err == nil {
		t.Fatalf("ferry %s succeeded, want failure %q", strings.Join(args, " "), want)
	}
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("ferry panicked:\n%s", r.stderr)
	}
	last := lastLine(r.stderr)
	if !strings.HasPrefix(last, "ferry: ") || !strings.Contains(last, want) {
		t.Fatalf("ferry %s: last stderr line %q, want a 'ferry: ' error containing %q", strings.Join(args, " "), last, want)
	}
	return r
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
