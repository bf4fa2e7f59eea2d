package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/innodb"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/safepath"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Config says what to roll forward and how.
type Config struct {
	Dir       string     // the datadir (a backup directory or a restore's staging copy)
	DataFiles []DataFile // the system tablespace's files; default ibdata1
	PageSize  int        // innodb_page_size; default 16384
	// Partial: the copy holds only some tablespaces; records of the others are skipped
	// (as innodb_force_recovery=1 does), instead of being an error.
	Partial bool
	// Newer: pages may be newer than the end of the log (pages read from a running
	// server after its log was cut, for the backup's roll-forward); such a page holds
	// every change the log has for it, which is skipped, as for any page. Without it a
	// page newer than the log is refused, as the server refuses pages "in the future".
	Newer     bool
	Keys      redo.KeyFunc // for an encrypted redo log
	Algorithm string       // file_key_management_encryption_algorithm
	// EncryptTables is innodb_encrypt_tables: whether pages of tables with
	// ENCRYPTED=DEFAULT are written encrypted (those with ENCRYPTED=YES always are).
	EncryptTables bool
	// CompressionLevel is innodb_compression_level, the level page_compressed pages are
	// written with during recovery (0: the server's default, 6).
	CompressionLevel int
	Parallel         int // pages rolled at once; default 4 per core, at least 16
	Memory           int // bytes of redo records held per batch; default 256 MiB
	// OpenFiles is how many tablespaces may stay open from one batch to the next; more
	// are closed and opened again when a batch needs them (default 1000). A datadir of
	// 100,000 tables does not need 100,000 descriptors.
	OpenFiles int
	// Ahead is the log parsed while the datadir was filled (nil: none); Dir uses it if
	// it is of the datadir's log, and parses the log itself otherwise.
	Ahead *Ahead
	Log   *slog.Logger
}

// defaultMemory is Config.Memory's default; maxMemory its most: a batch's records
// are found by 32-bit offsets, and a bigger batch saves nothing measurable.
const (
	defaultMemory = 256 << 20
	maxMemory     = 3 << 30
)

// batchMemory is the memory of a batch for Config.Memory m.
func batchMemory(m int) int {
	if m <= 0 {
		return defaultMemory
	}
	return min(m, maxMemory)
}

// Result is what Dir did.
type Result struct {
	CheckpointLSN, EndLSN uint64
	RedoBytes             uint64 // bytes of redo from the checkpoint to the end
	Batches               int
	Pages                 int // pages written
	Took                  time.Duration
	Check                 time.Duration // the first pass over the log (or the wait for the parse ahead)
	ParsedAhead           bool          // Config.Ahead was used
	Roll                  time.Duration // reading, applying and writing pages (parsing aside)
	// Spaces is how many tablespaces were written; Scanned tells whether every
	// tablespace file was read to find the ones the redo changes (false: each was
	// found by the name the redo gives it, so a datadir of 100,000 tables is not read
	// 100,000 times).
	Spaces  int
	Scanned bool
}

// ErrNotApplied wraps every reason why Dir left the data files for the server's
// recovery; a *RecordError or an error about the log or the files says which.
var ErrNotApplied = errors.New("native redo apply not possible")

// Dir rolls every page of the datadir forward to the end of its ib_logfile0 (a backup
// log from a ferry or mariadb-backup copy), then replaces the log with an empty one
// whose checkpoint is the end LSN, so that the server starts with nothing to recover.
// Running it again after it was killed gives the same bytes: a page already rolled
// carries the LSN of its last change, and the log is replaced last. An error wrapping
// ErrNotApplied means the redo or a page is one ferry does not apply: the log is then
// untouched, and the pages written so far hold states the server's recovery passes
// through too, so its recovery on the same files gives its usual result.
func Dir(ctx context.Context, cfg Config) (Result, error) {
	t0 := time.Now()
	a, err := newApplier(cfg)
	if errors.Is(err, ErrKey) {
		return Result{}, err
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNotApplied, err)
	}
	defer a.close()
	res, err := a.run(ctx)
	if err != nil {
		var re *RecordError
		if errors.As(err, &re) || errors.Is(err, errUnsupported) {
			return res, fmt.Errorf("%w: %w", ErrNotApplied, err)
		}
		return res, err
	}
	if err := a.sync(); err != nil {
		return res, err
	}
	if err := replaceLog(cfg.Dir, res.EndLSN); err != nil {
		return res, err
	}
	res.Took = time.Since(t0)
	return res, nil
}

