#!/usr/bin/env bash
# bench/backup.sh: ferry backup against mariadb-backup --backup on the same sysbench dataset.
#
# Same method as shared/research/mariabackup-baseline.md: a private mariadbd (1 GiB buffer pool,
# 512 MiB redo, binlog on), cold page cache and no dirty pages before every timed run, each
# command under /usr/bin/time -f '%e %U %S %M'. Measures, in one invocation:
#   1. the raw read limit: O_DIRECT dd of every datadir file but ib_logfile0, RUNS times;
#   2. ferry backup and mariadb-backup --backup (same --parallel), RUNS times each, alternating,
#      each followed by a separately timed `sync`;
#   3. correctness: prepare + restore the last ferry backup, start a server on it and compare
#      CHECKSUM TABLE of every sbtest table with the (idle) source;
#   4. each tool once under a sysbench oltp_write_only load, and the write TPS kept meanwhile.
# Prints a markdown report and writes it to $BENCH_DIR/results.md. Needs root (drop_caches).
#
#   bench/backup.sh                    # 14 tables x 1M rows (~4 GB datadir), 3 runs each
#   SMALL=1 bench/backup.sh            # 4 x 100k rows: checks the script in a few minutes
#   SKIP_FERRY=1 bench/backup.sh       # everything but ferry (e.g. while cmd/ferry does not build)
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), backups, logs, results.md
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [3]                          timed runs of dd, ferry and mariadb-backup each
#   PARALLEL [2]                      --parallel for both tools
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   LOAD_THREADS [2]                  sysbench threads of the write load
#   LOAD_BASE_SECS [20]               load-only seconds measured as the TPS baseline
#   LOAD_GAP_SECS [15]                load-only seconds after each backup under load
#   LOAD_MAX_SECS [1200]              sysbench --time (hard bound on the load phase)
#   TOOL_TIMEOUT [1800]               seconds before a single backup/prepare/restore is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry backup` (e.g. "--chunk-size 256K")
#   SKIP_FERRY=1 SKIP_LOAD=1 SKIP_CHECK=1   leave out ferry / the load phase / the restore check
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings ------------------------------------------------------------------------------
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-/var/tmp/ferry-bench}
if [[ ${SMALL:-0} == 1 ]]; then
  TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-100000}
else
  TABLES=${TABLES:-14}; TABLE_SIZE=${TABLE_SIZE:-1000000}
fi
RUNS=${RUNS:-3}
PARALLEL=${PARALLEL:-2}
PORT=${PORT:-3310}
QUIET_MAX=${QUIET_MAX:-120}
LOAD_THREADS=${LOAD_THREADS:-2}
LOAD_BASE_SECS=${LOAD_BASE_SECS:-20}
LOAD_GAP_SECS=${LOAD_GAP_SECS:-15}
LOAD_MAX_SECS=${LOAD_MAX_SECS:-1200}
TOOL_TIMEOUT=${TOOL_TIMEOUT:-1800}
FERRY_ARGS=${FERRY_ARGS:-}
SKIP_FERRY=${SKIP_FERRY:-0}
SKIP_LOAD=${SKIP_LOAD:-0}
SKIP_CHECK=${SKIP_CHECK:-0}
KEEP_SERVER=${KEEP_SERVER:-0}

DATA="$BENCH_DIR/data-${TABLES}x${TABLE_SIZE}"   # source datadir, one per dataset size
LOADED="$DATA.loaded"                             # marker: sysbench prepare finished
SOCK="$BENCH_DIR/src.sock"
PIDF="$BENCH_DIR/src.pid"
BK_FERRY="$BENCH_DIR/bk-ferry"                    # backup dirs (removed before each run)
BK_MB="$BENCH_DIR/bk-mariabackup"
RESTORED="$BENCH_DIR/restored"                    # datadir of the restore check
RSOCK="$BENCH_DIR/restored.sock"
RPIDF="$BENCH_DIR/restored.pid"
LOGS="$BENCH_DIR/logs"                            # per-command logs of the last invocation
RAW="$LOGS/raw.tsv"                               # one line per timed command
RESULTS="$BENCH_DIR/results.md"
MARIADBD=/usr/sbin/mariadbd
SB_OPTS=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
         --tables="$TABLES" --table-size="$TABLE_SIZE")

log() { echo "bench: $*" >&2; }
die() { echo "bench: FAILED: $*" >&2; exit 1; }
sql() { mariadb --no-defaults -S "$SOCK" -uroot -N -B "$@"; }

