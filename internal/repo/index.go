package repo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
)

// Every object a backup writes ends with an index of the tablespace ranges it holds
// (docs/repository.md, "Resuming a backup"): the index JSON, its length as 4 bytes
// little-endian, and indexMagic. A resumed backup reads only these trailers to learn
// what an interrupted attempt stored, since that attempt's manifest was never written.
// Readers of the backup skip the trailer: no blob covers it.
const (
	indexMagic = "ferryix1"
	indexTail  = 4 + len(indexMagic)
	// maxIndex bounds an index read back (a pack of many small tablespaces holds a few
	// hundred bytes per blob).
	maxIndex = 64 << 20
)

// objectIndex is the trailer of one object.
type objectIndex struct {
	// Body is the size and CRC-32C of the object's bytes before the trailer, so that
	// the object's own CRC-32C is known without reading it.
	BodySize  int64  `json:"body_size"`
	BodyCRC32 string `json:"body_crc32c"`
	// Since is the checkpoint LSN the attempt that wrote the object began its copy at:
	// a page of a held range whose source page still carries an LSN at or below it has
	// not changed since it was read. 0: unknown, nothing in it is held.
	Since uint64       `json:"since,omitempty"`
	Blobs []indexEntry `json:"blobs,omitempty"`
}

// indexEntry is one range of a tablespace's own bytes (not a patch) in the object.
type indexEntry struct {
	Path  string          `json:"path"`
	Space *manifest.Space `json:"space"`
	Blob  manifest.Blob   `json:"blob"`
}

// encodeIndex returns the trailer for an object whose body is size bytes with
// CRC-32C crc.
func encodeIndex(size int64, crc uint32, since uint64, blobs []indexEntry) []byte {
	if since == 0 {
		blobs = nil
	}
	js, err := json.Marshal(objectIndex{BodySize: size, BodyCRC32: checksum.Hex(crc), Since: since, Blobs: blobs})
	if err != nil {
		panic(fmt.Sprintf("encode object index: %v", err)) // only plain fields
	}
	out := binary.LittleEndian.AppendUint32(js, uint32(len(js)))
	return append(out, indexMagic...)
}

// errNoIndex means an object has no index trailer (written by an older ferry).
var errNoIndex = errors.New("no index trailer")

// indexLen reads the trailer's length from the last indexTail bytes of an object of
// size bytes.
func indexLen(tail []byte, size int64) (int64, error) {
	if len(tail) < indexTail || string(tail[len(tail)-len(indexMagic):]) != indexMagic {
		return 0, errNoIndex
	}
	n := int64(binary.LittleEndian.Uint32(tail[len(tail)-indexTail:]))
	if n == 0 || n > maxIndex || n+int64(indexTail) > size {
		return 0, fmt.Errorf("index trailer of %d bytes in an object of %d", n, size)
	}
	return n, nil
}

// decodeIndex parses and checks the trailer of an object of size bytes, whose last
// bytes (the whole trailer at least) are tail.
func decodeIndex(tail []byte, size int64) (*objectIndex, uint32, error) {
	n, err := indexLen(tail, size)
	if err != nil {
		return nil, 0, err
	}
	if int64(len(tail)) < n+int64(indexTail) {
		return nil, 0, fmt.Errorf("index trailer of %d bytes not read whole", n)
	}
	trailer := tail[int64(len(tail))-n-int64(indexTail):]
	var ix objectIndex
	dec := json.NewDecoder(bytes.NewReader(trailer[:n]))
	if err := dec.Decode(&ix); err != nil {
		return nil, 0, fmt.Errorf("index trailer: %w", err)
	}
	if ix.BodySize != size-n-int64(indexTail) {
		return nil, 0, fmt.Errorf("index trailer says %d bytes before it, the object has %d", ix.BodySize, size-n-int64(indexTail))
	}
	body, err := parseCRC(ix.BodyCRC32)
	if err != nil {
		return nil, 0, fmt.Errorf("index trailer: %w", err)
	}
	for _, e := range ix.Blobs {
		if err := e.check(ix.BodySize); err != nil {
			return nil, 0, fmt.Errorf("index trailer: %s: %w", e.Path, err)
		}
	}
	return &ix, checksum.Combine(body, checksum.Sum(trailer), int64(len(trailer))), nil
}

// check refuses an entry that names a path outside the backup or a blob outside the
// object's body.
func (e indexEntry) check(body int64) error {
	p := e.Path
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return errors.New("not a relative path inside the backup")
	}
	b := e.Blob
	switch {
	case e.Space == nil:
		return errors.New("no tablespace")
	case b.Round != 0:
		return errors.New("a patch")
	case b.Offset < 0 || b.StoredSize <= 0 || b.Offset+b.StoredSize > body:
		return fmt.Errorf("blob at %d+%d outside the object's %d bytes", b.Offset, b.StoredSize, body)
	case b.RawOffset < 0 || b.RawSize <= 0 || b.RawOffset > 1<<50 || b.RawSize > 1<<40:
		return fmt.Errorf("raw range %d+%d", b.RawOffset, b.RawSize)
	}
	if _, err := parseCRC(b.CRC32C); err != nil {
		return err
	}
	_, err := parseCRC(b.StoredCRC32C)
	return err
}
