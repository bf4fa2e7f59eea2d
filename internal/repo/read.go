package repo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sort"
	"sync/atomic"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/faultpoint"
	"github.com/ferry-backup/ferry/internal/manifest"
	"golang.org/x/sync/errgroup"
)

// ErrDamaged marks data that failed a check: a stored object whose bytes do not match
// the manifest, or a blob that does not decrypt or decompress.
var ErrDamaged = errors.New("damaged")

// ReadOptions configures ReadBackup.
type ReadOptions struct {
	Identities []age.Identity // for an encrypted backup
	Parallel   int            // objects read at once; default 8
	// Skip, if set, names objects not to read (already restored).
	Skip func(object string) bool
	// Done, if set, is called after every blob of an object was read and checked.
	Done func(object string) error
	// Unreferenced: also read (and check) the objects no blob references, parts of
	// copies that DDL made stale during the backup; a restore has no use for them.
	Unreferenced bool
	// Round selects the blobs read: 0 the files' own, k > 0 their patches of re-copy
	// round k (applied over the files' blobs, after them, round by round), AllRounds
	// both (to check every stored byte).
	Round int
}

// AllRounds as ReadOptions.Round reads the files' blobs and all their patches.
const AllRounds = -1

// Patched says how many re-copy rounds backup m stores patches of, and their bytes.
func Patched(m *manifest.Manifest) (rounds int, bytes int64) {
	for _, f := range m.Files {
		for _, p := range f.Patches {
			rounds, bytes = max(rounds, p.Round), bytes+p.RawSize
		}
	}
	return rounds, bytes
}

// BlobFunc receives the decoded bytes of one blob of file f. It must read r to its
// end and be idempotent: a read that breaks off is retried from the blob's start.
type BlobFunc func(f *manifest.File, b *manifest.Blob, r io.Reader) error

// objectRead is one object to read, with its blobs in offset order.
type objectRead struct {
	obj   manifest.Object
	blobs []blobRef
}

type blobRef struct {
	f *manifest.File
	b *manifest.Blob
}

// ReadBackup reads every object of backup m once, in parallel, and passes each blob's
// decoded bytes to fn. Every byte is checked: each object's size and CRC-32C, each
// blob's stored and decoded CRC-32C and size, the age authentication and the frame
// checksums. A check failing is an ErrDamaged error naming the object.
//
// An object is read from start to end by one reader, but its small blobs are decoded
// and passed to fn by a pool of decoders (as many as Parallel, shared by the objects):
// a backup of many small files packs them into few objects, and fn's writes of one
// object then overlap instead of waiting on each other.
func (r *Repo) ReadBackup(ctx context.Context, m *manifest.Manifest, o ReadOptions, fn BlobFunc) error {
	if m.Storage.Encryption != "" && len(o.Identities) == 0 {
		return codec.ErrNoIdentity
	}
	reads, err := plan(m, o.Round)
	if err != nil {
		return err
	}
	parallel := cmp.Or(o.Parallel, defaults.Downloads)
	decs, err := newDecoders(m, parallel)
	if err != nil {
		return err
	}
	defer decs.close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var done atomic.Int64
	for _, rd := range reads {
		if o.Skip != nil && o.Skip(rd.obj.Key) || len(rd.blobs) == 0 && !o.Unreferenced {
			continue
		}
		g.Go(func() error {
			if err := r.readObject(gctx, m, rd, o.Identities, decs, fn); err != nil {
				return err
			}
			if o.Done != nil {
				if err := o.Done(rd.obj.Key); err != nil {
					return err
				}
			}
			faultpoint.At(gctx, "restore-object", int(done.Add(1)))
			return nil
		})
	}
	return g.Wait()
}

// plan groups the manifest's blobs (or the patches of a round) by object.
func plan(m *manifest.Manifest, round int) ([]*objectRead, error) {
	byKey := map[string]*objectRead{}
	var out []*objectRead
	for _, obj := range m.Objects {
		rd := &objectRead{obj: obj}
		byKey[obj.Key] = rd
		out = append(out, rd)
	}
	for i := range m.Files {
		f := &m.Files[i]
		for _, b := range selectBlobs(f, round) {
			rd, ok := byKey[b.Object]
			if !ok {
				return nil, fmt.Errorf("%w: the manifest of %s stores %s in object %s, which it does not list", ErrDamaged, m.ID, f.Path, b.Object)
			}
			rd.blobs = append(rd.blobs, blobRef{f, b})
		}
	}
	for _, rd := range out {
		sort.Slice(rd.blobs, func(a, b int) bool { return rd.blobs[a].b.Offset < rd.blobs[b].b.Offset })
	}
	return out, nil
}

