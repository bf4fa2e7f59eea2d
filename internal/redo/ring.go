package redo

// ring is the geometry of the circular part of a log file
// (log_t::calc_lsn_offset, log_t::get_sequence_bit).
type ring struct {
	first    uint64 // LSN at file offset StartOffset
	capacity uint64 // file size - StartOffset
}

// offset returns the file offset of the byte with LSN lsn (lsn >= r.first).
func (r ring) offset(lsn uint64) int64 {
	return StartOffset + int64((lsn-r.first)%r.capacity)
}

// seqBit returns the sequence byte the server writes at LSN lsn: 1 on even
// laps of the ring, 0 on odd ones.
func (r ring) seqBit(lsn uint64) byte {
	if ((lsn-r.first)/r.capacity)%2 == 0 {
		return 1
	}
	return 0
}

// linear is the geometry of a backup log starting at first: it never wraps,
// so every sequence byte is 1.
func linear(first uint64) ring { return ring{first: first, capacity: 1 << 62} }
