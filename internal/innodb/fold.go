package innodb

// The "innodb" checksum of MySQL before 5.6.3 (innodb_checksum_algorithm=innodb), still
// accepted by the server outside strict modes. The server folds in 64-bit arithmetic
// and truncates; the low 32 bits of xor, add and left shift depend only on the low 32
// bits of their inputs, so 32-bit arithmetic gives the same result.

func foldPair(n1, n2 uint32) uint32 {
	return ((((n1 ^ n2 ^ 1653893711) << 8) + n1) ^ 1463735687) + n2
}

// foldBinary is ut_fold_binary.
func foldBinary(b []byte) uint32 {
	var fold uint32
	for _, c := range b {
		fold = foldPair(fold, uint32(c))
	}
	return fold
}

// foldNewChecksum is buf_calc_page_new_checksum, stored in bytes 0..3.
func foldNewChecksum(page []byte) uint32 {
	return foldBinary(page[offPageNo:offKeyVersion]) + foldBinary(page[offData:len(page)-trailerLen])
}

// foldOldChecksum is buf_calc_page_old_checksum, stored in the trailer (bytes ps-8..ps-5).
func foldOldChecksum(page []byte) uint32 { return foldBinary(page[:offKeyVersion]) }
