#!/usr/bin/env bash
# Benchmark: ferry backup against mariadb-backup --backup on the same sysbench dataset, in
# one run, alternating, cold cache, same --parallel; plus the raw O_DIRECT read limit and
# the write TPS a sysbench load keeps during each backup. Prints a table and ratios and
# writes them to $BENCH_DIR/results.md. Needs root (drop_caches), ~2x the dataset in disk.
#
#   bench/backup.sh                 # 14 tables x 1M rows (~4 GB), 3 runs each
#   SMALL=1 bench/backup.sh         # 4 x 100k rows, quick check of the script itself
#   Options (env): BENCH_DIR TABLES TABLE_SIZE RUNS PARALLEL LOAD_SECS SKIP_LOAD=1 KEEP_SERVER=1
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/var/tmp/ferry-bench}
if [ "${SMALL:-0}" = 1 ]; then TABLES=${TABLES:-4}; TABLE_SIZE=${TABLE_SIZE:-100000}; else TABLES=${TABLES:-14}; TABLE_SIZE=${TABLE_SIZE:-1000000}; fi
RUNS=${RUNS:-3}; PARALLEL=${PARALLEL:-2}; LOAD_SECS=${LOAD_SECS:-20}
DATA="$BENCH_DIR/data-${TABLES}x${TABLE_SIZE}"; SOCK="$BENCH_DIR/src.sock"; PIDF="$BENCH_DIR/src.pid"
OUT="$BENCH_DIR/out"; RAW="$OUT/raw.tsv"; M="mariadb --no-defaults -S $SOCK -uroot"
MARIADBD=$(command -v mariadbd || echo /usr/sbin/mariadbd)

