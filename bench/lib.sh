# bench/lib.sh: shared by every script of bench/ (sourced, not run).
# shellcheck shell=bash
#
# Common settings (environment, defaults in brackets; each script documents its own extras):
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), outputs, logs
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [3]                          timed runs of each command
#   PARALLEL [2]                      --parallel for both tools
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   SKIP_FERRY=1 SKIP_CHECK=1         leave out ferry / the restore check
#   KEEP_SERVER=1                     leave the private server running at the end
# and, for the scripts that document them:
#   PREPARE_MEMORY [256M]             mariadb-backup --prepare --use-memory (and ferry restore's)
#   LOAD_THREADS [2]                  sysbench oltp_write_only threads of the write load
#   LOAD_WARMUP_SECS [5]              load seconds before the measured window (start_load)
#   FERRY_ARGS                        extra arguments for the script's ferry command
#   FERRY_ONLY=1                      leave out mariadb-backup
#
# Usage in a script (after `set -euo pipefail`):
#   source lib.sh; LOGS=...; CLEAN_PATHS=(...); CLEAN_RESTORED=(...)   # optional overrides
#   bench_init; need ...; build_ferry; load_dataset; ... timed ...; check_restored DIR
# The EXIT trap stops every server and background job this library started, by pid. Scripts under
# a write load use start_load / stop_load / tps; those that check a restored datadir themselves,
# start_restored, check_tables_rows, set_check and stop_restored.

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
TOOL_TIMEOUT=${TOOL_TIMEOUT:-1800}
SKIP_FERRY=${SKIP_FERRY:-0}
SKIP_CHECK=${SKIP_CHECK:-0}
KEEP_SERVER=${KEEP_SERVER:-0}
PREPARE_MEMORY=${PREPARE_MEMORY:-256M}
LOAD_THREADS=${LOAD_THREADS:-2}
LOAD_WARMUP_SECS=${LOAD_WARMUP_SECS:-5}
FERRY_ARGS=${FERRY_ARGS:-}
FERRY_ONLY=${FERRY_ONLY:-0}

DATA="$BENCH_DIR/data-${TABLES}x${TABLE_SIZE}"   # source datadir, one per dataset size
LOADED="$DATA.loaded"                             # marker: sysbench prepare finished
SOCK="$BENCH_DIR/src.sock"
PIDF="$BENCH_DIR/src.pid"
RSOCK="$BENCH_DIR/restored.sock"                  # server of the restore check
RPIDF="$BENCH_DIR/restored.pid"
LOGS="$BENCH_DIR/logs"                            # per-command logs of the last invocation
MARIADBD=/usr/sbin/mariadbd
SB_OPTS=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
         --tables="$TABLES" --table-size="$TABLE_SIZE")
CLEAN_PATHS=()                                    # removed on exit (scripts add theirs)
CLEAN_RESTORED=()                                 # datadirs ferry wrote: removed on exit by clean_restored

log() { echo "bench: $*" >&2; }
die() { echo "bench: FAILED: $*" >&2; exit 1; }
sql() { mariadb --no-defaults -S "$SOCK" -uroot -N -B "$@"; }
rsql() { mariadb --no-defaults -S "$RSOCK" -uroot -N -B "$@"; }   # the restored server (start_restored)
q() { printf '%q' "$1"; }
now() { date +%s.%N; }

