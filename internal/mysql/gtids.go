package mysql

import (
	"bytes"
	"fmt"
	"io"
	"os"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// binlogMagic opens every binlog file.
var binlogMagic = []byte{0xfe, 'b', 'i', 'n'}

// BinlogGTIDs is set (a gtid_executed value) joined with the GTIDs the binlog file at
// path holds below pos: its Previous_gtids and the GTID of each transaction before
// pos. log_status reads the binlog position and gtid_executed under one lock, but a
// transaction already in the binlog (below the position) joins gtid_executed only once
// its commit stage ends: the binlog says it belongs to the end point, and the copy's
// recovery commits it.
func BinlogGTIDs(path string, pos uint64, set string) (string, error) {
	all, err := gomysql.ParseMysqlGTIDSet(set)
	if err != nil {
		return "", fmt.Errorf("gtid_executed %q: %w", clip(set), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	magic := make([]byte, len(binlogMagic))
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, binlogMagic) || pos < uint64(len(magic)) {
		return "", fmt.Errorf("%s is not a binlog file (or the position %d is not in it)", path, pos)
	}
	p := replication.NewBinlogParser()
	p.SetRawMode(false)
	add := func(e *replication.BinlogEvent) error {
		switch ev := e.Event.(type) {
		case *replication.PreviousGTIDsEvent:
			return all.Update(ev.GTIDSets)
		case *replication.GTIDEvent:
			next, err := ev.GTIDNext()
			if err != nil {
				return err
			}
			return all.Update(next.String())
		}
		return nil
	}
	if err := p.ParseReader(io.LimitReader(f, int64(pos)-int64(len(magic))), add); err != nil {
		return "", fmt.Errorf("read the GTIDs of %s up to %d: %w", path, pos, err)
	}
	return GTIDSet(all.String()), nil
}
