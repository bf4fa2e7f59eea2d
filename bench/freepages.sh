#!/usr/bin/env bash
# bench/freepages.sh: what storing the pages InnoDB marks free as holes saves after large deletes.
# A sysbench set (default 4 x 400k rows, ~400 MB; built once, kept pristine) is copied to a work
# datadir; a private server on that copy deletes DELETE_PCT % of every table's rows (the lowest ids,
# as a retention purge does), drops the secondary index k_N of every table with DROP_INDEX=1, waits
# for purge (innodb_max_purge_lag_wait=0) and flushes (quiesce). Then, in one invocation:
#   1. per .ibd and in total: file bytes, pages, and pages free per the extent descriptors
#      (bench/freepages, a read-only Go helper over the work datadir), so the bytes a backup can skip;
#   2. RUNS times, alternating the order, each with a cold page cache: `ferry backup --target-dir`
#      (free pages stored as holes, the default), the same with --keep-free-pages (every page
#      stored), and mariadb-backup --backup; recorded: wall time, and the backup's allocated bytes
#      (du -sB1) beside its apparent size;
#   3. the last holed ferry backup restored (`ferry restore --recovery native`) and CHECKSUM TABLE
#      of every table compared with the source's.
# Prints a markdown report and writes it to $BENCH_DIR/freepages-results.md. Needs root.
#
#   bench/freepages.sh                          # 4 x 400k rows, 70 % deleted, k_N dropped, 3 runs
#   DELETE_PCT=90 DROP_INDEX=0 bench/freepages.sh
#   TABLES=8 TABLE_SIZE=1000000 bench/freepages.sh
# Extra settings: DELETE_PCT [70], DROP_INDEX [1]; BENCH_DIR defaults to /var/tmp/ferry-bench-freepages
# and PORT to 3319 (the script deletes rows: it never runs on another script's dataset).
set -euo pipefail
BENCH_DIR=${BENCH_DIR:-/var/tmp/ferry-bench-freepages}
PORT=${PORT:-3319}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-400000}
DELETE_PCT=${DELETE_PCT:-70}
DROP_INDEX=${DROP_INDEX:-1}
source "$(dirname "$0")/lib.sh"
[[ $DELETE_PCT =~ ^[0-9]+$ ]] && ((DELETE_PCT <= 100)) || die "DELETE_PCT must be 0..100"

WORK="$BENCH_DIR/work-${TABLES}x${TABLE_SIZE}"
BK_HOLES="$BENCH_DIR/bk-holes"; BK_KEEP="$BENCH_DIR/bk-keep"; BK_MB="$BENCH_DIR/bk-mb"
RESTORED="$BENCH_DIR/restored"
RES="$BENCH_DIR/freepages-results.md"
CLEAN_PATHS=("$BK_HOLES" "$BK_KEEP" "$BK_MB" "$WORK")
CLEAN_RESTORED=("$RESTORED")

bench_init
build_ferry
[[ -n $FERRY ]] || die "this script measures ferry: SKIP_FERRY=1 leaves nothing to measure"
HELPER="$BENCH_DIR/bin/freepages"
(cd "$REPO" && "$(command -v go || echo /usr/local/go/bin/go)" build -o "$HELPER" ./bench/freepages) || die "go build ./bench/freepages failed"
stop_stale "$RPIDF" "$RESTORED"
load_dataset

# The deletes go to a copy: the dataset stays as sysbench left it for the next invocation.
stop_pid "$SRC_PID"; SRC_PID=""
rm -rf "$WORK"; cp -a --sparse=never "$DATA" "$WORK"
DATA=$WORK
start_source
log "deleting $DELETE_PCT % of the rows of $TABLES tables (drop k_N: $DROP_INDEX)"
for ((i = 1; i <= TABLES; i++)); do
  sql -e "DELETE FROM sbtest.sbtest$i WHERE id <= $((TABLE_SIZE * DELETE_PCT / 100))"
  if [[ $DROP_INDEX == 1 ]]; then sql -e "ALTER TABLE sbtest.sbtest$i DROP INDEX k_$i"; fi
