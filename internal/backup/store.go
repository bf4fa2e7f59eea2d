package backup

import (
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/sink"
)

// create starts a file of the backup in the sink (in the lock spool while the backup
// locks are held) and remembers it was sent.
func (j *job) create(rel string, o sink.FileOptions) (sink.File, error) {
	f, held := j.createHeld(rel, o)
	var err error
	if !held {
		f, err = j.sink.Create(rel, o)
	}
	if err == nil {
		j.mu.Lock()
		j.sent.Add(rel)
		j.mu.Unlock()
	}
	return f, err
}

// wasSent says whether a file named rel was started in the sink.
func (j *job) wasSent(rel string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sent.Has(rel)
}

// writeWhole stores a small file in one piece and returns its manifest entry.
func (j *job) writeWhole(rel string, data []byte, kind string) (manifest.File, error) {
	f, err := j.create(rel, sink.FileOptions{Meta: true, Size: int64(len(data))})
	if err != nil {
		return manifest.File{}, err
	}
	if err := f.WriteAt(data, 0); err != nil {
		f.Close(0)
		return manifest.File{}, err
	}
	if err := f.Close(int64(len(data))); err != nil {
		return manifest.File{}, err
	}
	return manifest.File{Path: rel, Size: int64(len(data)), CRC32C: checksum.Hex(checksum.Sum(data)), Kind: kind}, nil
}
