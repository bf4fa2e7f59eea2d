#!/usr/bin/env bash
# bench/capped.sh: a directory backup capped at a slow rate under a bulk-update load, the case
# issue 23 opens with (a 52 s backup at 8 MiB/s of a server with a 256M redo log kept 4,164 MiB of
# redo, and the recovery inside `ferry restore` took 20.5 s). Targets: the recovery (or native
# apply) inside `ferry restore` <= 1 s, the redo the backup keeps <= 64 MiB.
#
# A private server (1 GiB buffer pool, REDO_SIZE log, binlog on) with a sysbench dataset of
# TABLES x TABLE_SIZE rows (about 430 MB by default: at 8 MiB/s the copy lasts about a minute).
# The load: BULK_THREADS sessions, each running UPDATE sbtest.sbtestN SET k = k + 1 WHERE id
# BETWEEN a AND a + BULK_ROWS - 1 (random table and range) back to back, started after quiesce
# (no dirty pages, cold page cache), LOAD_WARMUP_SECS before each backup and stopped when it ends.
# In one invocation, each backup under that load, RUNS times:
#   ferry:           `ferry backup --target-dir D --max-rate RATE --parallel P` (the default
#                    three-stage copy);
#   ferry full-redo: the same with --full-redo (every byte of redo of the copy kept: what the
#                    three-stage copy saves; FULL_REDO=0 leaves it out);
#   mariadb-backup:  `mariadb-backup --backup --throttle=THROTTLE --parallel=P` (THROTTLE read
#                    operations of 1 MiB per second, about RATE; FERRY_ONLY=1 leaves it out);
# recorded for each: wall time, the server's LSN before and after (redo written meanwhile), the
# rows the load updated per second meanwhile, and the redo the backup keeps (ferry: redo_kept of
# its log; mariadb-backup: its ib_logfile0). Then, each with a cold page cache and the load
# stopped: `ferry restore --target-dir D --datadir X` as a new user runs it (its wall time and the
# native apply's or the server recovery's took, from its log), `mariadb-backup --prepare` of its
# own backup (wall). mariadb-backup failing (its log copy overtaken by the server wrapping its redo
# log: "Was only able to copy log ...") is a result, marked in its row, not a finding. A server started on ferry's first restore must pass mariadb-check
# --all-databases and hold the rows per table the source held before the load (UPDATE keeps
# them). A failing ferry command is a finding: reported, and the script exits non-zero at the end.
# Prints a markdown report and writes it to $BENCH_DIR/capped-results.md. Needs root.
#
#   bench/capped.sh                       # 4 x 400k rows, 8 MiB/s, 256M redo log, RUNS=1
#   SMALL=1 bench/capped.sh               # 4 x 100k rows: checks the script in a few minutes
#   RATE=4M REDO_SIZE=128M bench/capped.sh
#
# Options (environment), defaults in brackets (and lib.sh's: BENCH_DIR, PORT, QUIET_MAX, FERRY...):
#   TABLES [4] TABLE_SIZE [400000]  sysbench dataset (its own datadir)
#   RUNS [1]                        runs of every backup; the report shows medians
#   RATE [8M]                       ferry backup --max-rate
#   THROTTLE [8]                    mariadb-backup --throttle
#   REDO_SIZE [256M]                the source's innodb_log_file_size
#   BULK_THREADS [2] BULK_ROWS [20000]  the bulk-update load
#   PARALLEL [2] PREPARE_MEMORY [256M] LOAD_WARMUP_SECS [5] FULL_REDO [1] FERRY_ONLY [0]
#   KEEP_BACKUP [0]                 1: the last backup taken stays in $BENCH_DIR/capped-backup
set -euo pipefail
if [[ ${SMALL:-0} != 1 ]]; then TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-400000}; fi
RUNS=${RUNS:-1}
source "$(dirname "$0")/lib.sh"
RATE=${RATE:-8M}
THROTTLE=${THROTTLE:-8}
REDO_SIZE=${REDO_SIZE:-256M}
BULK_THREADS=${BULK_THREADS:-2}
BULK_ROWS=${BULK_ROWS:-20000}
KEEP_BACKUP=${KEEP_BACKUP:-0}
FULL_REDO=${FULL_REDO:-1}
LOGS="$BENCH_DIR/logs-capped"
RES="$LOGS/results.tsv"
D="$BENCH_DIR/capped-backup"
X="$BENCH_DIR/capped-restored"
CLEAN_PATHS=("$D")
[[ $KEEP_BACKUP != 1 ]] || CLEAN_PATHS=()
CLEAN_RESTORED=("$X")
BULK_PIDS=()
trap 'rc=$?; set +e; stop_bulk; (exit $rc); cleanup' EXIT

start_source() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1 --innodb-log-file-size="$REDO_SIZE"
}

