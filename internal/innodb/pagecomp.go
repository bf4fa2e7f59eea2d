package innodb

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// PageAlgorithm is a page_compressed compression algorithm (PAGE_ZLIB_ALGORITHM ..
// PAGE_SNAPPY_ALGORITHM, fsp0pagecompress.h): innodb_compression_algorithm.
type PageAlgorithm uint8

// The algorithms. Zlib is built into the server; the others need the server's
// provider_* plugins.
const (
	AlgoNone   PageAlgorithm = 0
	AlgoZlib   PageAlgorithm = 1
	AlgoLZ4    PageAlgorithm = 2
	AlgoLZO    PageAlgorithm = 3
	AlgoLZMA   PageAlgorithm = 4
	AlgoBzip2  PageAlgorithm = 5
	AlgoSnappy PageAlgorithm = 6
)

// String returns the algorithm's innodb_compression_algorithm name.
func (a PageAlgorithm) String() string {
	names := [...]string{"none", "zlib", "lz4", "lzo", "lzma", "bzip2", "snappy"}
	if int(a) < len(names) {
		return names[a]
	}
	return fmt.Sprintf("algorithm %d", uint8(a))
}

// ErrAlgorithm means a page is compressed with an algorithm ferry cannot decompress
// (lzo) or an unknown one.
var ErrAlgorithm = errors.New("page_compressed algorithm not supported")

// DefaultCompressionLevel is innodb_compression_level's default, the level the server
// uses when the table gives none (and always during recovery, which does not know the
// table's PAGE_COMPRESSION_LEVEL).
const DefaultCompressionLevel = 6

// PageAlgorithm returns the algorithm of a full_crc32 page_compressed tablespace
// (bits 5..7 of FSP_SPACE_FLAGS), AlgoNone otherwise. Legacy tablespaces do not
// record it: each page names its own, and the server writes innodb_compression_algorithm.
func (f SpaceFlags) PageAlgorithm() PageAlgorithm {
	if !f.FullCRC32() {
		return AlgoNone
	}
	return PageAlgorithm((uint32(f) >> fcrc32AlgoShift) & 7)
}

// fcrc32NeedsLenByte reports whether a full_crc32 page_compressed page of algorithm a
// stores the low byte of the exact payload length before its CRC
// (fil_space_t::full_crc32_page_compressed_len): the decoders that need the exact length.
func fcrc32NeedsLenByte(a PageAlgorithm) bool {
	return a == AlgoLZ4 || a == AlgoLZO || a == AlgoSnappy
}

// fcrc32CompHeader is where the payload of a full_crc32 page_compressed page starts
// (FIL_PAGE_COMP_ALGO): bytes 0..25 are the frame's, with FIL_PAGE_TYPE replaced.
const fcrc32CompHeader = offKeyVersion

// PageCompressed reports whether page, as stored (decrypted first), is a
// page_compressed page: full_crc32 with the marker bit 15 of FIL_PAGE_TYPE, or legacy
// of type 34354 or 37401.
func PageCompressed(page []byte, flags SpaceFlags) bool {
	t := PageType(page)
	if flags.FullCRC32() {
		return t&fcrc32CompressedBit != 0
	}
	return t == typePageCompressed || t == typePageCompressedEncrypted
}

// DecompressPage decompresses src, a page_compressed page as stored (decrypted first)
// of a tablespace with flags, into dst, both the physical page size (dst may be src).
// It returns false and copies src if the page is not compressed. The checks are the
// server's (fil_page_decompress): in full_crc32 the CRC-32C of the compressed image and
// a size below the page size, the exact length from the byte before the CRC for
// lz4/lzo/snappy; in the legacy format checksum field 0xDEADBEEF, the algorithm (bytes
// 26..33, or 40..41 for type 37401) and the payload length (38..39); then the stream
// must give exactly one page. It fails with ErrAlgorithm for lzo.
//
// A full_crc32 image is compressed before the server computes the page's CRC, so its
// last 4 bytes are stale after decompression; DecompressPage refreshes them, so that
// the result is the page as it would be stored uncompressed and Checker validates it.
func DecompressPage(dst, src []byte, flags SpaceFlags) (bool, error) {
	size := flags.PageSize()
	if len(src) != size || len(dst) != size {
		return false, fmt.Errorf("innodb: decompress page: got %d and %d bytes, page size is %d", len(dst), len(src), size)
	}
	if !PageCompressed(src, flags) {
		if &dst[0] != &src[0] {
			copy(dst, src)
		}
		return false, nil
	}
	algo, payload, err := compressedPayload(src, flags)
	if err != nil {
		return false, fmt.Errorf("innodb: decompress page %d: %w", PageNo(src), err)
	}
	out := dst
	if &dst[0] == &src[0] {
		out = make([]byte, size)
	}
	if err := inflate(out, payload, algo); err != nil {
		return false, fmt.Errorf("innodb: decompress page %d (%s): %w", PageNo(src), algo, err)
	}
	if &out[0] != &dst[0] {
		copy(dst, out)
	}
	if flags.FullCRC32() {
		binary.BigEndian.PutUint32(dst[size-4:], crc32c(dst[:size-4]))
	}
	return true, nil
}