// errUnsupported marks a datadir or log ferry does not apply (not a record).
var errUnsupported = errors.New("unsupported")

// applier is one run of Dir.
type applier struct {
	cfg       Config
	logPath   string
	spaces    map[uint32]*space
	deferred  map[string]string // files whose page 0 is not valid yet, by relative path (after scan)
	scanned   bool              // every tablespace file was looked at (scan)
	logs      map[uint32]*spaceLog
	end       uint64                 // end LSN of the redo: no page may be newer
	redoBytes uint64                 // from the checkpoint to the end
	reset     map[redo.PageID]uint64 // each page's last FREE_PAGE/INIT_PAGE (parser.reset)
	// final is what the first pass found of each tablespace at the log's end (nil:
	// the log was parsed in one batch, and logs is that): a batch rolled before a
	// later FILE_RENAME or FILE_DELETE finds a file by its name at the end, as a log
	// parsed in one batch does.
	final   map[uint32]*spaceLog
	written map[*space]bool
	arena   []byte
	pages   int // pages written so far, for the test pause point apply-page
	// injectDecrypt (FERRY_TEST_FAIL=apply-decrypt) refuses the first encrypted page read.
	injectDecrypt bool
}

// newApplier opens the datadir's tablespaces.
func newApplier(cfg Config) (*applier, error) {
	if cfg.PageSize == 0 {
		cfg.PageSize = 16384
	}
	if cfg.Parallel <= 0 {
		// Reads of pages not in the page cache wait on the disk: more pages in flight
		// than cores keep both busy.
		cfg.Parallel = max(16, 4*runtime.GOMAXPROCS(0))
	}
	cfg.Memory = batchMemory(cfg.Memory)
	if cfg.OpenFiles <= 0 {
		cfg.OpenFiles = defaultOpenFiles
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	sys, err := openSystem(cfg.Dir, cfg.DataFiles)
	if err != nil {
		return nil, err
	}
	if ps := sys.flags.PageSize(); ps != cfg.PageSize {
		sys.close()
		return nil, fmt.Errorf("%w: the backup says innodb_page_size=%d, its system tablespace has %d-byte pages", errUnsupported, cfg.PageSize, ps)
	}
	a := &applier{cfg: cfg, logPath: filepath.Join(cfg.Dir, "ib_logfile0"), spaces: map[uint32]*space{0: sys}, deferred: map[string]string{},
		logs: map[uint32]*spaceLog{}, written: map[*space]bool{}, injectDecrypt: faultpoint.Fails("apply-decrypt")}
	if err := a.bind(sys); err != nil {
		a.close()
		return nil, err
	}
	// With a key file, every encrypted tablespace is checked against it now, touched by
	// the redo or not (the server would only find a wrong key when a query reads the
	// table); without one, tablespaces are found when the redo first names them.
	if cfg.Keys != nil {
		if err := a.scan(); err != nil {
			a.close()
			return nil, err
		}
	}
	a.release()
	return a, nil
}

// bind readies a tablespace found in the datadir for its pages: its codec, and the
// check that the key file decrypts it.
func (a *applier) bind(sp *space) error {
	if err := a.setCodec(sp); err != nil {
		return err
	}
	return a.checkKey(sp)
}

// scan finds every tablespace file of the datadir (openSpaces), once, and binds those
// not found by name before. A file holding a tablespace already bound from another
// file is refused.
func (a *applier) scan() error {
	if a.scanned {
		return nil
	}
	a.scanned = true
	spaces, deferred, err := openSpaces(a.cfg.Dir)
	if err != nil {
		return err
	}
	bound := map[string]bool{}
	for _, sp := range a.spaces {
		bound[sp.path()] = true
	}
	for rel, path := range deferred {
		if !bound[path] {
			a.deferred[rel] = path
		}
	}
	for id, sp := range spaces {
		if old := a.spaces[id]; old != nil {
			if old.path() != sp.path() {
				return fmt.Errorf("%s and %s both hold tablespace %d", old.path(), sp.path(), id)
			}
			continue
		}
		if bound[sp.path()] {
			continue // a deferred space the redo built page 0 of
		}
		a.spaces[id] = sp
		if err := a.bind(sp); err != nil {
			return err
		}
	}
	return nil
}

// close closes the files.
func (a *applier) close() { closeAll(a.spaces) }

// release closes the tablespaces' files (but the system tablespace's) when more than
// cfg.OpenFiles of them are open, between batches: each batch opens the files it needs
// again. A file closed after writes loses nothing: its pages stay in the page cache
// and sync reopens it to make them durable.
func (a *applier) release() {
	n := 0
	for _, sp := range a.spaces {
		if sp.isOpen() {
			n++
		}
	}
	if n <= a.cfg.OpenFiles {
		return
	}
	for id, sp := range a.spaces {
		if id != 0 {
			sp.close()
		}
	}
}

// defaultOpenFiles is Config.OpenFiles' default.
const defaultOpenFiles = 1000

// run parses the log in batches of at most cfg.Memory bytes of records and rolls the
// pages of each batch forward. A log whose records fit one batch is parsed once: the
// batch is whole before any page is written, which is what the first pass of a longer
// log is for. A log up to half again as long as a batch is tried that way first (its
// records are usually two thirds of its bytes, the rest being headers and checksums).
func (a *applier) run(ctx context.Context) (Result, error) {
	t0 := time.Now()
	size, err := a.logSize()
	if err != nil {
		return Result{}, err
	}
	ahead, err := a.takeAhead(ctx)
	if err != nil {
		return Result{}, err
	}
	if h := a.cfg.Ahead; ahead && h.b != nil {
		return a.runOnce(ctx, size, t0, h)
	} else if ahead { // its first pass was made ahead
		a.reset, a.final, a.end, a.redoBytes = h.reset, h.final, h.ll.EndLSN, h.ll.EndLSN-h.ll.Checkpoint.LSN
		res, err := a.runBatches(ctx, size, t0, true)
		res.ParsedAhead = true
		return res, err
	}
	if size <= int64(a.cfg.Memory)/2*3 {
		res, err := a.runOnce(ctx, size, t0, nil)
		if !errors.Is(err, errBatchFull) {
			return res, err
		}
		a.logs = map[uint32]*spaceLog{} // what the attempt learned is learned again
		a.cfg.Log.Debug("apply: the log's records do not fit one batch: it is read twice")
	}
	return a.runBatches(ctx, size, t0, false)
}

// errBatchFull: the log's records do not fit one batch.
var errBatchFull = errors.New("the log's records do not fit one batch")

// runOnce parses the log into one batch (or takes the one h parsed ahead) and rolls
// it. It returns errBatchFull, having written nothing, if the records do not fit.
func (a *applier) runOnce(ctx context.Context, size int64, t0 time.Time, h *Ahead) (Result, error) {
	var res Result
	var err error
	var b *batch
	var ll redo.LinearLog
	if h != nil {
		b, a.logs, ll = h.b, h.logs, h.ll
		res.ParsedAhead = true
	} else {
		p := a.parser(min(int64(a.cfg.Memory), size))
		ll, err = redo.ScanLinear(a.logPath, a.cfg.Keys, a.cfg.Algorithm, func(m redo.MTR) error {
			if err := p.add(m); err != nil {
				return err
			}
			if p.b.bytes() >= a.cfg.Memory {
				return errBatchFull
			}
			return ctx.Err()
		})
		if err = checkErr(err); err != nil {
			return res, err
		}
		b = p.b
	}
	a.end, a.redoBytes, res.Check = ll.EndLSN, ll.EndLSN-ll.Checkpoint.LSN, time.Since(t0)
	if err := a.rollBatch(ctx, &res, b); err != nil {
		return res, err
	}
	return a.result(res, ll), nil
}

// runBatches reads the log twice: once to check every record and find its end
// (unless checked: that pass was made ahead), once to parse it into batches, each
// rolled before the next is parsed.
func (a *applier) runBatches(ctx context.Context, size int64, t0 time.Time, checked bool) (Result, error) {
	var res Result
	if !checked {
		end, err := a.logEnd()
		if err != nil {
			return res, err
		}
		a.end = end
	}
	res.Check = time.Since(t0)
	p := a.parser(min(int64(a.cfg.Memory), size))
	p.reset, p.gone = a.reset, a.gone()
	ll, err := redo.ScanLinear(a.logPath, a.cfg.Keys, a.cfg.Algorithm, func(m redo.MTR) error {
		if err := p.add(m); err != nil {
			return err
		}
		if p.b.bytes() >= a.cfg.Memory {
			if err := a.rollBatch(ctx, &res, p.b); err != nil {
				return err
			}
			groups := p.b.groups[:0]
			p.b = newBatch(p.b.arena[:0])
			p.b.groups = groups
		}
		return ctx.Err()
	})
	if err != nil {
		return res, err
	}
	if err := a.rollBatch(ctx, &res, p.b); err != nil {
		return res, err
	}
	return a.result(res, ll), nil
}

// parser returns a parser filing into a.logs, with one arena for every batch, big
// enough that it never grows: a batch ends once it holds arena bytes, and a
// mini-transaction is at most MTRSizeMax.
func (a *applier) parser(arena int64) *parser {
	return &parser{b: newBatch(make([]byte, 0, arena+redo.MTRSizeMax)), spaces: a.logs,
		pageSize: a.cfg.PageSize, inject: faultpoint.Fails("apply-record")}
}

// rollBatch rolls the pages of b forward, if it holds any, and counts them in res.
func (a *applier) rollBatch(ctx context.Context, res *Result, b *batch) error {
	if len(b.pages) == 0 && len(b.trims) == 0 {
		return nil
	}
	t1 := time.Now()
	n, err := a.applyBatch(ctx, b)
	a.release()
	res.Roll += time.Since(t1)
	res.Pages += n
	res.Batches++
	return err
}

// result completes res with the log's LSNs.
func (a *applier) result(res Result, ll redo.LinearLog) Result {
	res.CheckpointLSN, res.EndLSN = ll.Checkpoint.LSN, ll.EndLSN
	res.RedoBytes = ll.EndLSN - ll.Checkpoint.LSN
	res.Spaces, res.Scanned = len(a.written), a.scanned
	return res
}

// takeAhead tells whether the log was parsed ahead (Config.Ahead) and that parse is
// the one to apply; when it is not, the log says why.
func (a *applier) takeAhead(ctx context.Context) (bool, error) {
	h := a.cfg.Ahead
	if h == nil {
		return false, nil
	}
	ok, why, err := h.take(ctx, a.logPath, a.cfg.PageSize)
	switch {
	case err == nil && ok:
		a.cfg.Log.Debug("apply: the log was parsed ahead", "took", h.took.Round(time.Millisecond))
	case err == nil:
		a.cfg.Log.Info("apply: the log is parsed again", "why", why)
	}
	return ok, err
}

// logSize is the size of the log's records area: no more bytes of records than that
// are parsed from it.
func (a *applier) logSize() (int64, error) {
	st, err := os.Stat(a.logPath)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errUnsupported, err)
	}
	return max(0, st.Size()-int64(redo.StartOffset)), nil
}

