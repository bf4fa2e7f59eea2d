// Package hostile builds malformed and hostile inputs for tests.
package hostile

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"github.com/ferry-backup/ferry/internal/xbstream"
	"github.com/klauspost/compress/zstd"
)

// OpenFilesStream is a hostile xbstream that opens n zstd-compressed files, each with
// the first half of a real frame, and closes none: a reader starts a decoder for
// every file and each waits for more.
func OpenFilesStream(n int) []byte {
	raw := make([]byte, 256<<10)
	rand.Read(raw)
	enc, _ := zstd.NewWriter(nil)
	frame := enc.EncodeAll(raw, nil)
	var out bytes.Buffer
	w := xbstream.NewWriter(&out)
	for i := 0; i < n; i++ {
		w.WritePayload(fmt.Sprintf("db/t%d.ibd.zst", i), 0, frame[:len(frame)/2])
	}
	return out.Bytes()
}
