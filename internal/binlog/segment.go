// Package binlog is ferry's archive of a server's binary logs in a repository: the
// server's binlog files stored byte for byte, in segments written as the files grow,
// each compressed and encrypted like a backup's parts and named for the bytes it
// holds; records of the gaps the archive could not fill; and the reading side that
// point-in-time restore, list, verify and expire use: events, GTIDs, the recoverable
// window and the relay logs a restored server applies. docs/binlog-archive.md
// specifies the format.
package binlog

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/codec"
)

// Keys of the archive, relative to the repository's root.
const (
	segmentsDir = "binlogs/"
	gapsDir     = "binlog-gaps/"
)

// MaxSegment bounds the raw bytes of one stored segment ferry reads back: a segment
// holds whole events, and one event is at most 1 GiB (max_allowed_packet).
const MaxSegment = 1<<30 + 1<<20

// fileName is what a binlog file may be called: a base name and a numeric extension.
var fileName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}\.([0-9]{1,10})$`)

// CheckFile says whether name is a binlog file name ferry archives (it becomes part of
// object keys and relay log names, so it must be plain).
func CheckFile(name string) error {
	if !fileName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("binlog file name %q is not of the form base.NNNNNN", name)
	}
	return nil
}

// Position is a place in the source's binlog: a file and a byte offset in it.
type Position struct {
	File string `json:"file"`
	Pos  int64  `json:"pos"`
}

// String gives file:pos.
func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// fileSeq is the numeric extension of a checked binlog file name.
func fileSeq(name string) uint64 {
	m := fileName.FindStringSubmatch(name)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// CompareFiles orders binlog file names by base name, then by number.
func CompareFiles(a, b string) int {
	ba, bb := a[:strings.LastIndexByte(a, '.')+1], b[:strings.LastIndexByte(b, '.')+1]
	if c := strings.Compare(ba, bb); c != 0 {
		return c
	}
	return cmp.Compare(fileSeq(a), fileSeq(b))
}

// Compare orders positions.
func (p Position) Compare(q Position) int {
	if c := CompareFiles(p.File, q.File); c != 0 {
		return c
	}
	return cmp.Compare(p.Pos, q.Pos)
}

// Segment is one stored piece of a binlog file: its bytes [Start, End).
type Segment struct {
	File       string
	Start, End int64
	CRC        uint32 // CRC-32C of the raw bytes
	Key        string
	Comp       codec.Compression
	Encrypted  bool
	StoredSize int64
}

// segmentKey names a segment: binlogs/FILE/START-END.CRC[.zst|.lz4][.age].
func segmentKey(file string, start, end int64, crc uint32, c codec.Compression, enc bool) string {
	return codec.StoredName(fmt.Sprintf("%s%s/%012d-%012d.%08x", segmentsDir, file, start, end, crc), c, enc)
}

// parseSegmentKey reads a segment's key back; malformed keys are an error.
func parseSegmentKey(key string, size int64) (Segment, error) {
	rest, ok := strings.CutPrefix(key, segmentsDir)
	if !ok {
		return Segment{}, fmt.Errorf("binlog archive: %q is not a segment key", key)
	}
	file, name, ok := strings.Cut(rest, "/")
	if !ok || CheckFile(file) != nil {
		return Segment{}, fmt.Errorf("binlog archive: object %q: bad binlog file name", key)
	}
	base, c, enc := codec.ParseStoredName(name)
	s := Segment{File: file, Key: key, Comp: c, Encrypted: enc, StoredSize: size}
	if n, err := fmt.Sscanf(base, "%012d-%012d.%08x", &s.Start, &s.End, &s.CRC); n != 3 || err != nil ||
		len(base) != 12+1+12+1+8 || s.Start < 0 || s.End <= s.Start || s.End-s.Start > MaxSegment {
		return Segment{}, fmt.Errorf("binlog archive: object %q: not START-END.CRC32C", key)
	}
	return s, nil
}

// compareSegments orders segments by file, then offset, the longer first.
func compareSegments(a, b Segment) int {
	if c := CompareFiles(a.File, b.File); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Start, b.Start); c != 0 {
		return c
	}
	return cmp.Compare(b.End, a.End)
}

// Next is the start of the file numbered one more than p's.
func (p Position) Next() Position {
	i := strings.LastIndexByte(p.File, '.')
	if i < 0 {
		return Position{}
	}
	digits := len(p.File) - i - 1
	return Position{File: fmt.Sprintf("%s.%0*d", p.File[:i], digits, fileSeq(p.File)+1), Pos: 4}
}