// compressedPayload checks the header of a page_compressed page and returns its
// algorithm and compressed stream.
func compressedPayload(src []byte, flags SpaceFlags) (PageAlgorithm, []byte, error) {
	if flags.FullCRC32() {
		if !flags.PageCompressed() {
			return 0, nil, errors.New("page_compressed page in a tablespace that is not page_compressed")
		}
		algo := flags.PageAlgorithm()
		n := int(PageType(src)&^fcrc32CompressedBit) << 8
		if n >= len(src) || n < fcrc32CompHeader+fcrc32ChecksumSz+1 {
			return 0, nil, fmt.Errorf("page_compressed size %d out of range", n)
		}
		if crc32c(src[:n-4]) != be32(src, n-4) {
			return 0, nil, errors.New("page_compressed CRC-32C mismatch")
		}
		if fcrc32NeedsLenByte(algo) {
			if lsb := int(src[n-5]); lsb != 0 {
				n += lsb - 0x100
			}
			n -= 5
			if n <= fcrc32CompHeader {
				return 0, nil, errors.New("page_compressed length byte out of range")
			}
		}
		return algo, src[fcrc32CompHeader:n], nil
	}
	if be32(src, offChecksum) != noChecksum {
		return 0, nil, errors.New("page_compressed page without the 0xDEADBEEF checksum marker")
	}
	header, algo := compHeader, PageAlgorithm(0)
	if PageType(src) == typePageCompressedEncrypted {
		header = compHeaderEnc
		a := binary.BigEndian.Uint16(src[offCompAlgoEnc:])
		if a > 0xFF {
			return 0, nil, fmt.Errorf("%w: %d", ErrAlgorithm, a)
		}
		algo = PageAlgorithm(a)
	} else {
		a := binary.BigEndian.Uint64(src[offKeyVersion:])
		if a > 0xFF {
			return 0, nil, fmt.Errorf("%w: %d", ErrAlgorithm, a)
		}
		algo = PageAlgorithm(a)
	}
	n := int(binary.BigEndian.Uint16(src[offCompLen:]))
	if n == 0 || n > len(src)-header {
		return 0, nil, fmt.Errorf("page_compressed payload size %d out of range", n)
	}
	return algo, src[header : header+n], nil
}

// inflate decompresses payload into out, which it must fill exactly.
func inflate(out, payload []byte, algo PageAlgorithm) error {
	switch algo {
	case AlgoZlib:
		r, err := zlib.NewReader(bytes.NewReader(payload))
		if err != nil {
			return err
		}
		return readExactly(r, out)
	case AlgoBzip2:
		return readExactly(bzip2.NewReader(bytes.NewReader(payload)), out)
	case AlgoLZMA:
		// One .xz stream (lzma_stream_buffer_decode); what follows it is padding.
		r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(payload))
		if err != nil {
			return err
		}
		return readExactly(r, out)
	case AlgoLZ4:
		n, err := lz4.UncompressBlock(payload, out)
		if err != nil {
			return err
		}
		if n != len(out) {
			return fmt.Errorf("lz4 stream gives %d bytes, not a page", n)
		}
		return nil
	case AlgoSnappy:
		if n, err := snappy.DecodedLen(payload); err != nil || n != len(out) {
			return fmt.Errorf("snappy stream does not give a page (%d bytes, %v)", n, err)
		}
		_, err := snappy.Decode(out, payload)
		return err
	}
	return fmt.Errorf("%w: %s", ErrAlgorithm, algo)
}

// readExactly fills out from r and checks that the stream ends there.
func readExactly(r io.Reader, out []byte) error {
	if _, err := io.ReadFull(r, out); err != nil {
		return fmt.Errorf("stream shorter than a page: %w", err)
	}
	var one [1]byte
	if n, _ := r.Read(one[:]); n != 0 {
		return errors.New("stream longer than a page")
	}
	return nil
}

