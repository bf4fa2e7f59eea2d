package xbstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/safepath"
)

// Extract unpacks a stream into dir, like `mbstream -x -C dir`: each payload is written
// at its offset, and every file must be closed by its EOF chunk. It returns the
// relative paths written. Paths that would leave dir are refused.
func Extract(r io.Reader, dir string) ([]string, error) {
	x := NewReader(r)
	open := map[string]*os.File{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	var done []string
	for {
		c, err := x.Next()
		if err == io.EOF {
			return done, finished(open, len(done))
		}
		if err != nil {
			return done, err
		}
		f, err := fileFor(open, dir, c.Path)
		if err != nil {
			return done, err
		}
		if c.Type == TypeEOF {
			delete(open, c.Path)
			if err := f.Close(); err != nil {
				return done, fmt.Errorf("xbstream: close %s: %w", c.Path, err)
			}
			done = append(done, c.Path)
			continue
		}
		if _, err := f.WriteAt(c.Payload, int64(c.Offset)); err != nil {
			return done, fmt.Errorf("xbstream: write %s: %w", c.Path, err)
		}
	}
}

// finished checks the stream closed every file it opened and was not empty.
func finished(open map[string]*os.File, n int) error {
	if len(open) > 0 {
		var names []string
		for p := range open {
			names = append(names, p)
		}
		return fmt.Errorf("%w: stream ended before the end of %s (truncated)", ErrCorrupt, strings.Join(names, ", "))
	}
	if n == 0 {
		return fmt.Errorf("%w: empty stream", ErrCorrupt)
	}
	return nil
}

func fileFor(open map[string]*os.File, dir, rel string) (*os.File, error) {
	if f, ok := open[rel]; ok {
		return f, nil
	}
	p, err := SafePath(dir, rel)
	if err != nil {
		return nil, err
	}
	if _, err := safepath.MkdirParents(dir, rel, 0o750); err != nil {
		return nil, fmt.Errorf("xbstream: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o640)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %s appears twice in the stream (or the target is not empty)", ErrCorrupt, rel)
	}
	if err != nil {
		return nil, fmt.Errorf("xbstream: %w", err)
	}
	open[rel] = f
	return f, nil
}

// SafePath joins a stream path to dir with safepath.Join: a path that would leave dir
// (absolute, "..", a symbolic link on the way) or is malformed is ErrCorrupt.
func SafePath(dir, rel string) (string, error) {
	p, err := safepath.Join(dir, rel)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return p, nil
}
