package innodb

import (
	"encoding/binary"
	"fmt"
)

// Flavor is the server family that wrote a tablespace. MySQL 8.0 and MariaDB share the
// legacy page layout (checksums crc32, innodb and none) but not their extensions: MySQL
// has no full_crc32 and its own page compression and encryption (page types 14..17).
type Flavor uint8

// The flavors. The zero value is MariaDB, the server ferry was written for.
const (
	FlavorMariaDB Flavor = iota
	FlavorMySQL
)

// String returns the server's name.
func (f Flavor) String() string {
	if f == FlavorMySQL {
		return "MySQL"
	}
	return "MariaDB"
}

// FSP_SPACE_FLAGS bits only MySQL 5.7 and later set (fsp0types.h): bit 10 DATA_DIR,
// 11 SHARED, 12 TEMPORARY, 13 ENCRYPTION, 14 SDI. MariaDB refuses a file with bit 13
// or 14 set (fsp_flags_is_incompatible_mysql); the other three it does not test.
const (
	mysqlEncryption = 1 << 13
	mysqlSDI        = 1 << 14
)

// MySQL reports whether the flags carry a bit only MySQL sets: SDI (bit 14, every 8.0
// tablespace but the undo and temporary ones) or ENCRYPTION (bit 13). The flags of a
// MySQL undo tablespace look like MariaDB's legacy flags. (MariaDB 10.1.0 to 10.1.20
// also set bits 10..14 with pages other than 16 KiB; later versions rewrite such flags
// when they open the table.)
func (f SpaceFlags) MySQL() bool {
	return !f.FullCRC32() && f&(mysqlSDI|mysqlEncryption) != 0
}

// MySQLEncrypted reports whether a MySQL tablespace is encrypted (ENCRYPTION='Y',
// or innodb_undo_log_encrypt, innodb_sys_tablespace_encrypt): FSP_FLAGS_MASK_ENCRYPTION,
// bit 13. Its pages can be read only with the server's keyring. MariaDB never sets the
// bit (its encryption metadata is SpaceHeader.CryptData).
func (f SpaceFlags) MySQLEncrypted() bool {
	return !f.FullCRC32() && f&mysqlEncryption != 0
}

// Page types of MySQL's transparent page compression and keyring encryption
// (fil0fil.h), which MariaDB never writes.
const (
	typeMySQLCompressed          = 14 // FIL_PAGE_COMPRESSED
	typeMySQLEncrypted           = 15 // FIL_PAGE_ENCRYPTED
	typeMySQLCompressedEncrypted = 16 // FIL_PAGE_COMPRESSED_AND_ENCRYPTED
	typeMySQLEncryptedRTree      = 17 // FIL_PAGE_ENCRYPTED_RTREE
)

// The header of a MySQL compressed page (fil0fil.h, FIL_PAGE_*_V1), which overlays
// bytes 26..33: version, algorithm, original type, original size, compressed size.
const (
	offMySQLCompAlgo = offKeyVersion + 1
	offMySQLCompSize = offKeyVersion + 6
)

// Feature names a page format the Checker recognizes but cannot validate.
type Feature uint8

// The features.
const (
	// FeatureMySQLPageCompression is COMPRESSION='zlib' or 'lz4' (page type 14): the
	// checksum covers the page before compression.
	FeatureMySQLPageCompression Feature = iota + 1
	// FeatureMySQLEncryption is keyring encryption (page types 15, 16, 17): the body
	// and trailer are encrypted after the checksum was computed.
	FeatureMySQLEncryption
)

// String describes the feature as a table option.
func (f Feature) String() string {
	switch f {
	case FeatureMySQLPageCompression:
		return "MySQL transparent page compression (COMPRESSION='zlib'/'lz4')"
	case FeatureMySQLEncryption:
		return "MySQL tablespace encryption (ENCRYPTION='Y')"
	}
	return fmt.Sprintf("feature %d", uint8(f))
}

// UnsupportedPageError reports a well-formed page stored in a format the Checker
// cannot validate (it needs decompression or the server's keyring). It does not mean
// the page is damaged: re-reading it does not help, and a backup should refuse the
// tablespace.
type UnsupportedPageError struct {
	PageNo  uint32
	Feature Feature
	Detail  string // e.g. the compression algorithm; may be empty
}

// Error implements error.
func (e *UnsupportedPageError) Error() string {
	s := fmt.Sprintf("innodb: page %d uses %s", e.PageNo, e.Feature)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s + ", which ferry cannot validate"
}

// checkMySQLType returns an *UnsupportedPageError for a MySQL compressed or encrypted
// page, a *CorruptPageError for a compressed page whose header is invalid, and nil for
// any other page (checked as a legacy page).
func checkMySQLType(page []byte, pageNo uint32) error {
	switch PageType(page) {
	case typeMySQLCompressed:
		return checkMySQLCompressed(page, pageNo)
	case typeMySQLEncrypted, typeMySQLEncryptedRTree:
		return &UnsupportedPageError{PageNo: pageNo, Feature: FeatureMySQLEncryption}
	case typeMySQLCompressedEncrypted:
		return &UnsupportedPageError{PageNo: pageNo, Feature: FeatureMySQLEncryption, Detail: "compressed and encrypted"}
	}
	return nil
}

// checkMySQLCompressed tests the header of a MySQL compressed page (a known algorithm,
// a compressed size that fits the page) and reports the page unsupported if it holds.
func checkMySQLCompressed(page []byte, pageNo uint32) error {
	var algo string
	switch page[offMySQLCompAlgo] {
	case 1:
		algo = "zlib"
	case 2:
		algo = "lz4"
	default:
		return &CorruptPageError{PageNo: pageNo, Reason: "MySQL compressed page with unknown algorithm"}
	}
	if n := int(binary.BigEndian.Uint16(page[offMySQLCompSize:])); n == 0 || n > len(page)-offData {
		return &CorruptPageError{PageNo: pageNo, Reason: "MySQL compressed page size out of range"}
	}
	return &UnsupportedPageError{PageNo: pageNo, Feature: FeatureMySQLPageCompression, Detail: algo}
}