// CompressOptions are the server settings CompressPage follows.
type CompressOptions struct {
	// Algorithm is innodb_compression_algorithm, which legacy tablespaces are written
	// with (full_crc32 ones use the algorithm of their flags). AlgoNone means zlib.
	Algorithm PageAlgorithm
	// Level is the compression level: the table's PAGE_COMPRESSION_LEVEL, or
	// innodb_compression_level (0 means DefaultCompressionLevel).
	Level int
	// Encrypted is set when the page will be encrypted next: legacy tablespaces then
	// write type 37401 with the algorithm after the length.
	Encrypted bool
}

// Compresses reports whether CompressPage tries to compress plain, page pageNo of
// tablespace spaceID with flags: a page_compressed tablespace, not page 0 or 0:5, not
// an ALLOCATED, FSP_HDR, XDES or already page_compressed page (fil_page_compress).
func Compresses(plain []byte, flags SpaceFlags, spaceID, pageNo uint32) bool {
	if !flags.PageCompressed() || neverTransformed(spaceID, pageNo) {
		return false
	}
	switch PageType(plain) {
	case typeAllocated, typeFSPHdr, typeXDES, typePageCompressed:
		return false
	}
	return true
}

// CompressPage writes into dst (the page size; not plain's buffer) plain, page pageNo of
// tablespace spaceID with flags, as the server writes a page_compressed page
// (fil_page_compress), and returns the length of the compressed image; dst[n:] is
// zero (the server rounds its write up to the file system block and punches out the
// rest, which reads as zeros). It returns 0 with dst a copy of plain when the page is
// stored uncompressed: Compresses is false, the image would not fit (full_crc32: the
// size rounded up to 256 bytes must stay below the page size), or the algorithm is one
// ferry cannot write (lzo, bzip2), which the server accepts as it accepts any
// page that did not compress. The compressed bytes differ from the server's (another
// library), the decompressed page does not.
//
// full_crc32: bytes 0..25 are plain's with FIL_PAGE_TYPE := 0x80, size>>8 (size =
// header + payload [+ length byte] + CRC, rounded up to 256), the payload from byte 26,
// zeros, the payload length's low byte before the CRC for lz4/lzo/snappy, and CRC-32C
// of the image (EncryptPage replaces it when the page is encrypted too). The
// uncompressed page's trailer holds the low half of FIL_PAGE_LSN first, as the server
// sets it. Legacy: bytes 0..37 are plain's (computed with its checksum before
// compression, as the server does), 0..3 := 0xDEADBEEF, 26..33 := the algorithm, type
// 34354, the payload length at 38..39 and the payload from 40; with Encrypted, type
// 37401 and the algorithm also at 40..41, payload from 42.
func CompressPage(dst, plain []byte, flags SpaceFlags, spaceID, pageNo uint32, o CompressOptions) (int, error) {
	return compressPage(dst, plain, flags, spaceID, pageNo, o, nil)
}

// compressPage is CompressPage taking zlib writers of level o.Level from pool (of
// *zlibWriter) when it is not nil: a fresh writer costs three times the compression
// of a page.
func compressPage(dst, plain []byte, flags SpaceFlags, spaceID, pageNo uint32, o CompressOptions, pool *sync.Pool) (int, error) {
	size := flags.PageSize()
	if len(plain) != size || len(dst) != size {
		return 0, fmt.Errorf("innodb: compress page %d: got %d and %d bytes, page size is %d", pageNo, len(dst), len(plain), size)
	}
	if &dst[0] == &plain[0] {
		return 0, fmt.Errorf("innodb: compress page %d: dst and plain are the same buffer", pageNo)
	}
	copy(dst, plain)
	if !Compresses(plain, flags, spaceID, pageNo) {
		return 0, nil
	}
	if flags.FullCRC32() {
		setFullCRC32Trailer(dst)
		return compressFullCRC32(dst, flags.PageAlgorithm(), o.level(), pool)
	}
	algo := o.Algorithm
	if algo == AlgoNone {
		algo = AlgoZlib
	}
	return compressLegacy(dst, algo, o.level(), o.Encrypted, pool)
}

func (o CompressOptions) level() int {
	if o.Level <= 0 {
		return DefaultCompressionLevel
	}
	return min(o.Level, 9)
}

// compressFullCRC32 compresses frame (dst, a copy of the page) in place into the
// full_crc32 page_compressed layout; 0 if it does not fit.
func compressFullCRC32(dst []byte, algo PageAlgorithm, level int, pool *sync.Pool) (int, error) {
	size := len(dst)
	payload, err := deflate(dst, algo, level, size-fcrc32CompHeader, pool)
	if err != nil || payload == nil {
		return 0, err
	}
	actual := fcrc32CompHeader + len(payload)
	lenByte := 0
	if fcrc32NeedsLenByte(algo) {
		lenByte = 1
	}
	rounded := (actual + lenByte + fcrc32ChecksumSz + 255) &^ 255
	if rounded >= size {
		return 0, nil
	}
	copy(dst[fcrc32CompHeader:], payload)
	clear(dst[actual:])
	dst[offType] = 0x80
	dst[offType+1] = byte(rounded >> 8)
	if lenByte != 0 {
		dst[rounded-5] = byte(actual + 5)
	}
	binary.BigEndian.PutUint32(dst[rounded-4:], crc32c(dst[:rounded-4]))
	return rounded, nil
}

