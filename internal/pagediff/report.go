package pagediff

import (
	"errors"
	"fmt"
	"strings"
)

// Mismatch is one page (or one whole tablespace) that differs between the two
// prepared directories.
type Mismatch struct {
	File   string // path relative to the directories, e.g. "db/t.ibd"
	Space  uint32 // tablespace id, from page 0
	Page   uint32 // page number in the tablespace (continued across system data files)
	Offset int    // first differing byte within the page; -1 when Problem says what differs
	Oracle byte   // the byte at Offset in the server's recovery
	Native byte   // the byte at Offset in ferry's apply
	// Problem describes a difference that is not a byte, e.g. "only in the oracle
	// directory" or a page that could not be decrypted; empty for a byte difference.
	Problem string
	// Undecoded is set when the page is encrypted or page_compressed and was compared
	// raw because no decoder was given: the difference may lie only in bytes that
	// decoding would have made equal.
	Undecoded bool
	Desc      string // the last applied record group, from Options.Explain
}

// String describes the mismatch on one line.
func (m Mismatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", m.File)
	if m.Problem == "" || m.Offset >= 0 {
		fmt.Fprintf(&b, " space %d page %d", m.Space, m.Page)
	}
	if m.Offset >= 0 {
		fmt.Fprintf(&b, " byte %d: server %#02x, ferry %#02x", m.Offset, m.Oracle, m.Native)
	}
	if m.Problem != "" {
		fmt.Fprintf(&b, ": %s", m.Problem)
	}
	if m.Undecoded {
		b.WriteString(" (compared raw: encrypted or page_compressed and no decoder)")
	}
	if m.Desc != "" {
		fmt.Fprintf(&b, "; last applied: %s", m.Desc)
	}
	return b.String()
}

// LengthDiff is a tablespace file whose length differs between the two directories.
type LengthDiff struct {
	File           string
	Oracle, Native int64 // bytes
}

// String describes the difference on one line.
func (l LengthDiff) String() string {
	return fmt.Sprintf("%s: length %d bytes after the server's recovery, %d after ferry's", l.File, l.Oracle, l.Native)
}

// Report is the result of comparing two prepared directories.
type Report struct {
	Files      int // tablespace files compared
	Compared   int // pages compared
	Ignored    int // pages that differ but whose content is ignored (freed or free, §11.1)
	Decoded    int // pages compared after decrypting or decompressing
	Undecoded  int // encrypted or page_compressed pages compared raw (no decoder)
	Mismatches []Mismatch
	// MoreMismatches counts the mismatches beyond Options.MaxMismatches, which are not
	// listed.
	MoreMismatches int
	Lengths        []LengthDiff
}

// errShown is how many mismatches Err names.
const errShown = 5

// Err returns nil when the directories agree, or one error naming the first few
// mismatches and length differences.
func (r Report) Err() error {
	n := len(r.Mismatches) + r.MoreMismatches
	if n == 0 && len(r.Lengths) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ferry's redo apply differs from the server's recovery: %d mismatching pages or files, %d file lengths (%d pages compared in %d files)",
		n, len(r.Lengths), r.Compared, r.Files)
	for i, m := range r.Mismatches {
		if i == errShown {
			fmt.Fprintf(&b, "\n  ... and %d more", n-errShown)
			break
		}
		b.WriteString("\n  " + m.String())
	}
	for i, l := range r.Lengths {
		if i == errShown {
			fmt.Fprintf(&b, "\n  ... and %d more lengths", len(r.Lengths)-errShown)
			break
		}
		b.WriteString("\n  " + l.String())
	}
	return errors.New(b.String())
}

// add records a mismatch, keeping at most max of them.
func (r *Report) add(m Mismatch, max int) {
	if len(r.Mismatches) >= max {
		r.MoreMismatches++
		return
	}
	r.Mismatches = append(r.Mismatches, m)
}
