package archiver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

// stage is where in a session an error came from: connecting, the SQL connection
// that lists the server's binlogs, or the replication connection that dumps them.
type stage int

const (
	stageConnect stage = iota
	stageQuery
	stageDump
)

// MariaDB's error numbers the archiver tells apart.
const (
	errDBAccessDenied     = 1044 // ER_DBACCESS_DENIED_ERROR
	errAccessDenied       = 1045 // ER_ACCESS_DENIED_ERROR
	errTableAccessDenied  = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errColumnAccessDenied = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	errSpecificAccess     = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR: "you need (at least one of) the X privilege(s)"
	errMasterFatalRead    = 1236 // ER_MASTER_FATAL_ERROR_READING_BINLOG
	errAccessDeniedNoPass = 1698 // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
)

// serverError is the error number and message the server answered with, from either
// client library (go-sql-driver for queries, go-mysql for the binlog dump).
func serverError(err error) (code uint16, msg string, ok bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, me.Message, true
	}
	var ge *gomysql.MyError
	if errors.As(err, &ge) {
		return ge.Code, ge.Message, true
	}
	return 0, "", false
}

// classify marks the errors no reconnection can mend as permanent (backoff.Permanent),
// each with one line saying what to do; account is the archiver's user as the server
// knows it ('user'@'host'). Every other error is returned as it is: retried.
//
// A missing privilege is permanent wherever it shows. At the dump, MariaDB answers a
// user without REPLICATION SLAVE with 1045 ("Access denied for user"), not 1227: the
// password was accepted a moment before by the same server, so 1045 there is the grant.
// 1236 (the server cannot send from the position asked) is retried, but for an event
// larger than the server's max_allowed_packet: the next session checks the archive
// against the server's binlogs again, recording a gap when a file was purged and
// stopping when another server is behind the address; Run stops when the same 1236
// repeats. At connect, the refusals no retry mends are those mariadb.Open marks
// (mariadb.ErrRefused: the account, its host, its password or its authentication);
// its one line already says what to do. A server that is down, starting or out of
// connections is retried.
func classify(err error, st stage, account string) error {
	if st == stageConnect {
		if errors.Is(err, mariadb.ErrRefused) {
			return backoff.Permanent(err)
		}
		return err
	}
	code, msg, ok := serverError(err)
	if !ok || backoff.IsPermanent(err) {
		return err
	}
	switch {
	case st == stageDump && (code == errAccessDenied || code == errAccessDeniedNoPass || code == errSpecificAccess):
		return missingGrant("REPLICATION SLAVE", "the binlog dump", account, msg)
	case code == errSpecificAccess:
		return missingGrant(privilegeIn(msg, "BINLOG MONITOR"), "reading the server's binlog list", account, msg)
	case code == errAccessDenied || code == errAccessDeniedNoPass:
		return backoff.Permanent(setting.Errorf("the server refused %s (%s): check %s and the password", account, msg, setting.User))
	case code == errMasterFatalRead && strings.Contains(msg, "max_allowed_packet"):
		return backoff.Permanent(fmt.Errorf("the server cannot send an event larger than its max_allowed_packet (%s): raise max_allowed_packet on the server", msg))
	case code == errDBAccessDenied || code == errTableAccessDenied || code == errColumnAccessDenied:
		return backoff.Permanent(fmt.Errorf("the server refused %s: %s: grant it REPLICATION SLAVE and BINLOG MONITOR (docs/binlog-archive.md)", account, msg))
	}
	return err
}

// missingGrant is the one line for a privilege the archiver's user lacks.
func missingGrant(priv, what, account, msg string) error {
	return backoff.Permanent(fmt.Errorf("the archiver's user %s lacks the %s privilege, which %s needs (the server said: %s): run GRANT %s ON *.* TO %s; and start the archiver again",
		account, priv, what, msg, priv, account))
}

// privilegeIn picks the privilege a 1227 message names ("you need (at least one of)
// the SUPER, BINLOG MONITOR privilege(s)"): the last one, the narrowest; def when the
// message names none.
func privilegeIn(msg, def string) string {
	_, list, ok := strings.Cut(msg, " the ")
	list, _, ok2 := strings.Cut(list, " privilege")
	if !ok || !ok2 {
		return def
	}
	names := strings.Split(list, ",")
	if p := strings.TrimSpace(names[len(names)-1]); p != "" {
		return p
	}
	return def
}

// isRepeatable reports whether err is a refusal worth a few more tries but not for
// ever: the server's 1236 at the dump.
func isRepeatable(err error) bool {
	code, _, ok := serverError(err)
	return ok && code == errMasterFatalRead
}
