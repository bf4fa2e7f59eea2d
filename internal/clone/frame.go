package clone

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame types. docs/clone.md specifies the protocol.
const (
	frameJSON   byte = 1 // a control message (hello, welcome, start, result), JSON payload
	frameData   byte = 2 // bytes of a file at an offset
	frameClose  byte = 3 // a file is complete at size Off after RawLen data frames; created if there were none
	frameRemove byte = 4 // forget a file (a stale copy)
	frameRename byte = 5 // rename Path to the payload
	frameCommit byte = 6 // every file is complete; the payload is the manifest (JSON)
	frameAck    byte = 7 // recipient → donor: frame Seq is applied
	frameError  byte = 8 // either way: the sender failed; the payload says why
)

// Frame flags.
const (
	flagSparse byte = 1 << 0 // the file keeps holes where blocks are zero
	// flagPatch marks a data frame of pages copied again (the three-stage copy): it
	// goes over a file already complete, after every frame of an earlier round.
	flagPatch byte = 1 << 1
)

// Codecs of a data frame's payload.
const (
	codecNone byte = 0
	codecLZ4  byte = 1
	codecZstd byte = 2
)

// headerSize is the fixed part of a frame: type, flags, codec, reserved, path length,
// seq, handle, offset, raw length, payload length, CRC-32C of the raw bytes.
const headerSize = 1 + 1 + 1 + 1 + 2 + 8 + 8 + 8 + 4 + 4 + 4

// maxPayload bounds a frame's payload: a corrupt length must not allocate gigabytes.
const maxPayload = 64 << 20

// maxPath bounds a frame's path.
const maxPath = 4096

// frame is one message of the protocol.
type frame struct {
	typ     byte
	flags   byte
	codec   byte
	seq     uint64 // donor frames: numbered from 1; acks carry the acked seq
	handle  uint64 // file handle: one per Create on the donor
	off     int64  // data: offset; close: final size
	rawLen  uint32 // data: bytes once decoded; close: number of data frames
	crc     uint32 // data: CRC-32C of the decoded bytes
	path    string
	payload []byte

	cost int64         // donor: budget bytes the frame holds until acknowledged
	done chan struct{} // donor: closed on acknowledgement (control frames)
}

// wireSize is the frame's size on the connection.
func (f *frame) wireSize() int { return headerSize + len(f.path) + len(f.payload) }

// writeFrame writes f to w.
func writeFrame(w *bufio.Writer, f *frame) error {
	if len(f.path) > maxPath || len(f.payload) > maxPayload {
		return fmt.Errorf("frame too large (internal error)")
	}
	var h [headerSize]byte
	h[0], h[1], h[2] = f.typ, f.flags, f.codec
	binary.LittleEndian.PutUint16(h[4:], uint16(len(f.path)))
	binary.LittleEndian.PutUint64(h[6:], f.seq)
	binary.LittleEndian.PutUint64(h[14:], f.handle)
	binary.LittleEndian.PutUint64(h[22:], uint64(f.off))
	binary.LittleEndian.PutUint32(h[30:], f.rawLen)
	binary.LittleEndian.PutUint32(h[34:], uint32(len(f.payload)))
	binary.LittleEndian.PutUint32(h[38:], f.crc)
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	if _, err := w.WriteString(f.path); err != nil {
		return err
	}
	_, err := w.Write(f.payload)
	return err
}

// errProtocol marks a peer that does not speak the protocol.
var errProtocol = errors.New("protocol error")

// maxHandshake bounds a frame read before the peer has authenticated (a hello or a
// welcome is a few hundred bytes): a stranger cannot make ferry allocate more.
const maxHandshake = 4 << 10

// readFrame reads one frame from r; the payload is freshly allocated.
func readFrame(r *bufio.Reader) (*frame, error) { return readFrameMax(r, maxPayload) }

// readFrameMax reads one frame whose path and payload together are at most limit
// bytes; a larger one is refused before anything is allocated for it.
func readFrameMax(r *bufio.Reader, limit int) (*frame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	f := &frame{typ: h[0], flags: h[1], codec: h[2]}
	plen := int(binary.LittleEndian.Uint16(h[4:]))
	f.seq = binary.LittleEndian.Uint64(h[6:])
	f.handle = binary.LittleEndian.Uint64(h[14:])
	f.off = int64(binary.LittleEndian.Uint64(h[22:]))
	f.rawLen = binary.LittleEndian.Uint32(h[30:])
	n := int(binary.LittleEndian.Uint32(h[34:]))
	f.crc = binary.LittleEndian.Uint32(h[38:])
	if f.typ < frameJSON || f.typ > frameError || plen > maxPath || n > maxPayload || f.rawLen > maxPayload {
		return nil, fmt.Errorf("%w: bad frame header (type %d, path %d bytes, payload %d bytes)", errProtocol, f.typ, plen, n)
	}
	if plen+n > limit {
		return nil, fmt.Errorf("%w: a frame of %d bytes before authentication (at most %d)", errProtocol, plen+n, limit)
	}
	buf := make([]byte, plen+n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, noEOF(err)
	}
	f.path, f.payload = string(buf[:plen]), buf[plen:]
	return f, nil
}

// noEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// jsonFrame wraps a control message.
func jsonFrame(v any) (*frame, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return &frame{typ: frameJSON, payload: b}, nil
}

// decodeJSON reads a control message out of f.
func decodeJSON(f *frame, v any) error {
	if f.typ == frameError {
		return remoteError(string(f.payload))
	}
	if f.typ != frameJSON {
		return fmt.Errorf("%w: expected a control message, got frame type %d", errProtocol, f.typ)
	}
	if err := json.Unmarshal(f.payload, v); err != nil {
		return fmt.Errorf("%w: bad control message: %v", errProtocol, err)
	}
	return nil
}

// remoteError is a failure the peer reported.
type remoteError string

func (e remoteError) Error() string { return string(e) }
