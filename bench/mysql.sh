#!/usr/bin/env bash
# bench/mysql.sh: ferry's MySQL 8.0.30+ directory backup and restore (issue 27) against the
# physical limits of the same disk, on a sysbench set in a private MySQL 8.0 server.
#
# Percona XtraBackup, the stock tool for MySQL, is not installable here: the side-by-side
# comparison the other benches make is impossible, so the yardsticks are the raw read limit and
# the same-disk copy limit of backup.sh, and ferry's own MariaDB backup of a set of the same size.
# Measures, in one invocation (method of bench/README.md, backup.sh: 1 GiB buffer pool, 512 MiB
# of redo, binlog on; cold page cache and no dirty pages before every idle run, each command under
# /usr/bin/time -f '%e %U %S %M'):
#   1. the raw read limit (O_DIRECT dd of the files ferry reads: the datadir without
#      #innodb_redo, #innodb_temp, ibtmp1 and the doublewrite files), the same-disk copy limit
#      (PARALLEL cp's of the same files + sync) and `ferry backup` of the MySQL server, RUNS times;
#   2. ferry's CPU seconds per GB there, against `ferry backup` of the MariaDB 10.11 set of
#      backup.sh (lib.sh's cached dataset), RUNS times in the same invocation (MARIADB below);
#   3. under a sysbench oltp_write_only load (LOAD_THREADS threads): the write TPS kept during a
#      backup at full speed (--pace off), at the defaults (--pace auto) and with --max-impact
#      GENTLE_IMPACT, against the TPS just before it, and the transactions lost
#      ((TPS before - TPS during) x wall), as backup.sh reports them for MariaDB;
#   4. `ferry restore` of the last idle backup (it runs MySQL's recovery with the stock mysqld)
#      against a parallel cp of the backup's files + sync; a server started on the restored
#      datadir must show the source's row counts and CHECKSUM TABLE; then the restore of the
#      full-speed backup taken under load: its server must start with the row counts and the
#      gtid_executed of the backup's end point (ferry's log).
# Prints a markdown report and writes it to $BENCH_DIR/results-mysql.md. Needs root.
#
#   bench/mysql.sh                     # 14 tables x 1M rows (~3.9 GB of data), 3 runs each
#   SMALL=1 bench/mysql.sh             # 4 x 100k rows: checks the script in a few minutes
#   TABLES=7 bench/mysql.sh            # a ~2 GB set (the set size is TABLES x TABLE_SIZE)
#
# Options (environment), defaults in brackets; the common ones (BENCH_DIR, SMALL, TABLES,
# TABLE_SIZE, RUNS, PARALLEL, QUIET_MAX, LOAD_THREADS, TOOL_TIMEOUT, FERRY, FERRY_ARGS,
# KEEP_SERVER) are lib.sh's:
#   MYSQL_BASE [/opt/mysql-8.0]       MySQL installation (bin/mysqld, share/)
#   MYSQL_PORT [3320]                 TCP port of the private MySQL server (127.0.0.1)
#   MYSQL_ARGS                        extra arguments for the MySQL backups only (FERRY_ARGS: both
#                                     servers), e.g. --keep-free-pages
#   MARIADB [auto]                    1: also time ferry on the MariaDB set of the same TABLES x
#                                     TABLE_SIZE (building it first if needed, ~6 min); auto: only
#                                     if lib.sh's dataset is already there; 0: never
#   MYSQL_FLUSH [O_DIRECT]            innodb_flush_method of the source (lib.sh: MariaDB 10.11's
#                                     default, so that the page cache dropped before each run under
#                                     load is ferry's, not the server's; "fsync" is MySQL 8.0's)
#   LOAD_BASE_SECS [20]               load-only seconds measured as the TPS baseline
#   LOAD_GAP_SECS [30]                load-only seconds after each backup under load (the next
#                                     one's TPS before)
#   GENTLE_IMPACT [10]                --max-impact of the gentle run under load
#   SKIP_GENTLE=1 SKIP_DEFAULT=1      leave out the --max-impact / the --pace auto run under load
#   SKIP_LOAD=1                       leave out the load phase (and the restore of its backup)
#   SKIP_LOAD_RESTORE=1               leave out the restore of the backup taken under load
#   RESTORE_RUNS [2]                  restores of the idle backup, each with a cp of it, alternating
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
MYSQL_PORT=${MYSQL_PORT:-3320}
MARIADB=${MARIADB:-auto}
MYSQL_ARGS=${MYSQL_ARGS:-}
LOAD_BASE_SECS=${LOAD_BASE_SECS:-20}
LOAD_GAP_SECS=${LOAD_GAP_SECS:-30}
GENTLE_IMPACT=${GENTLE_IMPACT:-10}
SKIP_GENTLE=${SKIP_GENTLE:-0}
SKIP_DEFAULT=${SKIP_DEFAULT:-0}
SKIP_LOAD=${SKIP_LOAD:-0}
SKIP_LOAD_RESTORE=${SKIP_LOAD_RESTORE:-0}
RESTORE_RUNS=${RESTORE_RUNS:-2}

