package sink

import "testing"

// TestSent: a name is new once, until it is forgotten.
func TestSent(t *testing.T) {
	s := Sent{}
	if s.Has("a") || !s.Add("a") || !s.Has("a") {
		t.Fatal("a first Add must record a new name")
	}
	if s.Add("a") {
		t.Fatal("a second Add of the same name reported it new")
	}
	s.Forget("a")
	if s.Has("a") || !s.Add("a") {
		t.Fatal("a forgotten name must be new again")
	}
}
