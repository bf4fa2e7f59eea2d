package manifest

import (
	"encoding/json"
	"testing"
)

// TestStorageFormatJSON: the storage formats are written as the strings older ferry
// wrote, and those strings read back as the constants.
func TestStorageFormatJSON(t *testing.T) {
	for _, c := range []struct {
		f    StorageFormat
		json string
	}{
		{StorageDir, `{"format":"dir"}`},
		{StorageXbstream, `{"format":"xbstream","compression":"zstd"}`},
		{StorageRepository, `{"format":"repository","part_size":4096}`},
	} {
		var st Storage
		if err := json.Unmarshal([]byte(c.json), &st); err != nil {
			t.Fatal(err)
		}
		if st.Format != c.f {
			t.Errorf("%s reads as format %q, want %q", c.json, st.Format, c.f)
		}
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.json {
			t.Errorf("storage %+v is written as %s, want %s", st, out, c.json)
		}
	}
}
