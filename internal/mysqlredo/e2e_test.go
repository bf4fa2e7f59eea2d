//go:build e2e

package mysqlredo

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ferry-backup/ferry/internal/redo"
)

const (
	capacity = 8 << 20 // innodb_redo_log_capacity of the test servers
	creator  = "MySQL 8.0.31"
)

// TestMySQL80 proves the tailer and the restore recipe on a real MySQL 8.0.31.
func TestMySQL80(t *testing.T) {
	needMySQL(t)
	template := filepath.Join(t.TempDir(), "template")
	t0 := time.Now()
	initDatadir(t, template)
	t.Logf("mysqld --initialize-insecure: %v", time.Since(t0).Round(time.Millisecond))
	t.Run("BackupRestore", func(t *testing.T) { testBackupRestore(t, template) })
	t.Run("Lapped", func(t *testing.T) { testLapped(t, template) })
	t.Run("Consumer", func(t *testing.T) { testConsumer(t, template) })
	t.Run("Archive", func(t *testing.T) { testArchive(t, template) })
	t.Run("RedoDisabled", func(t *testing.T) { testRedoDisabled(t, template) })
}

// newServer starts mysqld on a copy of the template with the test tables.
func newServer(t *testing.T, template string) *mysqlServer {
	t.Helper()
	dd := filepath.Join(t.TempDir(), "data")
	copyDir(t, template, dd)
	s := startMySQL(t, dd, true)
	s.exec(t, "CREATE DATABASE d",
		"CREATE TABLE d.t (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, pad VARCHAR(255) NOT NULL, KEY (k)) ENGINE=InnoDB",
		"CREATE TABLE d.h (id BIGINT AUTO_INCREMENT PRIMARY KEY, w INT NOT NULL, n INT NOT NULL) ENGINE=InnoDB")
	for i := 0; i < 10; i++ {
		s.exec(t, "INSERT INTO d.t (k, pad) VALUES "+rows(200, i))
	}
	return s
}

// rows returns n VALUES tuples for d.t.
func rows(n, seed int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d, REPEAT('%c', %d))", seed*1000+i, 'a'+byte((seed+i)%26), 150+(seed+i)%100)
	}
	return b.String()
}

// workload runs writers against d.t and d.h until stopped.
type workload struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ops    atomic.Int64
	maxID  atomic.Int64
	mu     sync.Mutex
	err    error
}

func startLoad(db *sql.DB, writers int) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{cancel: cancel}
	w.maxID.Store(2000)
	for i := range writers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.writer(ctx, db, i)
		}()
	}
	return w
}

// stop ends the writers and returns the first unexpected error.
func (w *workload) stop() error {
	w.cancel()
	w.wg.Wait()
	return w.err
}

func (w *workload) writer(ctx context.Context, db *sql.DB, id int) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	for ctx.Err() == nil {
		err := w.op(ctx, db, rng, id)
		var me *mysql.MySQLError
		switch {
		case err == nil:
			w.ops.Add(1)
		case ctx.Err() != nil:
		case errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
		default:
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
			return
		}
	}
}

// op runs one random write: inserts, a range update, a delete or a transaction.
func (w *workload) op(ctx context.Context, db *sql.DB, rng *rand.Rand, id int) error {
	at := 1 + rng.Int64N(w.maxID.Load())
	switch rng.IntN(5) {
	case 0, 1:
		r, err := db.ExecContext(ctx, "INSERT INTO d.t (k, pad) VALUES "+rows(20, rng.IntN(1000)))
		if err == nil {
			last, _ := r.LastInsertId()
			w.maxID.Store(max(w.maxID.Load(), last+20))
		}
		return err
	case 2:
		_, err := db.ExecContext(ctx, "UPDATE d.t SET k = k + 1, pad = REPEAT(?, ?) WHERE id BETWEEN ? AND ?",
			string(rune('a'+rng.IntN(26))), 100+rng.IntN(150), at, at+30)
		return err
	case 3:
		_, err := db.ExecContext(ctx, "DELETE FROM d.t WHERE id = ?", at)
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO d.h (w, n) VALUES (?, ?)", id, rng.IntN(1000)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE d.t SET k = k - 1 WHERE id = ?", at); err != nil {
		return err
	}
	return tx.Commit()
}

