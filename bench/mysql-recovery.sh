#!/usr/bin/env bash
# bench/mysql-recovery.sh: the stock mysqld's crash recovery that ends `ferry restore` (and
# `ferry clone`) of a MySQL 8.0.30+ backup, for two ferry binaries side by side on the same
# backup. The MySQL clone misses its 1.2x link-limit target by this recovery (bench/README.md,
# clone.sh FAMILY=mysql): it replays the whole redo of the copy window after the last byte.
#
# One directory backup of the MySQL bench set (lib.sh: 1 GiB buffer pool, 512 MiB redo) is taken
# at --max-rate RATE under sysbench oltp_write_only (LOAD_THREADS threads), so that it keeps a few
# hundred MB of redo; the server is stopped; then FERRY_A and FERRY_B each restore it RUNS times,
# alternating (A B B A ...), with --use-memory MEMORY, the page cache dropped before each. Per run:
# the restore's wall time and the recovery's own time from ferry's log ("prepare: recovery
# finished took=..."). The restored server of every run must start (ferry restore starts and stops
# it itself during the recovery); the first one's row counts must match the backup's end point
# (not checked: the load ran; the recovery's own checks and the bank tests of e2e TestMySQL cover it).
# Prints a markdown table and writes it to $BENCH_DIR/results-mysql-recovery.md. Needs root.
#
#   FERRY_A=/tmp/ferry-old FERRY_B=/tmp/ferry-new bench/mysql-recovery.sh
#
# Options (environment), defaults in brackets; the common ones are lib.sh's:
#   FERRY_A, FERRY_B                  the two ferry binaries (required)
#   RATE [100M]                       --max-rate of the backup under load (longer copy: more redo)
#   MEMORY [256M]                     --use-memory of the restores (ferry's default)
#   RUNS [2]                          restores per binary
set -euo pipefail
RUNS=${RUNS:-2}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RATE=${RATE:-100M}
MEMORY=${MEMORY:-256M}
[[ -x ${FERRY_A:-} && -x ${FERRY_B:-} ]] || die "set FERRY_A and FERRY_B to two ferry binaries"
LOGS="$BENCH_DIR/logs-mysql-recovery"
RES="$BENCH_DIR/results-mysql-recovery.md"
BACKUP="$BENCH_DIR/mysql-recovery-backup"
TARGET="$BENCH_DIR/mysql-recovery-restored"
CLEAN_PATHS+=("$BACKUP" "$TARGET")

bench_init
need sysbench sysbench
use_mysql
load_mysql_dataset --skip-networking --log-bin=binlog --server-id=1 --gtid-mode=ON --enforce-gtid-consistency=ON
rm -rf "$BACKUP"
start_load 10 "the backup"
log "backup under load at --max-rate $RATE"
"$FERRY_B" backup --socket "$SOCK" --user root --target-dir "$BACKUP" --max-rate "$RATE" >"$LOGS/backup.log" 2>&1 ||
  { tail -n 20 "$LOGS/backup.log" >&2; die "ferry backup failed (log: $LOGS/backup.log)"; }
stop_load
stop_pid "$SRC_PID"; SRC_PID=""
redo=$(stat -c %s "$BACKUP/xtrabackup_logfile")
log "backup kept $((redo >> 20)) MiB of redo"

printf '| binary | run | restore wall s | recovery s |\n|---|---|---|---|\n' >"$RES"
for ((i = 1; i <= RUNS; i++)); do
  for which in A B; do
    ((i % 2)) || which=$([[ $which == A ]] && echo B || echo A)
    bin=FERRY_$which
    rm -rf "$TARGET"; drop_caches
    t0=$(now)
    "${!bin}" restore --target-dir "$BACKUP" --datadir "$TARGET" --use-memory "$MEMORY" >"$LOGS/restore-$which-$i.log" 2>&1 ||
      { tail -n 20 "$LOGS/restore-$which-$i.log" >&2; die "ferry restore ($which) failed"; }
    wall=$(gawk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
    rec=$(grep -o 'recovery finished" took=[0-9.]*[a-z]*' "$LOGS/restore-$which-$i.log" | tail -n1 | cut -d= -f2)
    log "$which run $i: restore $wall s, recovery $rec"
    printf '| %s | %d | %s | %s |\n' "$which" "$i" "$wall" "$rec" >>"$RES"
  done
done
printf '\nRedo kept by the backup: %d MiB; --use-memory %s; A = %s, B = %s.\n' "$((redo >> 20))" "$MEMORY" "$FERRY_A" "$FERRY_B" >>"$RES"
cat "$RES"
