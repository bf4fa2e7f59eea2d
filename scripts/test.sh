#!/usr/bin/env bash
# The test suite in phases, each timed (docs/testing.md says what each holds and costs):
#   lint     go vet (with and without the e2e and testhooks tags), gofmt, golangci-lint (.golangci.yml)
#   fast     every test that starts no server, under the race detector: `go test -race ./...`
#   servers  the tests in internal/ and cmd/ files marked //go:build e2e (real mariadbd, S3)
#   e2e      the end-to-end suite in e2e/ (real servers, Galera, faults), a few at a time
# Usage: scripts/test.sh [phase...]   (default: all four, in that order)
# .ci/run installs the servers and stock tools first; the fast phase needs none of them.
set -euo pipefail
cd "$(dirname "$0")/.."
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(lint fast servers e2e)
logs=${TEST_LOGS:-$(mktemp -d /tmp/ferry-test-logs.XXXXXX)}
mkdir -p "$logs"

# The CI tools are pinned in tools/ci/go.mod (their own module, out of ferry's
# dependencies) and built once into .bin/.
tool() {
  local name=$1 pkg=$2
  if [ ! -x ".bin/$name" ]; then
    (cd tools/ci && go build -o "../../.bin/$name" "$pkg")
  fi
  echo ".bin/$name"
}
gotestsum=$(tool gotestsum gotest.tools/gotestsum)
# run NAME ARGS...: go test ARGS with a compact report (failures in full, one line per
# package) and the run's events kept in $logs/NAME.json.
run() {
  local name=$1
  shift
  "$gotestsum" --format pkgname-and-test-fails --jsonfile "$logs/$name.json" -- "$@"
}

# Each phase runs as `"$p" || rc=$?`, where bash ignores set -e inside it: every step that
# can fail returns at once.
lint() {
  go vet ./... || return
  go vet -tags e2e,testhooks ./... || return
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go')) || return
  [ -z "$unformatted" ] || { echo "test: gofmt needed: $unformatted" >&2; return 1; }
  "$(tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint)" run ./...
}

fast() {
  run fast -race -count=1 -timeout 10m ./...
}

# servers runs only the tests of the tagged files outside e2e/: the other tests of those
# packages ran in the fast phase already.
servers() {
  local files names pkgs
  mapfile -t files < <(git grep -l '^//go:build e2e' -- '*_test.go' ':!e2e/')
  [ ${#files[@]} -gt 0 ] || { echo "test: no //go:build e2e files outside e2e/" >&2; return 1; }
  names=$(grep -ho '^func Test[A-Za-z0-9_]*' "${files[@]}" | sed 's/^func //' | sort -u | paste -sd'|')
  mapfile -t pkgs < <(for f in "${files[@]}"; do echo "./$(dirname "$f")"; done | sort -u)
  run servers -tags e2e -count=1 -timeout 20m -run "^($names)\$" "${pkgs[@]}"
}

e2e() {
  run e2e -tags e2e -count=1 -timeout 40m ./e2e/
}

total=$SECONDS
for p in "${phases[@]}"; do
  case $p in lint | fast | servers | e2e) ;; *) echo "test: unknown phase $p (lint, fast, servers, e2e)" >&2; exit 2 ;; esac
  start=$SECONDS
  rc=0
  "$p" || rc=$?
  echo "test: phase $p: $((SECONDS - start)) s$([ $rc -eq 0 ] || echo ", FAILED (exit $rc)")"
  if [ -f "$logs/$p.json" ]; then
    # sed, not head: head would close the pipe early and fail the run (pipefail, SIGPIPE).
    "$gotestsum" tool slowest --jsonfile "$logs/$p.json" --threshold 15s | sed -n '1,25s/^/test:   slow /p'
  fi
  [ $rc -eq 0 ] || exit $rc
done
echo "test: all phases passed in $((SECONDS - total)) s (logs in $logs)"
