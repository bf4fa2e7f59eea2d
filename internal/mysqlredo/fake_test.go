package mysqlredo

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// fakeServer writes a synthetic 8.0.30 redo log into #ib_redoN files of a temp
// directory, rotating and recycling files like mysqld (a recycled file keeps its
// old blocks), and reports its LSNs. It appends chunk data bytes on every LSNs call,
// so the log grows while the tailer reads it (from the tailer's goroutine).
type fakeServer struct {
	t        *testing.T
	dir      string
	uuid     uint32
	fileSize int64 // bytes per file, header included
	keep     int   // files kept in use; older ones become spares
	files    []File
	spares   []string
	nextID   uint64
	lsn      uint64 // end of the written log: a data LSN
	total    uint64 // stop writing at this LSN
	chunk    int    // data bytes per LSNs call
	burst    int    // on this call number write burstLen data bytes at once
	burstLen int
	calls    int
	lie      uint64 // added to the flushed LSN reported (a server claiming more than is on disk)
	lieCalls int    // how many calls lie
	// afterWrite, if set, runs at the end of each LSNs call.
	afterWrite func()
	arch       *fakeArchive // archives the log written, if set
}

// newFakeServer creates a log whose first file starts at start (a multiple of
// 512) with a checkpoint at cp, written up to cp.
func newFakeServer(t *testing.T, fileSize int64, start, cp uint64) *fakeServer {
	t.Helper()
	dir := filepath.Join(t.TempDir(), DirName)
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, dir: dir, uuid: 0x4020edbd, fileSize: fileSize, keep: 8, lsn: start + blockHdrSize,
		total: 1 << 62, chunk: 10 << 10}
	s.newFile(start)
	s.writeTo(cp)
	s.checkpoint(cp)
	return s
}

// payload is the log byte at lsn.
func payload(lsn uint64) byte { return byte((lsn * 2654435761) >> 13) }

// firstRec is the first_rec_group the fake writes into the block starting at lsn.
func firstRec(lsn uint64) int { return blockHdrSize + int(blockNumber(lsn)%300) }

// fakeBlock builds the block starting at bs holding data up to end (a data LSN in
// the block, or beyond it for a full block).
func fakeBlock(bs, end uint64) []byte {
	b := make([]byte, BlockSize)
	hdr, epoch := blockHeader(bs)
	dataLen := BlockSize
	if end < bs+BlockSize {
		dataLen = int(end - bs)
	}
	binary.BigEndian.PutUint32(b, hdr)
	binary.BigEndian.PutUint16(b[4:], uint16(dataLen))
	binary.BigEndian.PutUint16(b[6:], uint16(firstRec(bs)))
	binary.BigEndian.PutUint32(b[8:], epoch)
	for i := blockHdrSize; i < min(dataLen, blockCRCOff); i++ {
		b[i] = payload(bs + uint64(i))
	}
	sealBlock(b)
	return b
}

// advanceLSN returns the data LSN n data bytes after lsn.
func advanceLSN(lsn uint64, n int) uint64 {
	for n > 0 {
		take := min(blockCRCOff-int(lsn%BlockSize), n)
		lsn, n = lsn+uint64(take), n-take
		if lsn%BlockSize == blockCRCOff {
			lsn += BlockSize - blockCRCOff + blockHdrSize
		}
	}
	return lsn
}

// LSNs implements redo.ServerLSN.
func (s *fakeServer) LSNs(context.Context) (uint64, uint64, error) {
	s.calls++
	n := s.chunk
	if s.calls == s.burst {
		n = s.burstLen
	}
	if s.lsn < s.total {
		s.writeTo(min(advanceLSN(s.lsn, n), s.total))
	}
	if s.arch != nil {
		s.arch.archive(false)
	}
	if s.afterWrite != nil {
		s.afterWrite()
	}
	flushed := s.lsn
	if s.lieCalls > 0 {
		s.lieCalls--
		flushed += s.lie
	}
	return flushed, s.lsn, nil
}

// writeTo writes the log from s.lsn up to end, block by block, into the files.
func (s *fakeServer) writeTo(end uint64) {
	for bs := s.lsn / BlockSize * BlockSize; bs <= end/BlockSize*BlockSize; bs += BlockSize {
		if bs >= s.files[len(s.files)-1].EndLSN {
			s.newFile(bs)
		}
		s.writeBlock(fakeBlock(bs, end), bs)
	}
	s.lsn = end
}

// writeBlock writes b where the block starting at bs lives.
func (s *fakeServer) writeBlock(b []byte, bs uint64) {
	f := s.fileOf(bs)
	if f == nil {
		s.t.Fatalf("fake: no file holds LSN %d", bs)
	}
	s.writeAt(f.Path, b, int64(HeaderSize+bs-f.StartLSN))
}

