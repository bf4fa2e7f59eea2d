package innodb

import (
	"encoding/binary"
	"testing"
)

// MariaDB 10.11 can no longer write the "innodb" and "none" checksums but still reads
// them outside strict modes. These tests re-stamp real crc32-format pages.

func TestCheckLegacyInnodbAndNoneChecksums(t *testing.T) {
	ps, c := checkerFor(t, "crc32.after.gz", 16384, false)
	for i, orig := range ps {
		p := append([]byte(nil), orig...)
		stamp := func(f1, f2 uint32) {
			binary.BigEndian.PutUint32(p[offChecksum:], f1)
			binary.BigEndian.PutUint32(p[len(p)-trailerLen:], f2)
		}
		stamp(foldNewChecksum(p), 0)
		stamp(foldNewChecksum(p), foldOldChecksum(p)) // the old checksum covers field 1
		if err := c.Check(p, uint32(i)); err != nil {
			t.Errorf("innodb checksum: %v", err)
		}
		p[200] ^= 1
		wantCorrupt(t, c.Check(p, uint32(i)), uint32(i), "innodb checksum, flipped")
		p[200] ^= 1
		stamp(noChecksum, noChecksum)
		if err := c.Check(p, uint32(i)); err != nil {
			t.Errorf("none checksum: %v", err)
		}
		stamp(legacyCRC32(p), noChecksum+1)
		wantCorrupt(t, c.Check(p, uint32(i)), uint32(i), "bad trailer checksum")
	}
}

func TestCheckZipAdlerAndNoneChecksums(t *testing.T) {
	ps, c := checkerFor(t, "zip.after.gz", 8192, false)
	for i, orig := range ps {
		p := append([]byte(nil), orig...)
		binary.BigEndian.PutUint32(p[offChecksum:], zipAdler32(p))
		if err := c.Check(p, uint32(i)); err != nil {
			t.Errorf("adler32: %v", err)
		}
		p[300] ^= 1
		wantCorrupt(t, c.Check(p, uint32(i)), uint32(i), "adler32, flipped")
		binary.BigEndian.PutUint32(p[offChecksum:], noChecksum)
		if err := c.Check(p, uint32(i)); err != nil {
			t.Errorf("none: %v", err)
		}
	}
}

func TestCheckZipZeroChecksumNonZeroPage(t *testing.T) {
	ps, c := checkerFor(t, "zip.after.gz", 8192, false)
	p := make([]byte, len(ps[2]))
	copy(p[offPageNo:offPageNo+4], ps[2][offPageNo:])
	p[1000] = 1
	wantCorrupt(t, c.Check(p, 2), 2, "zero checksum and LSN")
}

func TestIsZero(t *testing.T) {
	b := make([]byte, 16384+7)
	if !IsZero(b) || !IsZero(nil) {
		t.Fatal("zero buffer reported nonzero")
	}
	for _, i := range []int{0, 63, 64, 8191, 16384, 16390} {
		b[i] = 1
		if IsZero(b) {
			t.Errorf("byte %d set, reported zero", i)
		}
		b[i] = 0
	}
}

func TestPageAccessors(t *testing.T) {
	ps, _ := checkerFor(t, "fcrc32.after.gz", 16384, false)
	p := ps[3]
	if PageNo(p) != 3 || PageType(p) != 17855 || PageLSN(p) == 0 {
		t.Errorf("page %d type %d lsn %d", PageNo(p), PageType(p), PageLSN(p))
	}
	if uint32(PageLSN(p)) != binary.BigEndian.Uint32(p[len(p)-8:]) {
		t.Error("LSN low half differs from trailer")
	}
}

// TestZipAdler32FromZero: the server's "innodb" checksum of ROW_FORMAT=COMPRESSED
// pages is zlib's adler32 called with 0 as the running value, not Adler-32's 1.
func TestZipAdler32FromZero(t *testing.T) {
	ps, _ := checkerFor(t, "zip.after.gz", 8192, false)
	for _, p := range ps {
		var a, b uint32
		for _, r := range [][]byte{p[offPageNo:offLSN], p[offType : offType+2], p[offSpaceID:]} {
			for _, c := range r {
				a = (a + uint32(c)) % 65521
				b = (b + a) % 65521
			}
		}
		if got, want := zipAdler32(p), b<<16|a; got != want {
			t.Errorf("page %d: %#x, want %#x", PageNo(p), got, want)
		}
	}
}
