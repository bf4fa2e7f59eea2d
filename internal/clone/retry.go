package clone

import (
	"errors"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
)

// dialPolicy is the backoff between attempts to connect to the other end: from 250 ms,
// doubling up to 5 s, jittered; the caller bounds it (the reconnect grace, say).
func dialPolicy() backoff.Policy {
	return backoff.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second}
}

// retryable reports whether a failed connection to the other end is worth another
// try. A refused, reset or timed-out connection is; the peer's own refusal (a
// remoteError: a bad token, a clone that is over), a peer that is not the one meant,
// another protocol and a certificate that does not fit are not (backoff.Permanent).
func retryable(err error) bool {
	var rem remoteError
	return !errors.As(err, &rem) && !backoff.IsPermanent(err)
}
