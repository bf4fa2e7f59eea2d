package mariadb

import (
	"context"
	"database/sql"
	"fmt"
)

// Coordinates is the replication position of a backup, read under BLOCK_COMMIT. All GTID
// variables are kept: gtid_current_pos can miss domains the server did not author (it takes
// a domain from the binlog only if its last GTID has the server's own server_id, else from
// gtid_slave_pos: a domain applied by Galera is in neither), so replicas are seeded from
// GTIDBinlogPos.
type Coordinates struct {
	BinlogFile      string `json:"binlog_file,omitempty"`
	BinlogPos       uint64 `json:"binlog_pos,omitempty"`
	GTIDBinlogPos   string `json:"gtid_binlog_pos"`
	GTIDCurrentPos  string `json:"gtid_current_pos"`
	GTIDSlavePos    string `json:"gtid_slave_pos"`
	GTIDBinlogState string `json:"gtid_binlog_state"`
	// Galera is the node's position in its cluster's history, nil if it is not a
	// Galera node (xtrabackup_galera_info; what an SST joiner or a node seeded from
	// the backup starts from).
	Galera *WsrepPosition `json:"galera,omitempty"`
	// Sources are where the server replicated from, if it is a replica and the backup
	// asked (--slave-info): a new replica of the same source starts at GTIDSlavePos.
	Sources []ReplicaSource `json:"replica_of,omitempty"`
}

// ReplicaGTID is the position a replica of the backed-up server starts from.
func (c Coordinates) ReplicaGTID() string {
	if c.BinlogFile != "" {
		return c.GTIDBinlogPos
	}
	return c.GTIDCurrentPos
}

// ReadCoordinates reads SHOW MASTER STATUS, the GTID variables and, on a Galera node,
// its position on conn.
func ReadCoordinates(ctx context.Context, conn *sql.Conn) (Coordinates, error) {
	var c Coordinates
	rows, err := conn.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return c, fmt.Errorf("SHOW MASTER STATUS: %w", err)
	}
	cols, _ := rows.Columns()
	if rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return c, fmt.Errorf("SHOW MASTER STATUS: %w", err)
		}
		c.BinlogFile = string(vals[0])
		fmt.Sscan(string(vals[1]), &c.BinlogPos)
	}
	rows.Close()
	err = conn.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_current_pos, @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_binlog_state").
		Scan(&c.GTIDBinlogPos, &c.GTIDCurrentPos, &c.GTIDSlavePos, &c.GTIDBinlogState)
	if err != nil {
		return c, fmt.Errorf("read GTID variables: %w", err)
	}
	c.Galera, err = ReadWsrepPosition(ctx, conn)
	return c, err
}