// waitLSN waits until the server's current LSN reaches lsn.
func waitLSN(t *testing.T, srv StatusLSN, lsn uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, cur, err := srv.LSNs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cur >= lsn {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's LSN is %d after %v, want %d", cur, within, lsn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logStatusLSN reads InnoDB's LSN from performance_schema.log_status.
func logStatusLSN(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) uint64 {
	t.Helper()
	return uint64Of(t, q, "SELECT CAST(STORAGE_ENGINES->>'$.InnoDB.LSN' AS UNSIGNED) FROM performance_schema.log_status")
}

// state is what a consistent point (or a restored copy) holds.
type state struct {
	sumT, sumH     uint64
	countT, countH uint64
}

func readState(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) state {
	t.Helper()
	var st state
	for _, c := range []struct {
		table string
		sum   *uint64
	}{{"d.t", &st.sumT}, {"d.h", &st.sumH}} {
		var name string
		if err := q.QueryRowContext(context.Background(), "CHECKSUM TABLE "+c.table).Scan(&name, c.sum); err != nil {
			t.Fatalf("CHECKSUM TABLE %s: %v", c.table, err)
		}
	}
	st.countT = uint64Of(t, q, "SELECT COUNT(*) FROM d.t")
	st.countH = uint64Of(t, q, "SELECT COUNT(*) FROM d.h")
	return st
}

// runTailer starts Run in a goroutine.
func runTailer(ctx context.Context, tl *Tailer) <-chan error {
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	return done
}

// openTailer opens a Tailer on s's redo writing to a new file of dir.
func openTailer(t *testing.T, s *mysqlServer, path string, out func(*os.File) Config) (*Tailer, *os.File) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tl, err := Open(out(f))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return tl, f
}

// waitRun waits for a Run result.
func waitRun(t *testing.T, name string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: Run: %v", name, err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: Run did not return", name)
	}
}

