package mariadb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
)

// TestRetryWhileOpen: the SQL thread is stopped again while it has temporary tables
// open, until none are (success), the timeout (how many were open), a failed statement
// (at once) or the end of the context.
func TestRetryWhileOpen(t *testing.T) {
	const every = time.Millisecond
	opens := func(n ...int) (func(context.Context) error, *int) {
		tries := 0
		return func(context.Context) error {
			tries++
			if tries <= len(n) {
				return tempTablesOpen(n[tries-1])
			}
			return nil
		}, &tries
	}
	try, tries := opens(3, 2, 1)
	if open, err := retryWhileOpen(context.Background(), every, time.Minute, try); open != 0 || err != nil || *tries != 4 {
		t.Errorf("tables closing: open %d, err %v after %d tries; want 0, nil after 4", open, err, *tries)
	}
	always := func(context.Context) error { return tempTablesOpen(2) }
	if open, err := retryWhileOpen(context.Background(), every, 20*time.Millisecond, always); open != 2 || err != nil {
		t.Errorf("tables kept open: open %d, err %v; want 2, nil", open, err)
	}
	try, tries = opens(5)
	if open, err := retryWhileOpen(context.Background(), every, 0, try); open != 5 || err != nil || *tries != 1 {
		t.Errorf("no timeout: open %d, err %v after %d tries; want 5, nil after 1", open, err, *tries)
	}
	failed := errors.New("STOP SLAVE SQL_THREAD: denied")
	n := 0
	stmt := func(context.Context) error { n++; return backoff.Permanent(failed) }
	if open, err := retryWhileOpen(context.Background(), every, time.Minute, stmt); open != 0 || !errors.Is(err, failed) || n != 1 {
		t.Errorf("failed statement: open %d, err %v after %d tries; want 0, %v after 1", open, err, n, failed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if open, err := retryWhileOpen(ctx, every, time.Minute, always); open != 0 || err != context.Canceled {
		t.Errorf("cancelled: open %d, err %v; want 0, %v", open, err, context.Canceled)
	}
}
