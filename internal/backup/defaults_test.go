package backup

import (
	"testing"

	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/sink"
)

// capsOnly is an end that only answers what it can do.
type capsOnly struct {
	sink.Sink
	caps sink.Caps
}

func (c capsOnly) Caps() sink.Caps { return c.caps }

// TestZeroConfigDefaults checks that a Config left zero gets internal/defaults' values,
// the ones ferry backup's flags print.
func TestZeroConfigDefaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		chunk int
	}{
		{"directory", Config{Sink: capsOnly{caps: sink.Caps{Rewrite: true, Direct: true}}}, defaults.ChunkSize},
		{"stream", Config{Sink: capsOnly{caps: sink.Caps{Remote: true}}}, defaults.RemoteChunkSize},
		{"repository", Config{Sink: capsOnly{caps: sink.Caps{Rewrite: true, Remote: true}}}, defaults.RemoteChunkSize},
		{"incremental into a directory", Config{Sink: capsOnly{caps: sink.Caps{Rewrite: true, Direct: true}}, Incremental: BaseFromLSN(1)}, defaults.RemoteChunkSize},
	} {
		got := withDefaults(c.cfg)
		if got.Parallel != defaults.BackupParallel || got.ChunkSize != c.chunk || got.Replica.SafeSlaveTimeout != defaults.SafeSlaveTimeout {
			t.Errorf("%s: parallel %d, chunk %d, safe-slave timeout %v; want %d, %d, %v", c.name, got.Parallel, got.ChunkSize,
				got.Replica.SafeSlaveTimeout, defaults.BackupParallel, c.chunk, defaults.SafeSlaveTimeout)
		}
		if c.cfg.Sink.Caps().Rewrite && got.Segment != defaults.Segment {
			t.Errorf("%s: segment %d, want %d", c.name, got.Segment, defaults.Segment)
		}
	}
}
