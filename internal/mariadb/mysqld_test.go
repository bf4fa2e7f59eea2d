package mariadb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fakeMysqld writes an executable at path that prints a mariadbd --version line.
func fakeMysqld(t *testing.T, path, version string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho '" + filepath.Base(path) + "  Ver " + version + "-MariaDB for Linux on x86_64'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFindMysqldFor: the mariadbd an option file names for the series wins, an
// installation directory given names its bin/mariadbd, a binary given is used as it
// is, and the search returns the first of the series wanted.
func TestFindMysqldFor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m114 := fakeMysqld(t, filepath.Join(dir, "114", "bin", "mariadbd"), "11.4.5")
	m1011 := fakeMysqld(t, filepath.Join(dir, "1011", "mariadbd"), "10.11.19")
	for _, c := range []struct {
		spec, series, want string
	}{
		{"10.11=" + m1011 + ",11.4=" + m114, "11.4", m114},
		{"10.11=" + m1011 + ",11.4=" + m114, "10.11", m1011},
		{filepath.Join(dir, "114"), "10.11", m114}, // given: used as it is, the caller checks it
		{m1011 + ",11.4=" + m114, "11.4", m1011},   // a binary given wins over the entries
	} {
		got, err := FindMysqldFor(ctx, c.spec, c.series)
		if err != nil || got != c.want {
			t.Errorf("FindMysqldFor(%q, %q) = %q, %v; want %q", c.spec, c.series, got, err, c.want)
		}
	}
	t.Setenv("PATH", filepath.Join(dir, "1011")+":"+filepath.Join(dir, "114", "bin"))
	if got, err := FindMysqldFor(ctx, "", "11.4"); err != nil || got != m114 {
		t.Errorf("search for 11.4: %q, %v; want %s (the second on PATH)", got, err, m114)
	}
	if _, err := FindMysqldFor(ctx, filepath.Join(dir, "nothing"), ""); err == nil {
		t.Error("a missing binary was accepted")
	}
}
