//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
	"github.com/ferry-backup/ferry/internal/xbstream"
)

// TestDamagedStreamsAreRefused: a flipped byte, a truncated stream, garbage, an empty
// stream, a stream cut before its manifest, a wrong or missing key, and a backup killed
// while piping into restore each make restore fail with its one-line error, and leave
// neither the datadir nor a staging directory behind.
func TestDamagedStreamsAreRefused(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{ServerID: 1})
	loadMixed(t, src)
	tmp := testdb.ShortDir(t)
	keyFile := filepath.Join(tmp, "key.txt")
	public := strings.TrimSpace(mustFerry(t, "keygen", "--output", keyFile).stdout)
	otherKey := filepath.Join(tmp, "other.txt")
	mustFerry(t, "keygen", "--output", otherKey)

	plain := filepath.Join(tmp, "plain.xbs")
	backupToFile(t, src, plain, "--compress", "none")
	sealed := filepath.Join(tmp, "sealed.xbs")
	backupToFile(t, src, sealed, "--encrypt-to", public)
	good, _ := os.ReadFile(plain)

	write := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x20
	cases := []struct {
		name, file, want string
		extra            []string
	}{
		{"flipped byte", write("flipped.xbs", flipped), "checksum mismatch", nil},
		{"truncated", write("truncated.xbs", good[:len(good)*3/5]), "truncated", nil},
		{"garbage", write("garbage.xbs", bytes.Repeat([]byte("garbage!"), 5000)), "not an xbstream", nil},
		{"empty", write("empty.xbs", nil), "stream is empty", nil},
		{"cut before the manifest", write("nomanifest.xbs", withoutFile(t, good, manifest.FileName)), "ends before ferry's manifest", nil},
		{"wrong key", sealed, "wrong key", []string{"--identity-file", otherKey}},
		{"missing key", sealed, "--identity-file", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			datadir := filepath.Join(tmp, "never", c.name)
			os.MkdirAll(filepath.Dir(datadir), 0o750)
			args := append([]string{"restore", "--from", c.file, "--datadir", datadir}, c.extra...)
			wantFail(t, nil, c.want, args...)
			noDatadir(t, datadir)
		})
	}

	t.Run("reader of the stream goes away", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		bk := exec.CommandContext(ctx, ferryBin, streamArgs(src, "--compress", "none")...)
		var errb bytes.Buffer
		bk.Stderr = &errb
		out, err := bk.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := bk.Start(); err != nil {
			t.Fatal(err)
		}
		io.ReadFull(out, make([]byte, 1<<20))
		out.Close()
		werr := bk.Wait()
		if werr == nil || !strings.Contains(lastLine(errb.String()), "broken pipe") {
			t.Fatalf("backup whose reader went away: %v, %q", werr, lastLine(errb.String()))
		}
		t.Logf("backup: %s", lastLine(errb.String()))
	})

	t.Run("backup killed mid-pipe", func(t *testing.T) {
		datadir := filepath.Join(tmp, "never", "killed")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", `"$1" backup --socket "$2" --user root --stream --compress none --max-rate 5M 2>/dev/null & pid=$!
			sleep 2; kill -9 $pid; wait $pid; exit 0`, "-", ferryBin, src.Socket)
		rs := exec.CommandContext(ctx, ferryBin, "restore", "--from", "-", "--datadir", datadir)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		rs.Stdin = pipe
		var errb bytes.Buffer
		rs.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rerr := rs.Run()
		cmd.Wait()
		if rerr == nil || !strings.Contains(lastLine(errb.String()), "truncated") {
			t.Fatalf("restore of a killed backup's stream: %v, %q", rerr, lastLine(errb.String()))
		}
		noDatadir(t, datadir)
	})
}

// withoutFile rewrites a stream without the chunks of one file (as if it stopped just
// before that file at a chunk boundary).
func withoutFile(t testing.TB, s []byte, path string) []byte {
	t.Helper()
	r := xbstream.NewReader(bytes.NewReader(s))
	var out bytes.Buffer
	w := xbstream.NewWriter(&out)
	for {
		c, err := r.Next()
		if err != nil {
			break
		}
		if c.Path == path {
			continue
		}
		if c.Type == xbstream.TypeEOF {
			w.WriteEOF(c.Path)
		} else {
			w.WritePayload(c.Path, c.Offset, c.Payload)
		}
	}
	return out.Bytes()
}
