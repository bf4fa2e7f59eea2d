// Package manifest reads and writes ferry's backup manifest: one versioned JSON document
// per backup, written last, listing every file with its size and CRC-32C. A backup
// directory without a manifest is incomplete and is never prepared or restored.
package manifest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/signing"
)

// FileName is the manifest's name inside a backup directory.
const FileName = "ferry_manifest.json"

// IncompleteMarker exists in a backup directory from the first byte copied until the
// manifest is written; it tells a reader the directory is not a usable backup.
const IncompleteMarker = "FERRY_BACKUP_INCOMPLETE"

// FormatVersion is the manifest format this ferry writes and the newest it reads.
const FormatVersion = 1

// ErrNotFound means the directory has no manifest.
var ErrNotFound = errors.New("no ferry manifest")

// Kinds of files in a backup.
const (
	KindInnoDB = "innodb" // tablespace copied page by page, every page validated
	KindRedo   = "redo"   // ib_logfile0 holding the redo copied from StartLSN to LastLSN
	KindOther  = "other"  // non-InnoDB table or log file
	KindMeta   = "meta"   // metadata written by ferry (xtrabackup_* files, backup-my.cnf)
	KindDDL    = "ddl"    // mariadb-backup DDL marker (<name>.del) applied before recovery
	KindDelta  = "delta"  // an incremental's changed pages of a tablespace (<file>.delta, docs/incremental.md)
)

// Backup types.
const (
	TypeFull        = "full"
	TypeIncremental = "incremental"
)

// Incremental says what an incremental backup applies on and what its deltas hold.
type Incremental struct {
	// BaseID is the manifest id of the backup it applies on ("" when the base is not
	// a ferry backup, or was named by --incremental-lsn).
	BaseID string `json:"base_id,omitempty"`
	// BaseToLSN is the base's to_lsn (xtrabackup_checkpoints): this backup's from_lsn,
	// which mariadb-backup --prepare checks against the base it applies on.
	BaseToLSN uint64 `json:"base_to_lsn"`
	// FromLSN: the deltas hold every page whose FIL_PAGE_LSN is above it. ferry takes
	// the base's start LSN (the checkpoint its redo starts from), so that every page
	// the base copied while it changed is in the deltas and one recovery with this
	// backup's redo makes the whole chain consistent.
	FromLSN uint64 `json:"from_lsn"`
	// Method says how the changed pages were found: "redo" (the server's redo log still
	// held everything since FromLSN) or "scan" (every page read).
	Method string `json:"method"`
}

// File is one file of the backup.
type File struct {
	Path   string `json:"path"` // relative, '/' separated
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
	Kind   string `json:"kind"`
	Sparse bool   `json:"sparse,omitempty"`
	// Stored is the file's name in a stream when it differs from Path (compressed:
	// .zst/.lz4, encrypted: .age), StoredSize its encoded size. Size and CRC32C are
	// always those of the decoded bytes.
	Stored     string `json:"stored,omitempty"`
	StoredSize int64  `json:"stored_size,omitempty"`
	// Space describes an InnoDB tablespace whose page 0 was read while copying, so a
	// verifier can check every page of the stored copy.
	Space *Space `json:"space,omitempty"`
	// Remote is the path a DATA DIRECTORY tablespace had on the source, outside its
	// datadir; the backup holds it at Path (db/t.ibd) beside its link db/t.isl.
	Remote string `json:"remote,omitempty"`
	// Blobs say where a repository stores the file: each covers a range of its bytes.
	// Ranges are in order and do not overlap; bytes no blob covers are zeros.
	Blobs []Blob `json:"blobs,omitempty"`
	// Patches are the pages a repository backup copied again after the file (the
	// three-stage copy), applied over its blobs on restore: round by round, in
	// increasing Round; the patches of one round do not overlap. A file with patches
	// keeps in CRC32C the checksum of its blobs (what the copy first wrote); each patch
	// carries its own.
	Patches []Blob `json:"patches,omitempty"`
}

// Space is what page validation needs of a tablespace (innodb.SpaceHeader).
type Space struct {
	ID        uint32 `json:"id"`
	Flags     uint32 `json:"flags"`
	Crypt     bool   `json:"crypt,omitempty"`      // page 0 carries encryption metadata
	System    bool   `json:"system,omitempty"`     // part of the system tablespace (ibdata*)
	FirstPage uint32 `json:"first_page,omitempty"` // page number of the file's first page (ibdata2...)
	// Identity is the file the copy read (absent in manifests of ferry before it): an
	// incremental compares it with its base's to find a tablespace imported, discarded
	// and re-imported, truncated or re-created since, which it copies whole.
	Identity *Identity `json:"identity,omitempty"`
	// Whole is set on a delta that holds every page of its tablespace: the file was
	// replaced since the base (its identity changed), and applying the delta replaces
	// the base's file instead of patching it.
	Whole bool `json:"whole,omitempty"`
}