// checkErr sorts an error of a pass over the log: a record ferry refuses, a batch
// full or an interruption is returned as it is, any other is a log ferry does not
// apply.
func checkErr(err error) error {
	var re *RecordError
	if err == nil || errors.As(err, &re) || errors.Is(err, errBatchFull) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", errUnsupported, err)
}

// logEnd is the first pass over the log: it checks every record as the server's parser
// does, so that a record ferry refuses is found before any page is written, and finds
// the end LSN (pages newer than it are refused, as the server refuses pages "in the
// future").
func (a *applier) logEnd() (uint64, error) {
	a.reset, a.final = map[redo.PageID]uint64{}, map[uint32]*spaceLog{}
	p := &parser{b: newBatch(nil), spaces: a.final, pageSize: a.cfg.PageSize,
		reset: a.reset, inject: faultpoint.Fails("apply-record"), dry: true}
	ll, err := redo.ScanLinear(a.logPath, a.cfg.Keys, a.cfg.Algorithm, p.add)
	if err = checkErr(err); err != nil {
		return 0, err
	}
	a.redoBytes = ll.EndLSN - ll.Checkpoint.LSN
	return ll.EndLSN, nil
}

// gone lists the tablespaces the first pass saw deleted at the log's end.
func (a *applier) gone() map[uint32]bool {
	out := map[uint32]bool{}
	for id, sl := range a.final {
		if sl.deleted {
			out[id] = true
		}
	}
	return out
}

