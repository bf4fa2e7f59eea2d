// Package directio reads files with O_DIRECT, bypassing the page cache. MariaDB writes
// its data files and redo log with O_DIRECT; a buffered read racing such a write can
// leave a stale page in the page cache that later buffered reads keep returning, so a
// hot copier must read them the same way. Where a file system rejects O_DIRECT (older
// tmpfs), Open falls back to buffered reads and says so.
package directio