// Identity tells one tablespace file from another that took its place under the same
// name and space id (docs/incremental.md): the file's inode and birth time, and
// page 0's FSP_SIZE and FIL_PAGE_LSN when the copy read it.
type Identity struct {
	Inode uint64 `json:"inode"`
	// BirthNS is the file's creation time (statx btime, Unix nanoseconds); 0 where the
	// filesystem does not keep one.
	BirthNS int64  `json:"birth_ns,omitempty"`
	Pages   uint32 `json:"pages"` // FSP_SIZE of page 0
	LSN     uint64 `json:"lsn"`   // FIL_PAGE_LSN of page 0
}

// Blob is one independently encoded range of a file in a repository: RawSize bytes
// from RawOffset, compressed and encrypted as the backup's storage says, stored as
// StoredSize bytes at Offset in Object (a key relative to the backup's prefix).
type Blob struct {
	Object       string `json:"object"`
	Offset       int64  `json:"offset"`
	StoredSize   int64  `json:"stored_size"`
	StoredCRC32C string `json:"stored_crc32c"`
	RawOffset    int64  `json:"raw_offset"`
	RawSize      int64  `json:"raw_size"`
	CRC32C       string `json:"crc32c"` // of the raw bytes
	// Round is a patch's re-copy round (from 1); 0 in a file's blobs.
	Round int `json:"round,omitempty"`
}

// Object is one object a repository backup wrote.
type Object struct {
	Key    string `json:"key"` // relative to the backup's prefix
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
	// SHA256 is the object's SHA-256 in hex, recorded by a signed backup: CRC-32C
	// catches damage, not forgery, and a signature must bind the bytes.
	SHA256 string `json:"sha256,omitempty"`
}

// StorageFormat is how a backup's files are laid out where they are stored: the
// manifest's storage.format, one of the Storage* values below (the JSON holds the
// string).
type StorageFormat string

// The storage formats.
const (
	// StorageDir: a directory with mariabackup's layout (docs/backup-format.md), also
	// what a clone recipient writes.
	StorageDir StorageFormat = "dir"
	// StorageXbstream: an xbstream, each file possibly compressed and encrypted under
	// a stored name (docs/xbstream.md).
	StorageXbstream StorageFormat = "xbstream"
	// StorageRepository: a repository's parts and packs, the manifest last
	// (docs/repository.md).
	StorageRepository StorageFormat = "repository"
)

// Storage says how a backup's files were stored.
type Storage struct {
	Format      StorageFormat `json:"format"`
	Compression string        `json:"compression,omitempty"` // zstd, lz4 (none if empty)
	Level       int           `json:"level,omitempty"`
	Encryption  string        `json:"encryption,omitempty"` // "age" (to public-key recipients)
	PartSize    int64         `json:"part_size,omitempty"`  // repository: raw bytes per part
}

// Server describes the backed-up server, as prepare needs it.
type Server struct {
	// Family is "mysql" for a MySQL server, absent for MariaDB: it says which server
	// recovers the backup and how its redo is stored.
	Family  string `json:"family,omitempty"`
	Version string `json:"version"`
	Series  string `json:"series"`
	Datadir string `json:"datadir"`
	// UID is the server's @@server_uid: an incremental is taken only on a base of the
	// same server.
	UID string `json:"uid,omitempty"`
	// Host and Port are where replicas reach the server: @@report_host and
	// @@report_port where set, else @@hostname and @@port (for the replica hint of a
	// restore; optional).
	Host     string            `json:"host,omitempty"`
	Port     int               `json:"port,omitempty"`
	Settings map[string]string `json:"settings"`
}

// Prepared records that ferry prepare has run crash recovery on the backup.
type Prepared struct {
	At              time.Time `json:"at"`
	MariadbdVersion string    `json:"mariadbd_version"`
}