[[ $EUID == 0 ]] || die "run as root (drop_caches, mariadbd --user=root)"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"

# --- tools (installed with apt-get only when missing) ---------------------------------------
apt_updated=0
need() {  # need COMMAND-OR-PATH DEBIAN-PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  if [[ $apt_updated == 0 ]]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  command -v "$1" >/dev/null 2>&1 || die "$1 still missing after apt-get install $2"
}
need "$MARIADBD" mariadb-server
need mariadb-install-db mariadb-server
need mariadb mariadb-client
need mariadb-backup mariadb-backup
need sysbench sysbench
need /usr/bin/time time
need timeout coreutils

mkdir -p "$BENCH_DIR"
rm -rf "$LOGS"; mkdir -p "$LOGS"; : >"$RAW"

# --- ferry binary -----------------------------------------------------------------------------
if [[ $SKIP_FERRY == 1 ]]; then
  log "SKIP_FERRY=1: ferry is left out (no ferry rows, ratios or restore check)"
  FERRY=""
elif [[ -n ${FERRY:-} ]]; then
  [[ -x $FERRY ]] || die "FERRY=$FERRY is not an executable"
else
  GO=$(command -v go || echo /usr/local/go/bin/go)
  [[ -x $GO ]] || die "go not found (install Go, set FERRY=/path/to/ferry, or SKIP_FERRY=1)"
  FERRY="$BENCH_DIR/bin/ferry"
  log "building ferry: go build -o $FERRY ./cmd/ferry"
  (cd "$REPO" && "$GO" build -o "$FERRY" ./cmd/ferry) >"$LOGS/go-build.log" 2>&1 || {
    tail -n 20 "$LOGS/go-build.log" >&2
    die "go build ./cmd/ferry failed (full log: $LOGS/go-build.log); rerun with SKIP_FERRY=1 to benchmark the rest"
  }
fi

# --- private servers --------------------------------------------------------------------------
SRC_PID=""; REST_PID=""; SB_PID=""

# start_server VAR DATADIR SOCKET PIDFILE ERRLOG EXTRA-ARGS...: starts mariadbd in the background,
# waits until it answers, and stores its pid in the variable named VAR.
start_server() {
  local var=$1 dir=$2 sock=$3 pidf=$4 err=$5 pid i; shift 5
  "$MARIADBD" --no-defaults --user=root --datadir="$dir" --socket="$sock" --pid-file="$pidf" \
    --log-error="$err" --innodb-buffer-pool-size=1G --innodb-log-file-size=512M "$@" \
    </dev/null >/dev/null 2>&1 &
  pid=$!
  printf -v "$var" %s "$pid"
  for ((i = 0; i < 1200; i++)); do            # up to 10 min (crash recovery of a big datadir)
    mariadb --no-defaults -S "$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 15 "$err" >&2; die "mariadbd on $dir exited; log: $err"; }
    sleep 0.5
  done
  die "mariadbd on $dir did not answer within 10 min; log: $err"
}

# stop_pid PID: SIGTERM, wait up to 5 min for a clean shutdown, then SIGKILL.
stop_pid() {
  local pid=$1 i
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  log "mariadbd $pid did not stop in 5 min; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# stop_stale PIDFILE DATADIR: stops a server left over by an interrupted earlier invocation, but
# only if that pid really is a mariadbd on DATADIR (never an unrelated process).
stop_stale() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--datadir=$2 "; then
    log "stopping the server left running on $2 (pid $pid)"
    stop_pid "$pid"
  fi
  rm -f "$1"
}

cleanup() {
  local rc=$?
  set +e
  [[ -n $SB_PID ]] && kill -TERM "$SB_PID" 2>/dev/null && wait "$SB_PID" 2>/dev/null
  [[ -n $REST_PID ]] && stop_pid "$REST_PID"
  rm -rf "$RESTORED"
  if [[ -n $SRC_PID ]]; then
    if [[ $KEEP_SERVER == 1 ]]; then log "KEEP_SERVER=1: source server left running (pid $SRC_PID, socket $SOCK)"
    else stop_pid "$SRC_PID"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_source() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1
}

