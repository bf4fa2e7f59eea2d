package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"
)

// Binlog event layout (MariaDB 10.x, binlog format v4).
const (
	headerSize   = replication.EventHeaderSize // 19
	checksumSize = replication.BinlogChecksumLength
	// flagArtificial marks an event the server made up for the dump stream (a Rotate
	// naming the next file); it is not in any file.
	flagArtificial = 0x20
	fileMagic      = "\xfebin"
	// flagStandalone in a GTID event: the group is one statement (DDL) with no COMMIT.
	flagStandalone = 1
)

// Event is one binlog event: where it lies in its file and the header fields ferry
// reads.
type Event struct {
	Type       replication.EventType
	Start, End int64 // offsets in the file
	Timestamp  uint32
	ServerID   uint32
	LogPos     uint32
	Flags      uint16
	Raw        []byte // the whole event, header to checksum
}

// ErrShort means the bytes end inside an event.
var ErrShort = errors.New("binlog bytes end inside an event")

// SplitEvent reads the event at the start of b, which lies at offset off of its file.
// ErrShort if b holds only part of it; a malformed header is an error.
func SplitEvent(b []byte, off int64) (Event, error) {
	if len(b) < headerSize {
		return Event{}, ErrShort
	}
	size := int64(binary.LittleEndian.Uint32(b[9:13]))
	if size < headerSize || size > MaxSegment {
		return Event{}, fmt.Errorf("binlog event at offset %d: malformed header (size %d)", off, size)
	}
	if int64(len(b)) < size {
		return Event{}, ErrShort
	}
	return Event{
		Type: replication.EventType(b[4]), Start: off, End: off + size,
		Timestamp: binary.LittleEndian.Uint32(b[0:4]), ServerID: binary.LittleEndian.Uint32(b[5:9]),
		LogPos: binary.LittleEndian.Uint32(b[13:17]), Flags: binary.LittleEndian.Uint16(b[17:19]),
		Raw: b[:size],
	}, nil
}

// Artificial says whether the server made the event up for the stream (a Rotate to the
// next file, a heartbeat): it is not part of any file.
func (e Event) Artificial() bool {
	return e.Flags&flagArtificial != 0 || e.Type == replication.HEARTBEAT_EVENT
}

// Decoder checks the events of one binlog file against their checksums and decodes
// the few ferry needs. Its first event must be the file's Format_description.
type Decoder struct {
	parser   *replication.BinlogParser
	crc      bool
	ServerID uint32 // of the Format_description
}

// NewDecoder starts a decoder on a file's Format_description event.
func NewDecoder(fde Event) (*Decoder, error) {
	if fde.Type != replication.FORMAT_DESCRIPTION_EVENT {
		return nil, fmt.Errorf("binlog event at offset %d is %v, not the Format_description that starts a file", fde.Start, fde.Type)
	}
	d := &Decoder{parser: replication.NewBinlogParser(), ServerID: fde.ServerID}
	d.parser.SetRawMode(true)
	d.parser.SetVerifyChecksum(true)
	d.parser.SetFlavor("mariadb")
	ev, err := d.parse(fde)
	if err != nil {
		return nil, err
	}
	f, ok := ev.Event.(*replication.FormatDescriptionEvent)
	if !ok {
		return nil, fmt.Errorf("binlog event at offset %d: not a Format_description", fde.Start)
	}
	if f.Version != 4 {
		return nil, fmt.Errorf("binlog format version %d: ferry reads version 4 (MariaDB 10 and later)", f.Version)
	}
	d.crc = f.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
	return d, nil
}

// parse runs the library's parser on one event (it verifies the checksum), turning a
// panic on malformed bytes into an error.
func (d *Decoder) parse(e Event) (ev *replication.BinlogEvent, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("binlog event at offset %d does not decode: %v", e.Start, r)
		}
	}()
	ev, err = d.parser.Parse(e.Raw)
	if err != nil {
		return nil, fmt.Errorf("binlog event %v at offset %d: %w", e.Type, e.Start, err)
	}
	return ev, nil
}

