package restore

import (
	"context"
	"io"

	"errors"
	"filippo.io/age"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ferry-backup/ferry/internal/apply"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/stream"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// StreamSource is a backup that arrives as a stream (ferry's, or mariadb-backup
// --stream=xbstream) or through a clone's connections: Unpack writes its files into the
// staging directory and says what it wrote, which is then verified against the
// manifest the stream carries.
type StreamSource struct {
	// Label names the stream in messages ("stdin", a file, "clone of HOST").
	Label string
	// Dir, if set, is the staging directory to create (it must not exist); default a
	// new temporary one beside the datadir.
	Dir    string
	Unpack func(ctx context.Context, staging string, env Env) (*stream.Unpacked, error)

	followLog bool        // Unpack tells feed how the log is written
	feed      *apply.Feed // set by LogFeed
}

// NewStreamSource reads an xbstream from r (named name), decrypting with ids and
// holding at most maxMemory of data between the reader and the file writers.
func NewStreamSource(r io.Reader, name string, ids []age.Identity, maxMemory int64) *StreamSource {
	s := &StreamSource{Label: name, followLog: true}
	s.Unpack = func(ctx context.Context, staging string, env Env) (*stream.Unpacked, error) {
		env.Log.Info("restoring from a stream", "from", name, "staging", staging, "memory_budget_mib", maxMemory>>20)
		prog := env.Reporter(-1)
		defer prog.Finish()
		if env.Want != nil {
			env.Log.Info("writing only the files the tables need; the others are decoded and checked")
		}
		return stream.Unpack(ctx, cancelable(ctx, r), staging, stream.UnpackOptions{Identities: ids, MaxMemory: maxMemory, Progress: prog.Add,
			Keep: env.Want, Follow: s.follower(staging)})
	}
	return s
}

var _ Following = (*StreamSource)(nil)

// LogFeed implements Following: a stream this package unpacks (not a clone's) has its
// log parsed as it is unpacked.
func (s *StreamSource) LogFeed(staging string) *apply.Feed {
	if !s.followLog {
		return nil
	}
	s.feed = apply.NewFeed(filepath.Join(staging, logName))
	return s.feed
}

// follower is the stream's Follow option for an unpack into staging: the feed, for
// the log.
func (s *StreamSource) follower(staging string) func(string) stream.Follower {
	return func(path string) stream.Follower {
		if s.feed == nil || path != logName || s.feed.Path() != filepath.Join(staging, logName) {
			return nil
		}
		return s.feed
	}
}

// cancelable reads r in a goroutine of its own, so that a reader blocked on a pipe
// whose writer stalls (stdin) does not keep an interrupted restore from ending: a read
// returns the context's error as soon as it is done.
func cancelable(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r, res: make(chan readResult, 1)}
}

type readResult struct {
	buf []byte
	err error
}

// ctxReader is cancelable's reader. One read is in flight at a time, into a buffer of
// its own, so that an abandoned read never writes into the caller's.
type ctxReader struct {
	ctx     context.Context
	r       io.Reader
	res     chan readResult
	pending bool
	buf     []byte // the in-flight read's, reused: a read starts only once the last was taken
	left    []byte
}

// Read implements io.Reader.
func (c *ctxReader) Read(p []byte) (int, error) {
	if len(c.left) > 0 {
		n := copy(p, c.left)
		c.left = c.left[n:]
		return n, nil
	}
	if !c.pending {
		c.pending = true
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		buf := c.buf[:len(p)]
		go func() {
			n, err := c.r.Read(buf)
			c.res <- readResult{buf[:n], err}
		}()
	}
	select {
	case <-c.ctx.Done():
		return 0, context.Cause(c.ctx)
	case rr := <-c.res:
		c.pending = false
		n := copy(p, rr.buf)
		c.left = rr.buf[n:]
		return n, rr.err
	}
}

// Name implements Source.
func (s *StreamSource) Name() string { return s.Label }

