package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestLimitRecoveryMemory: a recovering job's heap is held near three apply batches
// plus what its stream holds; a GOMEMLIMIT of the user's, or a --use-memory that does
// not parse, leaves the runtime's limit alone.
func TestLimitRecoveryMemory(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(math.MaxInt64)
	limitRecoveryMemory("256M", 64<<20)
	if got, want := debug.SetMemoryLimit(-1), int64(3*256<<20+64<<20+recoveryOverhead); got != want {
		t.Errorf("limit %d, want %d", got, want)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	limitRecoveryMemory("lots", 0)
	t.Setenv("GOMEMLIMIT", "1GiB")
	limitRecoveryMemory("256M", 0)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d set, want none (bad --use-memory, or the user's GOMEMLIMIT)", got)
	}
}
