//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestOptionFile: ferry's options come from [ferry] and [ferry-VERB] of --defaults-file
// (the connection from its [client]), the verb's group wins over [ferry], a flag wins
// over both, an option of [ferry] the verb lacks is ignored and one of [ferry-VERB] is
// refused in one line.
func TestOptionFile(t *testing.T) {
	t.Parallel()
	src := testdb.Start(t, testdb.Options{})
	tmp := testdb.ShortDir(t)
	cnf := func(extra string) string {
		return writeFile(t, tmp, "my.cnf", "[client]\nsocket="+src.Socket+"\nuser=root\n\n"+
			"[ferry]\nlog-format=json\nparallel=3\nlisten=127.0.0.1:1  # serve's: ignored by backup\n\n"+
			"[ferry-backup]\ntarget_dir="+filepath.Join(tmp, "from-file")+"\nparallel=1\nmetrics-file="+filepath.Join(tmp, "b.prom")+"\n"+extra)
	}
	out := mustFerry(t, "backup", "--defaults-file", cnf(""))
	if _, err := os.Stat(filepath.Join(tmp, "from-file", "ferry_manifest.json")); err != nil {
		t.Fatalf("[ferry-backup] target_dir was not used: %v\n%s", err, tail(out.stderr, 10))
	}
	if !strings.Contains(out.stderr, `"parallel":1`) || !strings.HasPrefix(out.stderr, "{") {
		t.Errorf("[ferry-backup] parallel=1 over [ferry] parallel=3, or [ferry] log-format=json, not applied:\n%s", tail(out.stderr, 30))
	}
	if _, err := os.Stat(filepath.Join(tmp, "b.prom")); err != nil {
		t.Errorf("[ferry-backup] metrics-file not applied: %v", err)
	}

	out = mustFerry(t, "backup", "--defaults-file", cnf(""), "--target-dir", filepath.Join(tmp, "from-flag"), "--parallel", "2", "--log-format", "text")
	if _, err := os.Stat(filepath.Join(tmp, "from-flag", "ferry_manifest.json")); err != nil {
		t.Fatalf("--target-dir did not win over the option file: %v", err)
	}
	if !strings.Contains(out.stderr, "parallel=2") || strings.HasPrefix(out.stderr, "{") {
		t.Errorf("flags did not win over the option file:\n%s", tail(out.stderr, 10))
	}

	// The file asks for JSON logs: the refusal is one JSON record, with its exit code.
	res := ferry(t, nil, "backup", "--defaults-file", cnf("no_such_thing=1\n"))
	wantExit(t, res, 2)
	if strings.Count(strings.TrimSpace(res.stderr), "\n") > 0 {
		t.Errorf("the refusal is not one line:\n%s", res.stderr)
	}
	if rec := jsonLines(t, res.stderr)[0]; rec["level"] != "ERROR" || !strings.Contains(fmt.Sprint(rec["msg"]), "ferry backup has no --no-such-thing") {
		t.Errorf("the refusal is %v", rec)
	}
	res = ferry(t, nil, "backup", "--defaults-file", cnf("parallel=many\n"), "--target-dir", filepath.Join(tmp, "x"))
	wantExit(t, res, 2)
	if rec := jsonLines(t, res.stderr)[0]; !strings.Contains(fmt.Sprint(rec["msg"]), "option parallel=many in [ferry-backup]") {
		t.Errorf("the refusal is %v", rec)
	}
}
