package mariadb

import (
	"reflect"
	"testing"
)

// TestChangeMaster: each statement ferry writes, written in and with placeholders; the
// written-in forms are the texts ferry printed and ran before they had one renderer.
func TestChangeMaster(t *testing.T) {
	cases := []struct {
		name     string
		c        ChangeMaster
		sql      string
		prepared string
		args     []any
	}{
		{"clone's advice", ChangeMaster{Host: "db1", Port: 3306, User: "repl", Password: "<password>", UseGTID: "slave_pos"},
			"CHANGE MASTER TO MASTER_HOST='db1', MASTER_PORT=3306, MASTER_USER='repl', MASTER_PASSWORD='<password>', MASTER_USE_GTID=slave_pos",
			"CHANGE MASTER TO MASTER_HOST=?, MASTER_PORT=?, MASTER_USER=?, MASTER_PASSWORD=?, MASTER_USE_GTID=slave_pos",
			[]any{"db1", uint64(3306), "repl", "<password>"}},
		{"a clone that starts replicating", ChangeMaster{Host: "10.0.0.1", Port: 3307, User: "r", Password: "it's", UseGTID: "slave_pos", ConnectRetry: 5},
			"CHANGE MASTER TO MASTER_HOST='10.0.0.1', MASTER_PORT=3307, MASTER_USER='r', MASTER_PASSWORD='it''s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=5",
			"CHANGE MASTER TO MASTER_HOST=?, MASTER_PORT=?, MASTER_USER=?, MASTER_PASSWORD=?, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=?",
			[]any{"10.0.0.1", uint64(3307), "r", "it's", uint64(5)}},
		{"slave info by position", ChangeMaster{Connection: "it's", LogFile: "mysql-bin.000004", LogPos: 1234},
			"CHANGE MASTER 'it''s' TO MASTER_LOG_FILE='mysql-bin.000004', MASTER_LOG_POS=1234",
			"CHANGE MASTER 'it''s' TO MASTER_LOG_FILE=?, MASTER_LOG_POS=?",
			[]any{"mysql-bin.000004", uint64(1234)}},
		{"replay of relay logs", ChangeMaster{Host: "ferry-binlog-archive", UseGTID: "no", RelayLogFile: "relay.000001", RelayLogPos: 4},
			"CHANGE MASTER TO MASTER_HOST='ferry-binlog-archive', MASTER_USE_GTID=no, RELAY_LOG_FILE='relay.000001', RELAY_LOG_POS=4",
			"CHANGE MASTER TO MASTER_HOST=?, MASTER_USE_GTID=no, RELAY_LOG_FILE=?, RELAY_LOG_POS=?",
			[]any{"ferry-binlog-archive", "relay.000001", uint64(4)}},
		{"an empty password is written with its user", ChangeMaster{Host: "db1", Port: 3306, User: "repl"},
			"CHANGE MASTER TO MASTER_HOST='db1', MASTER_PORT=3306, MASTER_USER='repl', MASTER_PASSWORD=''",
			"CHANGE MASTER TO MASTER_HOST=?, MASTER_PORT=?, MASTER_USER=?, MASTER_PASSWORD=?",
			[]any{"db1", uint64(3306), "repl", ""}},
		{"position 0 of a file is written", ChangeMaster{LogFile: "b.000001"},
			"CHANGE MASTER TO MASTER_LOG_FILE='b.000001', MASTER_LOG_POS=0",
			"CHANGE MASTER TO MASTER_LOG_FILE=?, MASTER_LOG_POS=?",
			[]any{"b.000001", uint64(0)}},
	}
	for _, c := range cases {
		if got := c.c.SQL(); got != c.sql {
			t.Errorf("%s: SQL() = %q, want %q", c.name, got, c.sql)
		}
		q, args := c.c.Prepared()
		if q != c.prepared || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s: Prepared() = %q %#v, want %q %#v", c.name, q, args, c.prepared, c.args)
		}
	}
}

// TestReplicaSetup: the three statements printed for a person to make a server a replica.
func TestReplicaSetup(t *testing.T) {
	got := ReplicaSetup("0-1-5", ChangeMaster{Host: "<source host>", Port: 3306, User: "<repl user>", Password: "<password>", UseGTID: "slave_pos"})
	want := []string{
		"SET GLOBAL gtid_slave_pos = '0-1-5';",
		"CHANGE MASTER TO MASTER_HOST='<source host>', MASTER_PORT=3306, MASTER_USER='<repl user>', MASTER_PASSWORD='<password>', MASTER_USE_GTID=slave_pos;",
		"START SLAVE;",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReplicaSetup = %q, want %q", got, want)
	}
}
