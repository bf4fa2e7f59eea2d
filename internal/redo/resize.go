package redo

import "fmt"

// followResize handles an online log resize (SET GLOBAL
// innodb_log_file_size): the server renames a new ib_logfile0 over the old
// one, with a new first LSN and capacity; LSNs continue. The old file, which
// the server no longer writes, is drained up to the new file's first LSN,
// then reading continues in the new file.
func (t *Tailer) followResize() error {
	if t.next == nil {
		if !t.log.replaced() {
			return nil
		}
		nl, err := openLog(t.cfg.Path)
		if err != nil {
			return fmt.Errorf("redo log was replaced (online resize?) at copied LSN %d: %w", t.cur, err)
		}
		if nl.hdr.Format != t.log.hdr.Format || nl.hdr.Crypt != t.log.hdr.Crypt {
			nl.close()
			return fmt.Errorf("redo log was replaced at copied LSN %d by one of format %#08x (was %#08x) or other encryption: cannot continue",
				t.cur, nl.hdr.Format, t.log.hdr.Format)
		}
		t.next = nl
	}
	if t.cur < t.next.ring.first {
		return nil
	}
	t.log.close()
	t.log, t.next = t.next, nil
	t.bad = 0
	return nil
}
