// Package mysqlredo reads, copies and restores the InnoDB redo log of MySQL 8.0.30
// and later (log format 6): the chain of files #innodb_redo/#ib_redoN of a running
// server, each a 2048-byte header (file header, checkpoint, encryption header,
// checkpoint blocks) followed by 512-byte log blocks addressed by LSN.
//
// A Tailer copies the log of a running server, from its newest checkpoint A to an
// end LSN E, into XtraBackup 8.0's xtrabackup_logfile layout; Scan verifies such a
// copy; WriteRedoDir turns it into a #innodb_redo directory from which a stock
// mysqld recovers exactly to E.
//
// Every integer in the files is big-endian. LSNs count every byte of the blocks,
// headers and trailers included: the block holding LSN l starts at l rounded down
// to 512, and a data LSN has l%512 in [12, 508).
package mysqlredo
