package sink

// Sent is the set of files a backup started in its end, by their names there. It does
// not lock: its owner guards it.
type Sent map[string]bool

// Add records that rel was started, and reports whether it was not yet.
func (s Sent) Add(rel string) bool {
	if s[rel] {
		return false
	}
	s[rel] = true
	return true
}

// Has tells whether rel was started.
func (s Sent) Has(rel string) bool { return s[rel] }

// Forget forgets rel (the end removed it).
func (s Sent) Forget(rel string) { delete(s, rel) }
