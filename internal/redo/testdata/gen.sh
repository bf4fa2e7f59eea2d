#!/bin/sh
# Regenerates the redo fixture (head.bin, mtrs.bin, meta.txt) from a private
# MariaDB 10.11 server started by TestGenerateFixture. Run from anywhere.
set -eu
cd "$(dirname "$0")/.."
FERRY_REDO_GEN_FIXTURE=1 go test -tags e2e -run '^TestGenerateFixture$' -count=1 -v .
