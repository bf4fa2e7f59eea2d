package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// WsrepPosition is where a Galera node's data stands in the cluster's history: the
// cluster state UUID, the seqno of the last write-set committed, and the node's
// wsrep_gtid_domain_id (0 when unknown).
type WsrepPosition struct {
	UUID   string `json:"uuid"`
	Seqno  int64  `json:"seqno"`
	Domain uint32 `json:"gtid_domain_id"`
}

// String is "uuid:seqno", Galera's GTID form.
func (p WsrepPosition) String() string { return fmt.Sprintf("%s:%d", p.UUID, p.Seqno) }

// Line is "uuid:seqno domain": xtrabackup_galera_info, and the last line an SST
// joiner prints.
func (p WsrepPosition) Line() string { return fmt.Sprintf("%s:%d %d", p.UUID, p.Seqno, p.Domain) }

// NilUUID is the UUID of a node that belongs to no cluster history.
const NilUUID = "00000000-0000-0000-0000-000000000000"

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ParseWsrepPosition reads "uuid:seqno", optionally followed by " domain" (an SST
// line, xtrabackup_galera_info) or ",gtid" (mariadbd --wsrep-recover with
// wsrep_gtid_mode). The seqno is -1 or more; a malformed position is an error.
func ParseWsrepPosition(s string) (WsrepPosition, error) {
	s = strings.TrimSpace(s)
	var p WsrepPosition
	head, domain, _ := strings.Cut(s, " ")
	head, _, _ = strings.Cut(head, ",")
	uuid, seqno, ok := strings.Cut(head, ":")
	if !ok || !uuidRe.MatchString(uuid) {
		return p, fmt.Errorf("%q is not a Galera position (uuid:seqno)", s)
	}
	n, err := strconv.ParseInt(seqno, 10, 64)
	if err != nil || n < -1 {
		return p, fmt.Errorf("%q is not a Galera position: bad seqno %q", s, seqno)
	}
	p.UUID, p.Seqno = strings.ToLower(uuid), n
	if domain = strings.TrimSpace(domain); domain != "" {
		d, err := strconv.ParseUint(domain, 10, 32)
		if err != nil {
			return p, fmt.Errorf("%q is not a Galera position: bad domain id %q", s, domain)
		}
		p.Domain = uint32(d)
	}
	return p, nil
}

// Known tells whether the position names a cluster history and a seqno in it.
func (p WsrepPosition) Known() bool { return p.UUID != "" && p.UUID != NilUUID && p.Seqno >= 0 }

// ReadWsrepPosition reads the node's Galera position (wsrep_local_state_uuid,
// wsrep_last_committed, wsrep_gtid_domain_id) on conn; nil when the server is not a
// Galera node (no provider loaded, or wsrep off). Read under BACKUP STAGE
// BLOCK_COMMIT, no commit can move it, so it is the position of the copy.
func ReadWsrepPosition(ctx context.Context, conn *sql.Conn) (*WsrepPosition, error) {
	rows, err := conn.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state_uuid', 'wsrep_last_committed')")
	if err != nil {
		return nil, fmt.Errorf("read the Galera position: %w", err)
	}
	status := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the Galera position: %w", err)
		}
		status[strings.ToLower(k)] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the Galera position: %w", err)
	}
	uuid := status["wsrep_local_state_uuid"]
	if uuid == "" || uuid == NilUUID {
		return nil, nil
	}
	p, err := ParseWsrepPosition(uuid + ":" + status["wsrep_last_committed"])
	if err != nil {
		return nil, fmt.Errorf("the server reports %w", err)
	}
	var domain sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.wsrep_gtid_domain_id").Scan(&domain); err != nil {
		return nil, fmt.Errorf("read wsrep_gtid_domain_id: %w", err)
	}
	p.Domain = uint32(domain.Int64)
	return &p, nil
}