# --- dataset (built once per size, then reused) -----------------------------------------------
stop_stale "$PIDF" "$DATA"
stop_stale "$RPIDF" "$RESTORED"
[[ -f $DATA/.loaded ]] && mv "$DATA/.loaded" "$LOADED"   # marker of an older version of this script
if [[ ! -f $LOADED ]]; then
  log "creating the dataset: sysbench ${TABLES} x ${TABLE_SIZE} rows (about 6 min for 14 x 1M)"
  rm -rf "$DATA"
  mariadb-install-db --no-defaults --user=root --datadir="$DATA" \
    --auth-root-authentication-method=normal >"$LOGS/install-db.log" 2>&1 ||
    { tail -n 15 "$LOGS/install-db.log" >&2; die "mariadb-install-db failed"; }
  start_source
  sql -e "CREATE DATABASE sbtest"
  /usr/bin/time -o "$LOGS/prepare.time" -f '%e' \
    sysbench oltp_read_write "${SB_OPTS[@]}" --threads=2 prepare >"$LOGS/sysbench-prepare.log" 2>&1 ||
    { tail -n 15 "$LOGS/sysbench-prepare.log" >&2; die "sysbench prepare failed"; }
  log "dataset loaded in $(tail -n1 "$LOGS/prepare.time") s"
  touch "$LOADED"
else
  log "reusing the dataset in $DATA"
  start_source
fi
# The load wrote GBs of binlog (and earlier load phases more); neither tool copies binlogs, so
# drop them (a private server without replicas): the datadir then holds what the baseline's did,
# and dd reads what the tools read.
sql -e "RESET MASTER"

