package binlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"filippo.io/age"
	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/ferry-backup/ferry/internal/timefmt"
)

// Options says how new segments are encoded and how stored ones are decoded.
type Options struct {
	Compression codec.Compression
	Level       int
	Recipients  []age.Recipient // encrypt new segments to these (none: not encrypted)
	Identities  []age.Identity  // decrypt stored segments
}

// Archive is the binlog archive of one repository.
type Archive struct {
	st   storage.Storage
	opts Options
	comp codec.Compressor
}

// ErrDamaged means a stored segment does not hold what its name says.
var ErrDamaged = errors.New("damaged binlog segment")

// Open returns the archive stored in st.
func Open(st storage.Storage, o Options) (*Archive, error) {
	if o.Compression == "" {
		o.Compression = codec.None
	}
	c, err := codec.NewCompressor(o.Compression, o.Level, 1)
	if err != nil {
		return nil, err
	}
	return &Archive{st: st, opts: o, comp: c}, nil
}

// Location names the archive's storage for messages.
func (a *Archive) Location() string { return a.st.Location() }

// Segments lists every stored segment in file and offset order.
func (a *Archive) Segments(ctx context.Context) ([]Segment, error) {
	var segs []Segment
	err := a.st.List(ctx, segmentsDir, func(oi storage.ObjectInfo) error {
		s, err := parseSegmentKey(oi.Key, oi.Size)
		if err != nil {
			return err
		}
		segs = append(segs, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list binlog archive at %s: %w", a.st.Location(), err)
	}
	slices.SortFunc(segs, compareSegments)
	segs, _ = splitCovered(segs)
	return segs, nil
}

// Covered lists the segments whose bytes a merged segment also holds: left when an
// archiver stopped between storing a merged segment and deleting the small ones.
func (a *Archive) Covered(ctx context.Context) ([]Segment, error) {
	var segs []Segment
	err := a.st.List(ctx, segmentsDir, func(oi storage.ObjectInfo) error {
		s, err := parseSegmentKey(oi.Key, oi.Size)
		if err == nil {
			segs = append(segs, s)
		}
		return err
	})
	slices.SortFunc(segs, compareSegments)
	_, covered := splitCovered(segs)
	return covered, err
}

// splitCovered separates, in ordered segments, those another segment of the same
// file holds whole (a merged one) from the rest.
func splitCovered(segs []Segment) (kept, covered []Segment) {
	for _, s := range segs {
		if n := len(kept); n > 0 && kept[n-1].File == s.File && kept[n-1].Start <= s.Start && s.End <= kept[n-1].End {
			covered = append(covered, s)
			continue
		}
		kept = append(kept, s)
	}
	return kept, covered
}

// Put stores data, the bytes of file from offset start, as one segment.
func (a *Archive) Put(ctx context.Context, file string, start int64, data []byte) (Segment, error) {
	if err := CheckFile(file); err != nil {
		return Segment{}, err
	}
	crc := checksum.Sum(data)
	enc, err := a.encode(data)
	if err != nil {
		return Segment{}, err
	}
	end := start + int64(len(data))
	key := segmentKey(file, start, end, crc, a.opts.Compression, len(a.opts.Recipients) > 0)
	if err := a.st.Put(ctx, key, bytes.NewReader(enc), int64(len(enc)), checksum.Sum(enc)); err != nil {
		return Segment{}, fmt.Errorf("store binlog %s bytes %d-%d: %w", file, start, end, err)
	}
	return Segment{File: file, Start: start, End: end, CRC: crc, Key: key, Comp: a.opts.Compression,
		Encrypted: len(a.opts.Recipients) > 0, StoredSize: int64(len(enc))}, nil
}

// encode compresses, then encrypts, data.
func (a *Archive) encode(data []byte) ([]byte, error) {
	if a.comp != nil {
		c, err := a.comp.Compress(nil, data)
		if err != nil {
			return nil, err
		}
		data = c
	}
	if len(a.opts.Recipients) == 0 {
		return data, nil
	}
	var out bytes.Buffer
	w, err := codec.Encrypt(&out, a.opts.Recipients)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Read returns a segment's raw bytes, checked against its size and CRC-32C.
func (a *Archive) Read(ctx context.Context, s Segment) ([]byte, error) {
	var raw []byte
	err := a.st.Get(ctx, s.Key, 0, -1, func(r io.Reader) error {
		var err error
		raw, err = a.decode(s, io.LimitReader(r, s.StoredSize+1))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("binlog segment %s: %w", s.Key, err)
	}
	if int64(len(raw)) != s.End-s.Start || checksum.Sum(raw) != s.CRC {
		return nil, fmt.Errorf("binlog segment %s: %w: %d bytes with CRC-32C %s, its name says %d bytes with %08x",
			s.Key, ErrDamaged, len(raw), checksum.Hex(checksum.Sum(raw)), s.End-s.Start, s.CRC)
	}
	return raw, nil
}

// decode decrypts and decompresses a segment's stored bytes, reading at most one byte
// more than it should hold.
func (a *Archive) decode(s Segment, r io.Reader) ([]byte, error) {
	if s.Encrypted {
		d, err := codec.Decrypt(r, a.opts.Identities)
		if err != nil {
			return nil, err
		}
		r = d
	}
	dec, err := codec.NewReader(s.Comp, r)
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := io.ReadAll(io.LimitReader(dec, s.End-s.Start+1))
	if err != nil && !errors.Is(err, codec.ErrWrongKey) && !errors.Is(err, codec.ErrNoIdentity) {
		return nil, fmt.Errorf("%w: does not decode: %v", ErrDamaged, err)
	}
	return raw, err
}

// Delete removes a segment.
func (a *Archive) Delete(ctx context.Context, s Segment) error {
	return a.st.Delete(ctx, s.Key)
}

// Gap is a stretch of the source's binlog the archive does not hold: from the end of
// what it held (After) to where it went on (Resumed).
type Gap struct {
	After    Position  `json:"after"`
	Resumed  Position  `json:"resumed"`
	Detected time.Time `json:"detected"`
	Reason   string    `json:"reason"`
	key      string
}

// String describes the gap on one line.
func (g Gap) String() string {
	return fmt.Sprintf("gap after %s, archive resumes at %s (%s, detected %s)", g.After, g.Resumed, g.Reason, timefmt.Format(g.Detected))
}

// RecordGap stores a gap record.
func (a *Archive) RecordGap(ctx context.Context, g Gap) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s%s-%012d.json", gapsDir, g.After.File, g.After.Pos)
	if err := a.st.Put(ctx, key, bytes.NewReader(b), int64(len(b)), checksum.Sum(b)); err != nil {
		return fmt.Errorf("record binlog gap: %w", err)
	}
	return nil
}

// Gaps lists the recorded gaps in order.
func (a *Archive) Gaps(ctx context.Context) ([]Gap, error) {
	var keys []string
	if err := a.st.List(ctx, gapsDir, func(oi storage.ObjectInfo) error {
		if oi.Size > 1<<16 {
			return fmt.Errorf("binlog gap record %s: %d bytes, too large", oi.Key, oi.Size)
		}
		keys = append(keys, oi.Key)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list binlog gaps: %w", err)
	}
	var gaps []Gap
	for _, k := range keys {
		var g Gap
		err := a.st.Get(ctx, k, 0, -1, func(r io.Reader) error {
			return json.NewDecoder(io.LimitReader(r, 1<<16)).Decode(&g)
		})
		if err != nil {
			return nil, fmt.Errorf("binlog gap record %s: %w", k, err)
		}
		if CheckFile(g.After.File) != nil || CheckFile(g.Resumed.File) != nil {
			return nil, fmt.Errorf("binlog gap record %s: bad file names", k)
		}
		g.key = k
		gaps = append(gaps, g)
	}
	slices.SortFunc(gaps, func(x, y Gap) int { return x.After.Compare(y.After) })
	return gaps, nil
}

// DeleteGap removes a gap record.
func (a *Archive) DeleteGap(ctx context.Context, g Gap) error { return a.st.Delete(ctx, g.key) }
