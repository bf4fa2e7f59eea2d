// Package apply rolls InnoDB pages forward by the records of a MariaDB 10.8+ redo log,
// as the server's crash recovery does (log0recv.cc), so that a backup needs no
// recovery when it is restored. The format it applies is written down in
// docs/redo-apply.md.
//
// A record ferry cannot apply exactly as the server would (an unknown subtype, a
// corrupt record, a page it cannot read) is an error of type *RecordError: the caller
// then falls back to the server's recovery.
package apply
