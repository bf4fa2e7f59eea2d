//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestSignedBackups: a backup signed with --sign-with restores and verifies under
// --trust-key; an unsigned backup, one signed by another key, and a forged manifest (a
// file's size changed; two objects' checksums swapped) are refused by restore and
// verify --trust-key with one line, before any file is written.
func TestSignedBackups(t *testing.T) {
	t.Parallel() // small server, a directory repository, error paths
	src := smallSource(t, 20000)
	tmp := testdb.ShortDir(t)
	repoDir := filepath.Join(tmp, "repo")
	if err := os.Mkdir(repoDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, other := filepath.Join(tmp, "sign.key"), filepath.Join(tmp, "other.key")
	pub := strings.TrimSpace(mustFerry(t, "keygen", "--signing", "--output", key).stdout)
	otherPub := strings.TrimSpace(mustFerry(t, "keygen", "--signing", "--output", other).stdout)
	if !strings.HasPrefix(pub, "ferrysign1") || pub == otherPub {
		t.Fatalf("keygen --signing printed %q and %q", pub, otherPub)
	}
	signed := strings.TrimSpace(mustFerry(t, repoBackupArgs(src, repoDir, "--sign-with", key, "--part-size", "1M")...).stdout)
	unsigned := strings.TrimSpace(mustFerry(t, repoBackupArgs(src, repoDir)...).stdout)

	mustFerry(t, "verify", "--repo", repoDir, signed, "--trust-key", pub)
	mustFerry(t, "restore", "--repo", repoDir, signed, "--trust-key", key, "--datadir", filepath.Join(tmp, "restored")) // the key file holds the public key too
	if _, err := os.Stat(filepath.Join(tmp, "restored", "s", "t.ibd")); err != nil {
		t.Fatalf("the signed backup did not restore: %v", err)
	}

	never := filepath.Join(tmp, "never")
	refused := func(name, id, trust, want string) {
		t.Run(name, func(t *testing.T) {
			wantExit(t, wantFail(t, nil, want, "restore", "--repo", repoDir, id, "--trust-key", trust, "--datadir", never), 4)
			noDatadir(t, never)
			wantFail(t, nil, want, "verify", "--repo", repoDir, id, "--trust-key", trust)
		})
	}
	refused("unsigned", unsigned, pub, "carries no signature")
	wantExit(t, wantFail(t, nil, "--trust-key applies to --repo", "restore", "--target-dir", tmp, "--trust-key", pub, "--datadir", never), 2)
	refused("another key", signed, otherPub, "signed by key")

	// Forgeries of the signed manifest, written back as they were stored.
	path := filepath.Join(repoDir, "backups", signed, "manifest.json")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, forge := range []struct {
		name string
		edit func(m *manifest.Manifest)
	}{
		{"a size changed", func(m *manifest.Manifest) { m.Files[0].Size++ }},
		{"objects swapped", func(m *manifest.Manifest) {
			m.Objects[0].SHA256, m.Objects[1].SHA256 = m.Objects[1].SHA256, m.Objects[0].SHA256
		}},
	} {
		var m manifest.Manifest
		if err := json.Unmarshal(orig, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Objects) < 2 || m.Signature == nil {
			t.Fatalf("the signed manifest has %d objects, signature %v", len(m.Objects), m.Signature)
		}
		forge.edit(&m)
		b, _ := json.Marshal(&m)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		refused("forged: "+forge.name, signed, pub, "does not match its content")
	}
}
