// Package progress reports bytes done, rate and ETA on stderr: a bar on a terminal, a
// log line every few seconds otherwise.
package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Reporter counts bytes for one job.
type Reporter struct {
	mu    sync.Mutex
	label string // what the job does now (Stage)
	done  atomic.Int64
	total atomic.Int64
	start time.Time
	bar   *progressbar.ProgressBar
	log   *slog.Logger
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// Options configures a Reporter.
type Options struct {
	Label    string
	Total    int64
	Terminal bool          // draw a bar on Out
	Out      io.Writer     // usually os.Stderr
	Log      *slog.Logger  // used when not on a terminal
	Every    time.Duration // log interval, default 5 s
}

// New starts a reporter; call Finish when the job ends.
func New(o Options) *Reporter {
	r := &Reporter{label: o.Label, start: time.Now(), log: o.Log}
	r.total.Store(o.Total)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	if o.Terminal {
		r.bar = progressbar.NewOptions64(o.Total, progressbar.OptionSetWriter(o.Out),
			progressbar.OptionShowBytes(true), progressbar.OptionSetDescription(o.Label),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		return r
	}
	every := o.Every
	if every == 0 {
		every = 5 * time.Second
	}
	r.wg.Add(1)
	go r.logLoop(ctx, every)
	return r
}

// Add records n more bytes done.
func (r *Reporter) Add(n int64) {
	r.done.Add(n)
	if r.bar != nil {
		_ = r.bar.Add64(n)
	}
}

// AddTotal grows the expected total (files found or grown while copying).
func (r *Reporter) AddTotal(n int64) {
	t := r.total.Add(n)
	if r.bar != nil {
		r.bar.ChangeMax64(t)
	}
}

// Stage names what the job does from now on ("backup: re-copy round 1"): the bar's
// description, and the message of the log lines.
func (r *Reporter) Stage(label string) {
	r.mu.Lock()
	r.label = label
	r.mu.Unlock()
	if r.bar != nil {
		r.bar.Describe(label)
	}
}

// Done returns the bytes counted so far.
func (r *Reporter) Done() int64 { return r.done.Load() }

// Finish stops the reporter.
func (r *Reporter) Finish() {
	r.stop()
	r.wg.Wait()
	if r.bar != nil {
		_ = r.bar.Finish()
	}
}

func (r *Reporter) logLoop(ctx context.Context, every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.logLine()
		}
	}
}

func (r *Reporter) logLine() {
	done, total := r.done.Load(), r.total.Load()
	el := time.Since(r.start).Seconds()
	rate := float64(done) / el
	attrs := []any{"done_mib", done >> 20, "total_mib", total >> 20, "mib_per_s", fmt.Sprintf("%.1f", rate/(1<<20))}
	if total > 0 {
		attrs = append(attrs, "percent", done*100/total)
	}
	if rate > 0 && total > done {
		attrs = append(attrs, "eta", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second).String())
	}
	r.mu.Lock()
	label := r.label
	r.mu.Unlock()
	r.log.Info(label, attrs...)
}
