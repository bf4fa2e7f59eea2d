package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/sink"
	"golang.org/x/sync/errgroup"
)

// ariaPage is the Aria log page size. The end of a log is rewritten in place (the last
// page fills up over time, within a write buffer of up to 1 MiB), so the last
// ariaRewrite bytes of a log are copied only under BLOCK_COMMIT.
const (
	ariaPage    = 8192
	ariaRewrite = 1 << 20
)

// openCopy is a file whose copy is under way: off bytes stored so far.
type openCopy struct {
	src  srcFile
	out  sink.File
	off  int64
	crc  uint32
	kind string
}

// copyOthers copies non-InnoDB files with plain reads, as many at once as small
// tablespaces (most are small: .frm, MyISAM and Aria tables, under BLOCK_DDL, whose
// length is the length of this copy); files dropped in the meantime are skipped.
func (j *job) copyOthers(ctx context.Context, files []srcFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(j.smallWorkers())
	for _, f := range files {
		g.Go(func() error {
			c, err := j.startCopy(f)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := j.copyTo(gctx, c, -1); err != nil {
				return err
			}
			return j.endCopy(c)
		})
	}
	return g.Wait()
}

// startCopy creates the copy of f (os.ErrNotExist if f is gone).
func (j *job) startCopy(f srcFile) (*openCopy, error) {
	if _, err := os.Stat(f.Abs); err != nil {
		return nil, err
	}
	out, err := j.create(f.Rel, sink.FileOptions{Size: f.Size})
	if err != nil {
		return nil, err
	}
	return &openCopy{src: f, out: out, kind: "other"}, nil
}

// copyTo copies c's source from c.off up to end (< 0: to the end of the file).
func (j *job) copyTo(ctx context.Context, c *openCopy, end int64) error {
	in, err := os.Open(c.src.Abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed since: keep what was copied
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", c.src.Abs, err)
	}
	defer in.Close()
	buf := <-j.bufs
	defer func() { j.bufs <- buf }()
	for end < 0 || c.off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := len(buf)
		if end >= 0 {
			want = int(min(int64(want), end-c.off))
		}
		n, rerr := in.ReadAt(buf[:want], c.off)
		if n > 0 {
			if err := c.out.WriteAt(buf[:n], c.off); err != nil {
				return fmt.Errorf("copy %s: %w", c.src.Rel, err)
			}
			c.crc = checksum.Update(c.crc, buf[:n])
			c.off += int64(n)
			j.prog.Add(int64(n))
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read %s: %w", c.src.Abs, rerr)
		}
	}
	return nil
}

// endCopy closes the copy and records it.
func (j *job) endCopy(c *openCopy) error {
	if err := c.out.Close(c.off); err != nil {
		return fmt.Errorf("%s: %w", c.src.Rel, err)
	}
	j.prog.AddTotal(c.off - c.src.Size)
	j.record(copiedFile{Rel: c.src.Rel, Size: c.off, CRC: c.crc, Kind: c.kind})
	return nil
}

// copyAriaHeads copies each Aria log under BLOCK_DDL except its last ariaRewrite bytes,
// which may still be rewritten; the copies stay open for copyAriaTails.
func (j *job) copyAriaHeads(ctx context.Context, logs []srcFile) error {
	for _, f := range logs {
		c, err := j.startCopy(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		cut := max(0, f.Size-ariaRewrite) / ariaPage * ariaPage
		if err := j.copyTo(ctx, c, cut); err != nil {
			return err
		}
		j.aria[f.Rel] = c
	}
	return nil
}

// copyAriaTails runs under BLOCK_COMMIT: it copies the rest of each Aria log and new
// logs whole.
func (j *job) copyAriaTails(ctx context.Context, logs []srcFile) error {
	var fresh []srcFile
	for _, f := range logs {
		if _, ok := j.aria[f.Rel]; !ok {
			fresh = append(fresh, f)
		}
	}
	for rel, c := range j.aria {
		if err := j.copyTo(ctx, c, -1); err != nil {
			return err
		}
		if err := j.endCopy(c); err != nil {
			return err
		}
		delete(j.aria, rel)
	}
	return j.copyOthers(ctx, fresh)
}
