package innodb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPageCompRoundTrip: for every algorithm ferry writes, in both formats,
// CompressPage writes the server's layout and DecompressPage gives the page back;
// Checker accepts both images.
func TestPageCompRoundTrip(t *testing.T) {
	for _, algo := range []PageAlgorithm{AlgoZlib, AlgoLZ4, AlgoSnappy, AlgoLZMA} {
		fc := SpaceFlags(fcrc32Marker | 5 | uint32(algo)<<fcrc32AlgoShift)
		for _, flags := range []SpaceFlags{fc, flagsLegacyPC} {
			plain := testPage(flags, 12, 777, uint64(algo))
			comp := make([]byte, len(plain))
			n, err := CompressPage(comp, plain, flags, 7, 12, CompressOptions{Algorithm: algo, Level: 1})
			if err != nil || n == 0 || n >= len(plain) {
				t.Fatalf("%s %#x: compress: %d %v", algo, flags, n, err)
			}
			if !IsZero(comp[n:]) {
				t.Errorf("%s %#x: bytes after the image are not zero", algo, flags)
			}
			if flags.FullCRC32() {
				if n%256 != 0 || comp[offType] != 0x80 || int(comp[offType+1]) != n>>8 {
					t.Errorf("%s: full_crc32 header %x, length %d", algo, comp[offType:offType+2], n)
				}
			} else if be32(comp, offChecksum) != noChecksum || PageType(comp) != typePageCompressed ||
				binary.BigEndian.Uint64(comp[offKeyVersion:]) != uint64(algo) {
				t.Errorf("%s: legacy header %x", algo, comp[:offData+2])
			}
			h := SpaceHeader{Flags: flags}
			if err := NewChecker(h, false).Check(comp, 12); err != nil {
				t.Errorf("%s %#x: Checker refuses the compressed page: %v", algo, flags, err)
			}
			back := make([]byte, len(plain))
			if ok, err := DecompressPage(back, comp, flags); !ok || err != nil {
				t.Fatalf("%s %#x: decompress: %v %v", algo, flags, ok, err)
			}
			if i := firstDiff(back, plain); i >= 0 {
				t.Errorf("%s %#x: round trip differs at byte %d", algo, flags, i)
			}
			if ok, err := DecompressPage(comp, comp, flags); !ok || err != nil || firstDiff(comp, plain) >= 0 {
				t.Errorf("%s %#x: in-place decompress: %v %v", algo, flags, ok, err)
			}
		}
	}
}

// TestPageCompStoredPlain: pages the server never compresses, pages that do not
// compress, and algorithms ferry cannot write are stored uncompressed.
func TestPageCompStoredPlain(t *testing.T) {
	p := testPage(flagsFCRC32PC, 3, 5, 9)
	out := make([]byte, len(p))
	for _, typ := range []uint16{typeAllocated, typeFSPHdr, typeXDES} {
		q := append([]byte(nil), p...)
		binary.BigEndian.PutUint16(q[offType:], typ)
		if n, err := CompressPage(out, q, flagsFCRC32PC, 7, 3, CompressOptions{}); n != 0 || err != nil || firstDiff(out, q) >= 0 {
			t.Errorf("type %d: compressed (%d %v)", typ, n, err)
		}
	}
	if n, _ := CompressPage(out, p, flagsFCRC32PC, 7, 0, CompressOptions{}); n != 0 {
		t.Error("page 0 was compressed")
	}
	if n, _ := CompressPage(out, p, flagsFCRC32PC, 0, 5, CompressOptions{}); n != 0 {
		t.Error("TRX_SYS was compressed")
	}
	noise := append([]byte(nil), p...)
	r := rand.New(rand.NewPCG(1, 2))
	for i := offData; i < len(noise)-8; i++ {
		noise[i] = byte(r.Uint32())
	}
	for _, flags := range []SpaceFlags{flagsFCRC32PC, flagsLegacyPC} {
		if n, err := CompressPage(out, noise, flags, 7, 3, CompressOptions{}); n != 0 || err != nil {
			t.Errorf("%#x: an incompressible page was stored compressed (%d %v)", flags, n, err)
		}
	}
	if n, err := CompressPage(out, p, flagsLegacyPC, 7, 3, CompressOptions{Algorithm: AlgoBzip2}); n != 0 || err != nil {
		t.Errorf("bzip2: %d %v", n, err)
	}
}

