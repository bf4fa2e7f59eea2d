package stream

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
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// Source is a backup that arrives as a stream (ferry's, or mariadb-backup
// --stream=xbstream) or through a clone's connections: Unpack writes its files into the
// staging directory and says what it wrote, which is then verified against the
// manifest the stream carries.
type Source struct {
	// Label names the stream in messages ("stdin", a file, "clone of HOST").
	Label string
	// Dir, if set, is the staging directory to create (it must not exist); default a
	// new temporary one beside the datadir.
	Dir    string
	Unpack func(ctx context.Context, staging string, env restore.Env) (*Unpacked, error)

	followLog bool        // Unpack tells feed how the log is written
	feed      *apply.Feed // set by LogFeed
}

// NewSource reads an xbstream from r (named name), decrypting with ids and
// holding at most maxMemory of data between the reader and the file writers.
func NewSource(r io.Reader, name string, ids []age.Identity, maxMemory int64) *Source {
	s := &Source{Label: name, followLog: true}
	s.Unpack = func(ctx context.Context, staging string, env restore.Env) (*Unpacked, error) {
		env.Log.Info("restoring from a stream", "from", name, "staging", staging, "memory_budget_mib", maxMemory>>20)
		prog := env.Reporter(-1)
		defer prog.Finish()
		if env.Want != nil {
			env.Log.Info("writing only the files the tables need; the others are decoded and checked")
		}
		return Unpack(ctx, cancelable(ctx, r), staging, UnpackOptions{Identities: ids, MaxMemory: maxMemory, Progress: prog.Add,
			Keep: env.Want, Follow: s.follower(staging)})
	}
	return s
}

var (
	_ restore.Source    = (*Source)(nil)
	_ restore.Following = (*Source)(nil)
)

// LogFeed implements restore.Following: a stream this package unpacks (not a clone's) has its
// log parsed as it is unpacked.
func (s *Source) LogFeed(staging string) *apply.Feed {
	if !s.followLog {
		return nil
	}
	s.feed = apply.NewFeed(filepath.Join(staging, restore.LogName))
	return s.feed
}

// follower is the stream's Follow option for an unpack into staging: the feed, for
// the log.
func (s *Source) follower(staging string) func(string) Follower {
	return func(path string) Follower {
		if s.feed == nil || path != restore.LogName || s.feed.Path() != filepath.Join(staging, restore.LogName) {
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

// Name implements restore.Source.
func (s *Source) Name() string { return s.Label }

// Caps implements restore.Source: a stream is read once, in order, and tells nothing before
// its data; one this package unpacks has its log parsed as it lands.
func (s *Source) Caps() restore.Caps { return restore.Caps{FollowLog: s.followLog} }

// Inspect implements restore.Source: nothing is known of a stream before its data.
func (s *Source) Inspect(context.Context) (*restore.Backup, error) { return nil, restore.ErrNoInspect }

// Staging implements restore.Source: a new directory (or Dir), removed if the restore fails.
func (s *Source) Staging(datadir string) (string, error) {
	return restore.NewStaging(datadir, s.Dir)
}

// Fill implements restore.Source: it unpacks the stream into staging and checks every file
// against the manifest (or, for a mariadb-backup stream, that the stream is whole).
func (s *Source) Fill(ctx context.Context, staging string, env restore.Env) (*restore.Backup, error) {
	got, err := s.Unpack(ctx, staging, env)
	if err != nil {
		return nil, fmt.Errorf("restore from %s: %w", s.Label, err)
	}
	if err := verifyStream(staging, got); err != nil {
		return nil, fmt.Errorf("restore from %s: %w", s.Label, err)
	}
	b, err := restore.Open(staging)
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
func verifyStream(dir string, got *Unpacked) error {
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
			return checksum.Mismatch(fmt.Errorf("the stream lacks %s, which its manifest lists: the stream is damaged", f.Path))
		}
		if g.Size != f.Size || checksum.Hex(g.CRC) != f.CRC32C {
			return checksum.Mismatch(fmt.Errorf("%s (stored as %s) does not match the manifest: %d bytes with CRC-32C %s, expected %d bytes with %s: the stream was damaged before it was framed", f.Path, g.Stored, g.Size, checksum.Hex(g.CRC), f.Size, f.CRC32C))
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
