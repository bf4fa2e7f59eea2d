package redo

import (
	"bytes"
	"fmt"
)

// FileOpKind is the kind of a file-level redo record.
type FileOpKind int

// File-level record kinds, in the order of their record types
// FILE_CREATE (0x80), FILE_DELETE (0x90), FILE_RENAME (0xA0), FILE_MODIFY (0xB0).
const (
	FileCreate FileOpKind = iota // a tablespace file was created (CREATE TABLE, rebuild, TRUNCATE)
	FileDelete                   // a tablespace file is about to be deleted
	FileRename                   // a tablespace file is about to be renamed
	FileModify                   // a tablespace is modified for the first time since the latest checkpoint
)

// String returns the record name, e.g. "FILE_CREATE".
func (k FileOpKind) String() string {
	switch k {
	case FileCreate:
		return "FILE_CREATE"
	case FileDelete:
		return "FILE_DELETE"
	case FileRename:
		return "FILE_RENAME"
	case FileModify:
		return "FILE_MODIFY"
	}
	return fmt.Sprintf("FileOpKind(%d)", int(k))
}

// FileOp is one file-level record found in the copied redo log.
type FileOp struct {
	Kind    FileOpKind
	SpaceID uint32
	Name    string // file name as logged, e.g. "./db/t.ibd"
	NewName string // FileRename only: the new name
	LSN     uint64 // start LSN of the mini-transaction holding the record
}

// File-level record types (bits 7..4 of the record byte).
const (
	recFileCreate     = 0x80
	recFileDelete     = 0x90
	recFileRename     = 0xA0
	recFileModify     = 0xB0
	recFileCheckpoint = 0xF0
)

// mtrFileOps returns the file-level records of the valid mini-transaction b (parsed
// as m), decrypting its records with c if the log is FormatKey (c is nil otherwise).
func mtrFileOps(b []byte, m mtr, lsn uint64, c *LogCrypt) ([]FileOp, error) {
	recs := b[:m.seq]
	if c != nil && recs[0]&0x80 != 0 {
		var err error
		if recs, err = c.Decrypt(recs, b[m.seq+1:m.size-4]); err != nil {
			return nil, fmt.Errorf("LSN %d: %w", lsn, err)
		}
	}
	return fileOps(recs, lsn)
}

// fileOps returns the file-level records of a valid mini-transaction whose
// record bytes (up to, not including, the sequence byte) are recs and whose
// first byte has LSN lsn. File-level records are the leading records with
// the high bit set; once a page record appears, a set high bit means "same
// page" instead.
func fileOps(recs []byte, lsn uint64) ([]FileOp, error) {
	var ops []FileOp
	for p := 0; p < len(recs) && recs[p]&0x80 != 0; {
		n, st := recordLen(recs[p:])
		if st.status != mtrOK || p+n > len(recs) {
			return nil, fmt.Errorf("file-level record at LSN %d: bad length", lsn)
		}
		typ := recs[p] & 0xF0
		if typ != recFileCheckpoint {
			op, err := parseFileOp(typ, recordBody(recs[p:p+n]), lsn)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
		p += n
	}
	return ops, nil
}

// recordBody returns the bytes of record r after its header byte and, for
// the long form, after its length varint.
func recordBody(r []byte) []byte { return r[recordHeaderLen(r):] }

// parseFileOp decodes the body of a FILE_CREATE/DELETE/RENAME/MODIFY record:
// varint space id, varint page number (0), then the name(s).
func parseFileOp(typ byte, body []byte, lsn uint64) (FileOp, error) {
	bad := func(what string) (FileOp, error) {
		return FileOp{}, fmt.Errorf("malformed file-level record %#02x at LSN %d: %s", typ, lsn, what)
	}
	if typ < recFileCreate || typ > recFileModify {
		return bad("unknown type")
	}
	space, n := decodeVarint(body)
	if n == 0 || n > len(body) || space == 0 || space > 0xFFFFFFFF {
		return bad("space id")
	}
	page, m := decodeVarint(body[n:])
	if m == 0 || n+m > len(body) || page != 0 {
		return bad("page number")
	}
	op := FileOp{Kind: FileOpKind((typ - recFileCreate) >> 4), SpaceID: uint32(space), LSN: lsn}
	name := body[n+m:]
	i := bytes.IndexByte(name, 0)
	if (i >= 0) != (typ == recFileRename) {
		return bad("file name")
	}
	if i < 0 {
		op.Name = string(name)
		return op, nil
	}
	op.Name, op.NewName = string(name[:i]), string(name[i+1:])
	if op.Name == "" || op.NewName == "" || bytes.IndexByte(name[i+1:], 0) >= 0 {
		return bad("file names")
	}
	return op, nil
}
