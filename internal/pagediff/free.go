package pagediff

import (
	"bytes"

	"github.com/ferry-backup/ferry/internal/innodb"
)

// descriptors are the extent descriptors of the tablespace being compared, as both
// copies hold them: a page both mark free has no content to compare (§11.1). A page
// freed where no link's log shows it (between the end of one incremental's redo and
// the start of the next one's) has no FREE_PAGE record to tell, and each side keeps
// whatever bytes its last writer left.
type descriptors struct {
	limitA, limitB uint32 // FSP_FREE_LIMIT of each side's page 0
	no             uint32 // the descriptor page held
	a, b           []byte // its bytes on each side (nil: none read yet)
}

// track keeps page no of both sides if it is a descriptor page (read in page order,
// each comes before the pages it describes).
func (d *descriptors) track(sp spaceInfo, no uint32, a, b []byte) {
	if !sp.parsed || innodb.DescriptorPage(sp.flags, no) != no {
		return
	}
	if no == 0 {
		d.limitA, d.limitB = innodb.FreeLimit(a), innodb.FreeLimit(b)
	}
	d.no, d.a, d.b = no, bytes.Clone(a), bytes.Clone(b)
}

// free tells whether both sides mark page no free.
func (d *descriptors) free(sp spaceInfo, no uint32) bool {
	if d.a == nil || innodb.DescriptorPage(sp.flags, no) != d.no || no == d.no {
		return false
	}
	return innodb.PageFree(d.a, sp.flags, d.limitA, no) && innodb.PageFree(d.b, sp.flags, d.limitB, no)
}
