// Package repo is ferry's repository of backups in object storage (or a directory):
// large files split into parts, small ones packed together, every part compressed and
// encrypted on its own, and a manifest per backup written last. docs/repository.md
// specifies the format.
package repo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/storage"
)

// FormatVersion is the repository format this ferry writes and the newest it reads.
const FormatVersion = 1

// Keys of a repository, relative to its root.
const (
	ConfigKey    = "ferry-repository.json"
	backupsDir   = "backups/"
	manifestName = "manifest.json"
	markerName   = "in-progress.json"
	objectsDir   = "objects/"
)

// ErrNoRepository means the location holds no ferry repository.
var ErrNoRepository = errors.New("no ferry repository")

// ErrNoBackup means the repository has no complete backup of that id.
var ErrNoBackup = errors.New("no such backup")

// Config is the repository's own description, written once by the first backup.
type Config struct {
	Format      int       `json:"format"`
	Tool        string    `json:"tool"`
	ToolVersion string    `json:"tool_version"`
	Created     time.Time `json:"created"`
}

// Repo is a repository of backups in a Storage.
type Repo struct {
	st    storage.Storage
	cfg   Config
	fresh bool // not created yet: the first backup writes its config
	// trust, if set, is the key every manifest read must be signed by (Trust).
	trust ed25519.PublicKey
}

// Trust makes every manifest read from r from here on refused unless pub signed it
// and it records every object's SHA-256, which every read then checks (restore and
// verify --trust-key). It is called before any backup is read.
func (r *Repo) Trust(pub ed25519.PublicKey) { r.trust = pub }

// checkTrust refuses a manifest the trusted key did not sign, or that lacks an
// object's SHA-256.
func (r *Repo) checkTrust(m *manifest.Manifest) error {
	msg, err := m.SigningBytes()
	if err == nil {
		err = signing.Verify(r.trust, msg, m.Signature)
	}
	if err != nil {
		return setting.Errorf("backup %s in %s: %w: it is refused (%s); nothing was read from it", m.ID, r.Location(), err, setting.TrustKey)
	}
	for _, o := range m.Objects {
		if o.SHA256 == "" {
			return fmt.Errorf("backup %s in %s: %w: object %s has no SHA-256", m.ID, r.Location(), signing.ErrUntrusted, o.Key)
		}
	}
	return nil
}

// Open reads the repository at st; ErrNoRepository if there is none, an error saying to
// upgrade ferry if it is of a newer format.
func Open(ctx context.Context, st storage.Storage) (*Repo, error) {
	var cfg Config
	err := getJSON(ctx, st, ConfigKey, &cfg)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, setting.Errorf("%w at %s (no %s): check %s; the first ferry backup to it creates one", ErrNoRepository, st.Location(), ConfigKey, setting.Repo)
	}
	if err != nil {
		return nil, err
	}
	if cfg.Format > FormatVersion || cfg.Format < 1 {
		return nil, fmt.Errorf("repository %s has format %d, this ferry reads format %d: upgrade ferry", st.Location(), cfg.Format, FormatVersion)
	}
	return &Repo{st: st, cfg: cfg}, nil
}

// Init opens the repository at st for a backup, or prepares a new one if the location
// holds none: it is created when the first backup starts (NewBackup), so a backup that
// fails its server checks leaves nothing behind.
func Init(ctx context.Context, st storage.Storage, version string) (*Repo, error) {
	r, err := Open(ctx, st)
	if !errors.Is(err, ErrNoRepository) {
		return r, err
	}
	cfg := Config{Format: FormatVersion, Tool: "ferry", ToolVersion: version, Created: time.Now().UTC()}
	return &Repo{st: st, cfg: cfg, fresh: true}, nil
}

// Create writes the config of a new repository (nothing if it exists).
func (r *Repo) Create(ctx context.Context) error {
	if !r.fresh {
		return nil
	}
	if err := putJSON(ctx, r.st, ConfigKey, r.cfg); err != nil {
		return fmt.Errorf("create repository at %s: %w", r.st.Location(), err)
	}
	r.fresh = false
	return nil
}

// Location names the repository for messages.
func (r *Repo) Location() string { return r.st.Location() }

// Storage is where the repository's objects are.
func (r *Repo) Storage() storage.Storage { return r.st }

func backupPrefix(id string) string { return backupsDir + id + "/" }

// ObjectKey is the key of one of a backup's objects (name relative to the backup).
func ObjectKey(id, name string) string { return path.Join(backupsDir, id, name) }

// Manifest reads the manifest of backup id; ErrNoBackup if it has none (never made, or
// incomplete).
func (r *Repo) Manifest(ctx context.Context, id string) (*manifest.Manifest, error) {
	_, m, err := r.rawManifest(ctx, id)
	return m, err
}

