// Package innodb knows the on-disk geometry of InnoDB tablespaces written by MariaDB
// 10.11 and validates pages the way the server and mariabackup do, so that a hot copy
// can detect torn (half-written) pages and re-read them.
//
// Supported page formats: innodb_checksum_algorithm=full_crc32 (plain, page_compressed
// and encrypted), the legacy crc32 format (with the non-strict acceptance of the old
// "innodb" fold checksum and of "none"), legacy page_compressed and encrypted pages,
// and ROW_FORMAT=COMPRESSED pages. All integers on a page are big-endian.
//
// MySQL 8.0 tablespaces use the same legacy format (crc32, innodb, none; SDI and LOB
// pages are ordinary pages to the checksum) and ROW_FORMAT=COMPRESSED pages. Their
// flags show it (Flavor, SpaceFlags.MySQL) except in undo tablespaces; MySQL's
// transparent page compression and keyring encryption are recognized, not validated
// (UnsupportedPageError), and SpaceFlags.MySQLEncrypted tells an encrypted tablespace
// from its page 0.
package innodb