func testBackupRestore(t *testing.T, template string) {
	t0 := time.Now()
	s := newServer(t, template)
	srv := StatusLSN{DB: s.db}
	backup := t.TempDir()
	cfg := func(f *os.File) Config {
		return Config{Dir: s.redoDir(), Out: f, Server: srv, Creator: "xtrabkup ferry-test", Poll: 10 * time.Millisecond}
	}
	// Two copies from the same start: the backup (stopped at E) and a longer one
	// (stopped at E2 > E) to show what recovery does with redo beyond E.
	tl1, f1 := openTailer(t, s, filepath.Join(backup, "xtrabackup_logfile"), cfg)
	tl2, f2 := openTailer(t, s, filepath.Join(backup, "longer_logfile"), cfg)
	a := tl1.Start().LSN
	files0, _ := ListFiles(s.redoDir())
	t.Logf("checkpoint A = %d (copy 2: %d); %d redo files, first %s [%d, %d)", a, tl2.Start().LSN, len(files0),
		filepath.Base(files0[0].Path), files0[0].StartLSN, files0[0].EndLSN)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	done1, done2 := runTailer(ctx, tl1), runTailer(ctx, tl2)
	load := startLoad(s.db, 4)
	defer load.stop()

	waitLSN(t, srv, a+capacity, time.Minute)
	s.exec(t, "SET GLOBAL innodb_log_checksums = OFF") // blocks written with 0xDEADBEEF
	waitLSN(t, srv, a+2*capacity, time.Minute)
	s.exec(t, "SET GLOBAL innodb_log_checksums = ON")
	waitLSN(t, srv, a+3*capacity, time.Minute)
	tc := time.Now()
	nfiles, rereads := copyLive(t, s.datadir, filepath.Join(backup, "data"))
	_, cur, _ := srv.LSNs(ctx)
	t.Logf("copied %d datadir files in %v (%d pages re-read), server at LSN %d (%.1f capacities past A)",
		nfiles, time.Since(tc).Round(time.Millisecond), rereads, cur, float64(cur-a)/capacity)
	waitLSN(t, srv, cur+2*capacity, time.Minute)

	lock, e := consistentPoint(t, s)
	tl1.StopAt(e)
	s.exec(t, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")
	waitRun(t, "copy 1", done1)
	// Changes committed after E, then E2.
	for i := range 5 {
		s.exec(t, fmt.Sprintf("INSERT INTO d.h (w, n) VALUES (-1, %d)", i))
	}
	e2 := logStatusLSN(t, s.db)
	tl2.StopAt(e2)
	s.exec(t, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")
	waitRun(t, "copy 2", done2)
	if err := load.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("E = %d (%.1f capacities past A), E2 = %d; copy 1 holds %d bytes, copy 2 %d; %d writes",
		e, float64(e-a)/capacity, e2, fileSize(t, f1), fileSize(t, f2), load.ops.Load())
	checkCopy(t, f1.Name(), a, e)
	checkCopy(t, f2.Name(), tl2.Start().LSN, e2)
	if n := countNoChecksum(t, f2.Name()); n == 0 {
		t.Error("no block of copy 2 has the 0xDEADBEEF checksum of innodb_log_checksums=OFF")
	} else {
		t.Logf("copy 2 holds %d blocks written with innodb_log_checksums=OFF (0xDEADBEEF)", n)
	}
	s.stop(t)

	data := filepath.Join(backup, "data")
	cut := restoreAndStart(t, "cut", data, f1.Name(), e, defaultLayout())
	checkRestored(t, cut, lock, a, e)
	uncut := restoreAndStart(t, "uncut", data, f2.Name(), e2, defaultLayout())
	checkScannedTo(t, uncut.log(t), e2)
	got := readState(t, uncut.db)
	if got == lock || got.countH < lock.countH+5 {
		t.Errorf("redo beyond E: restored %+v, the lock saw %+v: want at least 5 more rows of d.h", got, lock)
	}
	t.Logf("not cut at E (redo to E2 in the file): recovery applied it: d.h has %d rows, %d at E", got.countH, lock.countH)
	uncut.stop(t)
	// The split into several files (redo past 16 GiB) is checked by the unit tests
	// (restore_test.go); it was run here on 8.0.31 once, with 4 MiB files.
	t.Logf("BackupRestore took %v", time.Since(t0).Round(time.Millisecond))
}

// consistentPoint takes FLUSH TABLES WITH READ LOCK, reads E from log_status and
// the tables' state, and unlocks.
func consistentPoint(t *testing.T, s *mysqlServer) (state, uint64) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t0 := time.Now()
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	e := logStatusLSN(t, conn)
	st := readState(t, conn)
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	t.Logf("under FLUSH TABLES WITH READ LOCK (%v): E = %d (offset %d in its block), %+v",
		time.Since(t0).Round(time.Millisecond), e, e%BlockSize, st)
	return st, e
}

func fileSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// checkCopy scans a copy: it starts at a and reaches e.
func checkCopy(t *testing.T, path string, a, e uint64) {
	t.Helper()
	start, end, err := Scan(path)
	if err != nil || start != a || end < e {
		t.Fatalf("Scan(%s) = %d, %d, %v; want %d, >= %d", filepath.Base(path), start, end, err, a, e)
	}
}

// countNoChecksum counts the blocks of a copy whose checksum field is 0xDEADBEEF.
func countNoChecksum(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for off := HeaderSize; off+BlockSize <= len(b); off += BlockSize {
		if binary.BigEndian.Uint32(b[off+blockCRCOff:]) == noChecksum {
			n++
		}
	}
	return n
}

// restoreAndStart copies the backup's data files, writes its redo cut at end and
// starts a networkless mysqld on it.
func restoreAndStart(t *testing.T, name, data, logfile string, end uint64, lo layout) *mysqlServer {
	t.Helper()
	dd := filepath.Join(t.TempDir(), name)
	copyDir(t, data, dd)
	if err := os.RemoveAll(filepath.Join(dd, DirName)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(logfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t0 := time.Now()
	if err := writeRedoDir(f, fileSize(t, f), end, dd, creator, lo); err != nil {
		t.Fatalf("%s: WriteRedoDir: %v", name, err)
	}
	files, err := ListFiles(filepath.Join(dd, DirName))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var sizes []string
	for _, f := range files {
		sizes = append(sizes, fmt.Sprintf("%s %d bytes [%d, %d) flags %#x", filepath.Base(f.Path), f.Size, f.StartLSN, f.EndLSN, f.Header.Flags))
	}
	t.Logf("%s: wrote %d redo file(s) in %v: %s", name, len(files), time.Since(t0).Round(time.Millisecond), strings.Join(sizes, "; "))
	t0 = time.Now()
	s := startMySQL(t, dd, false, "--log-error-verbosity=3")
	t.Logf("%s: mysqld started on the copy in %v", name, time.Since(t0).Round(time.Millisecond))
	return s
}

// checkRestored checks a restored server: recovery ran from a and the tables hold
// what the lock saw; the doublewrite files the copy lacked were made.
func checkRestored(t *testing.T, s *mysqlServer, lock state, a, e uint64) {
	t.Helper()
	log := s.log(t)
	var innodb []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "[InnoDB]") && (strings.Contains(l, "ecover") || strings.Contains(l, "redo") ||
			strings.Contains(l, "LSN") || strings.Contains(l, "lsn") || !strings.Contains(l, "[Note]")) {
			innodb = append(innodb, l[strings.Index(l, "[InnoDB]")+9:])
		}
	}
	t.Logf("restored server's InnoDB log:\n\t%s", strings.Join(innodb, "\n\t"))
	if !strings.Contains(log, "Starting crash recovery") || !strings.Contains(log, fmt.Sprintf("checkpoint_lsn = %d", a)) {
		t.Errorf("error log does not show a crash recovery from the checkpoint %d", a)
	}
	checkScannedTo(t, log, e)
	if strings.Contains(log, "[ERROR]") {
		t.Errorf("the restored server logged errors")
	}
	if got := readState(t, s.db); got != lock {
		t.Fatalf("restored %+v, under the lock %+v", got, lock)
	}
	dblwr, _ := filepath.Glob(filepath.Join(s.datadir, "*.dblwr"))
	if len(dblwr) == 0 {
		t.Error("the restored server made no doublewrite files")
	}
	t.Logf("restored tables equal the lock's state; %d .dblwr files made at start", len(dblwr))
	s.stop(t)
}

// checkScannedTo checks that recovery scanned the log up to end, and no further.
func checkScannedTo(t *testing.T, log string, end uint64) {
	t.Helper()
	const scanned = "scanned up to log sequence number "
	i := strings.LastIndex(log, scanned)
	var last uint64
	if i >= 0 {
		fmt.Sscan(log[i+len(scanned):], &last)
	}
	if last != end {
		t.Errorf("recovery scanned up to LSN %d, want %d", last, end)
	}
}

// gatedWriter blocks the first write after the header until gate is closed.
type gatedWriter struct {
	w      *bytes.Buffer
	gate   chan struct{}
	writes int
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	g.writes++
	if g.writes == 2 {
		<-g.gate
	}
	return g.w.Write(b)
}

func testLapped(t *testing.T, template string) {
	s := newServer(t, template)
	srv := StatusLSN{DB: s.db}
	out := &gatedWriter{w: new(bytes.Buffer), gate: make(chan struct{})}
	tl, err := Open(Config{Dir: s.redoDir(), Out: out, Server: srv, Creator: "xtrabkup ferry-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := runTailer(ctx, tl)
	load := startLoad(s.db, 4)
	defer load.stop()
	waitLSN(t, srv, tl.Start().LSN+3*capacity, time.Minute) // the copy holds its first blocks meanwhile
	close(out.gate)
	err = <-done
	var ow *OverwrittenError
	if !errors.As(err, &ow) || !errors.Is(err, redo.ErrLogOverwritten) {
		t.Fatalf("Run = %v, want *OverwrittenError", err)
	}
	t.Logf("lapped copy: %v", err)
	if load.stop() != nil {
		t.Fatal(load.err)
	}
}

func testConsumer(t *testing.T, template string) {
	s := newServer(t, template)
	srv := StatusLSN{DB: s.db}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, before, _ := srv.LSNs(ctx)
	c, err := RegisterConsumer(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	out := &gatedWriter{w: new(bytes.Buffer), gate: make(chan struct{})}
	tl, err := Open(Config{Dir: s.redoDir(), Out: out, Server: srv, Creator: "xtrabkup ferry-test", Advance: c.Advance})
	if err != nil {
		t.Fatal(err)
	}
	a := tl.Start().LSN
	done := runTailer(ctx, tl)
	load := startLoad(s.db, 4)
	defer load.stop()
	// The copy is held: the server must stall rather than recycle what it needs.
	stall := waitStall(t, srv, 3*time.Second, time.Minute)
	t.Logf("registered at LSN %d (checkpoint A %d); the server stalled at LSN %d = A + %.2f MiB with the copy held at %d",
		before, a, stall, float64(stall-a)/(1<<20), tl.Copied())
	if stall-a > capacity+capacity/4 {
		t.Errorf("the server wrote %d bytes past A with the consumer held there", stall-a)
	}
	close(out.gate)
	waitLSN(t, srv, stall+2*capacity, time.Minute)
	_, cur, _ := srv.LSNs(ctx)
	tl.StopAt(cur)
	s.exec(t, "FLUSH NO_WRITE_TO_BINLOG ENGINE LOGS")
	waitRun(t, "consumer copy", done)
	if err := c.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if err := load.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	b := out.w.Bytes()
	if start, end, err := ScanReader(bytes.NewReader(b), int64(len(b))); err != nil || start != a || end < cur {
		t.Fatalf("ScanReader = %d, %d, %v", start, end, err)
	}
	t.Logf("copy with a consumer: %d bytes from A %d to %d, no lap", len(b), a, cur)
}

// waitStall waits until the server's current LSN has not moved for quiet and
// returns it.
func waitStall(t *testing.T, srv StatusLSN, quiet, within time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(within)
	var last uint64
	since := time.Now()
	for time.Now().Before(deadline) {
		_, cur, err := srv.LSNs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= quiet {
			return cur
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the server did not stall (LSN %d)", last)
	return 0
}

func testRedoDisabled(t *testing.T, template string) {
	s := newServer(t, template)
	srv := StatusLSN{DB: s.db}
	tl, err := Open(Config{Dir: s.redoDir(), Out: new(bytes.Buffer), Server: srv, Creator: "xtrabkup ferry-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := runTailer(ctx, tl)
	s.exec(t, "INSERT INTO d.h (w, n) VALUES (1, 1)", "ALTER INSTANCE DISABLE INNODB REDO_LOG",
		"INSERT INTO d.h (w, n) VALUES (1, 2)")
	files, _ := ListFiles(s.redoDir())
	t.Logf("after ALTER INSTANCE DISABLE INNODB REDO_LOG: newest file %s flags %#x", filepath.Base(files[len(files)-1].Path),
		files[len(files)-1].Header.Flags)
	_, cur, _ := srv.LSNs(ctx)
	tl.StopAt(cur)
	err = <-done
	if !errors.Is(err, ErrRedoDisabled) {
		t.Fatalf("Run = %v, want ErrRedoDisabled", err)
	}
	t.Logf("copy during disabled redo: %v", err)
	s.exec(t, "ALTER INSTANCE ENABLE INNODB REDO_LOG")
}

// heldWriter blocks a write once hold says so, until gate is closed.
type heldWriter struct {
	w    io.Writer
	hold func() bool
	gate chan struct{}
	held atomic.Bool
}

func (h *heldWriter) Write(b []byte) (int, error) {
	if h.hold != nil && h.hold() {
		h.held.Store(true)
		<-h.gate
	}
	return h.w.Write(b)
}

// testArchive: a copy that follows the server's redo log archive is held once it
// reached the archive, while the server writes three times its redo capacity (which
// laps a copy of the files, testLapped); released, it completes, and the backup
// restores to exactly what the lock saw.
func testArchive(t *testing.T, template string) {
	s := newServer(t, template)
	srv := StatusLSN{DB: s.db}
	dirs := t.TempDir() // 0700, outside the datadir
	s.exec(t, "SET GLOBAL innodb_redo_log_archive_dirs = 'ferry:"+dirs+"'")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A label the server does not know: refused, and nothing left behind.
	other, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartArchive(ctx, other, ArchiveDir{Label: "nope", Dir: dirs}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("StartArchive with an unknown label = %v", err)
	}
	if left, _ := os.ReadDir(dirs); len(left) != 0 {
		t.Fatalf("a refused start left %d entries in the archive directory", len(left))
	}
	arch, err := StartArchive(ctx, conn, ArchiveDir{Label: "ferry", Dir: dirs})
	if err != nil {
		t.Fatal(err)
	}
	backup := t.TempDir()
	f, err := os.Create(filepath.Join(backup, "xtrabackup_logfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := &heldWriter{w: f, gate: make(chan struct{})}
	tl, err := Open(Config{Dir: s.redoDir(), Out: out, Server: srv, Creator: "xtrabkup ferry-test", Poll: 10 * time.Millisecond, Archive: arch})
	if err != nil {
		t.Fatal(err)
	}
	out.hold = func() bool { at := tl.ArchiveStart(); return at != 0 && tl.Copied() >= at }
	a := tl.Start().LSN
	done := runTailer(ctx, tl)
	load := startLoad(s.db, 4)
	defer load.stop()
	waitLSN(t, srv, a+capacity, time.Minute)
	copyLive(t, s.datadir, filepath.Join(backup, "data"))
	waitLSN(t, srv, tl.Copied()+3*capacity, time.Minute)
	if !out.held.Load() {
		t.Fatalf("the copy was never held (archive start %d, copied %d)", tl.ArchiveStart(), tl.Copied())
	}
	held := tl.Copied()
	close(out.gate)
	lock, e := consistentPoint(t, s)
	tl.StopAt(e)
	waitRun(t, "archived copy", done)
	if err := load.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("A %d, archive from %d, held at %d, E %d: %.1f capacities copied from the archive after the hold",
		a, tl.ArchiveStart(), held, e, float64(e-held)/capacity)
	checkCopy(t, f.Name(), a, e)
	if err := arch.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dirs); len(left) != 0 {
		t.Errorf("Stop left %d entries in the archive directory", len(left))
	}
	s.stop(t)
	restored := restoreAndStart(t, "archived", filepath.Join(backup, "data"), f.Name(), e, defaultLayout())
	checkRestored(t, restored, lock, a, e)
}
