package mysqlredo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	logA uint64 = 1<<20 + 5000 // checkpoint of the test logs
	logH        = 0x1234       // their log_uuid
)

// makeLog builds a backup log from checkpoint a holding the blocks through the
// one of e as a server that wrote up to written leaves them.
func makeLog(a, e, written uint64) []byte {
	return wantLog(Header{Format: Format, UUID: logH, StartLSN: 1 << 20}, a, e, written, "xtrabkup test")
}

func scanBytes(b []byte) (uint64, uint64, error) {
	return ScanReader(bytes.NewReader(b), int64(len(b)))
}

func TestScan(t *testing.T) {
	full := advanceLSN(logA, 100000)
	full = full/BlockSize*BlockSize + BlockSize + blockHdrSize // every block up to full is full
	log := makeLog(logA, full-BlockSize, full)
	if a, end, err := scanBytes(log); err != nil || a != logA || end != full-blockHdrSize {
		t.Fatalf("Scan of whole blocks = %d, %d, %v; want %d, %d", a, end, err, logA, full-blockHdrSize)
	}
	e := advanceLSN(logA, 50000)
	part := makeLog(logA, e, e)
	if a, end, err := scanBytes(part); err != nil || a != logA || end != e {
		t.Fatalf("Scan of a partial end = %d, %d, %v; want %d, %d", a, end, err, logA, e)
	}
	flip := func(b []byte, off int) []byte {
		c := append([]byte{}, b...)
		c[off] ^= 0x10
		return c
	}
	blockOff := func(lsn uint64) int { return HeaderSize + int(lsn/BlockSize-logA/BlockSize)*BlockSize }
	for name, b := range map[string][]byte{
		"empty":               nil,
		"header only":         log[:HeaderSize],
		"truncated header":    log[:1000],
		"truncated in block":  log[:len(log)-100],
		"corrupt block":       flip(log, blockOff(logA+30000)+200),
		"corrupt header":      flip(log, 20),
		"both checkpoints":    flip(flip(log, checkpoint1+9), checkpoint2+9),
		"block after partial": append(append([]byte{}, part...), fakeBlock(e/BlockSize*BlockSize+BlockSize, e+BlockSize)...),
		"ends before A":       makeLog(logA, logA, logA/BlockSize*BlockSize+blockHdrSize),
		"missing block":       append(append([]byte{}, log[:blockOff(logA+20000)]...), log[blockOff(logA+20000)+BlockSize:]...),
	} {
		if _, _, err := scanBytes(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Scan = %v, want ErrCorrupt", name, err)
		}
	}
	// One damaged checkpoint block is tolerated, as by mysqld.
	if a, _, err := scanBytes(flip(log, checkpoint1+9)); err != nil || a != logA {
		t.Errorf("one damaged checkpoint: %d, %v", a, err)
	}
	path := filepath.Join(t.TempDir(), "xtrabackup_logfile")
	if err := os.WriteFile(path, part, 0o600); err != nil {
		t.Fatal(err)
	}
	if a, end, err := Scan(path); err != nil || a != logA || end != e {
		t.Fatalf("Scan(file) = %d, %d, %v", a, end, err)
	}
	if _, _, err := Scan(path + ".missing"); err == nil {
		t.Fatal("Scan of a missing file succeeded")
	}
}

