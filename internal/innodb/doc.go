// Package innodb knows the on-disk geometry of InnoDB tablespaces written by MariaDB
// 10.11 and validates pages the way the server and mariabackup do, so that a hot copy
// can detect torn (half-written) pages and re-read them.
//
// Supported page formats: innodb_checksum_algorithm=full_crc32 (plain, page_compressed
// and encrypted), the legacy crc32 format (with the non-strict acceptance of the old
// "innodb" fold checksum and of "none"), legacy page_compressed and encrypted pages,
// and ROW_FORMAT=COMPRESSED pages. All integers on a page are big-endian.
package innodb