need() { command -v "$1" >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need sysbench sysbench; need mariadb-backup mariadb-backup; need gawk gawk; need bc bc; [ -x /usr/bin/time ] || need /usr/bin/time time
mkdir -p "$BENCH_DIR" "$OUT"; : > "$RAW"
go build -o "$BENCH_DIR/ferry" ./cmd/ferry
FERRY="$BENCH_DIR/ferry"

stop_server() { local pid; pid=$(cat "$1" 2>/dev/null) || return 0; kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done; rm -f "$1"; }
cleanup() { [ -n "${SB_PID:-}" ] && kill "$SB_PID" 2>/dev/null; stop_server "$BENCH_DIR/restored.pid"
  [ "${KEEP_SERVER:-0}" = 1 ] || stop_server "$PIDF"; true; }
trap cleanup EXIT

start_server() {   # datadir sock pidfile port [extra...]
  local dir=$1 sock=$2 pidf=$3 port=$4; shift 4
  "$MARIADBD" --no-defaults --user=root --datadir="$dir" --socket="$sock" --pid-file="$pidf" --port="$port" \
    --bind-address=127.0.0.1 --log-error="$dir.err" --innodb-buffer-pool-size=1G --innodb-log-file-size=512M "$@" &
  for _ in $(seq 600); do mariadb --no-defaults -S "$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "bench: server on $dir did not start; see $dir.err" >&2; exit 1
}

# --- dataset -------------------------------------------------------------------------
if [ ! -f "$DATA/.loaded" ]; then
  stop_server "$PIDF"; rm -rf "$DATA"
  mariadb-install-db --no-defaults --user=root --datadir="$DATA" --auth-root-authentication-method=normal >/dev/null
  start_server "$DATA" "$SOCK" "$PIDF" 3310 --log-bin=binlog --server-id=1
  $M -e "CREATE DATABASE sbtest"
  echo "bench: loading sysbench ${TABLES}x${TABLE_SIZE} (minutes for the full size)..."
  sysbench oltp_read_write --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest \
    --tables="$TABLES" --table-size="$TABLE_SIZE" --threads=2 prepare >/dev/null
  touch "$DATA/.loaded"
elif ! $M -e 'SELECT 1' >/dev/null 2>&1; then
  start_server "$DATA" "$SOCK" "$PIDF" 3310 --log-bin=binlog --server-id=1
fi
DATA_BYTES=$(du -sb "$DATA" | cut -f1)
COPY_FILES=$(find "$DATA" -type f ! -name ib_logfile0 ! -name 'binlog.*' ! -name '*.err' | wc -l)

# --- helpers -------------------------------------------------------------------------
quiesce() {  # flush dirty pages, then drop the page cache (cold runs, as in the baseline)
  $M -e "SET GLOBAL innodb_max_dirty_pages_pct=0"
  for _ in $(seq 120); do
    [ "$($M -N -e "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'" | cut -f2)" = 0 ] && break; sleep 0.5
  done
  $M -e "SET GLOBAL innodb_max_dirty_pages_pct=90"
  sync; echo 3 > /proc/sys/vm/drop_caches
}
timed() {  # label bytes cmd...: one line "label wall user sys rss_kib bytes" in $RAW
  local label=$1 bytes=$2; shift 2
  /usr/bin/time -o "$OUT/t" -f '%e %U %S %M' bash -o pipefail -c "$*" >"$OUT/$label.log" 2>&1 || {
    echo "bench: $label failed:"; tail -5 "$OUT/$label.log"; exit 1; }
  [ "$bytes" = auto ] && bytes=$(du -sb "$BENCH_DIR/bk" | cut -f1)
  echo "$label $(cat "$OUT/t") $bytes" >> "$RAW"
}
FERRY_CMD="$FERRY backup --socket $SOCK --user root --parallel $PARALLEL --target-dir $BENCH_DIR/bk"
MB_CMD="mariadb-backup --no-defaults --backup --socket=$SOCK --user=root --datadir=$DATA --parallel=$PARALLEL --target-dir=$BENCH_DIR/bk"
DD_CMD="find $DATA -type f ! -name ib_logfile0 ! -name 'binlog.*' ! -name '*.err' -print0 | xargs -0 -I{} dd if={} of=/dev/null bs=1M iflag=direct status=none"

# --- idle runs -----------------------------------------------------------------------
for r in $(seq "$RUNS"); do
  quiesce; timed dd "$DATA_BYTES" "$DD_CMD"
  order="ferry mariabackup"; [ $((r % 2)) = 0 ] && order="mariabackup ferry"
  for tool in $order; do
    rm -rf "$BENCH_DIR/bk"; quiesce
    if [ "$tool" = ferry ]; then timed ferry auto "$FERRY_CMD"; else timed mariabackup auto "$MB_CMD"; fi
    timed "sync-$tool" 0 sync
  done
  echo "bench: run $r of $RUNS done"
done
cp -a "$OUT/ferry.log" "$OUT/ferry-last.log"

# --- under a write load --------------------------------------------------------------
tps_during() {  # sysbench log, start s, end s (relative to sysbench start): mean tps
  gawk -v a="$2" -v b="$3" '/^\[ *[0-9]+s \]/ { t=$2+0; if (t>a && t<=b) { s+=$7; n++ } } END { printf "%.1f", n ? s/n : 0 }' "$1"
}
LOAD=""
if [ "${SKIP_LOAD:-0}" != 1 ]; then
  rm -rf "$BENCH_DIR/bk"; quiesce
  sysbench oltp_write_only --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest \
    --tables="$TABLES" --table-size="$TABLE_SIZE" --threads=2 --report-interval=1 --time=$((LOAD_SECS * 3 + 600)) run > "$OUT/sysbench.log" 2>&1 &
  SB_PID=$!; t0=$(date +%s.%N); sleep "$LOAD_SECS"
  for tool in ferry mariabackup; do
    rm -rf "$BENCH_DIR/bk"; s=$(echo "$(date +%s.%N) - $t0" | bc)
    if [ "$tool" = ferry ]; then timed ferry-load auto "$FERRY_CMD"; else timed mariabackup-load auto "$MB_CMD"; fi
    e=$(echo "$(date +%s.%N) - $t0" | bc); eval "${tool}_s=$s ${tool}_e=$e"; sleep "$LOAD_SECS"
  done
  kill "$SB_PID"; wait "$SB_PID" 2>/dev/null || true; SB_PID=""
  base=$(tps_during "$OUT/sysbench.log" 2 "$LOAD_SECS")
  LOAD="$base $(tps_during "$OUT/sysbench.log" "$ferry_s" "$ferry_e") $(tps_during "$OUT/sysbench.log" "$mariabackup_s" "$mariabackup_e")"
fi

# --- correctness of the last idle ferry backup ---------------------------------------
rm -rf "$BENCH_DIR/bk" "$BENCH_DIR/restored"; $M -e "SET GLOBAL innodb_max_dirty_pages_pct=90"
$FERRY backup --socket "$SOCK" --user root --target-dir "$BENCH_DIR/bk" 2>/dev/null >/dev/null
tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
want=$($M -N -e "CHECKSUM TABLE $tables")
$FERRY restore --target-dir "$BENCH_DIR/bk" --datadir "$BENCH_DIR/restored" >/dev/null 2>&1
start_server "$BENCH_DIR/restored" "$BENCH_DIR/restored.sock" "$BENCH_DIR/restored.pid" 3311 --skip-networking
got=$(mariadb --no-defaults -S "$BENCH_DIR/restored.sock" -uroot -N -e "CHECKSUM TABLE $tables")
stop_server "$BENCH_DIR/restored.pid"; rm -rf "$BENCH_DIR/restored" "$BENCH_DIR/bk"
[ "$want" = "$got" ] && CHECK=OK || CHECK=MISMATCH

# --- report --------------------------------------------------------------------------
{
echo "## ferry backup vs mariadb-backup --backup ($(date -u +%F), $(nproc) cores, $(uname -r))"
echo
echo "Dataset: sysbench ${TABLES}x${TABLE_SIZE}, datadir $((DATA_BYTES / 1000000)) MB, $COPY_FILES files; --parallel $PARALLEL; cold cache; $RUNS runs each."
echo
echo "| what | n | wall s median (min) | user s | sys s | CPU s/GB | max RSS MiB | MB/s | sync after s |"
echo "|---|---|---|---|---|---|---|---|---|"
for tool in dd ferry mariabackup; do
  gawk -v t="$tool" -v gb="$(echo "$DATA_BYTES / 1000000000" | bc -l)" '
    $1==t { n++; w[n]=$2; u+=$3; s+=$4; if ($5>rss) rss=$5 }
    $1=="sync-"t { sy+=$2; ns++ }
    END { if (!n) exit; asort(w); med=w[int((n+1)/2)];
      printf "| %s | %d | %.2f (%.2f) | %.2f | %.2f | %.2f | %d | %.0f | %s |\n", t, n, med, w[1], u/n, s/n, (u+s)/n/gb, rss/1024, gb*1000/med, ns ? sprintf("%.2f", sy/ns) : "-" }' "$RAW"
done
gawk -v gb="$(echo "$DATA_BYTES / 1000000000" | bc -l)" '
  { n[$1]++; w[$1, n[$1]]=$2; c[$1]+=$3+$4; if ($5>r[$1]) r[$1]=$5 }
  function med(t,  i, a, k) { k=n[t]; for (i=1;i<=k;i++) a[i]=w[t,i]; asort(a); return a[int((k+1)/2)] }
  END {
    printf "\nRatios: ferry/mariadb-backup wall %.2f, CPU %.2f, peak RSS %.2f; ferry/dd wall %.2f; mariadb-backup/dd wall %.2f\n",
      med("ferry")/med("mariabackup"), c["ferry"]/n["ferry"]/(c["mariabackup"]/n["mariabackup"]), r["ferry"]/r["mariabackup"],
      med("ferry")/med("dd"), med("mariabackup")/med("dd") }' "$RAW"
if [ -n "$LOAD" ]; then
  set -- $LOAD
  echo
  echo "Under sysbench oltp_write_only (2 threads): baseline $1 tps; during ferry $2 tps ($(echo "scale=0; 100*$2/$1" | bc)% kept); during mariadb-backup $3 tps ($(echo "scale=0; 100*$3/$1" | bc)% kept)."
  gawk '$1=="ferry-load" || $1=="mariabackup-load" { printf "  %s: wall %.2f s, CPU %.2f s, RSS %d MiB\n", $1, $2, $3+$4, $5/1024 }' "$RAW"
fi
echo
echo "Restore check of a ferry backup (CHECKSUM TABLE of all sbtest tables against the idle source): $CHECK"
} | tee "$BENCH_DIR/results.md"