// redoFiles reads the files WriteRedoDir wrote under dir.
func redoFiles(t *testing.T, dir string) ([]File, [][]byte) {
	t.Helper()
	files, err := ListFiles(filepath.Join(dir, DirName))
	if err != nil {
		t.Fatal(err)
	}
	var data [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	return files, data
}

func TestWriteRedoDir(t *testing.T) {
	written := advanceLSN(logA, 200000)
	e := advanceLSN(logA, 150000) // the copy holds more than E
	log := makeLog(logA, written, written)
	// A block written with innodb_log_checksums=OFF.
	off := HeaderSize + 40*BlockSize
	binary.BigEndian.PutUint32(log[off+blockCRCOff:], noChecksum)
	path := filepath.Join(t.TempDir(), "xtrabackup_logfile")
	if err := os.WriteFile(path, log, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteRedoDir(path, e, dir, "MySQL 8.0.31"); err != nil {
		t.Fatal(err)
	}
	files, data := redoFiles(t, dir)
	if len(files) != 1 || files[0].ID != 0 {
		t.Fatalf("files %+v", files)
	}
	f, b := files[0], data[0]
	first := logA / BlockSize * BlockSize
	n := int(e/BlockSize-first/BlockSize) + 1
	wantH := Header{Format: Format, UUID: logH, StartLSN: first, Creator: "MySQL 8.0.31"}
	if f.Header != wantH || f.Checkpoint != logA || f.Size%(1<<20) != 0 || f.Size < int64(HeaderSize+n*BlockSize+RedoSlack) {
		t.Fatalf("file %+v; want header %+v, checkpoint %d, size a MiB multiple >= %d", f, wantH, logA, HeaderSize+n*BlockSize+RedoSlack)
	}
	if cp, err := Checkpoint(filepath.Join(dir, DirName)); err != nil || cp != logA {
		t.Fatalf("Checkpoint = %d, %v", cp, err)
	}
	for _, off := range []int{checkpoint1, checkpoint2} {
		if lsn, err := ParseCheckpoint(b[off:]); err != nil || lsn != logA {
			t.Fatalf("checkpoint block at %d: %d, %v", off, lsn, err)
		}
	}
	if !bytes.Equal(b[2*BlockSize:3*BlockSize], make([]byte, BlockSize)) {
		t.Fatal("encryption header block is not zero")
	}
	for i := range n {
		lsn := first + uint64(i)*BlockSize
		blk := b[HeaderSize+i*BlockSize : HeaderSize+(i+1)*BlockSize]
		dl, err := CheckBlock(blk, lsn)
		if err != nil || binary.BigEndian.Uint32(blk[blockCRCOff:]) != crc32c(blk[:blockCRCOff]) {
			t.Fatalf("block %d: %v (or no CRC-32C)", i, err)
		}
		src := log[HeaderSize+i*BlockSize : HeaderSize+(i+1)*BlockSize]
		switch {
		case i < n-1 && (dl != BlockSize || !bytes.Equal(blk[:blockCRCOff], src[:blockCRCOff])):
			t.Fatalf("block %d differs from the copy", i)
		case i == n-1 && (dl != int(e%BlockSize) || !bytes.Equal(blk[blockHdrSize:dl], src[blockHdrSize:dl])):
			t.Fatalf("last block: data_len %d, want %d", dl, e%BlockSize)
		}
	}
	if !bytes.Equal(b[HeaderSize+n*BlockSize:], make([]byte, len(b)-HeaderSize-n*BlockSize)) {
		t.Fatal("no zeros after the last block")
	}
	if err := WriteRedoDir(path, e, dir, "MySQL 8.0.31"); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("second WriteRedoDir into the same datadir: %v", err)
	}
}

func TestWriteRedoDirRefusals(t *testing.T) {
	written := advanceLSN(logA, 20000)
	log := makeLog(logA, written, written)
	corrupt := append([]byte{}, log...)
	corrupt[HeaderSize+10*BlockSize+100] ^= 1
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "ib_logfile0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		log     []byte
		e       uint64
		dir     string
		creator string
	}{
		"beyond the copy":     {log, written + 1, "", ""},
		"next block":          {log, written/BlockSize*BlockSize + BlockSize + blockHdrSize, "", ""},
		"below A":             {log, logA - 1, "", ""},
		"not a data LSN":      {log, logA/BlockSize*BlockSize + BlockSize + 3, "", ""},
		"corrupt block":       {corrupt, written, "", ""},
		"old layout":          {log, written, old, ""},
		"long creator":        {log, written, "", strings.Repeat("c", 40)},
		"truncated":           {log[:len(log)-1], written, "", ""},
		"zero uuid":           {makeLogUUID(0, written), written, "", ""},
		"partial before end":  {makeLog(logA, written-1000, written-1000), written, "", ""},
		"no block of the end": {log[:len(log)-BlockSize], written, "", ""},
	} {
		dir := tc.dir
		if dir == "" {
			dir = t.TempDir()
		}
		err := WriteRedoDirFrom(bytes.NewReader(tc.log), int64(len(tc.log)), tc.e, dir, "MySQL 8.0.31"+tc.creator)
		if err == nil {
			t.Errorf("%s: WriteRedoDir succeeded", name)
			continue
		}
		if left, _ := filepath.Glob(filepath.Join(dir, DirName, "#ib_redo*")); len(left) > 0 {
			t.Errorf("%s: left %v behind", name, left)
		}
		t.Logf("%s: %v", name, err)
	}
}

