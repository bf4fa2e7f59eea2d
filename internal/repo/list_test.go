package repo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// An incomplete backup started on this host is running while a ferry process has its
// PID (procs.IsFerry), not once that process ended or when the PID is another
// program's; one from another host is running while it wrote within StaleAfter.
func TestStillRunning(t *testing.T) {
	host, _ := os.Hostname()
	prog := filepath.Join(t.TempDir(), "ferry")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Start returns within execve, before the new program's arguments are in place.
	cmdline := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(cmdline); len(b) > 0 {
			break
		}
	}
	old := time.Now().Add(-2 * StaleAfter)
	if !stillRunning(Marker{Host: host, PID: cmd.Process.Pid}, old) {
		b, err := os.ReadFile(cmdline)
		t.Errorf("a live ferry on this host: not running (cmdline %q, %v)", b, err)
	}
	if stillRunning(Marker{Host: host, PID: os.Getpid()}, time.Now()) {
		t.Error("this test's own PID (not a ferry) taken for a running backup")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if stillRunning(Marker{Host: host, PID: cmd.Process.Pid}, time.Now()) {
		t.Error("an ended ferry on this host: still running")
	}
	if !stillRunning(Marker{Host: host + "-other", PID: 1}, time.Now()) || stillRunning(Marker{Host: host + "-other", PID: 1}, old) {
		t.Error("another host's backup: running is whether it wrote within StaleAfter")
	}
}