// Caps implements Source: a stream is read once, in order, and tells nothing before
// its data; one this package unpacks has its log parsed as it lands.
func (s *StreamSource) Caps() Caps { return Caps{FollowLog: s.followLog} }

// Inspect implements Source: nothing is known of a stream before its data.
func (s *StreamSource) Inspect(context.Context) (*Backup, error) { return nil, ErrNoInspect }

// Staging implements Source: a new directory (or Dir), removed if the restore fails.
func (s *StreamSource) Staging(datadir string) (string, error) {
	return makeStaging(datadir, s.Dir)
}

// Fill implements Source: it unpacks the stream into staging and checks every file
// against the manifest (or, for a mariadb-backup stream, that the stream is whole).
func (s *StreamSource) Fill(ctx context.Context, staging string, env Env) (*Backup, error) {
	got, err := s.Unpack(ctx, staging, env)
	if err != nil {
		return nil, fmt.Errorf("restore from %s: %w", s.Label, err)
	}
	if err := verifyStream(staging, got); err != nil {
		return nil, fmt.Errorf("restore from %s: %w", s.Label, err)
	}
	b, err := Open(staging)
	if err != nil {
		return nil, fmt.Errorf("restore from %s: %w", s.Label, err)
	}
	b.Source = s.Label
	env.Log.Info("files received and verified against the manifest", "files", len(got.Files), "made_by", b.Tool())
	return b, nil
}

// verifyStream checks a ferry stream against its manifest (every file present with its
// size and CRC-32C, nothing else), and that a stream without one is a complete
// mariadb-backup stream.
func verifyStream(dir string, got *stream.Unpacked) error {
	m, err := manifest.Read(dir)
	if errors.Is(err, manifest.ErrNotFound) {
		return verifyForeignStream(dir)
	}
	if err != nil {
		return err
	}
	want := map[string]bool{manifest.FileName: true}
	for _, f := range m.Files {
		want[f.Path] = true
		g, ok := got.Files[f.Path]
		if !ok {
			return fmt.Errorf("the stream lacks %s, which its manifest lists: the stream is damaged", f.Path)
		}
		if g.Size != f.Size || checksum.Hex(g.CRC) != f.CRC32C {
			return fmt.Errorf("%s (stored as %s) does not match the manifest: %d bytes with CRC-32C %s, expected %d bytes with %s: the stream was damaged before it was framed", f.Path, g.Stored, g.Size, checksum.Hex(g.CRC), f.Size, f.CRC32C)
		}
	}
	var extra []string
	for p := range got.Files {
		if !want[p] {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("the stream holds %s, which its manifest does not list: it is not one backup", extra[0])
	}
	return nil
}

// verifyForeignStream accepts a stream without a ferry manifest only if it is a whole
// mariadb-backup stream: ferry's own streams end with their manifest.
func verifyForeignStream(dir string) error {
	info, err := xtrabackup.ReadKeyValues(filepath.Join(dir, xtrabackup.InfoFile))
	if err == nil && info["tool_name"] == "ferry" {
		return errors.New("the stream ends before ferry's manifest (truncated: the backup was interrupted or the connection dropped)")
	}
	if _, err := os.Stat(filepath.Join(dir, xtrabackup.CheckpointsFile)); err != nil {
		return fmt.Errorf("the stream has neither a ferry manifest nor %s: it is truncated or not a backup", xtrabackup.CheckpointsFile)
	}
	return nil
}

// removeBackupOnlyFiles drops from a staging directory what is not part of a datadir:
// a backup's metadata and a repository restore's journal.
func removeBackupOnlyFiles(dir string) error {
	for _, name := range []string{manifest.FileName, xtrabackup.MyCnfFile, xtrabackup.CheckpointsFile, xtrabackup.BinlogInfoFile, xtrabackup.GaleraInfoFile, xtrabackup.SlaveInfoFile, journalName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
