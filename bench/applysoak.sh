#!/usr/bin/env bash
# bench/applysoak.sh: the long randomized differential run of ferry's native redo apply.
# Rounds of random workloads, each on a fresh private server with a random innodb_page_size
# (4k..64k) and a random subset of table formats (DYNAMIC, REDUNDANT, COMPACT, COMPRESSED,
# PAGE_COMPRESSED), random statement mixes and load lengths; each round is copied with
# mariadb-backup --backup, prepared once by mariadb-backup --prepare and once by ferry's
# native apply (restore.Prepare --recovery native), and every page of every tablespace is
# compared (internal/pagediff). The first differing page stops the run and prints the
# tablespace, page, last records with their LSN, and the first differing byte.
#
#   bench/applysoak.sh               # 2 hours
#   DURATION=10m bench/applysoak.sh  # a short run
#
# Prints the seed (to replay a failing run, the rounds follow from it) and one line per
# round: page size, formats, pages compared. Needs mariadbd and mariadb-backup on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-2h}
exec env FERRY_APPLY_SOAK="$DURATION" go test -tags e2e -count=1 -v -timeout 0 -run 'TestApplySoak' ./internal/apply