// makeLogUUID is makeLog with another log_uuid.
func makeLogUUID(uuid uint32, written uint64) []byte {
	return wantLog(Header{Format: Format, UUID: uuid, StartLSN: 1 << 20}, logA, written, written, "x")
}

func TestWriteRedoDirSplit(t *testing.T) {
	written := advanceLSN(logA, 3<<20)
	e := advanceLSN(logA, 3<<20-1000)
	log := makeLog(logA, written, written)
	dir := t.TempDir()
	lo := layout{maxSize: 1 << 20, slack: 64 << 10}
	if err := writeRedoDir(bytes.NewReader(log), int64(len(log)), e, dir, "MySQL 8.0.31", lo); err != nil {
		t.Fatal(err)
	}
	files, data := redoFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d files, want the copy split in 1 MiB files", len(files))
	}
	next := logA / BlockSize * BlockSize
	for i, f := range files {
		last := i == len(files)-1
		wantFlags, wantCP := FlagFileFull, uint64(0)
		if last {
			wantFlags = 0
		}
		if i == 0 {
			wantCP = logA
		}
		if f.ID != uint64(i) || f.StartLSN != next || f.Header.Flags != wantFlags || f.Checkpoint != wantCP || f.Size > lo.maxSize {
			t.Fatalf("file %d: %+v", i, f)
		}
		next = f.EndLSN
		for off := HeaderSize; off < len(data[i]); off += BlockSize {
			lsn := f.StartLSN + uint64(off-HeaderSize)
			if lsn > e {
				break
			}
			if dl, err := CheckBlock(data[i][off:off+BlockSize], lsn); err != nil || (lsn == e/BlockSize*BlockSize) != (dl < BlockSize) {
				t.Fatalf("file %d block at LSN %d: data_len %d, %v", i, lsn, dl, err)
			}
		}
	}
	if l := files[len(files)-1]; l.EndLSN-e < uint64(lo.slack) {
		t.Fatalf("last file ends %d bytes after E, want >= %d", l.EndLSN-e, lo.slack)
	}
}

func TestPlanFiles(t *testing.T) {
	const first = 1 << 20
	for _, n := range []int64{1, 1000, (MaxFileSize - HeaderSize - RedoSlack) / BlockSize, (MaxFileSize - HeaderSize) / BlockSize,
		(40 << 30) / BlockSize, (400 << 30) / BlockSize} {
		plan, err := planFiles(first, n, defaultLayout())
		if err != nil {
			t.Fatalf("%d blocks: %v", n, err)
		}
		next, total := uint64(first), int64(0)
		for i, p := range plan {
			last := i == len(plan)-1
			if p.start != next || p.size > MaxFileSize || p.size < HeaderSize+p.blocks*BlockSize || p.blocks < 1 ||
				(!last && p.size != HeaderSize+p.blocks*BlockSize) || (last && (p.size%fileAlign != 0 || p.size-HeaderSize-p.blocks*BlockSize < RedoSlack)) {
				t.Fatalf("%d blocks: file %d of %d: %+v", n, i, len(plan), p)
			}
			next, total = next+uint64(p.blocks)*BlockSize, total+p.blocks
		}
		if total != n {
			t.Fatalf("%d blocks planned as %d", n, total)
		}
	}
	if _, err := planFiles(first, (500<<30)/BlockSize, defaultLayout()); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("500 GiB of redo: %v", err)
	}
}

func TestListFilesRefusesHugeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(0))
	if err := os.WriteFile(path, FileHeader(Header{Format: Format, UUID: 1, StartLSN: 8192}, 9000), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, MaxFileSize+HeaderSize+BlockSize); err != nil { // sparse
		t.Fatal(err)
	}
	if _, err := ListFiles(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ListFiles of a file over 16 GiB: %v", err)
	}
}
