package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ferry-backup/ferry/internal/filecopy"
	"golang.org/x/sync/errgroup"
)

// ariaPage is the Aria log page size. The end of a log is rewritten in place (the last
// page fills up over time, within a write buffer of up to 1 MiB), so a tail copy starts
// ariaRewrite bytes before the previously copied end.
const (
	ariaPage    = 8192
	ariaRewrite = 1 << 20
)

// copyOthers copies non-InnoDB files in parallel with plain reads; files dropped in the
// meantime are skipped.
func (j *job) copyOthers(ctx context.Context, files []srcFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(j.cfg.Parallel)
	for _, f := range files {
		g.Go(func() error {
			n, crc, err := filecopy.CopyPlain(gctx, f.Abs, filepath.Join(j.cfg.TargetDir, f.Rel), j.prog.Add)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			j.prog.AddTotal(n - f.Size)
			j.record(copiedFile{Rel: f.Rel, Size: n, CRC: crc, Kind: "other"})
			return nil
		})
	}
	return g.Wait()
}

// copyAriaTails brings the Aria logs copied under BLOCK_DDL up to date: it re-copies
// each log from its last (possibly rewritten) page on, and copies new logs whole.
func (j *job) copyAriaTails(ctx context.Context, logs []srcFile) error {
	var fresh []srcFile
	for _, f := range logs {
		j.mu.Lock()
		old, ok := j.files[f.Rel]
		j.mu.Unlock()
		if !ok {
			fresh = append(fresh, f)
			continue
		}
		cf, err := j.copyTail(f, max(0, old.Size-ariaRewrite)/ariaPage*ariaPage)
		if err != nil {
			return err
		}
		j.record(cf)
	}
	return j.copyOthers(ctx, fresh)
}

// copyTail copies src from off to its end over the backup copy, then checksums the copy.
func (j *job) copyTail(f srcFile, off int64) (copiedFile, error) {
	in, err := os.Open(f.Abs)
	if err != nil {
		return copiedFile{}, fmt.Errorf("open %s: %w", f.Abs, err)
	}
	defer in.Close()
	dst := filepath.Join(j.cfg.TargetDir, f.Rel)
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return copiedFile{}, fmt.Errorf("open %s: %w", dst, err)
	}
	defer out.Close()
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return copiedFile{}, err
	}
	if _, err := out.Seek(off, io.SeekStart); err != nil {
		return copiedFile{}, err
	}
	n, err := io.Copy(out, in)
	if err != nil {
		return copiedFile{}, fmt.Errorf("copy %s: %w", f.Rel, filecopy.WrapWriteErr(err))
	}
	j.prog.Add(n)
	size, crc, err := filecopy.FileCRC(dst)
	return copiedFile{Rel: f.Rel, Size: size, CRC: crc, Kind: "other"}, err
}
