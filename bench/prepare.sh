#!/usr/bin/env bash
# bench/prepare.sh: the "flat prepare" benchmark. How long it takes from the end of the copy to a
# datadir the server starts on, after a backup that ran under a write load, as the backup gets
# longer, three ways on the same ferry backup: ferry's native redo apply (--recovery native),
# the stock server's crash recovery (--recovery server) and mariadb-backup --prepare; beside
# mariadb-backup --backup + --prepare of its own backup (which keeps and replays all the redo
# written during the copy), and the apply throughput (MB of redo per CPU-second) of ferry and
# of mariadb-backup --prepare on the same backups. ferry's three-stage copy (a directory backup
# copies again the pages changed up to a server checkpoint after the data copy and keeps only
# the redo from that checkpoint) and ferry --full-redo (the whole redo kept) are both measured.
#
# Same private server and dataset as bench/backup.sh (shared code: bench/lib.sh): 1 GiB buffer
# pool, 512 MiB redo, binlog on. Every backup runs under `sysbench oltp_write_only` (LOAD_THREADS
# threads, unthrottled), started after quiesce (no dirty pages, cold page cache) and RESET
# MASTER, LOAD_WARMUP_SECS before the backup, and stopped when the backup ends; restores and
# prepares run with the source idle. Each command runs under lib.sh's `timed`. In one invocation:
#   1. T1: the wall time of one uncapped `ferry backup --target-dir` under load (the calibration
#      run; with SKIP_FERRY=1, of one uncapped mariadb-backup --backup instead);
#   2. for each factor k of FACTORS (default 1 3 6), RUNS times:
#      ferry: `ferry backup --target-dir D --parallel P --max-rate R` with R = bytes the tools read
#         (the datadir without ib_logfile0, measured just before: the load grows the tables) /
#         (k x T1), uncapped for k = 1, so that its data copy lasts about k x T1 (the re-copy
#         rounds of the three-stage copy come on top, at the same cap); recorded: its wall
#         time, the redo it kept (size of D/ib_logfile0, the log's redo_bytes, last_lsn -
#         start_lsn of ferry_manifest.json), recopy_rounds, pages_recopied and the load's mean
#         TPS meanwhile; then, each with a cold page cache, on the same D:
#         `ferry restore --target-dir D --datadir X --recovery native`: its wall time, and the
#           apply's took, redo_bytes and pages ("prepare: redo applied natively; ..."); then a
#           first server start on X (seconds until it answers; its error log must not tell of
#           a crash recovery); X removed;
#         `ferry restore ... --recovery server`: wall time, the recovery time it logs ("prepare:
#           recovery finished" took=...), a first start; X removed;
#         in place: D copied to D' (MB_FERRY=1), then `ferry prepare --target-dir D --recovery
#           native` and `mariadb-backup --prepare --target-dir D'`: wall and CPU (user + sys)
#           of each, which give the apply throughput (redo_bytes / CPU seconds);
#         a failing ferry command (or a native apply without its log line) is a finding: it is
#         reported with its log's last line, the script goes on, and exits non-zero at the end;
#      mariadb-backup: `mariadb-backup --backup --parallel=P --throttle=N` with N chosen so that
#         it lasts about as long as ferry's backup of the same k (uncapped for k = 1, and when
#         its uncapped backup was not more than MB_TOLERANCE % shorter than that); --throttle
#         counts read (and redo scan) operations per second, not bytes, so N is estimated from
#         the datadir's files and, if the backup missed its target by more than MB_TOLERANCE %,
#         corrected from the measured time and the backup taken again (at most MB_TRIES times);
#         recorded: the wall time of the backup kept, its redo (ib_logfile0 or
#         xtrabackup_logfile in its target dir: 10.11 writes ib_logfile0), the load's mean TPS
#         and the wall and CPU time of `mariadb-backup --prepare` (cold cache);
#   3. with FULL_REDO=1: ferry --full-redo once at the largest factor (same cap), restored and
#      prepared the same ways: the redo and the recovery the three-stage copy saves;
#   4. correctness of the first ferry backup at the largest factor (the longest): a server on its
#      natively restored datadir (socket only) must pass mariadb-check --all-databases (CHECK TABLE) and
#      hold as many rows per sbtest table as the source before the load (oltp_write_only's
#      delete + insert keeps that count at every commit); then the source's binlog from the
#      backup's position (xtrabackup_binlog_info) to its end is replayed into it with
#      mariadb-binlog, and CHECKSUM TABLE of every sbtest table must match the idle source's.
# Backups and restored datadirs are removed as soon as they have been measured. Prints a markdown
# report and writes it to $BENCH_DIR/prepare-results.md. Needs root.
#
#   bench/prepare.sh                     # 14 x 1M rows (~4 GB datadir), factors 1 3 6, 1 run each
#   SMALL=1 bench/prepare.sh             # 4 x 100k rows: checks the script in a few minutes
#   FACTORS="1 10" bench/prepare.sh      # other backup lengths (multiples of T1, each >= 1)
#   FERRY_ONLY=1 bench/prepare.sh        # only ferry (no mariadb-backup runs)
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), backups, logs-prepare/
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   FACTORS ["1 3 6"]                 backup lengths as multiples of T1 (1 = uncapped)
#   RUNS [1]                          runs of every (factor, tool); the report shows medians
#   PARALLEL [2]                      --parallel for both backups and for ferry restore
#   PREPARE_MEMORY [256M]             ferry restore --use-memory and mariadb-backup --prepare --use-memory
#   LOAD_THREADS [2]                  sysbench oltp_write_only threads during every backup
#   LOAD_WARMUP_SECS [5]              load seconds before each backup starts
#   MB_TOLERANCE [25]                 % a throttled mariadb-backup may miss its target length by
#   MB_TRIES [3]                      most mariadb-backup backups per (factor, run) to hit it
#   FULL_REDO [1]                     0: leave out the ferry --full-redo run
#   MB_FERRY [1]                      0: leave out mariadb-backup --prepare of a copy of each ferry backup
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [7200]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for every `ferry backup`
#   SKIP_FERRY=1 FERRY_ONLY=1         leave out ferry / mariadb-backup
#   SKIP_CHECK=1                      leave out the correctness check
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
RUNS=${RUNS:-1}                                   # lib.sh's default is 3; a 6x backup is long
TOOL_TIMEOUT=${TOOL_TIMEOUT:-7200}                # lib.sh's default is 1800; a capped 6x backup may take longer
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FACTORS=${FACTORS:-1 3 6}
MB_TOLERANCE=${MB_TOLERANCE:-25}
MB_TRIES=${MB_TRIES:-3}
FULL_REDO=${FULL_REDO:-1}
MB_FERRY=${MB_FERRY:-1}

