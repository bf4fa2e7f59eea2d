package apply

import "fmt"

// RecordError is a record that ferry does not apply: the server would refuse it, or
// ferry does not know how to apply it exactly as the server does. The backup then
// needs the server's recovery.
type RecordError struct {
	Space, Page uint32
	LSN         uint64 // start LSN of the mini-transaction
	Record      string // record type, e.g. "WRITE" or "EXTENDED/INSERT_HEAP_DYNAMIC"
	Reason      string
}

// Error describes the record and why it was not applied.
func (e *RecordError) Error() string {
	return fmt.Sprintf("redo record %s for page %d:%d at LSN %d: %s", e.Record, e.Space, e.Page, e.LSN, e.Reason)
}
