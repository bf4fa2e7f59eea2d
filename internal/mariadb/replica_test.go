package mariadb

import "testing"

// TestSlaveInfo: xtrabackup_slave_info as mariadb-backup writes it, by GTID when the
// replica has a gtid_slave_pos, by file and position otherwise, nothing for a primary.
func TestSlaveInfo(t *testing.T) {
	src := []ReplicaSource{{Host: "db1", Port: 3306, File: "mysql-bin.000004", Pos: 1234}, {Connection: "it's", Host: "db2", Port: 3307, File: "b.000001", Pos: 4}}
	cases := []struct {
		c    Coordinates
		want string
	}{
		{Coordinates{GTIDSlavePos: "0-1-5"}, ""},
		{Coordinates{GTIDSlavePos: "0-1-5,1-2-9", Sources: src},
			"SET GLOBAL gtid_slave_pos = '0-1-5,1-2-9';\nCHANGE MASTER TO master_use_gtid = slave_pos;\nCHANGE MASTER 'it''s' TO master_use_gtid = slave_pos;\n"},
		{Coordinates{Sources: src[:1]}, "CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000004', MASTER_LOG_POS=1234;\n"},
	}
	for _, c := range cases {
		if got := string(SlaveInfo(c.c)); got != c.want {
			t.Errorf("SlaveInfo(%+v) = %q, want %q", c.c, got, c.want)
		}
	}
}