// selectBlobs returns f's blobs of the round ReadOptions.Round names.
func selectBlobs(f *manifest.File, round int) []*manifest.Blob {
	var out []*manifest.Blob
	if round == 0 || round == AllRounds {
		for j := range f.Blobs {
			out = append(out, &f.Blobs[j])
		}
	}
	for j := range f.Patches {
		if round == AllRounds || f.Patches[j].Round == round {
			out = append(out, &f.Patches[j])
		}
	}
	return out
}

// readObject reads one object and its blobs. A damaged read is tried once more before
// it is reported: the bytes may have been damaged on their way.
func (r *Repo) readObject(ctx context.Context, m *manifest.Manifest, rd *objectRead, ids []age.Identity, decs *decoders, fn BlobFunc) error {
	key := ObjectKey(m.ID, rd.obj.Key)
	var err error
	for try := 0; try < 2; try++ {
		err = r.st.Get(ctx, key, 0, -1, func(body io.Reader) error {
			return readBlobs(ctx, body, m, rd, ids, decs, fn)
		})
		if !errors.Is(err, ErrDamaged) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("object %s: %w", key, err)
	}
	return nil
}

// smallBlob is the largest stored blob read into memory and handed to a decoder of the
// pool; a larger one is decoded as it is read.
const smallBlob = 1 << 20

// readBlobs walks the object's bytes: each blob in order, then the rest, checking the
// object's CRC-32C and size at the end. Small blobs are decoded by the pool while the
// walk goes on; it returns once all of them are done.
func readBlobs(ctx context.Context, body io.Reader, m *manifest.Manifest, rd *objectRead, ids []age.Identity, decs *decoders, fn BlobFunc) error {
	h := crc32.New(checksum.Table)
	hashes := io.Writer(h)
	var sum hash.Hash
	if rd.obj.SHA256 != "" {
		sum = sha256.New()
		hashes = io.MultiWriter(h, sum)
	}
	in := &countReader{r: io.TeeReader(body, hashes)}
	g, gctx := errgroup.WithContext(ctx)
	err := walkBlobs(gctx, g, in, m, rd, ids, decs, fn)
	if werr := g.Wait(); werr != nil {
		return werr // a decoder's error: the walk stopped because of it
	}
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return err
	}
	if in.err != nil {
		return in.err
	}
	if in.n != rd.obj.Size || checksum.Hex(h.Sum32()) != rd.obj.CRC32C {
		return fmt.Errorf("%w: %d bytes with CRC-32C %s, the manifest says %d bytes with %s", ErrDamaged, in.n, checksum.Hex(h.Sum32()), rd.obj.Size, rd.obj.CRC32C)
	}
	if sum != nil && hex.EncodeToString(sum.Sum(nil)) != rd.obj.SHA256 {
		return fmt.Errorf("%w: its SHA-256 is not the one the signed manifest records: it was replaced", ErrDamaged)
	}
	return nil
}

// walkBlobs reads the object's blobs in order: a small one into memory, then decoded
// in g by a decoder of the pool; a large one decoded here.
func walkBlobs(ctx context.Context, g *errgroup.Group, in *countReader, m *manifest.Manifest, rd *objectRead, ids []age.Identity, decs *decoders, fn BlobFunc) error {
	for _, br := range rd.blobs {
		if err := ctx.Err(); err != nil {
			return err // a decoder failed, or the read was cancelled
		}
		gap := br.b.Offset - in.n
		if gap < 0 {
			return fmt.Errorf("%w: blobs of the manifest overlap at offset %d", ErrDamaged, br.b.Offset)
		}
		if _, err := io.CopyN(io.Discard, in, gap); err != nil {
			return short(err, rd.obj)
		}
		dec, err := decs.get(ctx)
		if err != nil {
			return err
		}
		if br.b.StoredSize > smallBlob {
			err := readBlob(in, m, br, ids, dec, fn)
			decs.put(dec)
			if err != nil {
				return err
			}
			continue
		}
		stored := make([]byte, br.b.StoredSize)
		if _, err := io.ReadFull(in, stored); err != nil {
			decs.put(dec)
			if in.err != nil {
				return in.err
			}
			return short(err, rd.obj)
		}
		g.Go(func() error {
			defer decs.put(dec)
			return readBlob(&countReader{r: bytes.NewReader(stored)}, m, br, ids, dec, fn)
		})
	}
	return nil
}

// short explains an object that ended early.
func short(err error, obj manifest.Object) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: shorter than the %d bytes the manifest says (truncated)", ErrDamaged, obj.Size)
	}
	return err
}