// applyBatch extends and trims files as the batch's records say, then rolls its pages
// forward in parallel. It returns the number of pages written.
func (a *applier) applyBatch(ctx context.Context, b *batch) (int, error) {
	a.arena = b.arena
	if err := a.trimAndExtend(b); err != nil {
		return 0, err
	}
	jobs, err := a.jobs(b)
	if err != nil {
		return 0, err
	}
	prefetch(jobs)
	// Page 0 first: a tablespace created during the copy learns from it whether its
	// other pages are encrypted.
	n0, err := a.roll(ctx, b, pageZeros(jobs))
	if err != nil {
		return n0, err
	}
	for _, j := range jobs {
		if j.sp.deferred && j.sp.codec == nil && !j.sp.codecSet {
			j.sp.codecSet = true
			if err := a.setCodec(j.sp); err != nil {
				return n0, err
			}
			if err := a.checkKey(j.sp); err != nil {
				return n0, err
			}
		}
	}
	n, err := a.roll(ctx, b, otherPages(jobs))
	return n0 + n, err
}

// prefetch asks the kernel to read ahead the pages of jobs (sorted by tablespace and
// page) that the batch reads, in runs of neighbouring pages, so that the reads of the
// roll find them in the page cache.
func prefetch(jobs []pageJob) {
	const gap = 8 // pages between two reads that still make one run
	for i := 0; i < len(jobs); {
		j := i
		for j+1 < len(jobs) && jobs[j+1].sp == jobs[i].sp && jobs[j+1].id.Page-jobs[j].id.Page <= gap {
			j++
		}
		if sp := jobs[i].sp; !allBuilt(jobs[i : j+1]) {
			if f, off, err := sp.locate(jobs[i].id.Page); err == nil { // an error is met again by the roll
				n := int64(jobs[j].id.Page-jobs[i].id.Page+1) * int64(sp.physSize())
				unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED) // advice only: an error changes nothing
			}
		}
		i = j + 1
	}
}

