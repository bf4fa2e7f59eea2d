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
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed: .ci/run must install the %s package", name, pkg)
		}
		t.Skipf("%s (package %s) not installed", name, pkg)
	}
	return p
}