// readBlob decodes one blob (decrypt, decompress) into fn, checking its stored bytes
// and its decoded bytes against the manifest.
func readBlob(in *countReader, m *manifest.Manifest, br blobRef, ids []age.Identity, d *codec.Decoder, fn BlobFunc) error {
	b := br.b
	stored := &checkReader{r: io.LimitReader(in, b.StoredSize), h: crc32.New(checksum.Table)}
	var src io.Reader = stored
	if m.Storage.Encryption != "" {
		d, err := codec.Decrypt(stored, ids)
		if err != nil {
			return classify(err, in, stored, br)
		}
		src = d
	}
	dec, err := d.Reset(src)
	if err != nil {
		return classify(err, in, stored, br)
	}
	raw := &checkReader{r: dec, h: crc32.New(checksum.Table)}
	if err := fn(br.f, b, raw); err != nil {
		return classify(err, in, raw, br)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return classify(err, in, raw, br)
	}
	if _, err := io.Copy(io.Discard, stored); err != nil {
		return classify(err, in, stored, br)
	}
	switch {
	case stored.n != b.StoredSize || checksum.Hex(stored.h.Sum32()) != b.StoredCRC32C:
		return fmt.Errorf("%w: bytes %d to %d (%s from byte %d) have CRC-32C %s, the manifest says %s", ErrDamaged,
			b.Offset, b.Offset+b.StoredSize, br.f.Path, b.RawOffset, checksum.Hex(stored.h.Sum32()), b.StoredCRC32C)
	case raw.n != b.RawSize || checksum.Hex(raw.h.Sum32()) != b.CRC32C:
		return fmt.Errorf("%w: %s from byte %d decodes to %d bytes with CRC-32C %s, the manifest says %d bytes with %s", ErrDamaged,
			br.f.Path, b.RawOffset, raw.n, checksum.Hex(raw.h.Sum32()), b.RawSize, b.CRC32C)
	}
	return nil
}

// decoders is the pool of blob decoders of one ReadBackup: each is used by one blob at
// a time, so that at most as many small blobs are held and decoded at once.
type decoders struct {
	free chan *codec.Decoder
	all  []*codec.Decoder
}

// newDecoders makes n decoders of m's compression.
func newDecoders(m *manifest.Manifest, n int) (*decoders, error) {
	comp := codec.Compression(m.Storage.Compression)
	if comp == "" {
		comp = codec.None
	}
	p := &decoders{free: make(chan *codec.Decoder, n)}
	for range n {
		d, err := codec.NewDecoder(comp)
		if err != nil {
			p.close()
			return nil, err
		}
		p.all = append(p.all, d)
		p.free <- d
	}
	return p, nil
}

// get waits for a free decoder.
func (p *decoders) get(ctx context.Context) (*codec.Decoder, error) {
	select {
	case d := <-p.free:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *decoders) put(d *codec.Decoder) { p.free <- d }

func (p *decoders) close() {
	for _, d := range p.all {
		d.Close()
	}
}

// classify tells what failed while a blob was read through r: the connection (its
// error, transient, so the read is retried), the decoding of bytes that did arrive
// (damage, or a wrong key), or the caller's own work (e.g. a full disk), as it is.
func classify(err error, in *countReader, r *checkReader, br blobRef) error {
	switch {
	case in.err != nil:
		return in.err
	case errors.Is(err, codec.ErrWrongKey), errors.Is(err, codec.ErrNoIdentity):
		return err
	case r.err != nil && r.err != io.EOF:
		return fmt.Errorf("%w: %s from byte %d does not decode: %v", ErrDamaged, br.f.Path, br.b.RawOffset, r.err)
	}
	return err // the caller's own (a blob cut short is caught by the size check)
}

// countReader counts the object's bytes and keeps its first read error.
type countReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// checkReader counts and checksums what passes through and keeps its read error.
type checkReader struct {
	r   io.Reader
	h   hash.Hash32
	n   int64
	err error
}

func (c *checkReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// CheckKey makes sure ids open an encrypted backup before anything is written: it
// decrypts the header of the backup's first blob (one small ranged read). A backup that
// is not encrypted needs no key.
func (r *Repo) CheckKey(ctx context.Context, m *manifest.Manifest, ids []age.Identity) error {
	if m.Storage.Encryption == "" {
		return nil
	}
	if len(ids) == 0 {
		return codec.ErrNoIdentity
	}
	for _, f := range m.Files {
		if len(f.Blobs) == 0 {
			continue
		}
		b := f.Blobs[0]
		return r.st.Get(ctx, ObjectKey(m.ID, b.Object), b.Offset, min(b.StoredSize, 64<<10), func(rd io.Reader) error {
			_, err := codec.Decrypt(rd, ids)
			return err
		})
	}
	return nil
}

// Load returns the manifest of backup id (or "latest") ready to be read: validated, and
// for an encrypted backup with ids checked against it.
func (r *Repo) Load(ctx context.Context, id string, ids []age.Identity) (*manifest.Manifest, error) {
	m, err := r.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := Validate(m); err != nil {
		return nil, err
	}
	if err := r.CheckKey(ctx, m, ids); err != nil {
		return nil, err
	}
	return m, nil
}
