// Package procs answers questions about the processes of this host.
package procs

import (
	"bytes"
	"os"
	"strconv"
)

// IsFerry reports whether pid is a live ferry process (its program's name holds
// "ferry"): a working directory named after a pid that is not is left by a killed run.
func IsFerry(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return bytes.Contains(argv0, []byte("ferry"))
}