// rawManifest reads the manifest of backup id as stored, and decoded and checked as
// Manifest does.
func (r *Repo) rawManifest(ctx context.Context, id string) ([]byte, *manifest.Manifest, error) {
	if id == "" || path.Base(id) != id || id == "." || id == ".." {
		return nil, nil, fmt.Errorf("%q is not a backup id", id)
	}
	raw, err := getRaw(ctx, r.st, backupPrefix(id)+manifestName)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w %q in %s: ferry list shows the backups", ErrNoBackup, id, r.Location())
	}
	if err != nil {
		return nil, nil, err
	}
	var m manifest.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, fmt.Errorf("%s in %s is not valid JSON (damaged?): %w", backupPrefix(id)+manifestName, r.Location(), err)
	}
	if err := r.checkManifest(id, &m); err != nil {
		return nil, nil, err
	}
	return raw, &m, nil
}

// checkManifest refuses a manifest of a newer format, of another backup or not a
// repository's, and (Trust) one the trusted key did not sign.
func (r *Repo) checkManifest(id string, m *manifest.Manifest) error {
	if m.Format > manifest.FormatVersion {
		return fmt.Errorf("backup %s has manifest format %d, newer than this ferry reads (%d): upgrade ferry", id, m.Format, manifest.FormatVersion)
	}
	if m.ID != id || m.Storage.Format != manifest.StorageRepository {
		return fmt.Errorf("the manifest of backup %s in %s is not a repository backup's (id %q, format %q): the repository is damaged", id, r.Location(), m.ID, m.Storage.Format)
	}
	if r.trust != nil {
		return r.checkTrust(m)
	}
	return nil
}

// Resolve reads the manifest of backup id, or of the newest complete backup for
// "latest".
func (r *Repo) Resolve(ctx context.Context, id string) (*manifest.Manifest, error) {
	if id != "latest" {
		return r.Manifest(ctx, id)
	}
	return r.latest(ctx)
}

// latest is the newest complete backup, in List's order. Only the manifests of the
// newest second that holds a complete backup are read, not every backup's: a manifest
// of a server with tens of thousands of tables takes a large part of a second to read.
func (r *Repo) latest(ctx context.Context) (*manifest.Manifest, error) {
	ids, err := r.st.Prefixes(ctx, backupsDir)
	if err != nil {
		return nil, err
	}
	second := func(id string) string { s, _, _ := strings.Cut(id, "-"); return s }
	sort.Slice(ids, func(a, b int) bool { return second(ids[a]) > second(ids[b]) })
	for len(ids) > 0 {
		n := 1
		for n < len(ids) && second(ids[n]) == second(ids[0]) {
			n++
		}
		var complete []Entry
		for _, id := range ids[:n] {
			m, err := r.Manifest(ctx, id)
			switch {
			case err == nil:
				complete = append(complete, Entry{ID: id, Manifest: m})
			case !errors.Is(err, ErrNoBackup):
				return nil, err
			}
		}
		if len(complete) > 0 {
			order(complete)
			return complete[len(complete)-1].Manifest, nil
		}
		ids = ids[n:]
	}
	return nil, fmt.Errorf("%w: %s holds no complete backup", ErrNoBackup, r.Location())
}

// getJSON reads and decodes a small object.
func getJSON(ctx context.Context, st storage.Storage, key string, v any) error {
	b, err := getRaw(ctx, st, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s in %s is not valid JSON (damaged?): %w", key, st.Location(), err)
	}
	return nil
}

// getRaw reads a small object (a manifest at most).
func getRaw(ctx context.Context, st storage.Storage, key string) ([]byte, error) {
	var b []byte
	err := st.Get(ctx, key, 0, -1, func(rd io.Reader) error {
		var err error
		b, err = io.ReadAll(io.LimitReader(rd, manifest.MaxSize+1))
		if err != nil {
			return err
		}
		if len(b) > manifest.MaxSize {
			return fmt.Errorf("%s in %s is larger than %d MiB: the repository is damaged or was tampered with", key, st.Location(), manifest.MaxSize>>20)
		}
		return nil
	})
	return b, err
}

// putJSON encodes and stores a small object.
func putJSON(ctx context.Context, st storage.Storage, key string, v any) error {
	return putJSONWith(ctx, st.Put, key, v)
}

// putJSONWith encodes a small object and stores it with put.
func putJSONWith(ctx context.Context, put func(context.Context, string, io.ReaderAt, int64, uint32) error, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	return put(ctx, key, bytes.NewReader(b), int64(len(b)), checksum.Sum(b))
}
