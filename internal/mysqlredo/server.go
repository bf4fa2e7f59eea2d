package mysqlredo

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
)

// StatusLSN implements redo.ServerLSN for MySQL 8.0.30+ from SHOW GLOBAL STATUS
// (no privilege needed): Innodb_redo_log_flushed_to_disk_lsn bounds the copy,
// Innodb_redo_log_current_lsn dates errors.
type StatusLSN struct{ DB *sql.DB }

// LSNs returns the server's flushed and current redo LSNs.
func (s StatusLSN) LSNs(ctx context.Context) (flushed, current uint64, err error) {
	rows, err := s.DB.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_redo_log_%_lsn'")
	if err != nil {
		return 0, 0, fmt.Errorf("read the server's redo LSNs: %w", err)
	}
	defer rows.Close()
	vals := map[string]uint64{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return 0, 0, fmt.Errorf("read the server's redo LSNs: %w", err)
		}
		if v, err := strconv.ParseUint(value, 10, 64); err == nil {
			vals[name] = v
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("read the server's redo LSNs: %w", err)
	}
	flushed, ok1 := vals["Innodb_redo_log_flushed_to_disk_lsn"]
	current, ok2 := vals["Innodb_redo_log_current_lsn"]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("the server reports no Innodb_redo_log_flushed_to_disk_lsn/current_lsn status: not MySQL 8.0.30 or later")
	}
	return flushed, current, nil
}

// Consumer is a redo log consumer registered on one server session
// (innodb_redo_log_consumer_register, BACKUP_ADMIN): the server recycles no redo
// file at or after the consumer's LSN and, once its capacity is used up, stalls
// every write until the consumer advances. Checked on 8.0.31: registering twice on
// a session is accepted, Advance to a lower LSN is silently ignored, Advance beyond
// the server's current LSN is silently accepted (so only ever pass what is copied),
// and closing or killing the session unregisters the consumer.
type Consumer struct {
	conn *sql.Conn
	mu   sync.Mutex
	at   uint64
}

// RegisterConsumer registers a redo log consumer on conn, which must stay open
// (and be used for nothing else) until Unregister, at the server's current
// checkpoint: call it before Open so the checkpoint Open reads is protected.
func RegisterConsumer(ctx context.Context, conn *sql.Conn) (*Consumer, error) {
	// An empty sql_mode: the call fails under ANSI_QUOTES on some versions (PXB-3147).
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ''"); err != nil {
		return nil, fmt.Errorf("register redo log consumer: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "DO innodb_redo_log_consumer_register()"); err != nil {
		return nil, fmt.Errorf("register redo log consumer (needs BACKUP_ADMIN): %w", err)
	}
	return &Consumer{conn: conn}, nil
}

// Advance tells the server the consumer no longer needs the log below lsn. Pass
// Tailer.Copied() (Config.Advance = c.Advance): never more than is copied.
func (c *Consumer) Advance(ctx context.Context, lsn uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lsn <= c.at {
		return nil
	}
	if _, err := c.conn.ExecContext(ctx, "DO innodb_redo_log_consumer_advance("+strconv.FormatUint(lsn, 10)+")"); err != nil {
		return fmt.Errorf("advance redo log consumer: %w", err)
	}
	c.at = lsn
	return nil
}

// Unregister removes the consumer; the server may recycle every consumed file again.
func (c *Consumer) Unregister(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.conn.ExecContext(ctx, "DO innodb_redo_log_consumer_unregister()"); err != nil {
		return fmt.Errorf("unregister redo log consumer: %w", err)
	}
	return nil
}