# start_bulk: BULK_THREADS sessions of back-to-back range UPDATEs (a gawk generator piped into
# one client each; stop_bulk kills the clients, which ends the generators).
start_bulk() {
  local i
  for ((i = 1; i <= BULK_THREADS; i++)); do
    gawk -v n="$TABLES" -v rows="$TABLE_SIZE" -v w="$BULK_ROWS" -v seed="$i$RANDOM" 'BEGIN { srand(seed)
        while (1) { t = int(rand() * n) + 1; a = int(rand() * (rows - w)) + 1
          printf "UPDATE sbtest%d SET k = k + 1 WHERE id BETWEEN %d AND %d;\n", t, a, a + w - 1 } }' |
      mariadb --no-defaults -S "$SOCK" -uroot sbtest >>"$LOGS/bulk.log" 2>&1 &
    BULK_PIDS+=($!)
  done
  sleep "$LOAD_WARMUP_SECS"
  for i in "${BULK_PIDS[@]}"; do kill -0 "$i" 2>/dev/null || die "the bulk-update load ended (log: $LOGS/bulk.log)"; done
}
stop_bulk() {
  local p
  for p in "${BULK_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${BULK_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  BULK_PIDS=()
}
lsn() { sql -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_LSN_CURRENT'"; }
updated() { sql -e "SHOW GLOBAL STATUS LIKE 'Handler_update'" | cut -f2; }

# backup_under_load KIND RUN CMD KEPT-FN: quiesce, load, the timed backup CMD into $D, load
# stopped; appends KIND, run, wall, redo written, rows updated/s, redo kept (KEPT-FN's output).
backup_under_load() {
  local kind=$1 run=$2 cmd=$3 l0 l1 u0 u1 t0 t1 kept
  rm -rf "$D"
  quiesce
  start_bulk
  l0=$(lsn); u0=$(updated); t0=$(now)
  if [[ $kind == mariadb-backup ]]; then timed_stock "$kind" "$run" "$cmd"; else timed_rc "$kind" "$run" "$D" "$cmd"; fi
  t1=$(now); l1=$(lsn); u1=$(updated)
  stop_bulk
  kept=""
  if [[ $RC == 0 ]]; then kept=$("$4" "$LOGS/$kind-$run.log"); fi
  res_row backup "$kind" "$run" "$(wall_of "$kind" "$run")" "$((l1 - l0))" \
    "$(gawk -v u="$((u1 - u0))" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", u / (b - a) }')" "$kept" "$RC"
}
# timed_stock LABEL RUN CMD: `timed` for the stock tool, whose failure is a result, not a finding
# (it dies when the server's redo log wraps before its log copy reads it): RC is its exit status.
timed_stock() {
  local rcf="$LOGS/$1-$2.rc"
  rm -f "$rcf"
  timed "$1" "$2" 0 "( $3 ) || { echo \$? >$(q "$rcf"); exit 0; }"
  RC=0
  [[ -f $rcf ]] && read -r RC <"$rcf"
  ((RC == 0)) || log "$1 (run $2) failed: $(grep -v '^[[:space:]]*$' "$LOGS/$1-$2.log" | grep -v 'Starting shutdown\|Stopping log' | tail -n2 | tr '\n' ' ')"
}
ferry_kept() { logval "$1" "backup completed OK" redo_kept; }
mb_kept() { stat -c %s "$D/ib_logfile0" 2>/dev/null || echo ""; }

# ferry_restore KIND RUN: `ferry restore` of $D with a cold cache; appends its wall time and the
# apply's (or the server recovery's) took and redo_bytes; the first run's datadir is checked.
ferry_restore() {
  local kind=$1 run=$2 log took how
  clean_restored "$X"
  drop_caches
  timed_rc "$kind-restore" "$run" "$X" "$(q "$FERRY") restore --target-dir $(q "$D") --datadir $(q "$X") --parallel $PARALLEL"
  log="$LOGS/$kind-restore-$run.log"
  took=$(logval "$log" "prepare: redo applied natively; the copy needs no recovery" took); how=native
  [[ -n $took ]] || { took=$(logval "$log" "prepare: recovery finished" took); how=server; }
  res_row restore "$kind" "$run" "$(wall_of "$kind-restore" "$run")" "$(secs "$took")" "$how" \
    "$(logval "$log" "prepare: redo applied natively; the copy needs no recovery" redo_bytes)" "$RC"
  if [[ $kind == ferry && $run == 1 && $RC == 0 ]]; then
    local fails=()
    start_restored "$X"
    check_tables_rows
    stop_restored
    set_check "CHECK TABLE, rows of $TABLES tables"
    res_row check "$CHECK"
  fi
  clean_restored "$X"
}

