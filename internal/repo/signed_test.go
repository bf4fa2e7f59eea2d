package repo

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/pipeline"
	"github.com/ferry-backup/ferry/internal/signing"
)

// TestSignedBackup: a backup written with SignWith records every object's SHA-256 and
// signs its manifest; a repository that trusts the key reads it, refuses it once the
// manifest changed, and refuses an unsigned one; an object whose bytes are not the
// ones the manifest's SHA-256 names fails the read even when its size and CRC-32C
// are the manifest's.
func TestSignedBackup(t *testing.T) {
	ctx := context.Background()
	r, _ := Init(ctx, newFS(t), "test")
	secret, public, _ := signing.NewKey()
	priv, pub := loadTestKey(t, secret), mustPublic(t, public)
	opts := WriterOptions{Pipeline: pipeline.Options{Compression: codec.None, Workers: 1, OpenFiles: 4}, PartSize: 1 << 20}
	files := smallFiles(50)
	files["big.ibd"] = []byte(strings.Repeat("page", 1<<21)) // 8 MiB in 2 MiB segments: parts of their own
	opts.SignWith = priv
	m := writeBackup(t, r, "20260101t000000z-s", files, opts)
	opts.SignWith = nil
	writeBackup(t, r, "20260102t000000z-u", files, opts)
	if m.Signature == nil || len(m.Objects) < 3 {
		t.Fatalf("signed backup: signature %v, %d objects", m.Signature, len(m.Objects))
	}
	for _, o := range m.Objects {
		if len(o.SHA256) != 64 {
			t.Fatalf("object %s has SHA-256 %q", o.Key, o.SHA256)
		}
	}
	r.Trust(pub)
	got, err := r.Manifest(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	back, err := readAll(t, r, got, nil)
	if err != nil || string(back["big.ibd"]) != string(files["big.ibd"]) {
		t.Fatalf("read the signed backup: %v", err)
	}
	if _, err := r.Manifest(ctx, "20260102t000000z-u"); !errors.Is(err, signing.ErrUntrusted) {
		t.Errorf("unsigned backup under trust: %v", err)
	}

	// The manifest changed after signing: refused under trust. Read without trust, the
	// object whose SHA-256 it changed fails the read (its size and CRC-32C still match).
	forged := *got
	forged.Objects = append([]manifest.Object(nil), got.Objects...)
	forged.Objects[0].SHA256 = strings.Repeat("0", 64)
	if err := putJSON(ctx, r.st, backupPrefix(m.ID)+manifestName, &forged); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Manifest(ctx, m.ID); !errors.Is(err, signing.ErrUntrusted) {
		t.Errorf("forged manifest under trust: %v", err)
	}
	r.Trust(nil)
	plain, err := r.Manifest(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = readAll(t, r, plain, nil); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("object with another SHA-256: %v", err)
	}
}

func loadTestKey(t *testing.T, secret string) ed25519.PrivateKey {
	t.Helper()
	f := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := signing.LoadSecret(f)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustPublic(t *testing.T, s string) ed25519.PublicKey {
	t.Helper()
	k, err := signing.ParsePublic(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
