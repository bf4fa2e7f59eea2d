package setting_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// flagLike is a command-line flag inside prose: "--tls-cert", "(--repo", "load/--parallel".
var flagLike = regexp.MustCompile(`(^|[\s(/'"])--[a-z]`)

// scanSkip are the packages still to convert (their errors still name flags).
var scanSkip = []string{"testdb"}

// scanAllowed are texts that name another program's options or the arguments mariadbd
// gives the SST method, not a setting of ferry's.
var scanAllowed = []string{
	"mariadbd --wsrep-recover",           // galera: the command ferry ran
	"--print-defaults",                   // mariadb: the command ferry ran
	"%s --version",                       // mariadb: the command ferry ran
	"mariadb-backup --decompress",        // stream: what to run instead
	"ferry sst --role donor",             // sst: the command recorded in the manifest
	"--role %q",                          // sst: mariadbd's arguments to the method
	"no --address",                       //
	"no --datadir",                       //
	"--%s %q: not a number",              //
	"--gtid: %w",                         //
	"mariadbd gave neither --socket nor", //

	"mariadb-backup --prepare --target-dir", // restore: what to run instead
	"ferry restore --move of ",              // restore: the move journal's header on disk, read back
}

// TestNoFlagsInLibraryText fails when a string of an internal/ package names a
// command-line flag: library errors name the setting (setting.TLSCert) and the front
// end spells it (cmd/ferry: --tls-cert, the SST method: [sst] tcert). Tokens of a
// command line ferry builds ("--datadir=") hold no space and are not prose.
func TestNoFlagsInLibraryText(t *testing.T) {
	root := filepath.Join("..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			for _, s := range scanSkip {
				if path == filepath.Join(root, s) {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.Contains(s, " ") || !flagLike.MatchString(s) || allowed(s) {
				return true
			}
			t.Errorf("%s: %q names a flag: name the setting with setting.Errorf and a setting.Setting instead", fset.Position(lit.Pos()), s)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func allowed(s string) bool {
	for _, a := range scanAllowed {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}