bench_init
need mariadb-check mariadb-client
build_ferry
[[ -n $FERRY ]] || die "capped.sh measures ferry: SKIP_FERRY is not supported"
load_dataset
data_sizes
describe_env
: >"$RES"
count_rows sql >"$LOGS/counts-source.txt"
for ((r = 1; r <= RUNS; r++)); do
  backup_under_load ferry "$r" "$(q "$FERRY") backup --socket $(q "$SOCK") --user root --target-dir $(q "$D") --max-rate $RATE --parallel $PARALLEL" ferry_kept
  ferry_restore ferry "$r"
  if [[ $FULL_REDO == 1 ]]; then
    backup_under_load ferry-full-redo "$r" "$(q "$FERRY") backup --socket $(q "$SOCK") --user root --target-dir $(q "$D") --max-rate $RATE --parallel $PARALLEL --full-redo" ferry_kept
    ferry_restore ferry-full-redo "$r"
  fi
  if [[ $FERRY_ONLY != 1 ]]; then
    backup_under_load mariadb-backup "$r" "mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --target-dir=$(q "$D") --throttle=$THROTTLE --parallel=$PARALLEL" mb_kept
    if [[ $RC == 0 ]]; then
      drop_caches
      timed_stock mb-prepare "$r" "mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$D")"
      res_row restore mariadb-backup "$r" "$(wall_of mb-prepare "$r")" "$(wall_of mb-prepare "$r")" prepare "" "$RC"
    fi
  fi
  [[ $KEEP_BACKUP == 1 && $r == "$RUNS" ]] || rm -rf "$D"
done

report_gawk -v rate="$RATE" -v redo="$REDO_SIZE" -v bt="$BULK_THREADS" -v br="$BULK_ROWS" "$AWK_FUNCS"'
  function med(key,   k, i, v) { k = n[key]; if (!k) return ""; for (i = 1; i <= k; i++) v[i] = V[key, i]; return median(v, k) }
  $1 == "backup"  { b = $2; if ($8 != 0) failed[b]++
                    k = ++n[b "w"]; V[b "w", k] = $4; V[b "written", k] = $5; n[b "written"] = k
                    V[b "ups", k] = $6; n[b "ups"] = k; if ($7 != "") { V[b "kept", k] = $7; n[b "kept"] = k }
                    seen[b] = 1; order[++no] = b }
  $1 == "restore" { b = $2; k = ++n[b "rw"]; V[b "rw", k] = $4; if ($5 != "") { V[b "apply", k] = $5; n[b "apply"] = k }
                    how[b] = $6; if ($7 != "") { V[b "bytes", k] = $7; n[b "bytes"] = k } }
  $1 == "check"   { check = $2 }
  END {
    printf "### capped.sh: a %s/s directory backup under bulk updates, %s redo log (%s)\n\n", rate, redo, date
    printf "- machine: %s\n- versions: %s\n", machine, versions
    printf "- dataset: sysbench %d tables x %d rows, %.0f MB read by the tools; load: %d sessions of UPDATE ... SET k = k + 1 over %d-row ranges, back to back; %d run(s), medians\n\n", tables, rows, ddbytes / 1e6, bt, br, runs
    print "| backup | wall s | redo written MiB | rows updated/s | redo kept MiB | restore wall s | recovery s (how) |"
    print "|---|---|---|---|---|---|---|"
    for (i = 1; i <= no; i++) { b = order[i]; if (done[b]++) continue
      printf "| %s%s | %s | %s | %s | %s | %s | %s (%s) |\n", b, failed[b] ? sprintf(" (**failed** %d of %d)", failed[b], n[b "w"]) : "", f(med(b "w"), "%.2f"), f(med(b "written") / 1048576, "%.0f"),
        f(med(b "ups"), "%.0f"), f(med(b "kept") == "" ? "" : med(b "kept") / 1048576, "%.1f"), f(med(b "rw"), "%.2f"),
        f(med(b "apply"), "%.2f"), b == "mariadb-backup" ? "--prepare, wall" : how[b] }
    a = med("ferryapply"); kept = med("ferrykept")
    printf "\nferry, targets: recovery inside ferry restore %s s (target <= 1: %s); redo kept %s MiB (target <= 64: %s)\n",
      f(a, "%.2f"), a == "" ? "–" : (a <= 1 ? "yes" : "**no**"), f(kept == "" ? "" : kept / 1048576, "%.1f"),
      kept == "" ? "–" : (kept <= 64 * 1048576 ? "yes" : "**no**")
    printf "check of ferry'"'"'s first restore: %s\n", check == "" ? "–" : check
  }' "$RES" | tee "$BENCH_DIR/capped-results.md"

if ((${#FINDINGS[@]})); then
  printf '\nFindings:\n' | tee -a "$BENCH_DIR/capped-results.md"
  printf -- '- %s\n' "${FINDINGS[@]}" | tee -a "$BENCH_DIR/capped-results.md"
  exit 1
fi
