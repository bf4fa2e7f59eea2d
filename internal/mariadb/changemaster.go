package mariadb

import (
	"strconv"
	"strings"
)

// ChangeMaster is a CHANGE MASTER TO statement: where a replica reads its source and
// from where. An empty field is left out of the statement (the server keeps its value).
type ChangeMaster struct {
	Connection   string // multi-source connection name; "" the default connection
	Host         string
	Port         int
	User         string
	Password     string // written with User, empty or not: an account without one
	LogFile      string // the source's binlog to start in; LogPos is written with it
	LogPos       uint64
	UseGTID      string // MASTER_USE_GTID: slave_pos, current_pos or no
	RelayLogFile string // the relay log to apply from; RelayLogPos is written with it
	RelayLogPos  uint64
	ConnectRetry int // seconds between the IO thread's connection attempts
}

// option is one "NAME=value" of the statement: text is the value written in, arg the
// value a placeholder stands for (nil for a keyword, always written in).
type option struct {
	name, text string
	arg        any
}

// options are the statement's set options, in the order the statement lists them.
func (c ChangeMaster) options() []option {
	var o []option
	str := func(set bool, name, v string) {
		if set {
			o = append(o, option{name, quote(v), v})
		}
	}
	num := func(set bool, name string, v uint64) {
		if set {
			o = append(o, option{name, strconv.FormatUint(v, 10), v})
		}
	}
	str(c.Host != "", "MASTER_HOST", c.Host)
	num(c.Port != 0, "MASTER_PORT", uint64(c.Port))
	str(c.User != "", "MASTER_USER", c.User)
	str(c.User != "", "MASTER_PASSWORD", c.Password)
	str(c.LogFile != "", "MASTER_LOG_FILE", c.LogFile)
	num(c.LogFile != "", "MASTER_LOG_POS", c.LogPos)
	if c.UseGTID != "" {
		o = append(o, option{"MASTER_USE_GTID", c.UseGTID, nil})
	}
	str(c.RelayLogFile != "", "RELAY_LOG_FILE", c.RelayLogFile)
	num(c.RelayLogFile != "", "RELAY_LOG_POS", c.RelayLogPos)
	num(c.ConnectRetry != 0, "MASTER_CONNECT_RETRY", uint64(c.ConnectRetry))
	return o
}

// SQL is the statement with its values written in, without a final semicolon: for a
// person to run, or a file.
func (c ChangeMaster) SQL() string {
	q, _ := c.render(true)
	return q
}

// Prepared is the statement with a placeholder for each value, and the values, to
// run through database/sql.
func (c ChangeMaster) Prepared() (string, []any) {
	return c.render(false)
}

func (c ChangeMaster) render(inline bool) (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString(c.head())
	for i, o := range c.options() {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + o.name + "=")
		if inline || o.arg == nil {
			b.WriteString(o.text)
			continue
		}
		b.WriteString("?")
		args = append(args, o.arg)
	}
	return b.String(), args
}

// head is the statement up to its options: CHANGE MASTER ['connection'] TO.
func (c ChangeMaster) head() string {
	if c.Connection == "" {
		return "CHANGE MASTER TO"
	}
	return "CHANGE MASTER " + quote(c.Connection) + " TO"
}

// quote is s as an SQL string literal.
func quote(s string) string { return QuoteString(s) }

// QuoteString is s as a single-quoted SQL string literal for the default sql_mode
// (backslashes are escapes): every backslash doubled, every quote doubled.
func QuoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// ReplicaSetup is what makes a server a replica from the GTID position gtid with c:
// the statements, each ending in a semicolon, for a person to run on it.
func ReplicaSetup(gtid string, c ChangeMaster) []string {
	return []string{
		"SET GLOBAL gtid_slave_pos = " + quote(gtid) + ";",
		c.SQL() + ";",
		"START SLAVE;",
	}
}
