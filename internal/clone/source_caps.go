package clone

import "github.com/ferry-backup/ferry/internal/restore"

var _ restore.Source = (*source)(nil)

// Caps implements restore.Source: a clone is a stream (nothing is known before its
// data) whose staging directory it owns: a journaled clone keeps it for --resume
// (Settle decides), and a clone received whole has its log parsed as it lands.
func (s *source) Caps() restore.Caps {
	return restore.Caps{Consume: true, Resume: s.journaled || s.offer != nil, FollowLog: s.offer == nil}
}