// allBuilt tells whether every page of jobs is built from INIT_PAGE or freed (none is read).
func allBuilt(jobs []pageJob) bool {
	for _, j := range jobs {
		if !j.log.init && !j.log.freed {
			return false
		}
	}
	return true
}

// pageZeros returns the jobs of page 0.
func pageZeros(jobs []pageJob) []pageJob {
	var out []pageJob
	for _, j := range jobs {
		if j.id.Page == 0 {
			out = append(out, j)
		}
	}
	return out
}

// otherPages returns the jobs of pages other than page 0.
func otherPages(jobs []pageJob) []pageJob {
	var out []pageJob
	for _, j := range jobs {
		if j.id.Page != 0 {
			out = append(out, j)
		}
	}
	return out
}

// roll rolls the pages of jobs forward in parallel and returns how many were written.
func (a *applier) roll(ctx context.Context, b *batch, jobs []pageJob) (int, error) {
	var written int
	var mu sync.Mutex
	stop := a.writeBack(&mu)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	next := make(chan pageJob)
	for range a.cfg.Parallel {
		g.Go(func() error {
			buf := make([]byte, 2<<16) // the page and its encoded form
			for j := range next {
				ok, err := a.rollPage(j, b, buf)
				if err != nil {
					return err
				}
				if ok {
					mu.Lock()
					written++
					a.written[j.sp] = true
					a.pages++
					n := a.pages
					mu.Unlock()
					faultpoint.At(gctx, "apply-page", n)
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(next)
		for _, j := range jobs {
			select {
			case next <- j:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return written, g.Wait()
}

// writeBackEvery is how often a roll starts writing back the pages it wrote.
const writeBackEvery = 100 * time.Millisecond

// writeBack starts, until stop is called, writing back the files the roll writes
// (a.written, under mu) every writeBackEvery, off the workers' path: the sync at the
// end of the apply then finds most pages already on disk instead of flushing them all
// after the roll.
func (a *applier) writeBack(mu *sync.Mutex) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(writeBackEvery)
		defer tick.Stop()
		var files []*os.File
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			files = files[:0]
			mu.Lock()
			for sp := range a.written {
				files = sp.appendOpen(files)
			}
			mu.Unlock()
			for _, f := range files {
				_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE) // a hint: Dir's sync makes the pages durable
			}
		}
	}()
	return func() { close(done); <-ended }
}

// jobs lists the batch's pages in (space, page) order with their tablespaces.
func (a *applier) jobs(b *batch) ([]pageJob, error) {
	jobs := make([]pageJob, 0, len(b.pages))
	for id, pl := range b.pages {
		if pl.empty() {
			continue
		}
		sp, err := a.spaceOf(id.Space)
		if err != nil {
			return nil, err
		}
		if sp == nil {
			continue // partial copy: not restored
		}
		jobs = append(jobs, pageJob{id: id, log: pl, sp: sp})
	}
	sort.Slice(jobs, func(i, k int) bool {
		if jobs[i].id.Space != jobs[k].id.Space {
			return jobs[i].id.Space < jobs[k].id.Space
		}
		return jobs[i].id.Page < jobs[k].id.Page
	})
	return jobs, nil
}

// spaceOf returns the tablespace with id: found before, or in the file the redo names
// it by (FILE_CREATE, FILE_MODIFY, FILE_RENAME: the server writes one for every
// tablespace it changes after a checkpoint), or else by a scan of every tablespace
// file. A file whose page 0 is not valid yet is bound by that name (a table created
// during the copy). It returns nil for a tablespace the copy lacks when the copy is
// partial.
func (a *applier) spaceOf(id uint32) (*space, error) {
	if sp := a.spaces[id]; sp != nil {
		return sp, nil
	}
	sl := a.logs[id]
	if f := a.final[id]; f != nil {
		sl = f
	}
	if !a.scanned && sl != nil && sl.name != "" {
		sp, err := a.byName(id, sl)
		if sp != nil || err != nil {
			return sp, err
		}
	}
	if err := a.scan(); err != nil {
		return nil, err
	}
	if sp := a.spaces[id]; sp != nil {
		return sp, nil
	}
	if sl != nil && sl.name != "" {
		if path := a.deferred[localName(sl.name)]; path != "" {
			delete(a.deferred, localName(sl.name))
			return a.bindDeferred(id, sl, path)
		}
	}
	if a.cfg.Partial || (sl != nil && sl.created && isTemporary(sl.name)) {
		return nil, nil
	}
	name := "?"
	if sl != nil {
		name = sl.name
	}
	return nil, fmt.Errorf("%w: the redo changes tablespace %d (%s), which has no file in %s", errUnsupported, id, name, a.cfg.Dir)
}

// byName binds tablespace id to the file the redo names it by, if that file holds it
// (its page 0 says so, or is not valid yet); nil if not: the caller scans.
func (a *applier) byName(id uint32, sl *spaceLog) (*space, error) {
	rel := localName(sl.name)
	if !filepath.IsLocal(rel) || !isTablespaceFile(rel) {
		return nil, nil
	}
	path, err := safepath.Join(a.cfg.Dir, rel)
	if err != nil {
		return nil, nil // a link on the way: the scan, which skips links, decides
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	h, ok, err := readHeader(f)
	f.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	case !ok:
		return a.bindDeferred(id, sl, path)
	case h.SpaceID != id:
		return nil, nil
	}
	sp := &space{id: id, segs: []segment{{path: path}}, flags: h.Flags, hasFlags: true, crypt: h.CryptData}
	a.spaces[id] = sp
	return sp, a.bind(sp)
}

// bindDeferred binds tablespace id to the file at path, whose page 0 the redo writes.
func (a *applier) bindDeferred(id uint32, sl *spaceLog, path string) (*space, error) {
	if !sl.hasFlags || innodb.SpaceFlags(sl.flags).PageSize() == 0 {
		return nil, &RecordError{Space: id, Record: "WRITE", Reason: "the redo creates the tablespace without valid FSP_SPACE_FLAGS"}
	}
	sp := &space{id: id, segs: []segment{{path: path}}, flags: innodb.SpaceFlags(sl.flags), hasFlags: true, deferred: true}
	a.spaces[id] = sp
	return sp, nil
}

// isTemporary tells whether a tablespace name is one of the server's intermediate
// tables (#sql-alter-…, #sql-ib…): a backup leaves out such a table created during the
// copy, and the server drops it when it starts.
func isTemporary(name string) bool { return strings.HasPrefix(filepath.Base(name), "#sql") }

// localName turns a file name from the redo ("./db/t.ibd") into a path relative to
// the datadir.
func localName(name string) string {
	return filepath.Clean(name) // also folds the padding of a localized DATA DIRECTORY name (".////db/t.ibd")
}

// trimAndExtend truncates undo tablespaces the batch trims and extends every file
// shorter than the size the redo gives its tablespace (§7.1), before pages are written.
func (a *applier) trimAndExtend(b *batch) error {
	for _, t := range b.trims {
		sp, err := a.spaceOf(t.space)
		if err != nil || sp == nil {
			continue // an undo tablespace the copy lacks: nothing to trim
		}
		g, err := sp.last()
		if err != nil {
			return err
		}
		if err := g.f.Truncate(int64(t.pages) * int64(sp.physSize())); err != nil {
			return fmt.Errorf("trim undo tablespace %s: %w", sp.path(), err)
		}
		a.written[sp] = true
	}
	for id, sl := range a.logs {
		if sl.recvSize == 0 || sl.deleted {
			continue
		}
		sp, err := a.spaceOf(id)
		if err != nil || sp == nil {
			continue // reported when one of its pages is rolled
		}
		if err := sp.extend(sl.recvSize); err != nil {
			return err
		}
		a.written[sp] = true
	}
	return nil
}

// extend makes the tablespace's last file hold at least pages pages in all.
func (s *space) extend(pages uint32) error {
	g, err := s.last()
	if err != nil {
		return err
	}
	want := (int64(pages) - int64(g.first)) * int64(s.physSize())
	if s.deferred {
		want = want / 4096 * 4096
	}
	st, err := g.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= want {
		return nil
	}
	if err := g.f.Truncate(want); err != nil {
		return fmt.Errorf("extend %s: %w", g.path, err)
	}
	return nil
}

// arenaOf returns a group's records.
func (a *applier) arenaOf(g group) []byte { return a.arena[g.off : g.off+g.n] }

// sync makes every written file durable.
func (a *applier) sync() error {
	for sp := range a.written {
		if err := sp.open(); err != nil {
			return err
		}
		for _, g := range sp.segs {
			if err := g.f.Sync(); err != nil {
				return fmt.Errorf("sync %s: %w", g.path, err)
			}
		}
	}
	return nil
}
