// Package sink defines the one interface every end a backup is written to implements
// (a directory, a stream, a repository, a clone's recipient), and the directory end.
// The backup engine talks to an end only through Sink and never asks which it has: it
// reads what the end can do from its Caps.
package sink

import (
	"context"
	"errors"

	"github.com/ferry-backup/ferry/internal/manifest"
)

// Sink is where a backup goes. Nothing in it is a backup before Commit.
type Sink interface {
	// Name says where the backup goes, for logs and messages.
	Name() string
	// Caps says what the end can do; it does not change once Open returned.
	Caps() Caps
	// Open prepares the end for the backup id, once the server checks passed (a
	// directory is created here, not before).
	Open(ctx context.Context, id string) error
	// Create starts a file of the backup.
	Create(rel string, o FileOptions) (File, error)
	// Remove forgets a file (a stale copy); a missing file is not an error. Only an
	// end whose Caps().Rewrite is set supports it.
	Remove(rel string) error
	// Rename moves a finished file to a new path (Caps().Rewrite only).
	Rename(from, to string) error
	// Patch rewrites the bytes at off of a file already closed, extending it with
	// zeros if off+len(p) is past its end. round numbers the re-copy rounds from 1: a
	// later round's bytes win over an earlier round's. In place, it returns the
	// CRC-32C of the bytes it replaced (zeros past the old end), so the caller can keep
	// the file's checksum without reading it again; stored apart (Caps().PatchApart) it
	// returns 0. Only an end whose Caps().Patch is set supports it.
	Patch(round int, rel string, off int64, p []byte) (old uint32, err error)
	// Drain waits until what was written so far is stored at the end (uploaded,
	// acknowledged), so that the pages a re-copy round reads are not held up behind the
	// copy's backlog; an end that stores as it is written returns at once. Only the
	// three-stage copy calls it, before each round.
	Drain(ctx context.Context) error
	// Commit receives the manifest last and makes the backup complete; the end
	// records in m how it stored each file.
	Commit(ctx context.Context, m *manifest.Manifest) error
	// Abort gives up a failed backup and says how the partial backup is left, for
	// the error message.
	Abort(err error) string
}

// Caps is what an end can do.
type Caps struct {
	// Rewrite: before Commit, files may be written at any offset (by parallel
	// segments), removed and renamed. Otherwise each file is written once, in order,
	// and what was sent stays sent.
	Rewrite bool
	// Patch: pages of a closed file can be rewritten in place (Patch), so that a
	// stock tool reading the backup sees them; the engine then copies again the pages
	// that changed during the copy and keeps only a short redo tail (the three-stage
	// copy). Otherwise the backup carries the whole redo of the copy.
	Patch bool
	// PatchApart: patched bytes are stored apart from the file's and applied over them
	// on restore (a repository's extra parts), so the file's CRC-32C stays that of the
	// bytes the copy wrote, and each patch carries its own.
	PatchApart bool
	// Remote: the end writes nothing to the server's disks, so larger reads cost the
	// server less (the copy's reads are the only I/O it adds there).
	Remote bool
	// Direct: a write is stored on local disk as it is made, at disk speed (a
	// directory). The engine then writes into the end even while it holds the server's
	// backup locks. Any other end (a pipe, uploads, a network peer) may make a write
	// wait behind earlier ones for as long as its link takes: what is copied under the
	// locks is spooled on local disk and stored once they are released, so that
	// commits never wait on the link.
	Direct bool
	// Memory is what the end's own pipeline may hold (compression, encryption,
	// uploads), counted in the job's memory budget.
	Memory int64
	// Storage is how the files are stored, for the manifest.
	Storage manifest.Storage
}

// FileOptions describe a file being created.
type FileOptions struct {
	Sparse bool // holes where pages are zero (page_compressed tablespaces)
	Meta   bool // a small metadata file: stored whole, never compressed
	// Size is the bytes the file is expected to hold (its source's size when the copy
	// starts), a hint; 0 when unknown.
	Size int64
	// Space is the InnoDB tablespace the file copies, as the copy read its page 0 and
	// identity (nil for any other file); an end may record it early (a clone's
	// recipient journals it to resume an interrupted clone).
	Space *manifest.Space
	// Keep (an end that is Resumable only) starts the file with the ranges Held
	// returned for it: the engine writes only the rest, and patches the kept ranges'
	// pages changed since their Since.
	Keep bool
}

// Resumable is an end that can continue an interrupted backup (a repository's
// backup --resume): it may hold ranges of tablespaces an earlier attempt stored, which
// the copy keeps instead of sending again. Every end that can resume records, with
// what it stores, the LSN the copy began at, so that a later attempt can tell which
// stored pages are still current.
type Resumable interface {
	// CopyFrom records lsn, the checkpoint the copy's redo begins at, with everything
	// stored from now on. The engine calls it before it copies any tablespace.
	CopyFrom(lsn uint64)
	// Held returns the ranges of rel that an earlier attempt stored, if space (page 0
	// as the copy just read it) is still the tablespace file they were read from; nil
	// if none. The ranges are in order, do not overlap and lie on page boundaries.
	Held(rel string, space *manifest.Space) []Held
	// HeldSince is the lowest Since of every range held (0: none): the pages changed
	// from there to the copy's start are those a held range may lack.
	HeldSince() uint64
}

// Held is a range of a tablespace an end already stores: Len bytes at Off with
// CRC-32C CRC, read by a copy that began at checkpoint LSN Since. Its pages whose
// source still carries an LSN at or below Since are current.
type Held struct {
	Off, Len int64
	CRC      uint32
	Since    uint64
}

// File is one file being written into a Sink. WriteAt may not keep p. Without
// Caps().Rewrite, writes come in order.
type File interface {
	WriteAt(p []byte, off int64) error
	// Close ends the file at size.
	Close(size int64) error
}

// ErrNoPatch is what Patch returns on an end whose Caps().Patch is not set.
var ErrNoPatch = errors.New("this end cannot rewrite a file in place (internal error: Caps().Patch is not set)")
