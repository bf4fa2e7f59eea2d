#!/bin/sh
# Regenerates the EXTENDED-record fixtures (extended_{4k,16k,64k}.json.gz) from
# private MariaDB 10.11 servers started by TestGenerateExtendedFixture. Run from anywhere.
set -eu
cd "$(dirname "$0")/.."
FERRY_APPLY_GEN_FIXTURE=1 go test -tags e2e -run '^TestGenerateExtendedFixture$' -count=1 -v .