// Check verifies an event's checksum.
func (d *Decoder) Check(e Event) error {
	_, err := d.parse(e)
	return err
}

// body is the event's post-header and payload, without the checksum.
func (d *Decoder) body(e Event) []byte {
	b := e.Raw[headerSize:]
	if d.crc && len(b) >= checksumSize {
		b = b[:len(b)-checksumSize]
	}
	return b
}

// GTID decodes a MariaDB GTID event: its GTID and flags.
func (d *Decoder) GTID(e Event) (GTID, byte, error) {
	b := d.body(e)
	if len(b) < 13 {
		return GTID{}, 0, fmt.Errorf("GTID event at offset %d: %d bytes, too short", e.Start, len(b))
	}
	var g replication.MariadbGTIDEvent
	if len(b) < 21 && b[12]&replication.BINLOG_MARIADB_FL_GROUP_COMMIT_ID != 0 {
		return GTID{}, 0, fmt.Errorf("GTID event at offset %d: %d bytes, too short for its commit id", e.Start, len(b))
	}
	if err := g.Decode(b); err != nil {
		return GTID{}, 0, err
	}
	return GTID{Domain: g.GTID.DomainID, Server: e.ServerID, Seq: g.GTID.SequenceNumber}, g.Flags, nil
}

// GTIDList decodes a Gtid_list event: the binlog state when the file began.
func (d *Decoder) GTIDList(e Event) (State, error) {
	b := d.body(e)
	if len(b) < 4 {
		return nil, fmt.Errorf("Gtid_list event at offset %d: too short", e.Start)
	}
	n := binary.LittleEndian.Uint32(b) & (1<<28 - 1)
	if int64(len(b)) < 4+16*int64(n) {
		return nil, fmt.Errorf("Gtid_list event at offset %d: %d GTIDs in %d bytes", e.Start, n, len(b))
	}
	var l replication.MariadbGTIDListEvent
	if err := l.Decode(b); err != nil {
		return nil, err
	}
	s := State{}
	for _, g := range l.GTIDs {
		s.Add(GTID{Domain: g.DomainID, Server: g.ServerID, Seq: g.SequenceNumber})
	}
	return s, nil
}

// Ends says whether a Query event closes the group it is in: COMMIT or ROLLBACK of a
// non-transactional group (an XID event closes transactional ones).
func (d *Decoder) Ends(e Event) bool {
	b := d.body(e)
	if len(b) < 13 {
		return false
	}
	var q replication.QueryEvent
	ok := func() (ok bool) {
		defer func() {
			if recover() != nil {
				ok = false
			}
		}()
		return q.Decode(b) == nil
	}()
	if !ok {
		return false
	}
	s := strings.ToUpper(strings.TrimSpace(string(q.Query)))
	return s == "COMMIT" || s == "ROLLBACK" || strings.HasPrefix(s, "XA COMMIT") || strings.HasPrefix(s, "XA ROLLBACK")
}

// RotateEvent builds the artificial Rotate event a relay log carries before the
// source's events: it names the source file and position the events that follow
// come from, as a replica's IO thread writes it.
func (d *Decoder) RotateEvent(file string, pos int64) []byte {
	body := binary.LittleEndian.AppendUint64(nil, uint64(pos))
	body = append(body, file...)
	size := headerSize + len(body)
	if d.crc {
		size += checksumSize
	}
	ev := make([]byte, headerSize, size)
	ev[4] = byte(replication.ROTATE_EVENT)
	binary.LittleEndian.PutUint32(ev[5:9], d.ServerID)
	binary.LittleEndian.PutUint32(ev[9:13], uint32(size))
	binary.LittleEndian.PutUint16(ev[17:19], flagArtificial)
	ev = append(ev, body...)
	if d.crc {
		ev = binary.LittleEndian.AppendUint32(ev, crc32.ChecksumIEEE(ev))
	}
	return ev
}
