package sst

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// NewLogger logs for mariadbd's error log, which is the method's stderr, in the stock
// scripts' form so that one grep finds every SST line:
//
//	2026-11-25 14:02:11 WSREP_SST: [INFO] ferry joiner: copy received (bytes=...)
func NewLogger(w io.Writer, role string, level slog.Level) *slog.Logger {
	return slog.New(&lineHandler{w: w, role: role, level: level, mu: &sync.Mutex{}})
}

// lineHandler writes one line a record: time, WSREP_SST tag, level, role, message and
// its attributes as key=value.
type lineHandler struct {
	w     io.Writer
	role  string
	level slog.Level
	attrs []slog.Attr
	mu    *sync.Mutex
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	level := "INFO"
	switch {
	case r.Level >= slog.LevelError:
		level = "ERROR"
	case r.Level >= slog.LevelWarn:
		level = "WARNING"
	case r.Level < slog.LevelInfo:
		level = "DEBUG"
	}
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	fmt.Fprintf(&b, "%s WSREP_SST: [%s] ferry %s: %s", t.Format("2006-01-02 15:04:05"), level, h.role, r.Message)
	write := func(a slog.Attr) bool {
		if v := a.Value.Resolve(); a.Key != "" {
			fmt.Fprintf(&b, " %s=%s", a.Key, quoteIfNeeded(v.String()))
		}
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &n
}

// WithGroup keeps groups flat: ferry's logs do not use them.
func (h *lineHandler) WithGroup(string) slog.Handler { return h }
