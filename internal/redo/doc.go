// Package redo reads and copies the MariaDB 10.8+ InnoDB redo log
// (ib_logfile0, format "Phys"): it parses the file header and checkpoint
// blocks, validates mini-transactions (sequence bit and CRC-32C), tails the
// circular log of a running server while it writes, and produces a linear
// backup log that the stock server can recover from.
//
// Layout of ib_logfile0: a 512-byte header block, checkpoint blocks at 4096
// and 8192, and from StartOffset to the end of the file a circular stream of
// mini-transactions addressed by LSN (one LSN per byte).
package redo