# MY_DATA, MY_SOCK, MY_PIDF, MY_ERR, MY_FIND (the files ferry reads): lib.sh's
MY_RERR="$BENCH_DIR/restored-mysql.err"
BK="$BENCH_DIR/bk-mysql"                          # idle and gentle backups (removed before each)
BK_LOAD="$BENCH_DIR/bk-mysql-load"                # the full-speed backup under load (restored)
BK_MDB="$BENCH_DIR/bk-mariadb-cpu"                # ferry's MariaDB backups (CPU per GB)
CP_DIR="$BENCH_DIR/cp-limit-mysql"                # the same-disk copies
RESTORED="$BENCH_DIR/restored-mysql"
RESULTS="$BENCH_DIR/results-mysql.md"
LOGS="$BENCH_DIR/logs-mysql"                      # not backup.sh's logs/
CLEAN_PATHS=("$BK" "$BK_LOAD" "$BK_MDB" "$CP_DIR")
CLEAN_RESTORED=("$RESTORED")
MY_OPTS=(--port="$MYSQL_PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1
         --gtid-mode=ON --enforce-gtid-consistency=ON --innodb-flush-method="$MYSQL_FLUSH")
T_START=$(now)

bench_init
[[ -x $MYSQLD ]] || die "no mysqld at $MYSQLD (set MYSQL_BASE to a MySQL 8.0.30+ installation)"
build_ferry
[[ -n $FERRY ]] || die "this bench measures ferry only: SKIP_FERRY=1 leaves nothing to run"
case $MARIADB in
  1) ;;
  0) ;;
  auto) if [[ -f $LOADED || -f $DATA/.loaded ]]; then MARIADB=1; else MARIADB=0
          log "MARIADB=auto: no cached MariaDB set in $DATA: ferry's MariaDB CPU is not measured (MARIADB=1 builds it)"; fi ;;
  *) die "MARIADB must be 0, 1 or auto" ;;
esac

