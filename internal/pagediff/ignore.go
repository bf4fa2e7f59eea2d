package pagediff

// Ignore is one thing the comparison does not hold against a page, and why. Ignores
// returns the complete list; nothing else in this package skips a byte. The list is
// written down in docs/redo-apply.md ("What the differential check ignores"); a test
// keeps the two equal.
type Ignore struct {
	What   string // the files, pages or bytes
	Reason string // why the server's recovery and a correct apply may differ there
}

// Ignores returns what the comparison ignores, each with the reason the server's recovery
// may leave those bytes different from a correct apply.
func Ignores() []Ignore {
	return []Ignore{
		{"ib_logfile0, ibtmp1, ib_buffer_pool and every file that is not an InnoDB data file",
			"not tablespaces: each prepare writes its own small log, the others are rebuilt or optional"},
		{"the content of a page whose final log state is FREE_PAGE",
			"recovery does not write a freed page: it keeps stale bytes, or zeros with innodb_immediate_scrub_data_uncompressed, or a punched hole if page_compressed"},
		{"the content of a page both copies' extent descriptors mark free (at or past FSP_FREE_LIMIT, in a free extent, or with XDES_FREE_BIT set)",
			"a page freed between the end of one incremental's redo and the start of the next one's has no FREE_PAGE record in any log: the server's link-by-link prepare keeps the bytes an older link's redo wrote, the chain's one apply those of an older delta"},
		{"encrypted pages: the key version (bytes 0..3 full_crc32, 26..29 legacy) and the post-encryption checksum (last 4 bytes full_crc32, 30..33 legacy); the rest is compared decrypted",
			"the ciphertext depends on the key version that is latest when the page is flushed, not on the redo"},
		{"page_compressed pages: the compressed stream; the last 4 bytes of a decompressed full_crc32 image; bytes 0..3 (0xDEADBEEF) and 26..33 (algorithm) of a decompressed legacy image; the rest is compared decompressed",
			"the stream depends on the library, algorithm and level (recovery uses innodb_compression_level), and the decompressed full_crc32 image keeps a stale checksum"},
		{"bytes 26..33 of page 0 of the system tablespace",
			"FIL_PAGE_FILE_FLUSH_LSN is written at shutdown, not by redo apply"},
		{"file lengths are compared apart from page content: a length difference fails the check on a line of its own, and pages past the shorter file are not compared",
			"files grow to FSP_SIZE, deferred spaces are sized rounded down to 4 KiB and undo truncation shrinks them; these are checked apart from the pages"},
	}
}
