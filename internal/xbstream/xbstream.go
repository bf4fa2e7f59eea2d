// Package xbstream reads and writes the xbstream chunk format of mariabackup's mbstream
// and XtraBackup's xbstream: a sequence of chunks, each naming a file, carrying bytes for
// an offset of it (with a CRC-32) or marking its end. Chunks of different files may
// interleave. Integers are little-endian.
package xbstream

import (
	"errors"
	"fmt"
)

// Magic starts every chunk.
const Magic = "XBSTCK01"

// Chunk types.
const (
	TypePayload byte = 'P' // bytes of a file at an offset
	TypeEOF     byte = 'E' // the file is complete
)

// FlagIgnorable marks a chunk a reader may skip if it does not know its type.
const FlagIgnorable byte = 0x01

// MaxPathLen is the longest path a chunk may carry (FN_REFLEN).
const MaxPathLen = 512

// MaxPayload bounds a payload so that a corrupt length cannot make a reader allocate
// without limit; writers emit chunks of at most 10 MiB.
const MaxPayload = 64 << 20

// ErrCorrupt is wrapped by every error about bad stream bytes.
var ErrCorrupt = errors.New("corrupt xbstream")

// Chunk is one chunk of a stream.
type Chunk struct {
	Flags   byte
	Type    byte
	Path    string
	Offset  uint64
	CRC     uint32 // CRC-32 (IEEE) of Payload, as stored
	Payload []byte
}

// corrupt formats an ErrCorrupt error with the stream position.
func corrupt(pos int64, format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrCorrupt, pos, fmt.Sprintf(format, args...))
}
