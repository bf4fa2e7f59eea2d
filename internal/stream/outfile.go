package stream

import (
	"strings"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/innodb"
)

// outFile is a restored file, created on its first write: an InnoDB tablespace whose
// page 0 says page_compressed stays sparse (its holes are not written).
type outFile struct {
	dst, path string
	t         *filecopy.Target
	discard   bool // decoded and checked, never written
}

func newOutFile(dst, path string) *outFile { return &outFile{dst: dst, path: path} }

func (o *outFile) write(p []byte, off int64) error {
	if o.discard {
		return nil
	}
	if o.t == nil {
		if err := o.open(p); err != nil {
			return err
		}
	}
	return o.t.WriteAt(p, off)
}

func (o *outFile) open(first []byte) error {
	sparse := false
	if strings.HasSuffix(o.path, ".ibd") && len(first) >= 64 && !innodb.IsZero(first[:64]) {
		if h, err := innodb.ParseSpaceHeader(first); err == nil {
			sparse = h.Flags.PageCompressed()
		}
	}
	t, err := filecopy.Create(o.dst, sparse)
	if err != nil {
		return err
	}
	t.Close()
	o.t, err = filecopy.Open(o.dst, sparse, true)
	return err
}

// finish sets the final size (a trailing hole is not written) and closes the file.
func (o *outFile) finish(size int64) error {
	if o.discard {
		return nil
	}
	if o.t == nil {
		if err := o.open(nil); err != nil {
			return err
		}
	}
	if err := o.t.Truncate(size); err != nil {
		return err
	}
	err := o.t.Close()
	o.t = nil
	return err
}

func (o *outFile) close() {
	if o.t != nil {
		o.t.Close()
	}
}