LOGS="$BENCH_DIR/logs-prepare"                    # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/prepare-results.md"
BK_F="$BENCH_DIR/prepare-bk-ferry"                # the ferry backup being measured
BK_M="$BENCH_DIR/prepare-bk-mb"                   # the mariadb-backup backup being measured
BK_FM="$BENCH_DIR/prepare-bk-ferry-mb"            # a copy of BK_F, prepared by mariadb-backup (MB_FERRY=1)
F_REST="$BENCH_DIR/prepare-restored"              # ferry restore --datadir, then the check's server
CLEAN_PATHS=("$BK_F" "$BK_M" "$BK_FM")
CLEAN_RESTORED=("$F_REST")

[[ $LOAD_THREADS =~ ^[1-9][0-9]*$ ]] || die "LOAD_THREADS must be a positive integer"
[[ $LOAD_WARMUP_SECS =~ ^[0-9]+$ ]] || die "LOAD_WARMUP_SECS must be a whole number of seconds"
[[ $MB_TOLERANCE =~ ^[1-9][0-9]*$ ]] || die "MB_TOLERANCE must be a positive whole number (percent)"
[[ $MB_TRIES =~ ^[1-9][0-9]*$ ]] || die "MB_TRIES must be a positive integer"
for k in $FACTORS; do
  [[ $k =~ ^[0-9]+(\.[0-9]+)?$ ]] && gawk -v k="$k" 'BEGIN { exit !(k >= 1) }' ||
    die "FACTORS must be numbers >= 1 (multiples of the uncapped backup's time), not '$k'"
