package mysql

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Source is where a new replica replicates from.
type Source struct {
	Host, User, Password string
	Port                 int
}

var seriesRe = regexp.MustCompile(`^(\d+)\.(\d+)`)

// ReplicaSetup is the statements that make a server restored from a backup of server
// version a replica of src from the backup's gtid_executed, in that version's words:
// the binlog and GTID state reset (RESET MASTER before 8.2, RESET BINARY LOGS AND GTIDS
// from it), gtid_purged set to the backup's GTIDs, and CHANGE REPLICATION SOURCE TO
// with auto-position (8.0.23+; CHANGE MASTER is gone in 8.4).
func ReplicaSetup(version, gtid string, src Source) []string {
	reset := "RESET MASTER;"
	if m := seriesRe.FindStringSubmatch(version); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major > 8 || (major == 8 && minor >= 2) {
			reset = "RESET BINARY LOGS AND GTIDS;"
		}
	}
	return []string{
		reset,
		fmt.Sprintf("SET GLOBAL gtid_purged = '%s';", quote(gtid)),
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='%s', SOURCE_PORT=%d, SOURCE_USER='%s', SOURCE_PASSWORD='%s', SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1;",
			quote(src.Host), src.Port, quote(src.User), quote(src.Password)),
		"START REPLICA;",
	}
}

// quote escapes s for a single-quoted SQL string.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}