// Manifest is the whole document.
type Manifest struct {
	Format      int       `json:"format"`
	Tool        string    `json:"tool"`
	ToolVersion string    `json:"tool_version"`
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	Engine      string    `json:"engine"`
	StartTime   time.Time `json:"start_time"`
	EndTime     time.Time `json:"end_time"`
	Server      Server    `json:"server"`
	StartLSN    uint64    `json:"start_lsn"`
	EndLSN      uint64    `json:"end_lsn"`
	LastLSN     uint64    `json:"last_lsn"`
	// ToLSN is xtrabackup_checkpoints' to_lsn, which the next incremental's from_lsn
	// names (0 in older manifests: EndLSN). A full backup's is EndLSN; an incremental's
	// is the server's checkpoint at its end (never below its base's to_lsn), as
	// mariadb-backup writes it: mariadb-backup --prepare refuses an incremental whose
	// to_lsn lies past where its recovery ends.
	ToLSN       uint64              `json:"to_lsn,omitempty"`
	Coordinates mariadb.Coordinates `json:"coordinates"`
	LockTimesMS map[string]int64    `json:"lock_times_ms"`
	Storage     Storage             `json:"storage"`
	Files       []File              `json:"files"`
	Objects     []Object            `json:"objects,omitempty"` // repository backups
	Prepared    *Prepared           `json:"prepared,omitempty"`
	// Incremental is set when Type is TypeIncremental.
	Incremental *Incremental `json:"incremental,omitempty"`
	// Partial is set when the backup holds only some tables (backup --databases,
	// --tables, --exclude): a restore recovers it without the others.
	Partial *Partial `json:"partial,omitempty"`
	// Lock, set in a repository backup stored with S3 Object Lock, is the retention
	// every one of its objects (the manifest included) was stored with.
	Lock *Lock `json:"lock,omitempty"`
	// Tables are the tables of the backup's end point (schema, name, engine), as the
	// server's data dictionary listed them under BLOCK_DDL (MariaDB; a partial backup's
	// selected ones): what a restore drill (verify --restore) checks the restored copy
	// against. Empty in older manifests and MySQL backups.
	Tables []mariadb.Table `json:"tables,omitempty"`
	// Signature, if set, is the Ed25519 signature of the manifest without it
	// (SigningBytes), by the key backup --sign-with names.
	Signature *signing.Signature `json:"signature,omitempty"`
}

// Lock is the S3 Object Lock retention of a repository backup's objects: none of them
// can be deleted before RetainUntil (docs/repository.md, Immutable backups).
type Lock struct {
	Mode        string    `json:"mode"` // GOVERNANCE or COMPLIANCE, as S3 spells them
	RetainUntil time.Time `json:"retain_until"`
}

// LockedAt reports whether the lock l records (nil: none) still holds at now.
func (l *Lock) LockedAt(now time.Time) bool { return l != nil && now.Before(l.RetainUntil) }

// SigningBytes are what a manifest's signature covers: its JSON without the
// signature.
func (m *Manifest) SigningBytes() ([]byte, error) {
	c := *m
	c.Signature = nil
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", m.ID, err)
	}
	return b, nil
}

// Partial is the selection a partial backup was taken with.
type Partial struct {
	Databases []string `json:"databases,omitempty"`
	Tables    string   `json:"tables,omitempty"`  // regular expression on db.table
	Exclude   string   `json:"exclude,omitempty"` // regular expression on db.table or db
}

// ChainLSN is the to_lsn an incremental on this backup starts from.
func (m *Manifest) ChainLSN() uint64 {
	if m.ToLSN != 0 {
		return m.ToLSN
	}
	return m.EndLSN
}

// StoredSize is the sum of the sizes of a repository backup's objects; for a
// directory or a stream, of its files as stored (compressed, encrypted).
func (m *Manifest) StoredSize() int64 {
	var n int64
	for _, o := range m.Objects {
		n += o.Size
	}
	if len(m.Objects) > 0 {
		return n
	}
	for _, f := range m.Files {
		n += cmp.Or(f.StoredSize, f.Size)
	}
	return n
}

// TotalSize is the sum of file sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Write stores m in dir atomically (temp file, fsync, rename, fsync dir).
func Write(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	tmp := filepath.Join(dir, FileName+".tmp")
	if err := writeSync(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, FileName)); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return SyncDir(dir)
}

// Read loads the manifest of dir; ErrNotFound if there is none.
func Read(dir string) (*Manifest, error) {
	path := filepath.Join(dir, FileName)
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxSize {
		return nil, fmt.Errorf("manifest %s is not a regular file of at most %d MiB: the backup was tampered with or damaged", path, MaxSize>>20)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes and validates a manifest read from name (a file, an object, a peer).
func Parse(b []byte, name string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s is corrupt: %w", name, err)
	}
	if m.Format > FormatVersion {
		return nil, fmt.Errorf("backup manifest format %d is newer than this ferry understands (%d): upgrade ferry", m.Format, FormatVersion)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &m, nil
}

func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncFile fsyncs a file that was written and closed, so that its bytes are durable.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs a directory so that renames and creations in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
