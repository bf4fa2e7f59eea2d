package testdb

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// PageFixture returns the gunzipped bytes of a page fixture that a real MariaDB 10.11
// server wrote, from internal/innodb/testdata (its README says what each holds), e.g.
// "fcrc32.after.gz": pages 0-3 of a full_crc32 tablespace.
func PageFixture(t testing.TB, name string) []byte {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the page fixtures")
	}
	f, err := os.Open(filepath.Join(filepath.Dir(self), "..", "innodb", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