# bench_init: checks, installs the tools every script needs, resets $LOGS (set LOGS before); sets
# RAW and SB_LOG (the log of the sysbench write load, start_load) below $LOGS.
bench_init() {
  [[ $EUID == 0 ]] || die "run as root (drop_caches, mariadbd --user=root)"
  [[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
  [[ $PARALLEL =~ ^[1-9][0-9]*$ ]] || die "PARALLEL must be a positive integer"
  need "$MARIADBD" mariadb-server
  need mariadb-install-db mariadb-server
  need mariadb mariadb-client
  need mariadb-backup mariadb-backup
  need sysbench sysbench
  need /usr/bin/time time
  need timeout coreutils
  need gawk gawk
  mkdir -p "$BENCH_DIR"
  RAW="$LOGS/raw.tsv"                             # one line per timed command
  SB_LOG="$LOGS/sysbench-load.log"                # the write load of the current run
  rm -rf "$LOGS"; mkdir -p "$LOGS"; : >"$RAW"
}

# --- tools (installed with apt-get only when missing) ---------------------------------------
apt_updated=0
need() {  # need COMMAND-OR-PATH DEBIAN-PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  if [[ $apt_updated == 0 ]]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  command -v "$1" >/dev/null 2>&1 || die "$1 still missing after apt-get install $2"
}

# --- ferry binary -----------------------------------------------------------------------------
# build_ferry: sets FERRY to $FERRY, a fresh build of ./cmd/ferry, or "" with SKIP_FERRY=1.
build_ferry() {
  local go
  if [[ $SKIP_FERRY == 1 ]]; then
    log "SKIP_FERRY=1: ferry is left out (no ferry rows, ratios or restore check)"
    FERRY=""
  elif [[ -n ${FERRY:-} ]]; then
    [[ -x $FERRY ]] || die "FERRY=$FERRY is not an executable"
  else
    go=$(command -v go || echo /usr/local/go/bin/go)
    [[ -x $go ]] || die "go not found (install Go, set FERRY=/path/to/ferry, or SKIP_FERRY=1)"
    FERRY="$BENCH_DIR/bin/ferry"
    log "building ferry: go build -o $FERRY ./cmd/ferry"
    (cd "$REPO" && "$go" build -o "$FERRY" ./cmd/ferry) >"$LOGS/go-build.log" 2>&1 || {
      tail -n 20 "$LOGS/go-build.log" >&2
      die "go build ./cmd/ferry failed (full log: $LOGS/go-build.log); rerun with SKIP_FERRY=1 to benchmark the rest"
    }
  fi
}

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
  local poll=${START_POLL:-0.5} n                 # START_POLL: seconds between probes (a script timing starts lowers it)
  n=$(gawk -v p="$poll" 'BEGIN { print int(600 / p) }')
  for ((i = 0; i < n; i++)); do               # up to 10 min (crash recovery of a big datadir)
    mariadb --no-defaults -S "$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 15 "$err" >&2; die "mariadbd on $dir exited; log: $err"; }
    sleep "$poll"
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
  ((${#CLEAN_PATHS[@]})) && rm -rf "${CLEAN_PATHS[@]}"
  ((${#CLEAN_RESTORED[@]})) && clean_restored "${CLEAN_RESTORED[@]}"
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
# load_dataset: stops a stale source server, creates the dataset unless DATADIR.loaded exists,
# starts the source server on it and drops the binlogs (RESET MASTER).
load_dataset() {
  stop_stale "$PIDF" "$DATA"
  [[ -f $DATA/.loaded ]] && mv "$DATA/.loaded" "$LOADED"   # marker of an older version of backup.sh
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
}

# data_sizes: sets DATA_BYTES (du -sb of the datadir) and DD_BYTES (what dd reads).
data_sizes() {
  DATA_BYTES=$(du -sb "$DATA" | cut -f1)
  DD_BYTES=$(find "$DATA" -type f ! -name ib_logfile0 -printf '%s\n' | gawk '{ s += $1 } END { print s + 0 }')
}
# check_free FACTOR: warns unless $BENCH_DIR has more than FACTOR x DATA_BYTES (data_sizes) free.
check_free() {
  local free
  free=$(df -B1 --output=avail "$BENCH_DIR" | tail -n1)
  ((free > DATA_BYTES * $1)) || log "warning: only $((free >> 20)) MiB free in $BENCH_DIR (want ${1}x the datadir)"
}

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

# The raw read limit: the files the tools read, with O_DIRECT as both tools read them.
DD_CMD="find $(q "$DATA") -type f ! -name ib_logfile0 -print0 | xargs -0 -I{} dd if={} of=/dev/null bs=1M iflag=direct status=none"

# timed LABEL RUN SIZE COMMAND: runs COMMAND (a bash string, with pipefail) under /usr/bin/time
# (and timeout), output to $LOGS/LABEL-RUN.log; appends "label run wall user sys maxrss_kib bytes
# loadavg1" to $RAW. SIZE is a directory (bytes = its du -sb afterwards), @FILE (bytes = the
# number FILE holds afterwards, e.g. from `| wc -c >FILE`) or a byte count.
# COMMAND may time its own steps with "$(step_time LABEL) CMD": each such line of $LOGS/steps.time
# is appended to $RAW too, as LABEL with bytes 0.
timed() {
  local label=$1 run=$2 size=$3 cmd=$4 out="$LOGS/$1-$2.log" la wall user sys rss bytes slabel
  la=$(cut -d' ' -f1 /proc/loadavg)
  : >"$LOGS/steps.time"
  if ! /usr/bin/time -o "$LOGS/time.out" -f '%e %U %S %M' \
       timeout -k 10 "$TOOL_TIMEOUT" bash -o pipefail -c "$cmd" >"$out" 2>&1; then
    tail -n 15 "$out" >&2
    die "$label (run $run) failed: $cmd   (log: $out)"
  fi
  read -r wall user sys rss < <(tail -n1 "$LOGS/time.out")
  # (a datadir a started server writes in, as a clone's, can lose a file while du walks it: du
  # then still prints the total, and exits 1)
  if [[ -d $size ]]; then bytes=$({ du -sb "$size" 2>/dev/null || true; } | cut -f1)
  elif [[ $size == @* ]]; then read -r bytes <"${size#@}" || bytes=0
  else bytes=$size; fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$run" "$wall" "$user" "$sys" "$rss" "$bytes" "$la" >>"$RAW"
  log "$(printf '%-20s run %s: wall %6.2f s  user %6.2f  sys %6.2f  rss %5d MiB  %s bytes' \
    "$label" "$run" "$wall" "$user" "$sys" $((rss / 1024)) "$bytes")"
  while read -r slabel wall user sys rss; do
    [[ -n $slabel ]] || continue
    printf '%s\t%s\t%s\t%s\t%s\t%s\t0\t%s\n' "$slabel" "$run" "$wall" "$user" "$sys" "$rss" "$la" >>"$RAW"
    log "$(printf '  %-18s run %s: wall %6.2f s  user %6.2f  sys %6.2f  rss %5d MiB' \
      "$slabel" "$run" "$wall" "$user" "$sys" $((rss / 1024)))"
  done <"$LOGS/steps.time"
}
# wall_of LABEL RUN: the wall time $RAW holds for that command.
wall_of() { gawk -F'\t' -v l="$1" -v r="$2" '$1 == l && $2 == r { w = $3 } END { print w }' "$RAW"; }
# secs GO-DURATION: seconds of a Go duration such as 1.475s, 850ms, 1m2.5s ("" stays "").
secs() {
  LC_ALL=C gawk -v d="$1" 'BEGIN { if (d == "") exit; t = 0
    while (match(d, /^[0-9.]+(h|ms|m|s|µs|us|ns)/)) {
      n = substr(d, 1, RLENGTH) + 0; u = substr(d, 1, RLENGTH); sub(/^[0-9.]+/, "", u); d = substr(d, RLENGTH + 1)
      t += n * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : u == "ms" ? 1e-3 : u == "ns" ? 1e-9 : 1e-6) }
    printf "%.3f", t }'
}
# cpu_of LABEL RUN: user + sys CPU seconds of that command ($RAW).
cpu_of() { gawk -F'\t' -v l="$1" -v r="$2" '$1 == l && $2 == r { c = $4 + $5 } END { if (c != "") printf "%.2f", c }' "$RAW"; }

# finding TEXT: records something ferry did wrong (a failure, a missing log line, a fallback) in
# FINDINGS; a script reports them and exits non-zero at its end instead of working around them.
FINDINGS=()
finding() { FINDINGS+=("$1"); log "FINDING: $1"; }

# timed_rc LABEL RUN SIZE COMMAND: `timed`, but a failing COMMAND does not end the script: RC is
# its exit status (0 if it succeeded); a failure is a finding, with its log's last line.
timed_rc() {
  local rcf="$LOGS/$1-$2.rc"
  rm -f "$rcf"
  timed "$1" "$2" "$3" "( $4 ) || { echo \$? >$(q "$rcf"); exit 0; }"
  RC=0
  [[ -f $rcf ]] && read -r RC <"$rcf"
  ((RC == 0)) || finding "$1 (run $2) exited $RC: $(grep -v '^[[:space:]]*$' "$LOGS/$1-$2.log" | tail -n1) (log: $LOGS/$1-$2.log)"
}
# step_time LABEL: a /usr/bin/time prefix for one step inside a timed COMMAND (see timed).
step_time() { printf "/usr/bin/time -a -o %s -f '%s %%e %%U %%S %%M'" "$(q "$LOGS/steps.time")" "$1"; }

# stock_restore_cmd UNPACK: the stock restore as one command line: UNPACK (a pipeline that
# unpacks into $M_UNPACK, timed as step mb-unpack or mb-download), then mariadb-backup
# --prepare and --copy-back into $M_REST, each step also timed on its own.
stock_restore_cmd() {  # stock_restore_cmd STEP-LABEL UNPACK-PIPELINE
  printf '%s' "$(step_time "$1") bash -o pipefail -c $(q "$2") \
&& $(step_time mb-prepare) mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_UNPACK") \
&& $(step_time mb-copyback) mariadb-backup --no-defaults --copy-back --parallel=$PARALLEL --target-dir=$(q "$M_UNPACK") --datadir=$(q "$M_REST")"
}

# order RUN: the tools of $TOOLS, reversed on even runs (alternating who goes first).
order() { if (($1 % 2)); then printf '%s\n' "${TOOLS[@]}"; else printf '%s\n' "${TOOLS[@]}" | tac; fi; }

# restore_runs TIMER: RUNS restores per tool of $TOOLS (ferry, mb), alternating, each with a
# cold cache and its target removed first, followed by a separately timed sync; the command
# of tool T is CMD[T-restore] (an associative array of the caller), run with TIMER (timed or
# a wrapper of it). ferry's last restore is kept for the check.
restore_runs() {
  local timer=$1 r tool size
  for ((r = 1; r <= RUNS; r++)); do
    for tool in $(order "$r"); do
      if [[ $tool == ferry ]]; then rm -rf "$F_REST"; size=$F_REST
      else rm -rf "$M_UNPACK" "$M_REST"; mkdir -p "$M_UNPACK"; size=$M_REST; fi
      drop_caches
      "$timer" "$tool-restore" "$r" "$size" "${CMD[$tool-restore]}"
      timed "sync-$tool-restore" "$r" 0 sync
    done
  done
  rm -rf "$M_UNPACK" "$M_REST"
}

# check_restored DATADIR: starts a server (socket only) on a restored DATADIR and compares
# CHECKSUM TABLE of every sbtest table with the source's; sets CHECK to OK or MISMATCH.
check_restored() {
  local tables
  tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
  log "restore check: CHECKSUM TABLE on the source and on $1"
  sql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-source.txt"
  start_restored "$1"
  rsql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-restored.txt"
  stop_restored
  if cmp -s "$LOGS/checksum-source.txt" "$LOGS/checksum-restored.txt"; then CHECK="OK ($TABLES/$TABLES tables)"
  else CHECK="MISMATCH (see $LOGS/checksum-*.txt)"; fi
  log "restore check: $CHECK"
}

# start_restored DATADIR: starts a server (socket only: $RSOCK, rsql) on a restored DATADIR, after
# stopping one an interrupted invocation left on it; stop_restored stops it.
start_restored() {
  stop_stale "$RPIDF" "$1"
  start_server REST_PID "$1" "$RSOCK" "$RPIDF" "$BENCH_DIR/restored.err" --skip-networking
}
stop_restored() { stop_pid "$REST_PID"; REST_PID=""; }

# clean_restored DATADIR...: removes each datadir ferry restore (or clone) wrote and what a failed
# run leaves beside it (.NAME.ferry-*).
clean_restored() {
  local d
  for d in "$@"; do rm -rf "$d" "$(dirname "$d")/.$(basename "$d").ferry-"*; done
}

# count_rows CLIENT...: "sbtestN<TAB>rows" for every table, through the given client command.
count_rows() {
  "$@" -e "$(gawk -v n="$TABLES" 'BEGIN { for (i = 1; i <= n; i++)
    printf "%sSELECT \"sbtest%d\", COUNT(*) FROM sbtest.sbtest%d", (i > 1) ? " UNION ALL " : "", i, i }')"
}

# check_tables_rows: on the server of start_restored, mariadb-check --all-databases (CHECK TABLE;
# the caller needs mariadb-check) and the rows per sbtest table (count_rows), which must equal
# $LOGS/counts-source.txt (count_rows sql before the load); adds each problem to the caller's
# array `fails` (set_check reports them).
check_tables_rows() {
  if ! mariadb-check --no-defaults -S "$RSOCK" -uroot --all-databases >"$LOGS/check-tables.txt" 2>&1; then
    fails+=("mariadb-check failed")
  elif grep -Eiq 'error|corrupt|warning' "$LOGS/check-tables.txt"; then
    fails+=("CHECK TABLE reported problems")
  fi
  count_rows rsql >"$LOGS/check-counts-restored.txt" || fails+=("COUNT(*) failed")
  cmp -s "$LOGS/counts-source.txt" "$LOGS/check-counts-restored.txt" || fails+=("row counts differ")
}

# set_check OK-TEXT: sets CHECK to "OK (OK-TEXT)", or to "FAILED: ..." with the problems in the
# caller's array `fails`, and logs it.
set_check() {
  if ((${#fails[@]})); then
    CHECK="FAILED: $(printf '%s; ' "${fails[@]}" | sed 's/; $//') (logs: $LOGS/check-*)"
  else
    CHECK="OK ($1)"
  fi
  log "check: $CHECK"
}

# --- report helpers ---------------------------------------------------------------------------
ver() { "$@" 2>&1 | gawk 'NR == 1 { sub(/[ \t]+$/, ""); print }'; }

# describe_env: sets MACHINE and VERSIONS (mariadbd, mariadb-backup, sysbench, ferry).
describe_env() {
  MACHINE="$(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), \
$(gawk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r), \
$(df -T "$BENCH_DIR" | gawk 'NR == 2 { print $1 " " $2 }') for $BENCH_DIR"
  VERSIONS="$(ver "$MARIADBD" --version | sed 's/ for debian.*//;s/^.*Ver/mariadbd/'); \
$(ver mariadb-backup --version | sed 's/^.*based on/mariadb-backup of/;s/ (x86_64)//'); $(ver sysbench --version)"
  if [[ -n ${FERRY:-} ]]; then VERSIONS+="; ferry $(ver "$FERRY" --version | gawk '{ print $NF }')"; fi
}

# report_gawk ARGS...: gawk -F'\t' with the variables every report prints (date; machine and
# versions: describe_env; tables, rows; databytes and ddbytes: data_sizes; runs, par), then ARGS:
# more -v assignments (a later one wins), the program and its files.
report_gawk() {
  gawk -F'\t' -v date="$(date -u '+%F %H:%M UTC')" -v machine="$MACHINE" -v versions="$VERSIONS" \
    -v tables="$TABLES" -v rows="$TABLE_SIZE" -v databytes="$DATA_BYTES" -v ddbytes="$DD_BYTES" \
    -v runs="$RUNS" -v par="$PARALLEL" "$@"
}

# AWK_FUNCS: awk functions for a report's program (prepend it): f(x, fmt), x formatted or "–" if
# it is ""; median(v, m), the median of v[1..m] (m >= 1), which it sorts in place.
AWK_FUNCS='
    function f(x, fmt) { return x == "" ? "–" : sprintf(fmt, x) }
    function median(v, m,   i, j, t) {
      for (i = 2; i <= m; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
      return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }
'

# AWK_LIB: prepended to a report's awk program run on $RAW (-F'\t'). Reads every row into
# W (wall), U (user), S (sys), C (user+sys), R (max RSS KiB), B (bytes), indexed [label, n], and
# cnt[label]; defines agg(A, label, "med"|"min"|"max"), ratio(a, b), met(r, limit) and those of
# AWK_FUNCS.
AWK_LIB="$AWK_FUNCS"'
    { n = ++cnt[$1]; W[$1, n] = $3 + 0; U[$1, n] = $4 + 0; S[$1, n] = $5 + 0
      C[$1, n] = $4 + $5; R[$1, n] = $6 + 0; B[$1, n] = $7 + 0 }
    # median (mode "med"), minimum ("min") or maximum ("max") of array A over the runs of label
    function agg(A, label, mode,   k, i, m, v) {
      k = cnt[label]; if (!k) return ""
      for (i = 1; i <= k; i++) v[i] = A[label, i]
      m = median(v, k)
      if (mode == "min") return v[1]; if (mode == "max") return v[k]
      return m }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "–" : sprintf("%.2f", a / b) }
    function met(r, lim) { return r == "–" ? "–" : (r + 0 <= lim ? "yes" : "**no**") }
'

# res_row FIELDS...: appends the FIELDS as one tab-separated line to $RES (the script's results).
res_row() { local IFS=$'\t'; printf '%s\n' "$*" >>"$RES"; }

# logval LOG MSG KEY: the value of KEY on the last line of ferry's LOG whose msg is MSG ("" if none).
logval() {
  gawk -v m="msg=\"$2\"" -v k="$3" 'index($0, m) { v = ""
      if (match($0, " " k "=[^ ]*")) v = substr($0, RSTART + length(k) + 2, RLENGTH - length(k) - 2) }
    END { gsub(/"/, "", v); print v }' "$1"
}

# --- write load (prepare.sh, clone.sh, slowsink.sh) -------------------------------------------
# start_load LEAD WHAT: starts sysbench oltp_write_only (LOAD_THREADS threads, unthrottled,
# per-second reports to $SB_LOG) on the source's socket until stop_load, with SB_T0 its start
# (epoch seconds); returns LEAD seconds later, dying if it ended meanwhile ("... before WHAT").
start_load() {
  SB_T0=$(now)
  sysbench oltp_write_only "${SB_OPTS[@]}" --threads="$LOAD_THREADS" --rate=0 --report-interval=1 \
    --time=$((TOOL_TIMEOUT + $1 + 3600)) run >"$SB_LOG" 2>&1 &
  SB_PID=$!
  sleep "$1"
  kill -0 "$SB_PID" 2>/dev/null || { tail -n 15 "$SB_LOG" >&2; die "sysbench ended before $2 (log: $SB_LOG)"; }
}

# stop_load [COPY]: stops the sysbench load a script started (SB_PID, logging to SB_LOG), waits
# until its connections are gone from the server on $SOCK, and copies $SB_LOG to COPY if given.
stop_load() {
  local i
  kill -0 "$SB_PID" 2>/dev/null || { tail -n 15 "$SB_LOG" >&2; die "sysbench ended before it was stopped (log: $SB_LOG)"; }
  kill -TERM "$SB_PID" 2>/dev/null || true
  wait "$SB_PID" 2>/dev/null || true
  SB_PID=""
  for ((i = 0; i < 300; i++)); do
    [[ $(sql -e "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = 'sbtest' AND ID <> CONNECTION_ID()") == 0 ]] && break
    sleep 0.1
  done
  ((i < 300)) || log "warning: sysbench connections still on the server 30 s after it was stopped"
  if [[ -n ${1:-} ]]; then cp "$SB_LOG" "$1"; fi
}

# tps FROM TO [T0 [FMT [NONE]]]: mean TPS of the per-second reports in $SB_LOG whose second
# (N-1, N] has its middle inside [FROM, TO] (TO "": no end). Times are epoch seconds with
# sysbench started at T0 [$SB_T0, see start_load]; with T0 0, seconds since sysbench started.
# Printed with FMT [%.1f]; NONE [""] if there is no such report.
tps() {
  gawk -v a="$1" -v b="$2" -v t0="${3:-$SB_T0}" -v fmt="${4:-%.1f}" -v none="${5:-}" '
    /^\[ *[0-9]+s \]/ { t = t0 + $2 - 0.5
      for (i = 3; i < NF; i++) if ($i == "tps:") v = $(i + 1) + 0
      if (t >= a && (b == "" || t <= b)) { s += v; n++ } }
    END { if (n) printf fmt, s / n; else printf "%s", none }' "$SB_LOG"
}

# --- MySQL 8.0.30+ servers and the MySQL set (mysql.sh, clone.sh FAMILY=mysql) ---------------
# MYSQL_BASE [/opt/mysql-8.0]: a MySQL installation (bin/mysqld, share/). No MySQL client is
# needed: the mariadb client (sql, rsql) and sysbench's mysql driver reach it over the socket as
# root with an empty password (caching_sha2_password works over a socket). Only the functions
# below use these settings: the MariaDB helpers above are unchanged.
MYSQL_BASE=${MYSQL_BASE:-/opt/mysql-8.0}
MYSQLD="$MYSQL_BASE/bin/mysqld"
# MYSQL_FLUSH [O_DIRECT]: innodb_flush_method of the MySQL source (MariaDB 10.11's default, so that
# the page cache a bench drops before each run under load is the tool's, not the server's; "fsync"
# is MySQL 8.0's default).
MYSQL_FLUSH=${MYSQL_FLUSH:-O_DIRECT}
MY_DATA="$BENCH_DIR/mysql80-data-${TABLES}x${TABLE_SIZE}"   # MySQL datadir, one per size (kept)
MY_LOADED="$MY_DATA.loaded"                                 # marker: sysbench prepare finished
MY_SOCK="$BENCH_DIR/mysql.sock"
MY_PIDF="$BENCH_DIR/mysql.pid"
MY_ERR="$BENCH_DIR/mysql.err"
# What ferry reads of a MySQL datadir (find tests, run inside it): everything but the redo files
# (ferry copies the redo from the checkpoint on, not the files), the temporary tablespaces and the
# doublewrite files.
MY_FIND="! -path './#innodb_redo/*' ! -path './#innodb_temp/*' ! -name ibtmp1 ! -name '*.dblwr'"

# wait_answer PID SOCKET ERRLOG WHAT: waits (START_POLL, up to 10 min) until the server of PID
# answers SELECT 1 on SOCKET; dies if it exits first or never answers.
wait_answer() {
  local pid=$1 sock=$2 err=$3 what=$4 poll=${START_POLL:-0.5} n i
  n=$(gawk -v p="$poll" 'BEGIN { print int(600 / p) }')
  for ((i = 0; i < n; i++)); do
    mariadb --no-defaults -S "$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 15 "$err" >&2; die "$what exited; log: $err"; }
    sleep "$poll"
  done
  die "$what did not answer within 10 min; log: $err"
}

# mysql_init DATADIR LOG: a new MySQL datadir (mysqld --initialize-insecure: root@localhost
# without a password).
mysql_init() {
  "$MYSQLD" --no-defaults --initialize-insecure --basedir="$MYSQL_BASE" --datadir="$1" \
    --lc-messages-dir="$MYSQL_BASE/share" --user=root >"$2" 2>&1 ||
    { tail -n 15 "$2" >&2; die "mysqld --initialize-insecure failed (log: $2)"; }
}

# start_mysql VAR DATADIR SOCKET PIDFILE ERRLOG EXTRA-ARGS...: start_server for MySQL: mysqld
# --no-defaults with a 1 GiB buffer pool, 512 MiB of redo (innodb_redo_log_capacity) and no X
# plugin, in the background; waits until it answers and stores its pid in the variable VAR (stop
# it with stop_pid; stop_stale finds one an interrupted run left).
start_mysql() {
  local var=$1 dir=$2 sock=$3 pidf=$4 err=$5 pid; shift 5
  "$MYSQLD" --no-defaults --basedir="$MYSQL_BASE" --lc-messages-dir="$MYSQL_BASE/share" --user=root \
    --datadir="$dir" --socket="$sock" --pid-file="$pidf" --log-error="$err" --mysqlx=OFF \
    --innodb-buffer-pool-size=1G --innodb-redo-log-capacity=512M "$@" </dev/null >/dev/null 2>&1 &
  pid=$!
  printf -v "$var" %s "$pid"
  wait_answer "$pid" "$sock" "$err" "mysqld on $dir"
}

# use_mysql: from here on SOCK, PIDF and SB_OPTS (sql, quiesce, start_load, ...) are the MySQL
# source's.
use_mysql() {
  SOCK=$MY_SOCK
  PIDF=$MY_PIDF
  SB_OPTS=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
           --tables="$TABLES" --table-size="$TABLE_SIZE")
}

# load_mysql_dataset OPTIONS...: (after use_mysql) stops a stale server on MY_DATA, creates the
# sysbench set in it unless MY_LOADED exists, starts mysqld on it with OPTIONS (start_mysql,
# SRC_PID), drops the binlog (RESET MASTER) and waits until the buffer pool dump of the last
# shutdown is read back (or the first cold-cache runs would share the disk with it); sets
# MY_VERSION. mysqld is $MYSQLD: a caller may shadow it (a local MYSQLD) to start it elsewhere.
load_mysql_dataset() {
  local i
  stop_stale "$PIDF" "$MY_DATA"
  if [[ ! -f $MY_LOADED ]]; then
    log "creating the MySQL set: sysbench ${TABLES} x ${TABLE_SIZE} rows (about 5 min for 14 x 1M)"
    rm -rf "$MY_DATA"
    mysql_init "$MY_DATA" "$LOGS/mysql-init.log"
    # Loaded without a binlog and with lazy redo flushes (faster; RESET MASTER would drop the
    # binlog anyway); measured with the caller's OPTIONS.
    start_mysql SRC_PID "$MY_DATA" "$SOCK" "$PIDF" "$MY_ERR" --skip-networking --disable-log-bin \
      --gtid-mode=ON --enforce-gtid-consistency=ON --innodb-flush-log-at-trx-commit=2
    sql -e "CREATE DATABASE sbtest"
    /usr/bin/time -o "$LOGS/prepare.time" -f '%e' \
      sysbench oltp_read_write "${SB_OPTS[@]}" --threads=2 prepare >"$LOGS/sysbench-prepare.log" 2>&1 ||
      { tail -n 15 "$LOGS/sysbench-prepare.log" >&2; die "sysbench prepare failed"; }
    log "MySQL set loaded in $(tail -n1 "$LOGS/prepare.time") s"
    stop_pid "$SRC_PID"; SRC_PID=""
    touch "$MY_LOADED"
  else
    log "reusing the MySQL set in $MY_DATA"
  fi
  start_mysql SRC_PID "$MY_DATA" "$SOCK" "$PIDF" "$MY_ERR" "$@"
  sql -e "RESET MASTER"                           # the binlog ferry copies starts empty
  for ((i = 0; i < 240; i++)); do
    [[ $(sql -e "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_load_status'" | cut -f2) =~ completed|not\ started ]] && break
    sleep 0.5
  done
  MY_VERSION=$(sql -e "SELECT CONCAT(VERSION(), ' ', @@version_comment)")
}

# mysql_sizes: sets MY_DATA_BYTES (du -sb of MY_DATA) and MY_DD_BYTES (the files ferry reads: MY_FIND).
mysql_sizes() {
  MY_DATA_BYTES=$(du -sb "$MY_DATA" | cut -f1)
  MY_DD_BYTES=$(cd "$MY_DATA" && eval "find . -type f $MY_FIND -printf '%s\n'" | gawk '{ s += $1 } END { print s + 0 }')
}
