package redo

import (
	"encoding/binary"
	"strings"
)

// BackupCreatorPrefix starts the creator of every backup log; the server
// then knows it starts on a restored backup (srv_start_after_restore).
const BackupCreatorPrefix = "Backup "

// BackupHeader returns the StartOffset bytes that begin a linear backup
// redo log holding the mini-transactions from cp.LSN on with every sequence
// byte set to 1: the header of h with first LSN cp.LSN and the given creator
// (prefixed with "Backup " if it lacks it, cut to 31 bytes), checkpoint block
// 1 = (cp.LSN, cp.EndLSN) and checkpoint block 2 zero.
func BackupHeader(h Header, cp Checkpoint, creator string) []byte {
	b := make([]byte, StartOffset)
	binary.BigEndian.PutUint32(b, h.Format)
	binary.BigEndian.PutUint64(b[8:], cp.LSN)
	if !strings.HasPrefix(creator, BackupCreatorPrefix) {
		creator = BackupCreatorPrefix + creator
	}
	copy(b[creatorOff:creatorOff+creatorLen-1], creator)
	if h.Encrypted() {
		copy(b[cryptOff:], h.Crypt[:])
	}
	binary.BigEndian.PutUint32(b[hdrCRCOff:], crc32c(b[:hdrCRCOff]))
	c := b[checkpoint1:]
	binary.BigEndian.PutUint64(c, cp.LSN)
	binary.BigEndian.PutUint64(c[8:], cp.EndLSN)
	binary.BigEndian.PutUint32(c[cpCRCOff:], crc32c(c[:cpCRCOff]))
	return b
}