done
sql -e "SET GLOBAL innodb_max_purge_lag_wait=0"
quiesce
"$HELPER" "$WORK" >"$LOGS/freepages.tsv"
read -r _ F_BYTES _ F_PAGES F_FREE < <(tail -n1 "$LOGS/freepages.tsv")
log "free pages: $F_FREE of $F_PAGES ($(gawk -v f="$F_FREE" -v p="$F_PAGES" 'BEGIN { printf "%.1f", p ? 100 * f / p : 0 }') %)"
data_sizes

FERRY_CMD="$(q "$FERRY") backup --socket $(q "$SOCK") --user root --parallel $PARALLEL $FERRY_ARGS"
declare -A CMD=(
  [holes]="$FERRY_CMD --target-dir $(q "$BK_HOLES")"
  [keep]="$FERRY_CMD --keep-free-pages --target-dir $(q "$BK_KEEP")"
  [mb]="mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$WORK") --target-dir=$(q "$BK_MB") --parallel=$PARALLEL"
)
declare -A DIRS=([holes]=$BK_HOLES [keep]=$BK_KEEP [mb]=$BK_MB)
TOOLS=(holes keep mb)
[[ $FERRY_ONLY == 1 ]] && TOOLS=(holes keep)
for ((r = 1; r <= RUNS; r++)); do
  for t in $(order "$r"); do
    rm -rf "${DIRS[$t]}"
    drop_caches
    timed "$t" "$r" 0 "${CMD[$t]}"
    printf '%s\t%s\t%s\t%s\n' "$t" "$r" "$(du -sB1 "${DIRS[$t]}" | cut -f1)" "$(du -sb "${DIRS[$t]}" | cut -f1)" >>"$LOGS/sizes.tsv"
  done
done
FREE_LOGGED=$(grep -o 'free_pages=[0-9]*' "$LOGS/holes-$RUNS.log" | tail -n1 | cut -d= -f2)

if [[ $SKIP_CHECK != 1 ]]; then
  timed ferry-restore 1 0 "$(q "$FERRY") restore --target-dir $(q "$BK_HOLES") --datadir $(q "$RESTORED") --recovery native"
  check_restored "$RESTORED"
  clean_restored "$RESTORED"
else
  CHECK="skipped (SKIP_CHECK=1)"
fi

describe_env
{
  echo "## bench/freepages.sh: free pages as holes after large deletes ($(date -u '+%F %H:%M UTC'))"
  echo
  echo "$MACHINE; $VERSIONS"
  echo
  echo "Dataset: sysbench $TABLES x $TABLE_SIZE rows, $DELETE_PCT % of the rows deleted (lowest ids), k_N dropped: $DROP_INDEX; purged and flushed."
  echo "Datadir $((DATA_BYTES >> 20)) MiB; .ibd files $((F_BYTES >> 20)) MiB, $F_PAGES pages of which $F_FREE free per the extent descriptors ($((F_FREE * F_BYTES / (F_PAGES > 0 ? F_PAGES : 1) >> 20)) MiB a backup need not store); ferry logged free_pages=$FREE_LOGGED."
  echo
  echo "| backup | median wall s | stored (allocated) MiB | apparent MiB | runs (wall s) |"
  echo "|---|---:|---:|---:|---|"
  for t in "${TOOLS[@]}"; do
    gawk -F'\t' -v t="$t" -v name="$([[ $t == holes ]] && echo 'ferry (free pages as holes)' || { [[ $t == keep ]] && echo 'ferry --keep-free-pages'; } || echo 'mariadb-backup')" '
      FILENAME ~ /raw/ && $1 == t { w[++n] = $3 }
      FILENAME ~ /sizes/ && $1 == t { a = $3; b = $4 }
      END { asort(w, s); m = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
        list = ""; for (i = 1; i <= n; i++) list = list (i > 1 ? ", " : "") w[i]
        printf "| %s | %.2f | %.0f | %.0f | %s |\n", name, m, a / 1048576, b / 1048576, list }' "$RAW" "$LOGS/sizes.tsv"
  done
  echo
  echo "Restore of the holed backup (--recovery native), CHECKSUM TABLE against the source: $CHECK"
  echo
  echo "Largest .ibd files (path, bytes, allocated, pages, free pages):"
  echo '```'
  sort -t$'\t' -k2,2nr "$LOGS/freepages.tsv" | grep -v '^total' | head -n 8 | sed "s|$WORK/||"
  echo '```'
} | tee "$RES"
[[ $CHECK == OK* || $SKIP_CHECK == 1 ]] || exit 1
