#!/usr/bin/env bash
# bench/checkpoint.sh: what the server's checkpoint does under a write load, and what forcing one
# costs. This is the measurement behind the three-stage copy's rule of taking the server's own
# newest checkpoint and never forcing one (docs/backup-procedure.md, step 5b): it runs no backup.
#
# Same private server and dataset as bench/backup.sh (lib.sh: 1 GiB buffer pool, 512M redo log).
#   1. no dirty pages, page cache dropped (lib.sh quiesce);
#   2. sysbench oltp_write_only (LOAD_THREADS threads, unthrottled, per-second reports) runs for
#      PROBE_SECS after LOAD_WARMUP_SECS; every second the probe records Innodb_lsn_current,
#      Innodb_lsn_last_checkpoint and Innodb_buffer_pool_pages_dirty;
#   3. at each second of FORCE_AT (counted from the probe's start; later if the one before still
#      runs) it runs `SET GLOBAL innodb_log_checkpoint_now=ON` on its own connection (it needs
#      SUPER) and records
#      how long the statement ran, how long the checkpoint took to pass the LSN of the request,
#      and the load's TPS while it ran against the 10 s before.
# Prints a markdown report (also $BENCH_DIR/checkpoint-results.md); the samples are in
# $BENCH_DIR/logs-checkpoint/samples.tsv (seconds, LSN, checkpoint LSN, dirty pages).
#
#   bench/checkpoint.sh                      # 14 x 1M rows, forced at 30, 90 and 150 s (~4 min)
#   SMALL=1 PROBE_SECS=40 FORCE_AT=20 bench/checkpoint.sh
#
# Options (environment), defaults in brackets: BENCH_DIR, SMALL, TABLES, TABLE_SIZE, PORT,
# QUIET_MAX, KEEP_SERVER as for backup.sh, and
#   PROBE_SECS [180]      seconds of load probed
#   FORCE_AT ["30 90 150"] seconds of load at which a checkpoint is forced (empty: none)
#   LOAD_THREADS [2] LOAD_WARMUP_SECS [5]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PROBE_SECS=${PROBE_SECS:-180}
FORCE_AT=${FORCE_AT-30 90 150}
LOGS="$BENCH_DIR/logs-checkpoint"
RESULTS="$BENCH_DIR/checkpoint-results.md"
[[ $PROBE_SECS =~ ^[1-9][0-9]*$ ]] || die "PROBE_SECS must be a positive number of seconds"
for f in $FORCE_AT; do
  [[ $f =~ ^[0-9]+$ && $f -lt $PROBE_SECS ]] || die "FORCE_AT must list seconds below PROBE_SECS, not '$f'"
done

bench_init
need bc bc
load_dataset
quiesce
SAMPLES="$LOGS/samples.tsv"; FORCED="$LOGS/forced.tsv"
: >"$SAMPLES"; : >"$FORCED"

# status: "LSN CHECKPOINT DIRTY" of the server now.
status() {
  sql -e "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN
    ('INNODB_LSN_CURRENT', 'INNODB_LSN_LAST_CHECKPOINT', 'INNODB_BUFFER_POOL_PAGES_DIRTY')" |
    gawk '{ v[$1] = $2 } END { print v["INNODB_LSN_CURRENT"], v["INNODB_LSN_LAST_CHECKPOINT"], v["INNODB_BUFFER_POOL_PAGES_DIRTY"] }'
}

# force N: runs innodb_log_checkpoint_now in the background (FORCE_PID); appends "at start end
# lsn" to $FORCED.
FORCE_PID=""
force() {
  (
    local s e lsn
    lsn=$(status | cut -d' ' -f1)
    s=$(now)
    sql -e "SET GLOBAL innodb_log_checkpoint_now=ON" || die "SET GLOBAL innodb_log_checkpoint_now failed (it needs SUPER)"
    e=$(now)
    printf '%s\t%s\t%s\t%s\n' "$1" "$s" "$e" "$lsn" >>"$FORCED"
  ) &
  FORCE_PID=$!
}

log "probing ${PROBE_SECS} s of sysbench oltp_write_only (${LOAD_THREADS} threads); forcing a checkpoint at: ${FORCE_AT:-never}"
start_load "$LOAD_WARMUP_SECS" "the probe"
T0=$(now)
pending=()                                        # forcings due while another still ran
for ((i = 0; i < PROBE_SECS; i++)); do
  printf '%s\t%s\n' "$(echo "$(now) - $T0" | bc)" "$(status | tr ' ' '\t')" >>"$SAMPLES"
  for f in $FORCE_AT; do ((f == i)) && pending+=("$i"); done
  if ((${#pending[@]})) && ! { [[ -n $FORCE_PID ]] && kill -0 "$FORCE_PID" 2>/dev/null; }; then
    force "$i"; pending=("${pending[@]:1}")
  fi
  sleep 1
done
((${#pending[@]} == 0)) || log "warning: ${#pending[@]} forced checkpoint(s) did not start: the one before ran to the end of the probe"
[[ -z $FORCE_PID ]] || wait "$FORCE_PID"
stop_load "$LOGS/sysbench.log"

{
  echo "### checkpoint.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  describe_env
  echo "- machine: $MACHINE"
  echo "- versions: $VERSIONS"
  echo "- dataset: sysbench ${TABLES} x ${TABLE_SIZE} rows; load: oltp_write_only, ${LOAD_THREADS} threads"
  echo
  echo "Under the load (every 10 s): the checkpoint age, and how far the checkpoint moved since the probe began (MB):"
  echo
  echo "| s | checkpoint age | checkpoint moved |"
  echo "|---|---|---|"
  gawk -F'\t' 'NR == 1 { c0 = $3 } NR % 10 == 1 { printf "| %.0f | %.0f | %.0f |\n", $1, ($2 - $3) / 1e6, ($3 - c0) / 1e6 }' "$SAMPLES"
  echo
  echo "| forced at s (probe) | statement s | checkpoint passed the request's LSN after s | TPS 10 s before | TPS while it ran | lowest 1-s TPS while it ran |"
  echo "|---|---|---|---|---|---|"
  while IFS=$'\t' read -r at s e lsn; do
    passed=$(gawk -F'\t' -v t0="$T0" -v s="$s" -v lsn="$lsn" '$3 >= lsn && t0 + $1 >= s { printf "%.1f", t0 + $1 - s; exit }' "$SAMPLES")
    low=$(gawk -v a="$s" -v b="$e" -v t0="$SB_T0" '/^\[ *[0-9]+s \]/ { t = t0 + $2 - 0.5
        for (i = 3; i < NF; i++) if ($i == "tps:") v = $(i + 1) + 0
        if (t >= a && t <= b && (m == "" || v < m)) m = v } END { printf "%.0f", m }' "$SB_LOG")
    printf '| %s | %.1f | %s | %s | %s | %s |\n' "$at" "$(echo "$e - $s" | bc)" "${passed:-never}" \
      "$(tps "$(echo "$s - 10" | bc)" "$s" "$SB_T0" %.0f)" "$(tps "$s" "$e" "$SB_T0" %.0f -)" "$low"
  done <"$FORCED"
} | tee "$RESULTS"
