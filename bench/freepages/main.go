// Command freepages counts, for each .ibd file under the directories it is given, the
// pages its extent descriptors mark free: the bytes a backup need not store. It prints
// one tab-separated line per file (path, file bytes, allocated bytes, pages, free
// pages) and a total line. Used by bench/freepages.sh; read-only.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferry-backup/ferry/internal/innodb"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: freepages DIR...")
		os.Exit(2)
	}
	var tot [4]int64
	for _, dir := range os.Args[1:] {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ibd") {
				return err
			}
			c, err := count(p)
			if err != nil {
				return err
			}
			fmt.Printf("%s\t%d\t%d\t%d\t%d\n", p, c[0], c[1], c[2], c[3])
			for i := range c {
				tot[i] += c[i]
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "freepages:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("total\t%d\t%d\t%d\t%d\n", tot[0], tot[1], tot[2], tot[3])
}

// count returns a file's bytes, allocated bytes, pages and free pages.
func count(path string) ([4]int64, error) {
	var c [4]int64
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return c, err
	}
	c[0] = fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		c[1] = st.Blocks * 512
	}
	head := make([]byte, 16384)
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return c, err
	}
	h, err := innodb.ParseSpaceHeader(head)
	if err != nil {
		return c, nil // not yet written: no pages counted
	}
	ps := h.Flags.PhysicalSize()
	page := make([]byte, ps)
	var desc []byte
	limit := innodb.FreeLimit(head)
	for no := uint32(0); int64(no+1)*int64(ps) <= c[0]; no++ {
		c[2]++
		if innodb.DescriptorPage(h.Flags, no) == no {
			if _, err := f.ReadAt(page, int64(no)*int64(ps)); err != nil {
				return c, err
			}
			desc = append(desc[:0], page...)
			continue
		}
		if innodb.PageFree(desc, h.Flags, limit, no) {
			c[3]++
		}
	}
	return c, nil
}
