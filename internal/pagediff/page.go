package pagediff

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Byte offsets in the FIL header (fil0fil.h) the comparison looks at.
const (
	offKeyVersionFCRC32 = 0  // FIL_PAGE_SPACE_OR_CHKSUM: key version in full_crc32
	offType             = 24 // FIL_PAGE_TYPE
	offFlushLSN         = 26 // FIL_PAGE_FILE_FLUSH_LSN_OR_KEY_VERSION (8 bytes)
	offSpaceID          = 34 // FIL_PAGE_SPACE_ID

	typePageCompressed          = 34354   // FIL_PAGE_PAGE_COMPRESSED (legacy)
	typePageCompressedEncrypted = 37401   // FIL_PAGE_PAGE_COMPRESSED_ENCRYPTED (legacy)
	fcrc32CompressedBit         = 1 << 15 // FIL_PAGE_COMPRESS_FCRC32_MARKER in FIL_PAGE_TYPE
	trxSysPage                  = 5       // page 0:5, never encrypted or compressed
)

// span is a byte range [from, to) of a page; a negative bound counts from the end.
type span struct{ from, to int }

// encoding is how a page is stored: encrypted, page_compressed, both or neither.
type encoding struct{ encrypted, compressed bool }

func (e encoding) any() bool { return e.encrypted || e.compressed }

// encodingOf tells how page pageNo of sp is stored (buf_page_decrypt_after_read): a
// page is encrypted when it has a key version and page 0 has encryption metadata.
// Page 0 and the system tablespace's TRX_SYS page never are encrypted or compressed.
func encodingOf(sp spaceInfo, pageNo uint32, p []byte) encoding {
	if pageNo == 0 || sp.id == 0 && pageNo == trxSysPage || len(p) < offSpaceID {
		return encoding{}
	}
	t := binary.BigEndian.Uint16(p[offType:])
	if sp.flags.FullCRC32() {
		return encoding{
			encrypted:  sp.crypt && binary.BigEndian.Uint32(p[offKeyVersionFCRC32:]) != 0,
			compressed: t&fcrc32CompressedBit != 0,
		}
	}
	switch t {
	case typePageCompressed: // bytes 26..33 hold the algorithm, not a key version
		return encoding{compressed: true}
	case typePageCompressedEncrypted:
		return encoding{encrypted: true, compressed: true}
	}
	return encoding{encrypted: sp.crypt && binary.BigEndian.Uint32(p[offFlushLSN:]) != 0}
}

// ignoredSpans are the bytes of a decoded page stored as e that the comparison
// ignores (Ignores, §11.2 and §11.3).
func ignoredSpans(full bool, e encoding) []span {
	var s []span
	switch {
	case e.encrypted && full:
		s = append(s, span{0, 4}, span{-4, 0}) // key version, post-encryption CRC-32C
	case e.encrypted:
		s = append(s, span{26, 34}) // key version, post-encryption checksum
	}
	switch {
	case e.compressed && full:
		s = append(s, span{-4, 0}) // stale checksum of the decompressed image
	case e.compressed:
		s = append(s, span{0, 4}, span{26, 34}) // 0xDEADBEEF, algorithm
	}
	return s
}

// page compares page pageNo of file name in tablespace sp: a (the oracle's) and b
// (ferry's).
func (c *comparer) page(sp spaceInfo, name string, pageNo uint32, a, b []byte) {
	if bytes.Equal(a, b) {
		c.r.Compared++
		return
	}
	var desc string
	if c.opt.Explain != nil {
		var freed bool
		if desc, freed = c.opt.Explain.Explain(sp.id, pageNo); freed {
			c.r.Ignored++
			return
		}
	}
	if c.desc.free(sp, pageNo) {
		c.r.Ignored++
		return
	}
	c.r.Compared++
	m := Mismatch{File: name, Space: sp.id, Page: pageNo, Offset: -1, Desc: desc}
	var skip []span
	if sp.id == 0 && pageNo == 0 {
		skip = append(skip, span{offFlushLSN, offFlushLSN + 8}) // written at shutdown (§11.4)
	}
	ea, eb := encodingOf(sp, pageNo, a), encodingOf(sp, pageNo, b)
	switch {
	case !ea.any() && !eb.any():
	case c.opt.Decode == nil:
		c.r.Undecoded++
		m.Undecoded = true
	default:
		var err error
		if a, err = c.decode(sp, pageNo, ea, a); err != nil {
			m.Problem = fmt.Sprintf("cannot decode the server's page: %v", err)
			c.r.add(m, c.opt.MaxMismatches)
			return
		}
		if b, err = c.decode(sp, pageNo, eb, b); err != nil {
			m.Problem = fmt.Sprintf("cannot decode ferry's page: %v", err)
			c.r.add(m, c.opt.MaxMismatches)
			return
		}
		c.r.Decoded++
		full := sp.flags.FullCRC32()
		skip = append(skip, ignoredSpans(full, ea)...)
		skip = append(skip, ignoredSpans(full, eb)...)
	}
	off := firstDiff(a, b, skip)
	if off < 0 {
		return
	}
	m.Offset = off
	if off < len(a) {
		m.Oracle = a[off]
	}
	if off < len(b) {
		m.Native = b[off]
	}
	if len(a) != len(b) {
		m.Problem = fmt.Sprintf("decoded to %d and %d bytes", len(a), len(b))
	}
	c.r.add(m, c.opt.MaxMismatches)
}

// decode returns the plaintext uncompressed image of p, or p if it is stored as is.
func (c *comparer) decode(sp spaceInfo, pageNo uint32, e encoding, p []byte) ([]byte, error) {
	if !e.any() {
		return p, nil
	}
	return c.opt.Decode(sp.id, pageNo, sp.flags, p)
}

// firstDiff returns the first offset where a and b differ outside skip, or -1. Pages
// of different lengths differ at the shorter length at the latest.
func firstDiff(a, b []byte, skip []span) int {
	n := min(len(a), len(b))
	ignored := func(i int) bool {
		for _, s := range skip {
			from, to := s.from, s.to
			if from < 0 || to <= 0 {
				from, to = n+from, n+to
			}
			if i >= from && i < to {
				return true
			}
		}
		return false
	}
	for i := 0; i < n; i++ {
		if a[i] != b[i] && !ignored(i) {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}
