package main

import (
	"os"
	"runtime/debug"

	"github.com/ferry-backup/ferry/internal/optfile"
)

// recoveryOverhead is what a job that recovers a copy holds besides its batches: copy
// buffers, the tablespaces' pages in flight, the runtime.
const recoveryOverhead = 128 << 20

// limitRecoveryMemory sets the Go runtime's soft memory limit of a job that recovers a
// copy with --use-memory useMemory (its redo apply batch: records and their index)
// and holds streamed bytes of its own (--max-memory of a stream restore): three
// batches (the apply's, the log parsed ahead of it while the copy is made, and the
// garbage collector's room between cycles) plus those. Without it the collector lets
// the heap grow to twice its last peak. A GOMEMLIMIT in the environment, or a
// --use-memory that does not parse (the job reports it), leaves the limit alone.
func limitRecoveryMemory(useMemory string, streamed int64) {
	n, err := optfile.ParseSize(useMemory)
	if os.Getenv("GOMEMLIMIT") != "" || err != nil || n <= 0 {
		return
	}
	debug.SetMemoryLimit(recoveryLimit(n, streamed))
}

// recoveryLimit is limitRecoveryMemory's limit.
func recoveryLimit(useMemory, streamed int64) int64 {
	return 3*useMemory + streamed + recoveryOverhead
}
