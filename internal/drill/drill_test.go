package drill

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/restore"
)

// mysqlSource is a source whose backup was taken from MySQL; it fails if the drill
// goes past inspecting it.
type mysqlSource struct{}

func (mysqlSource) Name() string       { return "test" }
func (mysqlSource) Caps() restore.Caps { return restore.Caps{Inspect: true} }
func (mysqlSource) Staging(string) (string, error) {
	return "", errors.New("the drill went on with a MySQL backup")
}
func (mysqlSource) Inspect(context.Context) (*restore.Backup, error) {
	m := &manifest.Manifest{ID: "b1", Server: manifest.Server{Family: mariadb.FamilyMySQL, Version: "8.0.40"}}
	return &restore.Backup{Manifest: m, ServerVersion: "8.0.40", Source: "test b1"}, nil
}
func (mysqlSource) Fill(context.Context, string, restore.Env) (*restore.Backup, error) {
	return nil, errors.New("the drill went on with a MySQL backup")
}

// TestRunRefusesMySQL: a MySQL backup is refused in one line before any data moves,
// and the scratch directory is gone.
func TestRunRefusesMySQL(t *testing.T) {
	tmp := t.TempDir()
	done := false
	cfg := Config{TmpDir: tmp, Open: func(rc *restore.Config) (func(), error) {
		rc.Source = mysqlSource{}
		return func() { done = true }, nil
	}}
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "taken from MySQL 8.0.40") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run: %v, want one line refusing the MySQL backup", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 || !done {
		t.Errorf("left %v in the temporary directory (source released: %v)", ents, done)
	}
}