// TestPageCompRefuses: unknown or unsupported algorithms and damaged headers are
// errors; a page that is not compressed is copied.
func TestPageCompRefuses(t *testing.T) {
	plain := testPage(flagsLegacyPC, 3, 5, 1)
	comp := make([]byte, len(plain))
	CompressPage(comp, plain, flagsLegacyPC, 7, 3, CompressOptions{})
	out := make([]byte, len(plain))
	if ok, err := DecompressPage(out, plain, flagsLegacyPC); ok || err != nil || firstDiff(out, plain) >= 0 {
		t.Errorf("a plain page: %v %v", ok, err)
	}
	bad := append([]byte(nil), comp...)
	bad[offKeyVersion+7] = byte(AlgoLZO)
	if _, err := DecompressPage(out, bad, flagsLegacyPC); !errors.Is(err, ErrAlgorithm) {
		t.Errorf("lzo: %v", err)
	}
	bad = append([]byte(nil), comp...)
	binary.BigEndian.PutUint16(bad[offCompLen:], 60000)
	if _, err := DecompressPage(out, bad, flagsLegacyPC); err == nil {
		t.Error("an oversized payload length was accepted")
	}
	bad = append([]byte(nil), comp...)
	bad[offData+10] ^= 0xFF
	if _, err := DecompressPage(out, bad, flagsLegacyPC); err == nil {
		t.Error("a damaged zlib stream was accepted")
	}
	fc := testPage(flagsFCRC32PC, 3, 5, 1)
	CompressPage(comp, fc, flagsFCRC32PC, 7, 3, CompressOptions{})
	comp[100] ^= 1
	if _, err := DecompressPage(out, comp, flagsFCRC32PC); err == nil {
		t.Error("a full_crc32 image with a bad CRC was accepted")
	}
}

// TestSpaceCodecPageSizes: with 4 KiB and 64 KiB pages, in both formats, encrypted
// and page_compressed, Encode then Decode gives the page back, from several
// goroutines sharing one SpaceCodec.
func TestSpaceCodecPageSizes(t *testing.T) {
	for _, flags := range []SpaceFlags{
		SpaceFlags(fcrc32Marker | 3 | uint32(AlgoZlib)<<fcrc32AlgoShift),
		SpaceFlags(fcrc32Marker | 7 | uint32(AlgoLZ4)<<fcrc32AlgoShift),
		SpaceFlags(0x21 | 3<<legacySsizeShift | legacyPageComp),
		SpaceFlags(0x21 | 7<<legacySsizeShift | legacyPageComp),
	} {
		c := &SpaceCodec{SpaceID: 7, Flags: flags, Crypt: testCrypt(t, flags, "aes_cbc"), Encrypt: true, KeyVersion: 1}
		done := make(chan error, 4)
		for g := range 4 {
			go func() {
				for i := range 8 {
					no := uint32(3 + g*8 + i)
					plain := testPage(flags, no, uint64(1000+no), uint64(no))
					out, back := make([]byte, len(plain)), make([]byte, len(plain))
					n, err := c.Encode(out, plain, no)
					if err == nil && (n >= len(plain) || !c.Crypt.Encrypted(out, no)) {
						err = fmt.Errorf("page %d: image of %d bytes, key version %d", no, n, c.Crypt.KeyVersion(out))
					}
					if err == nil {
						_, err = c.Decode(back, out, no)
					}
					if err == nil && firstDiff(back, plain) >= 0 {
						err = fmt.Errorf("page %d: Decode(Encode(p)) differs at byte %d", no, firstDiff(back, plain))
					}
					if err != nil {
						done <- fmt.Errorf("%d-byte pages %#x: %w", len(plain), flags, err)
						return
					}
				}
				done <- nil
			}()
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
}