// compressLegacy compresses frame (dst, a copy of the page) in place into the legacy
// page_compressed layout; 0 if it does not fit.
func compressLegacy(dst []byte, algo PageAlgorithm, level int, encrypted bool, pool *sync.Pool) (int, error) {
	header := compHeader
	if encrypted {
		header = compHeaderEnc
	}
	payload, err := deflate(dst, algo, level, len(dst)-header, pool)
	if err != nil || payload == nil {
		return 0, err
	}
	binary.BigEndian.PutUint32(dst[offChecksum:], noChecksum)
	binary.BigEndian.PutUint64(dst[offKeyVersion:], uint64(algo))
	if encrypted {
		binary.BigEndian.PutUint16(dst[offType:], typePageCompressedEncrypted)
		binary.BigEndian.PutUint16(dst[offCompAlgoEnc:], uint16(algo))
	} else {
		binary.BigEndian.PutUint16(dst[offType:], typePageCompressed)
	}
	binary.BigEndian.PutUint16(dst[offCompLen:], uint16(len(payload)))
	copy(dst[header:], payload)
	clear(dst[header+len(payload):])
	return header + len(payload), nil
}

// deflate compresses page with algo and returns the stream, nil if it is longer than
// limit or the algorithm is one ferry does not write. pool (nil: none) keeps zlib
// writers of this level.
func deflate(page []byte, algo PageAlgorithm, level, limit int, pool *sync.Pool) ([]byte, error) {
	var out []byte
	switch algo {
	case AlgoZlib:
		zw, err := getZlibWriter(pool, level)
		if err != nil {
			return nil, err
		}
		out, err = zw.compress(page)
		out = append([]byte(nil), out...) // the buffer goes back to the pool
		putZlibWriter(pool, zw)
		if err != nil {
			return nil, err
		}
	case AlgoLZ4:
		buf := make([]byte, lz4.CompressBlockBound(len(page)))
		n, err := lz4.CompressBlock(page, buf, nil)
		if err != nil || n == 0 {
			return nil, err
		}
		out = buf[:n]
	case AlgoSnappy:
		out = snappy.Encode(nil, page)
	case AlgoLZMA:
		// An .xz stream without check, as lzma_easy_buffer_encode(LZMA_CHECK_NONE)
		// writes; the level has no counterpart here.
		var b bytes.Buffer
		w, err := xz.WriterConfig{DictCap: len(page), NoCheckSum: true}.NewWriter(&b)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(page); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		out = b.Bytes()
	default:
		return nil, nil
	}
	if len(out) > limit {
		return nil, nil
	}
	return out, nil
}

// setFullCRC32Trailer puts the low half of FIL_PAGE_LSN into bytes S-8..S-5 of a
// full_crc32 page (FIL_PAGE_FCRC32_END_LSN), as the server does before it compresses,
// encrypts or checksums a page.
func setFullCRC32Trailer(page []byte) {
	copy(page[len(page)-8:len(page)-4], page[offLSN+4:offLSN+8])
}

// zlibWriter is a zlib writer with its output buffer, kept for reuse.
type zlibWriter struct {
	w   *zlib.Writer
	buf bytes.Buffer
}

func getZlibWriter(pool *sync.Pool, level int) (*zlibWriter, error) {
	if pool != nil {
		if zw, ok := pool.Get().(*zlibWriter); ok {
			return zw, nil
		}
	}
	zw := &zlibWriter{}
	w, err := zlib.NewWriterLevel(&zw.buf, level)
	if err != nil {
		return nil, err
	}
	zw.w = w
	return zw, nil
}

func putZlibWriter(pool *sync.Pool, zw *zlibWriter) {
	if pool != nil {
		pool.Put(zw)
	}
}

// compress returns the zlib stream of page, in zw's buffer.
func (zw *zlibWriter) compress(page []byte) ([]byte, error) {
	zw.buf.Reset()
	zw.w.Reset(&zw.buf)
	if _, err := zw.w.Write(page); err != nil {
		return nil, err
	}
	if err := zw.w.Close(); err != nil {
		return nil, err
	}
	return zw.buf.Bytes(), nil
}
