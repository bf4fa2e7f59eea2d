package backuptest

import (
	"context"
	"slices"
	"sync"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/redo"
)

// Copy scripts one redo copy of the fake server (Server.Script).
type Copy struct {
	// Start is the checkpoint the copy opens at: the server's newest checkpoint
	// while this copy is the next to open. Copies that start further and further
	// on are a checkpoint that moves during the backup.
	Start uint64
	// Pages are the pages its redo names: what a tracker or a round sees changed.
	Pages []redo.PageID
	// Lapped: the server overwrote redo the copy had not read yet. Its Run fails at
	// once with a *redo.OverwrittenError, as the real redo copy's does.
	Lapped bool
	// Redo is what it writes into its output (Server.Redo if nil).
	Redo []byte
}

// script is the Copy the nth redo copy follows.
func (s *Server) script(n int) Copy {
	if n < len(s.Script) {
		c := s.Script[n]
		if c.Redo == nil {
			c.Redo = s.Redo
		}
		return c
	}
	return Copy{Start: s.Checkpoint, Pages: s.Changed, Redo: s.Redo}
}

// Open implements backup.RedoLog: a redo copy that follows the next Copy.
func (c session) Open(cfg redo.Config) (backup.RedoCopy, error) {
	s := c.s
	s.mu.Lock()
	n := s.copies
	s.copies++
	sc := s.script(n)
	s.End = max(s.End, sc.Start) // the server's LSN is past its newest checkpoint
	r := &redoCopy{s: s, script: sc, out: cfg, stop: make(chan struct{})}
	s.running = append(s.running, r)
	s.mu.Unlock()
	if s.OnOpen != nil {
		s.OnOpen(n)
	}
	if cfg.Pages != nil {
		cfg.Pages.Add(sc.Pages...)
	}
	return r, nil
}

// Checkpoint implements backup.RedoLog: the start of the next redo copy to open, or
// of the last one scripted once all are open (the checkpoint stopped moving).
func (c session) Checkpoint(string) (uint64, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.Script) > 0 {
		return s.script(min(s.copies, len(s.Script)-1)).Start, nil
	}
	return s.Checkpoint, nil
}

// Running is how many redo copies the backup opened whose Run has not returned. A
// backup that returned, whether it failed or not, must leave none.
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// redoCopy is a fake redo copy: it writes its Redo, then runs until it is told where
// to stop (it has then copied up to there) or its context ends; a lapped one fails at
// once. It hears of the file operations the server logs while it runs.
type redoCopy struct {
	s      *Server
	script Copy
	out    redo.Config
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	end    uint64
}

// capacity is the redo the fake server's log holds, for the lapped copy's error.
const capacity = 64 << 20

func (r *redoCopy) Run(ctx context.Context) error {
	defer r.s.ended(r)
	if r.script.Lapped {
		return &redo.OverwrittenError{Copied: r.script.Start, Server: r.script.Start + 2*capacity, Capacity: capacity}
	}
	if _, err := r.out.Out.Write(r.script.Redo); err != nil {
		return err
	}
	select {
	case <-r.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ended drops r from the running copies.
func (s *Server) ended(r *redoCopy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.running, r); i >= 0 {
		s.running = slices.Delete(s.running, i, i+1)
	}
}

func (r *redoCopy) StopAt(lsn uint64) {
	r.mu.Lock()
	r.end = lsn
	r.mu.Unlock()
	r.once.Do(func() { close(r.stop) })
}

func (r *redoCopy) Copied() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.end, r.script.Start)
}

// WaitCopied returns at once: the fake copy has read whatever the server logged (a
// lapped one never will).
func (r *redoCopy) WaitCopied(context.Context, uint64) error {
	if r.script.Lapped {
		return &redo.OverwrittenError{Copied: r.script.Start, Server: r.script.Start + 2*capacity, Capacity: capacity}
	}
	return nil
}

func (r *redoCopy) Start() redo.Checkpoint { return redo.Checkpoint{LSN: r.script.Start} }

func (r *redoCopy) EndLSN() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// logOp gives a file-level record to every redo copy running that started below it,
// as the real copies report the records they read (redo.Config.OnFileOp).
func (s *Server) logOp(op redo.FileOp) {
	s.mu.Lock()
	var to []func(redo.FileOp)
	for _, r := range s.running {
		if r.out.OnFileOp != nil && !r.script.Lapped && op.LSN >= r.script.Start {
			to = append(to, r.out.OnFileOp)
		}
	}
	s.mu.Unlock()
	for _, f := range to {
		f(op)
	}
}