// fileOf returns the file in use holding lsn, or nil.
func (s *fakeServer) fileOf(lsn uint64) *File {
	for i := range s.files {
		if f := &s.files[i]; lsn >= f.StartLSN && lsn < f.EndLSN {
			return f
		}
	}
	return nil
}

func (s *fakeServer) writeAt(path string, b []byte, off int64) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		s.t.Fatal(err)
	}
}

// newFile puts the next file in use from start on: a recycled spare (keeping its
// old blocks) if there is one, else a new file. The previous file becomes full and
// files beyond keep become spares.
func (s *fakeServer) newFile(start uint64) {
	path := filepath.Join(s.dir, FileName(s.nextID))
	if len(s.spares) > 0 {
		if err := os.Rename(s.spares[0], path); err != nil {
			s.t.Fatal(err)
		}
		s.spares = s.spares[1:]
	} else if err := os.WriteFile(path, make([]byte, s.fileSize), 0o640); err != nil {
		s.t.Fatal(err)
	}
	if n := len(s.files); n > 0 {
		s.setFlags(&s.files[n-1], FlagFileFull)
	}
	f := File{ID: s.nextID, Path: path, Header: Header{Format: Format, UUID: s.uuid, StartLSN: start, Creator: "MySQL 8.0.31"},
		Size: s.fileSize, StartLSN: start, EndLSN: start + uint64(s.fileSize-HeaderSize)}
	s.writeAt(path, FileHeader(f.Header, 0), 0)
	s.files = append(s.files, f)
	s.nextID++
	for len(s.files) > s.keep {
		s.recycle()
	}
}

// setFlags rewrites a file's header block with flags.
func (s *fakeServer) setFlags(f *File, flags uint32) {
	f.Header.Flags = flags
	s.writeAt(f.Path, f.Header.Block(), 0)
}

// recycle renames the oldest file in use to a spare, keeping its contents.
func (s *fakeServer) recycle() {
	old := s.files[0]
	s.files = s.files[1:]
	spare := filepath.Join(s.dir, FileName(s.nextID+uint64(100+len(s.spares)))+"_tmp")
	if err := os.Rename(old.Path, spare); err != nil {
		s.t.Fatal(err)
	}
	s.spares = append(s.spares, spare)
}

// checkpoint writes checkpoint lsn into both checkpoint blocks of its file.
func (s *fakeServer) checkpoint(lsn uint64) {
	f := s.fileOf(lsn)
	s.writeAt(f.Path, checkpointBlock(lsn), checkpoint1)
	s.writeAt(f.Path, checkpointBlock(lsn), checkpoint2)
}

// wantLog returns the backup log a copy from checkpoint a to e should hold when
// the fake has written the log up to written: every block through the one of e.
func wantLog(h Header, a, e, written uint64, creator string) []byte {
	out := BackupHeader(h, a, creator)
	for bs := a / BlockSize * BlockSize; bs <= e/BlockSize*BlockSize; bs += BlockSize {
		out = append(out, fakeBlock(bs, written)...)
	}
	return out
}

// fakeArchive is fakeServer's redo log archive (an ArchiveSource): a 4 KiB zero
// header, then from the block of the LSN written when it starts, every block the
// fake has filled; Flush also writes the block being filled, which a later round
// writes again, full.
type fakeArchive struct {
	s       *fakeServer
	path    string
	start   uint64
	next    uint64 // the next block to archive
	flushes int
}

// startArchive starts archiving s from the block being written.
func (s *fakeServer) startArchive() *fakeArchive {
	a := &fakeArchive{s: s, path: filepath.Join(s.t.TempDir(), "archive.fake.000001.log"), start: s.lsn / BlockSize * BlockSize}
	a.next = a.start
	if err := os.WriteFile(a.path, make([]byte, ArchiveHeaderSize), 0o440); err != nil {
		s.t.Fatal(err)
	}
	s.arch = a
	return a
}

func (a *fakeArchive) Path() string { return a.path }

func (a *fakeArchive) Flush(context.Context) error {
	a.flushes++
	a.archive(true)
	return nil
}

// archive appends the blocks filled since the last call, and the partial one too.
func (a *fakeArchive) archive(partial bool) {
	for ; a.next+BlockSize <= a.s.lsn; a.next += BlockSize {
		a.write(a.next)
	}
	if partial {
		a.write(a.next)
	}
}

func (a *fakeArchive) write(bs uint64) {
	f, err := os.OpenFile(a.path, os.O_WRONLY, 0)
	if err != nil {
		a.s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(fakeBlock(bs, a.s.lsn), int64(ArchiveHeaderSize+bs-a.start)); err != nil {
		a.s.t.Fatal(err)
	}
}
