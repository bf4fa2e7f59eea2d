// Package faultpoint lets a test stop ferry at an exact point of its work, to signal or
// kill it there: a real process at a point no timing could hit reliably (the third file
// of a restore, the start of recovery). A point is named in the environment variable
// FERRY_TEST_PAUSE as NAME=N; ferry then says so on stderr when it reaches the N-th
// step of NAME and waits there until its context ends (the test's signal) or a
// minute passes. Without the variable, At costs one environment lookup.
package faultpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env is the variable that names the point to pause at.
const Env = "FERRY_TEST_PAUSE"

// At pauses if the environment names step n of point name (see the package comment).
func At(ctx context.Context, name string, n int) {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	want, count, ok := strings.Cut(v, "=")
	if !ok || want != name || count != strconv.Itoa(n) {
		return
	}
	fmt.Fprintf(os.Stderr, "ferry: test pause at %s=%d\n", name, n)
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
	}
}

// FailEnv names a failure to inject: ferry then behaves as if that step failed (for
// example "apply-record", a redo record native apply does not know).
const FailEnv = "FERRY_TEST_FAIL"

// Fails tells whether the environment asks step name to fail.
func Fails(name string) bool { return os.Getenv(FailEnv) == name }