done
[[ -n ${FACTORS// /} ]] || die "FACTORS is empty"
[[ $SKIP_FERRY == 1 && $FERRY_ONLY == 1 ]] && die "SKIP_FERRY=1 and FERRY_ONLY=1 leave nothing to run"
KMAX=$(printf '%s\n' $FACTORS | sort -g | tail -n1)

# --- load -----------------------------------------------------------------------------------------
# under_load LABEL RUN SIZE COMMAND: quiesce, RESET MASTER, start the load (lib.sh start_load),
# LOAD_WARMUP_SECS later `timed LABEL RUN SIZE COMMAND`, stop the load (its log is kept as
# LABEL-RUN.sysbench.log) and set LOAD_TPS: the mean of sysbench's per-second TPS after the
# warm-up (about the backup's window; lib.sh tps in seconds since the load started).
under_load() {
  quiesce
  sql -e "RESET MASTER"
  start_load "$LOAD_WARMUP_SECS" "the backup"
  timed "$@"
  stop_load "$LOGS/$1-$2.sysbench.log"
  LOAD_TPS=$(tps "$LOAD_WARMUP_SECS.5" "" 0 %.0f)
}

# --- helpers (and lib.sh's wall_of, logval, res_row) -------------------------------------------------
# manifest_span DIR: last_lsn - start_lsn of DIR's ferry_manifest.json (the redo kept, in LSN).
manifest_span() {
  gawk '/^  "start_lsn": / { s = $2 + 0 } /^  "last_lsn": / { l = $2 + 0 }
    END { if (l != "" && s != "") printf "%.0f", l - s }' "$1/ferry_manifest.json" 2>/dev/null || true
}

# mb_ios: a first guess of the operations mariadb-backup --throttle counts for a full backup of
# the datadir: one per 10 MiB read (its read buffer: 640 pages of 16 KiB) of every file it
# copies, plus one per file (the read that finds the end). The redo it scans counts too, so
# every throttled backup measures the count instead (MB_OPS = (N + 1) x its wall time: N + 1
# operations pass per second), and the next throttle is aimed with that.
MB_OPS=""
mb_ios() {
  find "$DATA" -type f ! -name 'ib_logfile*' ! -name 'binlog.*' ! -name '*.pid' ! -name 'ibtmp*' -printf '%s\n' |
    gawk '{ n += 1 + int(($1 + 10485759) / 10485760) } END { print n + 0 }'
}

# --- correctness ------------------------------------------------------------------------------------
# check_replayed DATADIR BINLOG-INFO: the check of step 4 on a restored DATADIR, whose backup's
# xtrabackup_binlog_info is BINLOG-INFO; the source must be idle. Sets CHECK.
check_replayed() {
  local dir=$1 file pos tables files fails=()
  tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
  read -r file pos _ <"$2" || true
  [[ -n ${file:-} && ${pos:-} =~ ^[0-9]+$ ]] || { CHECK="FAILED: no binlog position in the backup's xtrabackup_binlog_info"; return 0; }
  log "check: restored datadir $dir (CHECK TABLE, row counts, binlog replay from $file:$pos, CHECKSUM TABLE)"
  sql -e "FLUSH BINARY LOGS"
  start_restored "$dir"
  # 1+2. CHECK TABLE of every table of every database; rows per sbtest table, as before the load
  check_tables_rows
  # 3. the source's binlog from the backup's position, replayed into the restored server
  files=$(gawk -v f="$file" '{ sub(/^.*\//, "") } $0 == f { on = 1 } on' "$DATA/binlog.index")
  if [[ -z $files ]]; then
    fails+=("binlog $file not in $DATA/binlog.index")
  elif ! (cd "$DATA" && timeout "$TOOL_TIMEOUT" bash -o pipefail -c \
      "mariadb-binlog --no-defaults --start-position=$pos $(printf '%q ' $files) | mariadb --no-defaults -S $(q "$RSOCK") -uroot") \
      >"$LOGS/check-replay.log" 2>&1; then
    fails+=("binlog replay failed (log: $LOGS/check-replay.log)")
  fi
  # 4. CHECKSUM TABLE after the replay vs the idle source
  sql -e "CHECKSUM TABLE $tables" >"$LOGS/check-checksum-source.txt"
  rsql -e "CHECKSUM TABLE $tables" >"$LOGS/check-checksum-restored.txt" || fails+=("CHECKSUM TABLE failed")
  cmp -s "$LOGS/check-checksum-source.txt" "$LOGS/check-checksum-restored.txt" || fails+=("CHECKSUM TABLE differs after the replay")
  stop_restored
  set_check "mariadb-check all OK; $TABLES/$TABLES tables with their $(gawk '{ s += $2 } END { print s }' "$LOGS/counts-source.txt") rows; CHECKSUM TABLE equal after replaying $(wc -l <<<"$files") binlog file(s) from $file:$pos"
}

# --- helpers of the three ways to a datadir ------------------------------------------------------------
NATIVE_MSG="prepare: redo applied natively; the copy needs no recovery"   # ferry's log line of a native apply
SERVER_MSG="prepare: recovery finished"                                   # ... of the stock server's recovery
FALLBACK_MSG="prepare: the stock server recovers the copy instead of ferry"

# first_start DATADIR: starts a server (socket only) on a prepared DATADIR with a cold page cache;
# START_S = seconds until it answered (probed every 0.05 s), START_REC = lines of that start's
# error log telling of a crash recovery (0 for a datadir that needs none); then stops it.
first_start() {
  local err="$BENCH_DIR/restored.err" off t0
  off=$(stat -c %s "$err" 2>/dev/null || echo 0)
  drop_caches
  t0=$(now)
  START_POLL=0.05 start_restored "$1"
  START_S=$(gawk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  START_REC=$(tail -c +$((off + 1)) "$err" | grep -aci 'crash recovery' || true)
  stop_restored
}

# --- one ferry backup, and the three ways from it to a datadir the server starts on ------------------
# ferry_run TOOL FACTOR RUN [ARGS...]: TOOL is ferry-calib (uncapped, sets T1), ferry (default
# mode) or ferry-full (ARGS --full-redo); a backup under load, capped at the bytes it reads now
# (the datadir grows under the load) / (FACTOR x T1) unless FACTOR is 1. Then, each with a cold
# page cache, on the same backup D:
#   native: `ferry restore --recovery native` (wall, the apply's took, redo_bytes, pages), a first
#           server start on the result (seconds to answer; did it recover?); with CHECK_NOW=1 the
#           correctness check (check_replayed) on it;
#   server: `ferry restore --recovery server` (wall, the recovery's took), a first start too;
#   in place: D copied to D' (MB_FERRY=1), `ferry prepare --target-dir D --recovery native`
#           (wall, CPU) and `mariadb-backup --prepare --target-dir D'` (wall, CPU).
# ferry-calib does the native restore only. Appends its line to $RES.
ferry_run() {
  local tool=$1 k=$2 r=$3 rate=0 label="$1-$2x" cmd wall rest rlog; shift 3
  rm -rf "$BK_F" "$BK_FM"; clean_restored "$F_REST"
  data_sizes
  if [[ $tool != ferry-calib && $k != 1 ]]; then
    rate=$(gawk -v b="$DD_BYTES" -v k="$k" -v t="$T1" 'BEGIN { printf "%.0f", b / (k * t) }')
  fi
  cmd="$(q "$FERRY") backup --socket $(q "$SOCK") --user root --target-dir $(q "$BK_F") --parallel $PARALLEL"
  ((rate > 0)) && cmd+=" --max-rate $rate"
  cmd+=" $* $FERRY_ARGS"
  under_load "$label" "$r" "$BK_F" "$cmd"
  wall=$(wall_of "$label" "$r")
  local tps=$LOAD_TPS
  local flog="$LOGS/$label-$r.log" redo_file redo_log span rounds pages spool
  redo_file=$(stat -c %s "$BK_F/ib_logfile0" 2>/dev/null || echo "")
  redo_log=$(logval "$flog" "redo copy finished" redo_bytes)
  spool=$(logval "$flog" "redo copy finished" spool_peak_bytes)
  rounds=$(logval "$flog" "backup completed OK" recopy_rounds)
  pages=$(logval "$flog" "backup completed OK" pages_recopied)
  span=$(manifest_span "$BK_F")
  [[ -f $BK_F/xtrabackup_binlog_info ]] && cp "$BK_F/xtrabackup_binlog_info" "$LOGS/$label-$r.binlog_info"
  rest="$(q "$FERRY") restore --target-dir $(q "$BK_F") --datadir $(q "$F_REST") --parallel $PARALLEL --use-memory $PREPARE_MEMORY"

  # native: ferry restore --recovery native, a first start, the check
  local nwall ntook="" nredo="" npages="" nstat="ok" nstart="" nrec=""
  drop_caches
  timed_rc "$label-native" "$r" "$F_REST" "$rest --recovery native"
  rlog="$LOGS/$label-native-$r.log"; nwall=$(wall_of "$label-native" "$r")
  if ((RC == 0)); then
    ntook=$(secs "$(logval "$rlog" "$NATIVE_MSG" took)")
    nredo=$(logval "$rlog" "$NATIVE_MSG" redo_bytes); npages=$(logval "$rlog" "$NATIVE_MSG" pages)
    if [[ -z $ntook ]]; then nstat="no native line"; finding "$label-native run $r: exit 0 but no \"$NATIVE_MSG\" line (log: $rlog)"; fi
    first_start "$F_REST"; nstart=$START_S; nrec=$START_REC
    ((nrec == 0)) || finding "$label-native run $r: the first start on the natively restored datadir logged $nrec crash-recovery line(s) ($BENCH_DIR/restored.err)"
    if [[ ${CHECK_NOW:-0} == 1 ]]; then
      if [[ -f $LOGS/$label-$r.binlog_info ]]; then check_replayed "$F_REST" "$LOGS/$label-$r.binlog_info"
      else CHECK="FAILED: the backup has no xtrabackup_binlog_info"; fi
    fi
  else
    nstat="FAILED (exit $RC)"
    [[ ${CHECK_NOW:-0} == 1 ]] && CHECK="not run: ferry restore --recovery native failed ($LOGS/$label-native-$r.log)"
  fi
  clean_restored "$F_REST"
  log "$(printf '  %-18s run %s: backup %s s (cap %s B/s), ib_logfile0 %s B, redo_bytes %s, rounds %s, pages %s; native restore %s s (%s), apply %s s, %s B redo, %s pages, first start %s s' \
    "$label" "$r" "$wall" "$rate" "$redo_file" "$redo_log" "${rounds:-–}" "${pages:-–}" "$nwall" "$nstat" "${ntook:-–}" "${nredo:-–}" "${npages:-–}" "${nstart:-–}")"

  local swall="" stook="" sstart="" pwall="" pcpu="" ptook="" mwall="" mcpu=""
  if [[ $tool != ferry-calib ]]; then
    # server: ferry restore --recovery server (the stock mariadbd's crash recovery), a first start
    drop_caches
    timed_rc "$label-server" "$r" "$F_REST" "$rest --recovery server"
    rlog="$LOGS/$label-server-$r.log"; swall=$(wall_of "$label-server" "$r")
    if ((RC == 0)); then
      stook=$(secs "$(logval "$rlog" "$SERVER_MSG" took)")
      [[ -n $stook ]] || finding "$label-server run $r: no \"$SERVER_MSG\" line (log: $rlog)"
      first_start "$F_REST"; sstart=$START_S
    fi
    clean_restored "$F_REST"
    # in place: mariadb-backup --prepare of a copy of D, ferry prepare --recovery native of D
    if [[ $MB_FERRY == 1 ]]; then cp -a "$BK_F" "$BK_FM"; fi
    drop_caches
    timed_rc "$label-prepare" "$r" 0 "$(q "$FERRY") prepare --target-dir $(q "$BK_F") --recovery native --use-memory $PREPARE_MEMORY"
    pwall=$(wall_of "$label-prepare" "$r"); pcpu=$(cpu_of "$label-prepare" "$r")
    ((RC == 0)) && ptook=$(secs "$(logval "$LOGS/$label-prepare-$r.log" "$NATIVE_MSG" took)")
    if [[ $MB_FERRY == 1 ]]; then
      drop_caches
      timed_rc "$label-mbprepare" "$r" 0 "mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$BK_FM")"
      mwall=$(wall_of "$label-mbprepare" "$r"); mcpu=$(cpu_of "$label-mbprepare" "$r")
    fi
    log "$(printf '  %-18s run %s: server restore %s s, recovery %s s, first start %s s; in place: ferry prepare --recovery native %s s (%s CPU s), mariadb-backup --prepare %s s (%s CPU s)' \
      "$label" "$r" "${swall:-–}" "${stook:-–}" "${sstart:-–}" "${pwall:-–}" "${pcpu:-–}" "${mwall:-–}" "${mcpu:-–}")"
  fi
  res_row "$tool" "$k" "$r" "$rate" "$wall" "$redo_file" "$redo_log" "$span" "$rounds" "$pages" "$spool" \
    "$nwall" "$ntook" "" "" "ib_logfile0" "$DD_BYTES" "$tps" \
    "$nredo" "$npages" "$swall" "$stook" "$pwall" "$pcpu" "$mwall" "$mcpu" "$nstat" "$nstart" "$sstart" "$ptook" "$nrec"
  rm -rf "$BK_F" "$BK_FM"
}

# --- one mariadb-backup backup + prepare --------------------------------------------------------------
# mb_run FACTOR RUN TARGET-S: a mariadb-backup --backup under load lasting about TARGET-S
# (uncapped for TARGET-S 0, or when an uncapped one, MB_FREE s, is not much shorter), then
# --prepare. Appends its line to $RES.
MB_FREE=""
mb_run() {
  local k=$1 r=$2 target=$3 thr=0 capped=0 try label wall f redo_name="" redo_bytes="" off
  data_sizes
  [[ $target != 0 ]] && capped=1
  if ((capped)) && [[ -n $MB_FREE ]] &&
     gawk -v t="$target" -v u="$MB_FREE" -v p="$MB_TOLERANCE" 'BEGIN { exit !(t <= u * (1 + p / 100)) }'; then
    log "  mariadb-backup ${k}x: the target $target s is within $MB_TOLERANCE % of its uncapped time ($MB_FREE s): uncapped"
    capped=0
  fi
  if ((capped)); then
    thr=$(gawk -v n="${MB_OPS:-$(mb_ios)}" -v t="$target" 'BEGIN { x = int(n / t + 0.5) - 1; print (x < 1) ? 1 : x }')
  fi
  for ((try = 1; ; try++)); do
    rm -rf "$BK_M"
    label="mb-${k}x-t$thr"
    under_load "$label" "$r" "$BK_M" "mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root \
--datadir=$(q "$DATA") --target-dir=$(q "$BK_M") --parallel=$PARALLEL$( ((thr > 0)) && echo " --throttle=$thr")"
    wall=$(wall_of "$label" "$r")
    [[ $target == 0 ]] && MB_FREE=$wall
    ((capped)) || break
    # throttle-bound: about thr + 1 operations a second, so the backup took ~ (thr + 1) x wall
    MB_OPS=$(gawk -v thr="$thr" -v w="$wall" 'BEGIN { printf "%.0f", (thr + 1) * w }')
    off=$(gawk -v w="$wall" -v t="$target" 'BEGIN { printf "%.0f", 100 * (w - t) / t }')
    ((${off#-} <= MB_TOLERANCE || try >= MB_TRIES)) && break
    local next
    next=$(gawk -v n="$MB_OPS" -v t="$target" 'BEGIN { x = int(n / t + 0.5) - 1; print (x < 1) ? 1 : x }')
    if [[ $next == "$thr" ]]; then break; fi
    log "  mariadb-backup --throttle=$thr took $wall s for a target of $target s ($off %); again with --throttle=$next"
    thr=$next
  done
  if ((capped)) && ((${off#-} > MB_TOLERANCE)); then
    log "warning: mariadb-backup ${k}x run $r: $wall s is $off % off the target $target s after $try backup(s); kept"
  fi
  for f in ib_logfile0 xtrabackup_logfile; do
    if [[ -f $BK_M/$f ]]; then
      redo_name=$f; redo_bytes=$(stat -c %s "$BK_M/$f")
      log "  mariadb-backup's $f: $redo_bytes bytes, $(du -B1 "$BK_M/$f" | cut -f1) allocated; $(tr '\n' ' ' <"$BK_M/xtrabackup_checkpoints" 2>/dev/null)"
      break
    fi
  done
  drop_caches
  timed "mb-${k}x-prepare" "$r" 0 "mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$BK_M")"
  log "$(printf '  %-18s run %s: backup %s s (target %s s, --throttle=%s, try %s), %s %s B; prepare %s s' \
    "mb-${k}x" "$r" "$wall" "$target" "$thr" "$try" "${redo_name:-no redo file}" "$redo_bytes" "$(wall_of "mb-${k}x-prepare" "$r")")"
  res_row mb "$k" "$r" "$thr" "$wall" "$redo_bytes" "" "" "" "" "" "" "$(wall_of "mb-${k}x-prepare" "$r")" "$target" "$try" "$redo_name" "$DD_BYTES" "$LOAD_TPS" \
    "" "" "" "" "" "" "$(wall_of "mb-${k}x-prepare" "$r")" "$(cpu_of "mb-${k}x-prepare" "$r")"
  rm -rf "$BK_M"
}

# --- setup ------------------------------------------------------------------------------------------
bench_init
need mariadb-binlog mariadb-client
need mariadb-check mariadb-client
build_ferry
if [[ $SKIP_FERRY != 1 ]]; then
  "$FERRY" backup --help 2>&1 | grep -q -- '--full-redo' ||
    die "$FERRY backup has no --full-redo (an older ferry without the three-stage copy?); set FERRY or rebuild"
  "$FERRY" restore --help 2>&1 | grep -q -- '--recovery' ||
    die "$FERRY restore has no --recovery (an older ferry without native apply?); set FERRY or rebuild"
fi
RES="$LOGS/prepare.tsv"; : >"$RES"                # one line per measured backup (fields: report below)
stop_stale "$RPIDF" "$F_REST"
load_dataset
rm -rf "$BK_F" "$BK_M" "$BK_FM"; clean_restored "$F_REST"

quiesce
data_sizes
START_DATA_BYTES=$DATA_BYTES; START_DD_BYTES=$DD_BYTES
count_rows sql >"$LOGS/counts-source.txt"         # the rows per table every commit keeps
check_free 3
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); factors: $FACTORS; $RUNS run(s) each; load: $LOAD_THREADS threads"

# --- 1: T1, one uncapped backup under load ---------------------------------------------------------
if [[ $SKIP_FERRY != 1 ]]; then
  ferry_run ferry-calib 1 1
  T1=$(wall_of ferry-calib-1x 1)
else
  rm -rf "$BK_M"
  under_load mb-calib 1 "$BK_M" "mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --target-dir=$(q "$BK_M") --parallel=$PARALLEL"
  rm -rf "$BK_M"
  T1=$(wall_of mb-calib 1)
fi
log "T1 = $T1 s (uncapped backup under load)"

# --- 2: per factor, ferry then mariadb-backup --------------------------------------------------------
CHECK="not run (SKIP_CHECK=1)"
[[ $SKIP_FERRY == 1 ]] && CHECK="not run (SKIP_FERRY=1)"
for k in $FACTORS; do
  for ((r = 1; r <= RUNS; r++)); do
    target=0
    if [[ $SKIP_FERRY != 1 ]]; then
      CHECK_NOW=0
      [[ $SKIP_CHECK != 1 && $k == "$KMAX" && $r == 1 ]] && CHECK_NOW=1
      ferry_run ferry "$k" "$r"
      CHECK_NOW=0
      [[ $k == 1 ]] || target=$(wall_of "ferry-${k}x" "$r")
    else
      [[ $k == 1 ]] || target=$(gawk -v k="$k" -v t="$T1" 'BEGIN { printf "%.2f", k * t }')
    fi
    [[ $FERRY_ONLY == 1 ]] || mb_run "$k" "$r" "$target"
  done
done

# --- 3: ferry --full-redo at the largest factor --------------------------------------------------------
if [[ $SKIP_FERRY != 1 && $FULL_REDO == 1 ]]; then
  ferry_run ferry-full "$KMAX" 1 --full-redo
fi

# --- report ---------------------------------------------------------------------------------------------
data_sizes                                        # the load grows the tables: sizes at the end too
describe_env

report() {
  # the sizes at the start (the later -v wins), and at the end (enddd)
  report_gawk -v databytes="$START_DATA_BYTES" -v ddbytes="$START_DD_BYTES" \
      -v enddd="$DD_BYTES" -v factors="$FACTORS" -v kmax="$KMAX" -v t1="$T1" \
      -v skipferry="$SKIP_FERRY" -v ferryonly="$FERRY_ONLY" -v check="$CHECK" -v pmem="$PREPARE_MEMORY" \
      -v lthreads="$LOAD_THREADS" -v lwarm="$LOAD_WARMUP_SECS" -v ferryargs="$FERRY_ARGS" \
      -v tol="$MB_TOLERANCE" -v tries="$MB_TRIES" -v mbferry="$MB_FERRY" -v findfile="$LOGS/findings.txt" "$AWK_FUNCS"'
    # $RES: 1 tool 2 factor 3 run 4 cap 5 wall 6 redo_file 7 redo_log 8 lsn_span 9 rounds 10 pages
    #       11 spool_peak 12 native_restore_wall (mb: "") 13 native_apply_took (mb: prepare wall)
    #       14 target 15 tries 16 redo_name 17 data_bytes 18 load_tps 19 native_redo_bytes
    #       20 native_pages 21 server_restore_wall 22 server_recovery_took 23 prepare_wall
    #       24 prepare_cpu 25 mbprepare_wall (mb: its prepare) 26 mbprepare_cpu 27 native_status
    #       28 native_first_start 29 server_first_start 30 prepare_took 31 native_start_recovery_lines
    { k = $1 SUBSEP $2; i = ++n[k]; for (j = 4; j <= 31; j++) V[j, k, i] = $j }
    # median of field j over the runs of (tool, factor) that have a value; "" if none
    function med(j, tool, fac,   k, i, m, v) {
      k = tool SUBSEP fac; m = 0
      for (i = 1; i <= n[k]; i++) if (V[j, k, i] != "" && V[j, k, i] !~ /[^0-9.]/) v[++m] = V[j, k, i] + 0
      return m ? median(v, m) : "" }
    function mib(x) { return x == "" ? "–" : sprintf("%.1f", x / 1048576) }
    function mb(x) { return x == "" ? "–" : sprintf("%.1f", x / 1e6) }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "–" : sprintf("%.1f", a / b) }
    function tput(bytes, cpu) { return (bytes == "" || cpu == "" || cpu == 0) ? "–" : sprintf("%.0f", bytes / 1e6 / cpu) }
    function met(x, lim) { return x == "" ? "–" : (x + 0 <= lim ? "yes" : "**no**") }
    function fname(fac) { return fac == 1 ? "1x (uncapped)" : fac "x" }
    function rp(tool, fac,   r, p) { r = med(9, tool, fac); p = med(10, tool, fac); return (r == "" && p == "") ? "–" : f(r, "%d") " / " f(p, "%d") }
    function cap(x) { return (x == "" || x == 0) ? "none" : sprintf("%.1f MiB/s", x / 1048576) }
    # the rows to show: (label, ferry tool, factor); mariadb-backup at the same factor
    function mkrows(   i) {
      nr = 0
      for (i = 1; i <= nf; i++) { nr++; XL[nr] = fname(F[i]); XT[nr] = "ferry"; XF[nr] = F[i] }
      if (n["ferry-full" SUBSEP kmax]) { nr++; XL[nr] = fname(kmax) ", ferry `--full-redo` (mb: the " kmax "x run)"; XT[nr] = "ferry-full"; XF[nr] = kmax }
    }
    function mainrow(label, tool, fac,   fp, mp) {
      fp = med(23, tool, fac); mp = med(13, "mb", fac)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label, f(med(5, tool, fac), "%.2f"),
        mib(med(6, tool, fac)), f(med(13, tool, fac), "%.2f"), f(fp, "%.2f"), f(med(28, tool, fac), "%.2f"),
        f(med(22, tool, fac), "%.2f"), f(med(25, tool, fac), "%.2f"), rp(tool, fac), f(med(5, "mb", fac), "%.2f"),
        mib(med(6, "mb", fac)), f(mp, "%.2f"), ratio(mp, fp) }
    END {
      nf = split(factors, F, " "); mkrows()
      printf "## Prepare: from the end of the copy to a datadir the server starts on, after longer backups under load: ferry native apply vs the stock server'"'"'s recovery vs mariadb-backup --prepare, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (what the tools read) at the start, %.3f GB at the end (the load grows the tables)\n", tables, rows, databytes / 1e9, ddbytes / 1e9, enddd / 1e9
      printf "- load during every backup (not during restores and prepares): `sysbench oltp_write_only --threads=%d --rate=0`, started %d s before the backup on a quiesced server (no dirty pages, cold page cache, RESET MASTER)\n", lthreads, lwarm
      printf "- T1 = **%.2f s**: one uncapped %s under load. Factor k: ferry `--max-rate` = the bytes it reads (datadir without ib_logfile0, measured just before) / (k x T1), uncapped for k = 1; mariadb-backup `--throttle=N` aimed at the length of ferry'"'"'s backup of the same k (k x T1 without ferry): N estimated from the datadir'"'"'s files (an operation per 10 MiB read and per file), corrected from the measured time until within %d %% (at most %d backups); uncapped for k = 1 and where its uncapped backup is not shorter than that\n", t1, skipferry == 1 ? "`mariadb-backup --backup`" : "`ferry backup --target-dir`", tol, tries
      printf "- `--parallel %d` for both backups. On each ferry backup D, cold page cache each: `ferry restore --target-dir D --datadir X --use-memory %s --recovery native` (native apply: the `took` of its log line `%s`), then a first server start on X; the same with `--recovery server` (the stock mariadbd'"'"'s crash recovery in a private server: `took` of `%s`); then in place: `ferry prepare --target-dir D --recovery native` (wall, CPU)%s. mariadb-backup: the wall and CPU of `mariadb-backup --prepare --use-memory=%s` of its own backup%s\n", par, pmem, "prepare: redo applied natively", "prepare: recovery finished", mbferry == 1 ? " and `mariadb-backup --prepare` of a copy of D made before it (wall, CPU)" : "", pmem, ferryargs == "" ? "" : "; ferry backup " ferryargs
      printf "- %d run(s) per factor and tool (medians)\n\n", runs
      print "| duration factor | ferry backup s | ferry redo kept MiB | native apply s (restore) | `ferry prepare --recovery native` s (in place) | first start after native s | server recovery s (restore `--recovery server`) | mariadb-backup `--prepare` of ferry'"'"'s backup s | rounds / pages recopied | mariadb-backup backup s | mb redo MiB | mb prepare s (own backup) | mb prepare / ferry prepare |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= nr; i++) mainrow(XL[i], XT[i], XF[i])
      print "\nferry redo kept: the size of `ib_logfile0` in the backup. first start: seconds until a server started on the natively restored datadir answered (cold cache; it rolls back the transactions open at the backup'"'"'s end). mb prepare / ferry prepare: how many times longer mariadb-backup'"'"'s prepare of its own backup took than ferry'"'"'s native prepare in place."

      if (skipferry != 1) {
        print "\nTargets (issue 23, Performance, bench/prepare.sh):\n"
        print "| duration factor | end of copy → startable datadir: `ferry prepare --recovery native` s (native apply s) | ≤ 1 s | redo kept MiB | ≤ 16 MiB |"
        print "|---|---|---|---|---|"
        for (i = 1; i <= nr; i++) {
          x = med(23, XT[i], XF[i]); y = med(6, XT[i], XF[i])
          printf "| %s | %s (%s) | %s | %s | %s |\n", XL[i], f(x, "%.2f"), f(med(13, XT[i], XF[i]), "%.2f"), met(x, 1), mib(y), met(y == "" ? "" : y / 1048576, 16)
        }
        print "\nApply throughput: MB (10^6 bytes) of redo applied per CPU-second (user + sys of the whole command; the redo: end LSN − checkpoint LSN, from ferry'"'"'s log line; mariadb-backup'"'"'s own backup: the size of its `ib_logfile0`):\n"
        print "| duration factor | redo applied MB | `ferry prepare --recovery native` CPU s | ferry MB/CPU-s | `mariadb-backup --prepare` of the same backup CPU s | its MB/CPU-s | ferry / mariadb-backup | mb own backup: redo MB | its prepare CPU s | its MB/CPU-s |"
        print "|---|---|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nr; i++) {
          rb = med(19, XT[i], XF[i]); pc = med(24, XT[i], XF[i]); mc = med(26, XT[i], XF[i])
          ob = med(6, "mb", XF[i]); oc = med(26, "mb", XF[i])
          ft = tput(rb, pc); mt = tput(rb, mc)
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", XL[i], mb(rb), f(pc, "%.2f"), ft, f(mc, "%.2f"), mt,
            (ft == "–" || mt == "–" || mt == 0) ? "–" : sprintf("%.1f", ft / mt), mb(ob), f(oc, "%.2f"), tput(ob, oc)
        }

        print "\nferry, per run:\n"
        print "| run | data read MB | `--max-rate` | backup s | × T1 | ib_logfile0 MiB | redo_bytes (log) MiB | last_lsn − start_lsn MiB | spool peak MiB | rounds | pages recopied | load TPS during the backup | native restore s | apply s | pages written | first start s | server restore s | recovery s | first start s | ferry prepare in place s / CPU s | mb --prepare of it s / CPU s | native |"
        print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        for (i = 0; i <= nf; i++) {
          tool = (i == 0) ? "ferry-calib" : "ferry"; fac = (i == 0) ? 1 : F[i]
          for (t = 1; t <= 2; t++) {
            if (t == 2) { if (i != nf) continue; tool = "ferry-full"; fac = kmax }
            k = tool SUBSEP fac
            for (r = 1; r <= n[k]; r++) {
              name = (tool == "ferry-calib") ? "T1 (calibration)" : (tool == "ferry-full") ? fname(fac) " `--full-redo`" : fname(fac)
              printf "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s |\n", name, (n[k] > 1) ? " #" r : "",
                f(V[17, k, r] / 1e6, "%.0f"), cap(V[4, k, r]), f(V[5, k, r], "%.2f"), V[5, k, r] == "" ? "–" : sprintf("%.2f", V[5, k, r] / t1),
                mib(V[6, k, r]), mib(V[7, k, r]), mib(V[8, k, r]), mib(V[11, k, r]), f(V[9, k, r], "%s"), f(V[10, k, r], "%s"), f(V[18, k, r], "%s"),
                f(V[12, k, r], "%.2f"), f(V[13, k, r], "%.2f"), f(V[20, k, r], "%s"), f(V[28, k, r], "%.2f"),
                f(V[21, k, r], "%.2f"), f(V[22, k, r], "%.2f"), f(V[29, k, r], "%.2f"),
                f(V[23, k, r], "%.2f"), f(V[24, k, r], "%.2f"), f(V[25, k, r], "%.2f"), f(V[26, k, r], "%.2f"), V[27, k, r]
            }
          }
        }
      }
      if (ferryonly != 1) {
        print "\nmariadb-backup, per run:\n"
        print "| run | target s | `--throttle` | backups taken | backup s | × T1 | redo file | redo MiB | prepare s | prepare CPU s | load TPS during the backup |"
        print "|---|---|---|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= nf; i++) {
          k = "mb" SUBSEP F[i]
          for (r = 1; r <= n[k]; r++)
            printf "| %s%s | %s | %s | %s | %.2f | %.2f | %s | %s | %s | %s | %s |\n", fname(F[i]), (n[k] > 1) ? " #" r : "",
              (V[14, k, r] == 0) ? "– (uncapped)" : sprintf("%.2f", V[14, k, r]), (V[4, k, r] == 0) ? "none" : V[4, k, r],
              f(V[15, k, r], "%s"), V[5, k, r], V[5, k, r] / t1, V[16, k, r] == "" ? "–" : "`" V[16, k, r] "`",
              mib(V[6, k, r]), f(V[13, k, r], "%.2f"), f(V[26, k, r], "%.2f"), f(V[18, k, r], "%s")
        }
      }
      printf "\nCheck (ferry backup at %sx, restored with `--recovery native`; server on it: mariadb-check, rows per table, binlog replay from the backup'"'"'s position, CHECKSUM TABLE vs the idle source): **%s**\n", kmax, check
      nfd = 0
      while ((getline line < findfile) > 0) { if (!nfd++) print "\nFindings (ferry failed or fell back; not worked around):\n"; print "- " line }
      if (!nfd && skipferry != 1) print "\nFindings: none (every native apply succeeded, logged its line, and its datadir started without crash recovery)."
    }' "$RES"
}
: >"$LOGS/findings.txt"
((${#FINDINGS[@]} == 0)) || printf '%s\n' "${FINDINGS[@]}" >"$LOGS/findings.txt"
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RES and $RAW"
((${#FINDINGS[@]} == 0)) || die "ferry: ${#FINDINGS[@]} finding(s), see the report's Findings ($RESULTS)"