# ferry_backup_cmd SOCKET DIR EXTRA...: a ferry directory backup of the server on SOCKET.
ferry_backup_cmd() {
  local sock=$1 dir=$2; shift 2
  echo "$(q "$FERRY") backup --socket $(q "$sock") --user root --target-dir $(q "$dir") --parallel $PARALLEL $FERRY_ARGS $*"
}
# cp_cmd SRC FIND-TESTS: the same-disk copy: PARALLEL cp --parents of SRC's files (find SRC
# -type f FIND-TESTS) into $CP_DIR, then sync, as backup.sh's limit.
cp_cmd() {
  echo "mkdir -p $(q "$CP_DIR") && cd $(q "$1") && find . -type f $2 -print0 | xargs -0 -r -n 16 -P $PARALLEL cp --parents -t $(q "$CP_DIR") && sync"
}
since() { gawk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# --- 2 (first, on its own server): ferry on the MariaDB set of the same size --------------------
MDB_DD_BYTES=""
if [[ $MARIADB == 1 ]]; then
  log "MariaDB 10.11 set $DATA: ferry backup x $RUNS (CPU per GB)"
  load_dataset                                    # lib.sh: the cached MariaDB set, RESET MASTER
  quiesce
  data_sizes
  MDB_DD_BYTES=$DD_BYTES
  for ((r = 1; r <= RUNS; r++)); do
    rm -rf "$BK_MDB"; quiesce
    timed ferry-mariadb "$r" "$BK_MDB" "$(ferry_backup_cmd "$SOCK" "$BK_MDB")"
    timed sync-ferry-mariadb "$r" 0 sync
  done
  rm -rf "$BK_MDB"
  stop_pid "$SRC_PID"; SRC_PID=""
fi

# --- the MySQL server: from here on SOCK, PIDF and SB_OPTS (sql, quiesce, start_load, ...) are its
use_mysql
stop_stale "$RPIDF" "$RESTORED"
load_mysql_dataset "${MY_OPTS[@]}"                # lib.sh: built once, RESET MASTER, MY_VERSION

MY_DD_CMD="cd $(q "$MY_DATA") && find . -type f $MY_FIND -print0 | xargs -0 -I{} dd if={} of=/dev/null bs=1M iflag=direct status=none"
MY_CP_CMD=$(cp_cmd "$MY_DATA" "$MY_FIND")

# --- 1: idle runs, cold cache ---------------------------------------------------------------
rm -rf "$BK" "$BK_LOAD" "$CP_DIR"
quiesce
mysql_sizes                                       # MY_DATA_BYTES, MY_DD_BYTES
DATA_BYTES=$MY_DATA_BYTES; check_free 3
log "MySQL datadir $MY_DATA: $MY_DATA_BYTES bytes ($MY_DD_BYTES read by ferry and the limits); $RUNS runs, --parallel $PARALLEL"
for ((r = 1; r <= RUNS; r++)); do
  quiesce
  timed dd "$r" "$MY_DD_BYTES" "$MY_DD_CMD"
  rm -rf "$CP_DIR"; quiesce
  timed cp "$r" "$MY_DD_BYTES" "$MY_CP_CMD"
  rm -rf "$CP_DIR" "$BK"; quiesce
  timed ferry "$r" "$BK" "$(ferry_backup_cmd "$SOCK" "$BK" "$MYSQL_ARGS")"
  timed sync-ferry "$r" 0 sync
done
FLOG="$LOGS/ferry-$RUNS.log"
IDLE_REDO=$(logval "$FLOG" "backup completed OK" redo_kept)
IDLE_FREE=$(logval "$FLOG" "backup completed OK" free_pages)

# --- 4a: restore of the last idle backup (the source has been idle since) ------------------------
tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
count_rows sql >"$LOGS/counts-source.txt"
sql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-source.txt"
RESTORE_CMD() { echo "$(q "$FERRY") restore --target-dir $(q "$1") --datadir $(q "$RESTORED") --mariadbd $(q "$MYSQL_BASE") --parallel $PARALLEL"; }
# check_mysql_restored WHAT [GTID]: starts a server on $RESTORED, compares its row counts (and the
# CHECKSUM TABLE of an idle source, or the gtid_executed GTID) with the source's; sets CHECK.
check_mysql_restored() {
  local fails=() got
  start_mysql REST_PID "$RESTORED" "$RSOCK" "$RPIDF" "$MY_RERR" --skip-networking --log-bin=binlog \
    --server-id=2 --gtid-mode=ON --enforce-gtid-consistency=ON
  count_rows rsql >"$LOGS/check-counts-$1.txt" || fails+=("COUNT(*) failed")
  cmp -s "$LOGS/counts-source.txt" "$LOGS/check-counts-$1.txt" || fails+=("row counts differ")
  if [[ -z ${2:-} ]]; then
    rsql -e "CHECKSUM TABLE $tables" >"$LOGS/check-checksum-$1.txt" || fails+=("CHECKSUM TABLE failed")
    cmp -s "$LOGS/checksum-source.txt" "$LOGS/check-checksum-$1.txt" || fails+=("CHECKSUM TABLE differs")
  else
    got=$(rsql -e "SELECT REPLACE(@@GLOBAL.gtid_executed, '\n', '')")
    [[ $got == "$2" ]] || fails+=("gtid_executed $got, the backup's end point $2")
  fi
  stop_pid "$REST_PID"; REST_PID=""
  if ((${#fails[@]})); then CHECK="FAILED: $(printf '%s; ' "${fails[@]}" | sed 's/; $//') (logs: $LOGS/check-*-$1.txt, $MY_RERR)"
  elif [[ -z ${2:-} ]]; then CHECK="OK (server started; $TABLES/$TABLES tables: row counts and CHECKSUM TABLE equal the source's)"
  else CHECK="OK (server started; $TABLES/$TABLES row counts equal; gtid_executed = the backup's end point)"; fi
  log "restore check ($1): $CHECK"
}
# recovery_row LABEL RUN: appends the mysqld recovery time of ferry's restore LABEL-RUN (its log) to
# $RAW as LABEL-recovery (the restore's wall time without the recovery is compared with cp too).
recovery_row() {
  local t
  t=$(secs "$(logval "$LOGS/$1-$2.log" "prepare: recovery finished" took)")
  [[ -n $t ]] && printf '%s-recovery\t%s\t%s\t0\t0\t0\t0\t0\n' "$1" "$2" "$t" >>"$RAW"
  return 0
}
# RESTORE_RUNS restores, each against a cp of the same backup, alternating which goes first (the
# disk is faster on what was just written or read); the last ferry restore is checked.
CHECK_IDLE="restore failed" RESTORE_RC=1
for ((r = 1; r <= RESTORE_RUNS; r++)); do
  order=(cp ferry); ((r % 2)) || order=(ferry cp)
  for t in "${order[@]}"; do
    if [[ $t == cp ]]; then
      rm -rf "$CP_DIR"; drop_caches
      timed cp-backup "$r" "$BK" "$(cp_cmd "$BK" "")"
      rm -rf "$CP_DIR"
    else
      clean_restored "$RESTORED"; drop_caches
      timed_rc ferry-restore "$r" "$RESTORED" "$(RESTORE_CMD "$BK")"
      timed sync-ferry-restore "$r" 0 sync
      recovery_row ferry-restore "$r"
      RESTORE_RC=$RC
    fi
  done
done
((RESTORE_RC == 0)) && { check_mysql_restored idle; CHECK_IDLE=$CHECK; }
[[ $CHECK_IDLE == OK* ]] || finding "restore of the idle backup: $CHECK_IDLE"
clean_restored "$RESTORED"
rm -rf "$BK"

# --- 3: under a sysbench write load -------------------------------------------------------------
LOAD_TOOLS=(ferry-unpaced)
[[ $SKIP_DEFAULT == 1 ]] || LOAD_TOOLS+=(ferry)
[[ $SKIP_GENTLE == 1 ]] || LOAD_TOOLS+=(ferry-gentle)
LOAD_LINES="" BASE_TPS="" CHECK_LOAD="not run"
declare -A WIN_S WIN_E
if [[ $SKIP_LOAD != 1 ]]; then
  quiesce
  log "load phase: sysbench oltp_write_only, $LOAD_THREADS threads; baseline ${LOAD_BASE_SECS} s; ${LOAD_TOOLS[*]}"
  start_load "$LOAD_BASE_SECS" "the first backup"
  for tool in "${LOAD_TOOLS[@]}"; do
    case $tool in
      ferry-unpaced) dir=$BK_LOAD; extra="--pace off" ;;
      ferry) dir=$BK; extra="" ;;
      ferry-gentle) dir=$BK; extra="--max-impact $GENTLE_IMPACT" ;;
    esac
    rm -rf "$dir"
    drop_caches                                   # cold, as the idle runs (dirty pages stay)
    WIN_S[$tool]=$(now)
    timed "$tool-load" 1 "$dir" "$(ferry_backup_cmd "$SOCK" "$dir" "$MYSQL_ARGS $extra")"
    WIN_E[$tool]=$(now)
    [[ $dir == "$BK" ]] && rm -rf "$BK"
    sleep "$LOAD_GAP_SECS"
  done
  stop_load
  warm=$LOAD_WARMUP_SECS; ((LOAD_BASE_SECS > warm + 5)) || warm=1
  BASE_TPS=$(tps "$(gawk -v t="$SB_T0" -v w="$warm" 'BEGIN { printf "%.3f", t + w }')" \
    "$(gawk -v t="$SB_T0" -v b="$LOAD_BASE_SECS" 'BEGIN { printf "%.3f", t + b }')" "$SB_T0" %.1f -)
  for tool in "${LOAD_TOOLS[@]}"; do
    s=${WIN_S[$tool]} e=${WIN_E[$tool]}
    # the gap before it, not reaching into sysbench's warm-up
    before=$(tps "$(gawk -v s="$s" -v g="$LOAD_GAP_SECS" -v t="$SB_T0" -v w="$warm" \
      'BEGIN { a = s - g; if (a < t + w) a = t + w; printf "%.3f", a }')" "$s" "$SB_T0" %.1f -)
    during=$(tps "$s" "$e" "$SB_T0" %.1f -)
    after=$(tps "$e" "$(gawk -v e="$e" -v g="$LOAD_GAP_SECS" 'BEGIN { printf "%.3f", e + g }')" "$SB_T0" %.1f -)
    redo=$(logval "$LOGS/$tool-load-1.log" "backup completed OK" redo_kept)
    LOAD_LINES+="$tool $before $during $after ${redo:--};"
  done
  # --- 4b: restore of the full-speed backup taken under load ---------------------------------
  if [[ $SKIP_LOAD_RESTORE != 1 ]]; then
    END_GTID=$(logval "$LOGS/ferry-unpaced-load-1.log" "backup completed OK" gtid)
    clean_restored "$RESTORED"
    drop_caches
    timed_rc ferry-restore-load 1 "$RESTORED" "$(RESTORE_CMD "$BK_LOAD")"
    timed sync-ferry-restore-load 1 0 sync
    recovery_row ferry-restore-load 1
    CHECK_LOAD="restore failed"
    ((RC == 0)) && { check_mysql_restored load "${END_GTID:-none (not in the backup log)}"; CHECK_LOAD=$CHECK; }
    [[ $CHECK_LOAD == OK* ]] || finding "restore of the backup taken under load: $CHECK_LOAD"
    clean_restored "$RESTORED"
  fi
  rm -rf "$BK_LOAD"
fi

# --- report -----------------------------------------------------------------------------------
describe_env
VERSIONS="$MY_VERSION; $VERSIONS"
DD_BYTES=${DD_BYTES:-}                            # report_gawk's (lib.sh); the MariaDB set's if timed
TOTAL_MIN=$(gawk -v a="$T_START" -v b="$(now)" 'BEGIN { printf "%.1f", (b - a) / 60 }')

report() {
  report_gawk -v myddbytes="$MY_DD_BYTES" -v mydatabytes="$MY_DATA_BYTES" -v mdbddbytes="$MDB_DD_BYTES" \
      -v loadlines="$LOAD_LINES" -v basetps="$BASE_TPS" -v lthreads="$LOAD_THREADS" -v gentle="$GENTLE_IMPACT" \
      -v gap="$LOAD_GAP_SECS" -v checkidle="$CHECK_IDLE" -v checkload="$CHECK_LOAD" -v idleredo="$IDLE_REDO" \
      -v idlefree="$IDLE_FREE" -v total="$TOTAL_MIN" \
      -v ferryargs="$FERRY_ARGS" -v myargs="$MYSQL_ARGS" -v myflush="$MYSQL_FLUSH" "$AWK_LIB"'
    function row(name, label, gbdiv,   cpu, wmed, b, sy) {
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – | – |\n", name; return }
      wmed = agg(W, label, "med"); cpu = agg(C, label, "med"); b = agg(B, label, "med")
      sy = agg(W, "sync-" label, "med")
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.3f | %.0f | %.0f | %.0f | %s |\n", name, cnt[label],
        wmed, agg(W, label, "min"), agg(U, label, "med"), agg(S, label, "med"), cpu / gbdiv,
        agg(R, label, "max") / 1024, b / 1e6, b / 1e6 / wmed, f(sy, "%.2f") }
    END {
      gb = myddbytes / 1e9; mgb = mdbddbytes / 1e9
      printf "## ferry backup and restore of MySQL 8.0 vs the physical limits, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- MySQL set: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB read by ferry and the limits (without #innodb_redo, #innodb_temp, ibtmp1, *.dblwr)\n", tables, rows, mydatabytes / 1e9, gb
      if (mgb > 0) printf "- MariaDB set (CPU per GB only): the same sysbench size, %.3f GB without ib_logfile0\n", mgb
      printf "- MySQL source: innodb_flush_method=%s, 1 GiB buffer pool, innodb_redo_log_capacity=512M, binlog and GTIDs on\n", myflush
      printf "- %d cold-cache runs each (page cache dropped, 0 dirty pages), --parallel %d%s%s; Percona XtraBackup is not installable here, so no stock tool is compared: the yardsticks are the physical limits\n\n", runs, par, ferryargs == "" ? "" : ", ferry " ferryargs, myargs == "" ? "" : ", MySQL backups " myargs
      print "| what | n | wall s median | wall s min | user s | sys s | CPU s/GB read | max RSS MiB | MB read/copied | MB/s (median) | sync after s |"
      print "|---|---|---|---|---|---|---|---|---|---|---|"
      row("raw `dd iflag=direct` (MySQL files ferry reads)", "dd", gb)
      row("same-disk copy: `cp` x " par " + `sync`", "cp", gb)
      row("`ferry backup`, MySQL 8.0", "ferry", gb)
      if (mgb > 0) row("`ferry backup`, MariaDB 10.11 (same set size)", "ferry-mariadb", mgb)
      fw = agg(W, "ferry", "med"); fm = agg(W, "ferry", "min"); dw = agg(W, "dd", "med"); dm = agg(W, "dd", "min")
      cw = agg(W, "cp", "med"); fs = fw + agg(W, "sync-ferry", "med")
      fc = agg(C, "ferry", "med"); mc = agg(C, "ferry-mariadb", "med")
      printf "\nferry'"'"'s last idle MySQL backup kept %s MB of redo; free pages stored as zeros (holes): %s (0: copied as they are).\n", f(idleredo == "" ? "" : idleredo / 1e6, "%.1f"), f(idlefree, "%s")
      print "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|"
      r = ratio(fs, cw); printf "| ferry + its sync / same-disk copy limit, wall | %s | %s | ≤ 1.10 | %s |\n", r, ratio(fm + agg(W, "sync-ferry", "min"), agg(W, "cp", "min")), met(r, 1.10)
      printf "| ferry / raw dd, wall | %s | %s | – | – |\n", ratio(fw, dw), ratio(fm, dm)
      if (mgb > 0) { r = ratio(fc / gb, mc / mgb); printf "| ferry CPU s/GB, MySQL / MariaDB | %s | – | ≤ 1.20 | %s |\n", r, met(r, 1.20) }
      else printf "| ferry CPU s/GB, MySQL / MariaDB | not measured (MARIADB=0) | – | ≤ 1.20 | – |\n"
      if (loadlines != "") {
        printf "\nUnder `sysbench oltp_write_only --threads=%d` (baseline, mean per-second TPS before the first backup: **%s TPS**; TPS before is that of the %d s before each backup):\n\n", lthreads, basetps, gap
        print "| backup under load | wall s | x idle | CPU s | TPS before | TPS during | TPS after | TPS kept (during / before) | TPS kept (during / baseline) | transactions lost ((before - during) x wall) | redo kept MB |"
        print "|---|---|---|---|---|---|---|---|---|---|---|"
        nl = split(loadlines, L, ";")
        for (i = 1; i <= nl; i++) {
          if (split(L[i], x, " ") < 4) continue
          lab = x[1] "-load"; w = W[lab, 1]
          kept = (x[3] == "-" || x[2] == "-" || x[2] == 0) ? "–" : sprintf("%.0f %%", 100 * x[3] / x[2])
          lost = (x[3] == "-" || x[2] == "-") ? "" : (x[2] - x[3]) * w
          name = x[1] == "ferry" ? "`ferry backup` (defaults: `--pace auto`)" : (x[1] == "ferry-gentle" ? "`ferry backup --max-impact " gentle "`" : "`ferry backup --pace off` (full speed)")
          keptb = (x[3] == "-" || basetps == "-" || basetps == 0) ? "–" : sprintf("%.0f %%", 100 * x[3] / basetps)
          printf "| %s | %.2f | %s | %.2f | %s | %s | %s | **%s** | %s | **%s** | %s |\n", name, w, ratio(w, fw), C[lab, 1],
            x[2], x[3], x[4], kept, keptb, f(lost, "%.0f"), f(x[5] == "-" ? "" : x[5] / 1e6, "%.0f")
          if (x[1] == "ferry-gentle" && kept != "–")
            gentleline = sprintf("\nTPS kept by --max-impact %s: %s (asked: ≥ %d %%): %s\n", gentle, kept, 100 - gentle, (kept + 0 >= 100 - gentle) ? "yes" : "**no**")
        }
        printf "%s", gentleline
      }
      print "\n| restore | n | wall s median | wall s min | CPU s | max RSS MiB | of which mysqld recovery s | sync after s |\n|---|---|---|---|---|---|---|---|"
      rw = agg(W, "ferry-restore", "med"); rs = agg(W, "sync-ferry-restore", "med"); rr = agg(W, "ferry-restore-recovery", "med"); cb = agg(W, "cp-backup", "med")
      if (cnt["ferry-restore"]) printf "| `ferry restore` of the last idle backup | %d | %.2f | %.2f | %.2f | %.0f | %s | %.2f |\n", cnt["ferry-restore"], rw, agg(W, "ferry-restore", "min"), agg(C, "ferry-restore", "med"), agg(R, "ferry-restore", "max") / 1024, f(rr, "%.2f"), rs
      if (cnt["cp-backup"]) printf "| `cp` x %d of that backup'"'"'s files + `sync` (same disk) | %d | %.2f | %.2f | %.2f | %.0f | – | – |\n", par, cnt["cp-backup"], cb, agg(W, "cp-backup", "min"), agg(C, "cp-backup", "med"), agg(R, "cp-backup", "max") / 1024
      if (cnt["ferry-restore-load"]) printf "| `ferry restore` of the full-speed backup under load | 1 | %.2f | – | %.2f | %.0f | %s | %.2f |\n", W["ferry-restore-load", 1], C["ferry-restore-load", 1], R["ferry-restore-load", 1] / 1024, f(agg(W, "ferry-restore-load-recovery", "med"), "%.2f"), W["sync-ferry-restore-load", 1]
      if (cnt["cp-backup"] && cb > 0 && cnt["ferry-restore"]) {
        r = ratio(rw + rs, cb)
        printf "\nRestore of the idle backup (+ its sync) / parallel cp of its files + sync, medians: %s (target ≤ 1.10, backup.sh'"'"'s for MariaDB: %s)", r, met(r, 1.10)
        if (rr != "") printf "; without the mysqld recovery: %s", ratio(rw + rs - rr, cb)
        printf "\n"
      }
      printf "\nRestored server, idle backup: **%s**\n", checkidle
      printf "Restored server, full-speed backup under load: **%s**\n", checkload
      printf "\nTotal run time of this invocation: %s min\n", total
    }' "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW"
if ((${#FINDINGS[@]})); then
  printf 'FINDINGS:\n' >&2; printf -- '- %s\n' "${FINDINGS[@]}" >&2
  exit 1
fi
