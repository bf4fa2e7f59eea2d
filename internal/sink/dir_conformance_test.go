package sink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
	"github.com/ferry-backup/ferry/internal/sink/sinktest"
)

// dirStored reads a backup directory back as restore takes it: refused while it is
// marked incomplete or has no manifest.
type dirStored struct{ dir string }

func (d dirStored) Load(context.Context, string) (*manifest.Manifest, map[string][]byte, error) {
	if _, err := os.Stat(filepath.Join(d.dir, manifest.IncompleteMarker)); err == nil {
		return nil, nil, fmt.Errorf("%s is marked incomplete", d.dir)
	}
	m, err := manifest.Read(d.dir)
	if err != nil {
		return nil, nil, err
	}
	files, err := sinktest.ReadTree(d.dir)
	return m, files, err
}

// TestDirConformance runs the Sink suite on a backup directory.
func TestDirConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) (sink.Sink, sinktest.Stored) {
		dir := filepath.Join(t.TempDir(), "backup")
		d, err := sink.NewDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return d, dirStored{dir}
	})
}