# --- measuring helpers ------------------------------------------------------------------------
# quiesce: wait (at most QUIET_MAX s) until InnoDB has no dirty pages, then drop the page cache.
quiesce() {
  local old dirty=1 i
  old=$(sql -e "SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
  sql -e "SET GLOBAL innodb_max_dirty_pages_pct=0"
  for ((i = 0; i <= QUIET_MAX * 2; i++)); do
    dirty=$(sql -e "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'" | cut -f2)
    [[ $dirty == 0 ]] && break
    sleep 0.5
  done
  sql -e "SET GLOBAL innodb_max_dirty_pages_pct=$old"
  [[ $dirty == 0 ]] || log "warning: still $dirty dirty pages after ${QUIET_MAX} s; measuring anyway"
  drop_caches
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# timed LABEL RUN SIZE COMMAND: runs COMMAND (a bash string) under /usr/bin/time (and timeout),
# output to $LOGS/LABEL-RUN.log; appends "label run wall user sys maxrss_kib bytes loadavg1" to
# $RAW. SIZE is a directory (bytes = its du -sb afterwards) or a byte count.
timed() {
  local label=$1 run=$2 size=$3 cmd=$4 out="$LOGS/$1-$2.log" la wall user sys rss bytes
  la=$(cut -d' ' -f1 /proc/loadavg)
  if ! /usr/bin/time -o "$LOGS/time.out" -f '%e %U %S %M' \
       timeout -k 10 "$TOOL_TIMEOUT" bash -o pipefail -c "$cmd" >"$out" 2>&1; then
    tail -n 15 "$out" >&2
    die "$label (run $run) failed: $cmd   (log: $out)"
  fi
  read -r wall user sys rss < <(tail -n1 "$LOGS/time.out")
  if [[ -d $size ]]; then bytes=$(du -sb "$size" | cut -f1); else bytes=$size; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$run" "$wall" "$user" "$sys" "$rss" "$bytes" "$la" >>"$RAW"
  log "$(printf '%-18s run %s: wall %6.2f s  user %6.2f  sys %6.2f  rss %5d MiB  %s bytes' \
    "$label" "$run" "$wall" "$user" "$sys" $((rss / 1024)) "$bytes")"
}

q() { printf '%q' "$1"; }
FERRY_CMD="$(q "${FERRY:-ferry}") backup --socket $(q "$SOCK") --user root --target-dir $(q "$BK_FERRY") --parallel $PARALLEL $FERRY_ARGS"
MB_CMD="mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --target-dir=$(q "$BK_MB") --parallel=$PARALLEL"
DD_CMD="find $(q "$DATA") -type f ! -name ib_logfile0 -print0 | xargs -0 -I{} dd if={} of=/dev/null bs=1M iflag=direct status=none"

# run_tool TOOL LABEL RUN: removes TOOL's previous backup dir, then times a backup into it. The
# other tool's last backup is kept, so the last ferry backup survives the loop for the check.
run_tool() {
  if [[ $1 == ferry ]]; then rm -rf "$BK_FERRY"; timed "$2" "$3" "$BK_FERRY" "$FERRY_CMD"
  else rm -rf "$BK_MB"; timed "$2" "$3" "$BK_MB" "$MB_CMD"; fi
}

TOOLS=(ferry mariabackup)
[[ $SKIP_FERRY == 1 ]] && TOOLS=(mariabackup)

# --- 1+2: idle runs, cold cache ---------------------------------------------------------------
rm -rf "$BK_FERRY" "$BK_MB"
quiesce
DATA_BYTES=$(du -sb "$DATA" | cut -f1)
DD_BYTES=$(find "$DATA" -type f ! -name ib_logfile0 -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
FREE_BYTES=$(df -B1 --output=avail "$BENCH_DIR" | tail -n1)
((FREE_BYTES > DATA_BYTES * 3)) || log "warning: only $((FREE_BYTES >> 20)) MiB free in $BENCH_DIR (want 3x the datadir)"
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); $RUNS runs, --parallel $PARALLEL"

for ((r = 1; r <= RUNS; r++)); do
  quiesce
  timed dd "$r" "$DD_BYTES" "$DD_CMD"
  order=("${TOOLS[@]}")                                   # odd runs ferry first, even runs
  ((r % 2 == 0)) && order=($(printf '%s\n' "${TOOLS[@]}" | tac))   # mariadb-backup first
  for tool in "${order[@]}"; do
    if [[ $tool == ferry ]]; then rm -rf "$BK_FERRY"; else rm -rf "$BK_MB"; fi   # before quiesce:
    quiesce                                                                    # its IO settles
    run_tool "$tool" "$tool" "$r"
    timed "sync-$tool" "$r" 0 sync
  done
done
rm -rf "$BK_MB"   # the last ferry backup stays for the check

# --- 3: correctness of the last idle ferry backup (the source has been idle since) --------------
CHECK="not run (SKIP_CHECK=1)"
[[ $SKIP_FERRY == 1 ]] && CHECK="not run (SKIP_FERRY=1)"
if [[ $SKIP_FERRY != 1 && $SKIP_CHECK != 1 ]]; then
  tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
  log "restore check: CHECKSUM TABLE on the source"
  sql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-source.txt"
  rm -rf "$RESTORED"
  drop_caches
  timed ferry-prepare 1 0 "$(q "$FERRY") prepare --target-dir $(q "$BK_FERRY")"
  drop_caches
  timed ferry-restore 1 "$RESTORED" "$(q "$FERRY") restore --target-dir $(q "$BK_FERRY") --datadir $(q "$RESTORED")"
  start_server REST_PID "$RESTORED" "$RSOCK" "$RPIDF" "$BENCH_DIR/restored.err" --skip-networking
  mariadb --no-defaults -S "$RSOCK" -uroot -N -B -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-restored.txt"
  stop_pid "$REST_PID"; REST_PID=""
  rm -rf "$RESTORED"
  if cmp -s "$LOGS/checksum-source.txt" "$LOGS/checksum-restored.txt"; then CHECK="OK ($TABLES/$TABLES tables)"
  else CHECK="MISMATCH (see $LOGS/checksum-*.txt)"; fi
  log "restore check: $CHECK"
fi
rm -rf "$BK_FERRY"

# --- 4: each tool once under a sysbench write load ----------------------------------------------
# tps FROM TO: mean TPS of the per-second sysbench reports whose second (N-1, N] has its middle
# inside [FROM, TO] (seconds since sysbench started); "-" if there is none.
tps() {
  awk -v a="$1" -v b="$2" '
    /^\[ *[0-9]+s \]/ { t = $2 + 0 - 0.5
      for (i = 3; i < NF; i++) if ($i == "tps:") v = $(i + 1) + 0
      if (t >= a && t <= b) { s += v; n++ } }
    END { if (n) printf "%.1f", s / n; else printf "-" }' "$LOGS/sysbench-load.log"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

LOAD_LINES=""
if [[ $SKIP_LOAD != 1 ]]; then
  rm -rf "$BK_FERRY" "$BK_MB"
  quiesce
  log "load phase: sysbench oltp_write_only, $LOAD_THREADS threads; baseline ${LOAD_BASE_SECS} s"
  t0=$(now)
  sysbench oltp_write_only "${SB_OPTS[@]}" --threads="$LOAD_THREADS" --report-interval=1 \
    --time="$LOAD_MAX_SECS" run >"$LOGS/sysbench-load.log" 2>&1 &
  SB_PID=$!
  sleep "$LOAD_BASE_SECS"
  declare -A WIN_S WIN_E
  for tool in "${TOOLS[@]}"; do
    rm -rf "$BK_FERRY" "$BK_MB"
    drop_caches                        # cold, as in the idle runs (dirty pages can't be flushed now)
    WIN_S[$tool]=$(since "$t0")
    run_tool "$tool" "$tool-load" 1
    WIN_E[$tool]=$(since "$t0")
    sleep "$LOAD_GAP_SECS"
  done
  kill -0 "$SB_PID" 2>/dev/null || log "warning: sysbench ended before the load phase did (LOAD_MAX_SECS=$LOAD_MAX_SECS too small?)"
  kill -TERM "$SB_PID" 2>/dev/null || true
  wait "$SB_PID" 2>/dev/null || true
  SB_PID=""
  rm -rf "$BK_FERRY" "$BK_MB"
  # Baseline: the load-only seconds before the first backup, skipping a 5 s warm-up.
  warm=5; ((LOAD_BASE_SECS > 10)) || warm=1
  BASE_TPS=$(tps "$warm" "$LOAD_BASE_SECS")
  for tool in "${TOOLS[@]}"; do
    s=${WIN_S[$tool]} e=${WIN_E[$tool]}
    before=$(tps "$(awk -v s="$s" -v g="$LOAD_GAP_SECS" 'BEGIN { print s - g }')" "$s")
    during=$(tps "$s" "$e")
    after=$(tps "$e" "$(awk -v e="$e" -v g="$LOAD_GAP_SECS" 'BEGIN { print e + g }')")
    LOAD_LINES+="$tool $s $e $before $during $after;"
  done
fi

# --- report -----------------------------------------------------------------------------------
ver() { "$@" 2>&1 | awk 'NR == 1 { sub(/[ \t]+$/, ""); print }'; }
MACHINE="$(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), \
$(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r), \
$(df -T "$BENCH_DIR" | awk 'NR == 2 { print $1 " " $2 }') for $BENCH_DIR"
VERSIONS="$(ver "$MARIADBD" --version | sed 's/ for debian.*//;s/^.*Ver/mariadbd/'); \
$(ver mariadb-backup --version | sed 's/^.*based on/mariadb-backup of/;s/ (x86_64)//'); $(ver sysbench --version)"
[[ -n $FERRY ]] && VERSIONS+="; ferry $(ver "$FERRY" --version | awk '{ print $NF }')"

report() {
  awk -F'\t' -v date="$(date -u '+%F %H:%M UTC')" -v machine="$MACHINE" -v versions="$VERSIONS" \
      -v tables="$TABLES" -v rows="$TABLE_SIZE" -v databytes="$DATA_BYTES" -v ddbytes="$DD_BYTES" \
      -v runs="$RUNS" -v par="$PARALLEL" -v check="$CHECK" -v loadlines="$LOAD_LINES" \
      -v basetps="${BASE_TPS:-}" -v lthreads="$LOAD_THREADS" -v skipferry="$SKIP_FERRY" \
      -v ferryargs="$FERRY_ARGS" '
    { n = ++cnt[$1]; W[$1, n] = $3 + 0; U[$1, n] = $4 + 0; S[$1, n] = $5 + 0
      C[$1, n] = $4 + $5; R[$1, n] = $6 + 0; B[$1, n] = $7 + 0 }
    # median (mode "med"), minimum ("min") or maximum ("max") of array A over the runs of label
    function agg(A, label, mode,   k, i, j, t, v) {
      k = cnt[label]; if (!k) return ""
      for (i = 1; i <= k; i++) v[i] = A[label, i]
      for (i = 2; i <= k; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
      if (mode == "min") return v[1]; if (mode == "max") return v[k]
      return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
    function f(x, fmt) { return x == "" ? "–" : sprintf(fmt, x) }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "–" : sprintf("%.2f", a / b) }
    function met(r, lim) { return r == "–" ? "–" : (r + 0 <= lim ? "yes" : "**no**") }
    function row(name, label,   gb, cpu, wmed, b, sy) {
      gb = databytes / 1e9
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – | – |\n", name; return }
      wmed = agg(W, label, "med"); cpu = agg(C, label, "med"); b = agg(B, label, "med")
      sy = agg(W, "sync-" label, "med")
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %s |\n", name, cnt[label],
        wmed, agg(W, label, "min"), agg(U, label, "med"), agg(S, label, "med"), cpu / gb,
        agg(R, label, "max") / 1024, b / 1e6, b / 1e6 / wmed, f(sy, "%.2f") }
    END {
      gb = databytes / 1e9
      printf "## ferry backup vs mariadb-backup --backup, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (what dd reads)\n", tables, rows, databytes / 1e9, ddbytes / 1e9
      printf "- %d cold-cache runs each (page cache dropped, 0 dirty pages), alternating ferry / mariadb-backup, --parallel %d%s\n\n", runs, par, ferryargs == "" ? "" : ", ferry " ferryargs
      print "| what | n | wall s median | wall s min | user s | sys s | CPU s/GB datadir | max RSS MiB | MB read/copied | MB/s (median) | sync after s |"
      print "|---|---|---|---|---|---|---|---|---|---|---|"
      row("raw `dd iflag=direct` (all but ib_logfile0)", "dd")
      if (skipferry != 1) row("`ferry backup`", "ferry")
      row("`mariadb-backup --backup`", "mariabackup")
      if (skipferry != 1) {
        fw = agg(W, "ferry", "med"); mw = agg(W, "mariabackup", "med"); dw = agg(W, "dd", "med")
        fm = agg(W, "ferry", "min"); mm = agg(W, "mariabackup", "min"); dm = agg(W, "dd", "min")
        fc = agg(C, "ferry", "med"); mc = agg(C, "mariabackup", "med")
        fr = agg(R, "ferry", "max"); mr = agg(R, "mariabackup", "max")
        print "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|"
        r = ratio(fw, dw); printf "| ferry / raw dd, wall | %s | %s | ≤ 1.15 | %s |\n", r, ratio(fm, dm), met(r, 1.15)
        r = ratio(fw, mw); printf "| ferry / mariadb-backup, wall | %s | %s | ≤ 0.80 | %s |\n", r, ratio(fm, mm), met(r, 0.80)
        r = ratio(fc, mc); printf "| ferry / mariadb-backup, CPU s per GB | %s | – | ≤ 0.60 | %s |\n", r, met(r, 0.60)
        r = ratio(fr, mr); printf "| ferry / mariadb-backup, max RSS | %s | – | ferry < 256 MiB | %s |\n", r, fr == "" ? "–" : (fr / 1024 < 256 ? "yes" : "**no**")
        printf "| mariadb-backup / raw dd, wall | %s | %s | – | – |\n", ratio(mw, dw), ratio(mm, dm)
      }
      if (loadlines != "") {
        printf "\nUnder `sysbench oltp_write_only --threads=%d` (baseline: mean of per-second TPS before the first backup): **%s TPS**\n\n", lthreads, basetps
        print "| backup under load | wall s | CPU s | max RSS MiB | TPS before (gap) | TPS during | TPS after (gap) | TPS kept (during / baseline) |"
        print "|---|---|---|---|---|---|---|---|"
        nl = split(loadlines, L, ";")
        for (i = 1; i <= nl; i++) {
          if (split(L[i], x, " ") < 6) continue
          lab = x[1] "-load"
          kept = (x[5] == "-" || basetps == "-" || basetps == 0) ? "–" : sprintf("%.0f %%", 100 * x[5] / basetps)
          printf "| %s | %.2f | %.2f | %.0f | %s | %s | %s | **%s** |\n", x[1] == "ferry" ? "`ferry backup`" : "`mariadb-backup --backup`",
            W[lab, 1], C[lab, 1], R[lab, 1] / 1024, x[4], x[5], x[6], kept
          kp[x[1]] = kept
        }
        if (("ferry" in kp) && ("mariabackup" in kp) && kp["ferry"] != "–" && kp["mariabackup"] != "–")
          printf "\nTPS kept, ferry vs mariadb-backup: %s vs %s (target: ferry keeps more): %s\n", kp["ferry"], kp["mariabackup"], (kp["ferry"] + 0 > kp["mariabackup"] + 0) ? "yes" : "**no**"
      }
      printf "\nRestore check (ferry prepare + restore of the last idle ferry backup, CHECKSUM TABLE vs the source): **%s**\n", check
      if (cnt["ferry-prepare"]) printf "(ferry prepare %.2f s, ferry restore %.2f s wall / %.2f CPU s / %.0f MiB RSS)\n", W["ferry-prepare", 1], W["ferry-restore", 1], C["ferry-restore", 1], R["ferry-restore", 1] / 1024
    }' "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW"
