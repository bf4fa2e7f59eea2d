package backoff

import "github.com/ferry-backup/ferry/internal/clock"

// Fake is a Clock for tests (clock.Fake): Sleep returns at once (or with ctx's cause
// when ctx has ended), moving the fake time on by the wait and recording it.
type Fake = clock.Fake
