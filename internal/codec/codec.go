// Package codec compresses and encrypts backup files as standard formats: zstd and lz4
// frames (a stock `zstd -d` or `lz4 -d` restores the bytes) and age encryption to
// public-key recipients (a stock `age -d -i key` decrypts). A stored file's name says
// how it was encoded: "<path>[.zst|.lz4][.age]".
package codec

import (
	"fmt"
	"strings"
)

// Compression names a compression algorithm.
type Compression string

// Supported compressions.
const (
	None Compression = "none"
	Zstd Compression = "zstd"
	LZ4  Compression = "lz4"
)

// Suffixes of stored names.
const (
	ZstdSuffix = ".zst"
	LZ4Suffix  = ".lz4"
	AgeSuffix  = ".age"
)

// ParseCompression accepts "zstd", "lz4" or "none".
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(strings.ToLower(s)); c {
	case None, Zstd, LZ4:
		return c, nil
	case "":
		return None, nil
	}
	return "", fmt.Errorf("unknown compression %q: use zstd, lz4 or none", s)
}

// Suffix is the file name suffix of the compression ("" for none).
func (c Compression) Suffix() string {
	switch c {
	case Zstd:
		return ZstdSuffix
	case LZ4:
		return LZ4Suffix
	}
	return ""
}

// StoredName is the name under which rel is stored with compression c, encrypted or not.
func StoredName(rel string, c Compression, encrypted bool) string {
	name := rel + c.Suffix()
	if encrypted {
		name += AgeSuffix
	}
	return name
}

// ParseStoredName splits a stored name into the file's path and its encoding.
func ParseStoredName(name string) (rel string, c Compression, encrypted bool) {
	rel, encrypted = strings.CutSuffix(name, AgeSuffix)
	c = None
	if r, ok := strings.CutSuffix(rel, ZstdSuffix); ok {
		rel, c = r, Zstd
	} else if r, ok := strings.CutSuffix(rel, LZ4Suffix); ok {
		rel, c = r, LZ4
	}
	return rel, c, encrypted
}
