package testdb

import (
	"os"
	"os/exec"
	"testing"
)

// Tool returns the path of a command-line tool the test needs. Under CI (CI set) a
// missing tool fails the test, since .ci/run must install pkg; elsewhere it skips.
func Tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" not installed", ".ci/run must install the "+pkg+" package")
	}
	return p
}

// Missing stops a test that lacks what, which .ci/run provides (install says how):
// under CI (CI set) it fails, since a skipped test proves nothing there; elsewhere it
// skips.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %s", what, install)
	}
	t.Skipf("%s (%s)", what, install)
}
