package setting_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"testing"

	"github.com/ferry-backup/ferry/internal/setting"
)

var cli = setting.Names{setting.TLSCert: "--tls-cert", setting.TLSKey: "--tls-key", setting.TokenFile: "--token-file"}

func TestErrorText(t *testing.T) {
	err := setting.Errorf("load %s %s / %s %s: %w", setting.TLSCert, "/c.pem", setting.TLSKey, "/k.pem", fs.ErrNotExist)
	if got, want := err.Error(), "load TLS certificate /c.pem / TLS key /k.pem: file does not exist"; got != want {
		t.Fatalf("Error() = %q, want the human names: %q", got, want)
	}
	if got, want := setting.Render(err, cli), "load --tls-cert /c.pem / --tls-key /k.pem: file does not exist"; got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the wrapped error is lost")
	}
	// A setting the table does not hold keeps its human name.
	if got, want := setting.Render(err, setting.Names{setting.TLSKey: "[sst] tkey"}), "load TLS certificate /c.pem / [sst] tkey /k.pem: file does not exist"; got != want {
		t.Fatalf("partial table: %q, want %q", got, want)
	}
}

func TestRenderThroughWrapping(t *testing.T) {
	inner := setting.Errorf("read %s: %w", setting.TokenFile, fs.ErrPermission)
	outer := setting.Errorf("%w; or give %s and %s", inner, setting.TLSCert, setting.TLSKey)
	err := fmt.Errorf("clone: %w", errors.Join(outer, errors.New("second")))
	want := "clone: read --token-file: permission denied; or give --tls-cert and --tls-key\nsecond"
	if got := setting.Render(err, cli); got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
	if setting.Render(nil, cli) != "" {
		t.Fatal("nil renders as text")
	}
}

func TestRename(t *testing.T) {
	err := fmt.Errorf("sst: %w", setting.Errorf("%s and %s go together", setting.TLSCert, setting.TLSKey))
	sst := setting.Rename(err, setting.Names{setting.TLSCert: "[sst] tcert", setting.TLSKey: "[sst] tls-key"})
	if got, want := sst.Error(), "sst: [sst] tcert and [sst] tls-key go together"; got != want {
		t.Fatalf("Rename: %q, want %q", got, want)
	}
	if !errors.Is(sst, err) {
		t.Fatal("Rename does not unwrap to the error")
	}
	// A front end printing a renamed error keeps the spelling it was given.
	if got, want := setting.Render(fmt.Errorf("ferry: %w", sst), cli), "ferry: sst: [sst] tcert and [sst] tls-key go together"; got != want {
		t.Fatalf("Render of a renamed error: %q, want %q", got, want)
	}
	if setting.Rename(nil, cli) != nil {
		t.Fatal("Rename(nil) is not nil")
	}
}

// TestAllComplete: All lists every Setting constant, so a front end's completeness
// test sees a new one.
func TestAllComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "setting.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	for _, s := range setting.All() {
		all[string(s)] = true
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Setting" {
				continue
			}
			for _, val := range v.Values {
				s, _ := strconv.Unquote(val.(*ast.BasicLit).Value)
				if n++; !all[s] {
					t.Errorf("setting %q is not in All", s)
				}
			}
		}
	}
	if n != len(all) {
		t.Errorf("%d constants, All has %d (a duplicate human name?)", n, len(all))
	}
}

// TestRenderQuoted: an error quoted with %v (not wrapped) inside an Errorf is
// respelled too.
func TestRenderQuoted(t *testing.T) {
	inner := setting.Errorf("check %s", setting.TokenFile)
	err := fmt.Errorf("clone: %w", setting.Errorf("the donor refused (%v); retry", inner))
	if got, want := setting.Render(err, cli), "clone: the donor refused (check --token-file); retry"; got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
	if errors.Is(err, inner) {
		t.Fatal("a quoted error became a wrapped one")
	}
}
