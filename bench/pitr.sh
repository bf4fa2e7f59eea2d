#!/usr/bin/env bash
# bench/pitr.sh: point-in-time recovery from ferry's binlog archive: how far the archive trails
# the server under a write load (RPO) and what archiving costs, and how fast `ferry restore
# --to-gtid` applies the archived binlog against the stock replay `mariadb-binlog | mariadb`, on
# the same sysbench dataset, in one invocation.
#
# Same private server and dataset code as bench/backup.sh (shared code: bench/lib.sh): 1 GiB
# buffer pool, 512 MiB redo, `--log-bin=binlog --server-id=1`, plus `--binlog-format=ROW`
# (sync_binlog left at its default, 0). The dataset defaults to 4 tables x 100k rows here
# (lib.sh's SMALL size): the default run takes about 8 min on 2 cores (building the dataset the
# first time takes seconds at this size). A probe table pitr.probe (in a database of its own, dropped at the end)
# is created first. In order:
#   1. baseline load, no archiver: after quiesce (lib.sh: no dirty pages, page cache dropped),
#      `sysbench oltp_write_only --threads=THREADS --rate=0 --report-interval=1` (lib.sh
#      start_load) for DURATION s, with the probe loop (below) running beside it. TPS = mean of
#      sysbench's per-second TPS after the first LOAD_WARMUP_SECS s.
#   1b. reference (SKIP_REF=1 leaves it out): RESET MASTER, then the same load while the stock
#      streaming client `mariadb-binlog --read-from-remote-server --raw --stop-never` copies the
#      binlog into a directory: what any replication client costs the server (its binlog dump
#      thread), apart from ferry. Its CPU (/proc/PID/stat) and VmHWM are recorded too.
#      For every load: TPS, the transactions committed (@@gtid_binlog_pos before and after) and
#      the source mariadbd's CPU (/proc/PID/stat), per 1000 transactions.
#   2. RESET MASTER (the archive starts with an empty binlog, no catch-up), `TRUNCATE pitr.probe`
#      (the backup's GTID position is then not empty), mkdir REPO (a plain directory repository),
#      then in the background `ferry binlog-archive --repo REPO --socket S --user root --log-format
#      json --log-level debug [--flush-interval FLUSH_INTERVAL]`, stderr to logs-pitr/archive.log
#      (one JSON line per stored segment: time, file, start, end, last_gtid, waited_ms; one per
#      merge: time, file, start, end, segments).
#   3. with the archiver running and the server idle: `ferry backup --repo REPO --socket S --user
#      root --parallel P` (timed); its id from stdout; its binlog file and position and its
#      gtid_binlog_pos from REPO/backups/ID/manifest.json (coordinates.*).
#   4. the same load as 1 (after quiesce), for DURATION s, with the same probe loop: one mariadb
#      client session (a coprocess, `mariadb -N -B -n`) commits every PROBE_MS ms (200) `BEGIN;
#      INSERT INTO pitr.probe ...; COMMIT; SELECT @@last_gtid`; when the answer is read the loop
#      records bash's $EPOCHREALTIME (the client-side time right after COMMIT returned, as
#      date +%s.%N without a fork) and the GTID. Afterwards, per probe with GTID D-S-N: lag =
#      time of the first "binlog-archive: stored" log line (JSON time field: after that segment's
#      store completed) whose last_gtid is in domain D with seq >= N, minus the commit time.
#      Reported: probes, median, p99 (nearest rank) and max lag in ms; probes no stored line covers
#      (should be 0). A segment is stored every flush interval, wherever the stream is, so it may
#      end inside a transaction: the one its last_gtid names is then not yet whole in the archive.
#      So the lag is also given by a strict rule: to the first stored line whose segment ends at or
#      after the probe's commit (Xid) event, its position from `mariadb-binlog` of the source's
#      binlog files after the load; and the number of segments that end inside a transaction.
#      Also the segments stored during the load, their median and max waited_ms, the raw binlog
#      bytes stored (sum of end - start) and the bytes in REPO/binlogs (zstd); the merges (the
#      archiver stores the small segments again as one every --merge-size bytes or --merge-every,
#      in its receive loop): their count and the longest gap from the "stored" line before a
#      merge to its "merged" line (how long it held up the stream; the probes' lag includes it).
#      Archiver cost: utime + stime from /proc/PID/stat (CPU s during the load window, as % of one
#      core, and over its whole life), VmHWM from /proc/PID/status (max RSS) sampled just before
#      it is stopped. sysbench TPS with the archiver vs the baseline (steps 1 and 7) and vs 1b.
#   5. the load stops; FINAL = @@gtid_binlog_pos (one GTID: a single domain), SHOW MASTER STATUS
#      (the last file and its end); the script waits until the archive log has stored FINAL, then
#      SIGTERMs the archiver (it stores what it received, exits 0). CHECKSUM TABLE of every sbtest
#      table on the (idle) source is saved.
#   6. apply, RUNS times each, alternating (odd runs in this order, even runs reversed), cold page
#      cache, each target removed first:
#      (a) `ferry restore --repo REPO --to-gtid FINAL --datadir X --use-memory PREPARE_MEMORY
#          [--replay-threads REPLAY_THREADS]` (timed as a whole: download, prepare, apply). The
#          apply time is the `took=` of its "point-in-time: applied" log line: from the start of
#          its private server on the prepared copy (innodb_flush_log_at_trx_commit=0, buffer pool
#          PREPARE_MEMORY, no binlog, slave_parallel_threads REPLAY_THREADS or 2 x cores,
#          optimistic) through the applier reaching FINAL to its clean shutdown; transactions from
#          its "point-in-time: applying the archived binlog ..." line. ferry tx/s = transactions /
#          took.
#      (b) `ferry restore --repo REPO ID --datadir Y --use-memory PREPARE_MEMORY` (the same backup,
#          no replay; timed), a server on Y (socket only) with the settings of ferry's replay
#          server: --innodb-buffer-pool-size=PREPARE_MEMORY --innodb-flush-log-at-trx-commit=0
#          --skip-log-bin, the redo log size of the restored ib_logfile0 (start timed), then, timed:
#          `mariadb-binlog --start-position=<backup pos> <the source's binlog files from the
#          backup's file on> --stop-position=<end of the last file at FINAL> | mariadb`, i.e.
#          exactly the transactions after the backup up to FINAL, applied by one session; then its
#          clean shutdown (timed). mariadb-binlog tx/s = (FINAL's seq - the backup's seq) / the
#          pipeline's wall time (and, like ferry's took, / start + pipeline + shutdown).
#      Check of the last run of each: a server (socket only) on X and on Y; CHECKSUM TABLE of every
#      sbtest table must equal the source's (step 5), so X and Y equal each other too; a mismatch
#      makes the script exit non-zero after the report. transactions= of ferry's log must equal
#      the GTID count.
#   7. (BASE_AFTER=0 leaves it out) the baseline load of step 1 again, after quiesce: the TPS
#      baseline of the ratios is the mean of 1 and 7 (this VM's TPS drifts by 10 % and more
#      between loads of the same kind; every load's per-second TPS stddev is reported too).
# Ratios: sysbench TPS with / without the archiver (and / with the reference client); ferry apply
# tx/s / mariadb-binlog tx/s (the target: >= 3); RPO p99 < 1000 ms is the "sub-second RPO"
# reference (a replication client streaming the binlog, against wal-g pushing whole binlogs).
# Prints a markdown report and writes it to $BENCH_DIR/pitr-results.md. Needs root. Disk, besides
# the dataset: the repository (one backup, the archive) and two restored datadirs.
#
#   bench/pitr.sh                                    # 4 x 100k rows, 4 loads of 60 s, 1 run (~8 min)
#   DURATION=15 TABLES=2 TABLE_SIZE=10000 bench/pitr.sh   # checks the script in ~2 min
#   TABLES=14 TABLE_SIZE=1000000 DURATION=120 bench/pitr.sh   # the other scripts' dataset
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), repository, logs-pitr/
#   TABLES [4] TABLE_SIZE [100000]    sysbench dataset; each size gets its own datadir
#   DURATION [60]                     seconds of each load (baseline, reference, archiver, baseline)
#   THREADS [2]                       sysbench oltp_write_only threads of every load
#   LOAD_WARMUP_SECS [5]              first seconds of each load left out of its TPS
#   PROBE_MS [200]                    interval of the probe commits
#   FLUSH_INTERVAL                    ferry binlog-archive --flush-interval (default: ferry's, 500ms)
#   ARCHIVE_ARGS                      extra arguments for `ferry binlog-archive`
#   REPLAY_THREADS                    ferry restore --replay-threads (default: ferry's, 2 x cores)
#   PREPARE_MEMORY [256M]             ferry restore --use-memory, and the baseline server's buffer pool
#   RUNS [1]                          apply runs of each side
#   PARALLEL [2]                      ferry backup --parallel
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a load
#   TOOL_TIMEOUT [1800]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry backup`
#   SKIP_REF=1                        leave out the reference load with mariadb-binlog --stop-never (1b)
#   BASE_AFTER=0                      leave out the second baseline load (7)
#   SKIP_CHECK=1                      leave out the CHECKSUM TABLE checks of X and Y
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
RUNS=${RUNS:-1}                                   # lib.sh's default is 3
TABLES=${TABLES:-4}                               # lib.sh's SMALL size by default
TABLE_SIZE=${TABLE_SIZE:-100000}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DURATION=${DURATION:-60}
THREADS=${THREADS:-2}
LOAD_THREADS=$THREADS                             # lib.sh start_load's
PROBE_MS=${PROBE_MS:-200}
FLUSH_INTERVAL=${FLUSH_INTERVAL:-}
ARCHIVE_ARGS=${ARCHIVE_ARGS:-}
REPLAY_THREADS=${REPLAY_THREADS:-}

LOGS="$BENCH_DIR/logs-pitr"                       # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/pitr-results.md"
PREPO="$BENCH_DIR/pitr-repo"                      # the repository: backup and binlog archive
IDF="$BENCH_DIR/pitr-backup-id.out"               # stdout of ferry backup --repo: the backup id
X_REST="$BENCH_DIR/pitr-restored-ferry"           # ferry restore --to-gtid --datadir
Y_REST="$BENCH_DIR/pitr-restored-mb"              # ferry restore ID --datadir, then mariadb-binlog | mariadb
REFDIR="$BENCH_DIR/pitr-ref-stream"               # mariadb-binlog --raw --stop-never's copy (1b)
SKIP_REF=${SKIP_REF:-0}
BASE_AFTER=${BASE_AFTER:-1}
CLEAN_PATHS=("$PREPO" "$IDF" "$REFDIR")
CLEAN_RESTORED=("$X_REST" "$Y_REST")

[[ $SKIP_FERRY == 1 || $FERRY_ONLY == 1 ]] && die "this script measures ferry's binlog archive: SKIP_FERRY=1 / FERRY_ONLY=1 are not supported"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive number of seconds"
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS must be a positive integer"
[[ $LOAD_WARMUP_SECS =~ ^[0-9]+$ ]] || die "LOAD_WARMUP_SECS must be a whole number of seconds"
((LOAD_WARMUP_SECS < DURATION)) || die "LOAD_WARMUP_SECS ($LOAD_WARMUP_SECS) must be below DURATION ($DURATION)"
[[ $PROBE_MS =~ ^[1-9][0-9]*$ ]] || die "PROBE_MS must be a positive number of milliseconds"
[[ -z $REPLAY_THREADS || $REPLAY_THREADS =~ ^[1-9][0-9]*$ ]] || die "REPLAY_THREADS must be a positive integer"
[[ $PREPARE_MEMORY =~ ^[1-9][0-9]*[KMG]$ ]] || die "PREPARE_MEMORY must be a size such as 256M, not '$PREPARE_MEMORY'"

# start_source (lib.sh's, overridden): the same server with row-based binlog events (what ferry's
# replay and mariadb-binlog then apply).
start_source() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1 --binlog-format=ROW
}

# --- helpers (and lib.sh's timed, start_load, stop_load, tps) --------------------------------------
KV="$LOGS/pitr.kv"                                # key<TAB>value: what the report prints besides $RAW
kv() { printf '%s\t%s\n' "$1" "$2" >>"$KV"; }
kvget() { gawk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print v }' "$KV"; }
TABLE_LIST=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
CLK_TCK=$(getconf CLK_TCK)
ARCH_PID=""; PROBE_OWN=""; REF_PID=""            # the archiver; the probe session (coproc); 1b's client

# gtid_seq GTID: the seq of D-S-N; dies unless GTID is exactly one GTID.
gtid_seq() {
  [[ $1 =~ ^[0-9]+-[0-9]+-([0-9]+)$ ]] || die "expected one GTID (domain-server-seq), got '$1'"
  echo "${BASH_REMATCH[1]}"
}

# probe_loop SECONDS OUT: every PROBE_MS ms for SECONDS s, one committed probe transaction through
# one client session; appends "commit-epoch-time<TAB>GTID" per probe to OUT (step 4 above).
probe_loop() {
  local secs=$1 out=$2 t0 t next end gtid k=0 wait_us pid
  : >"$out"
  coproc PROBE { exec mariadb --no-defaults -S "$SOCK" -uroot -N -B -n pitr 2>"$LOGS/probe.err"; }
  pid=$PROBE_PID; PROBE_OWN=$pid
  t0=${EPOCHREALTIME/[.,]/}
  end=$((t0 + secs * 1000000))
  while :; do
    printf 'BEGIN; INSERT INTO probe (at) VALUES (NOW(6)); COMMIT; SELECT @@last_gtid;\n' >&"${PROBE[1]}"
    IFS= read -r -t 10 gtid <&"${PROBE[0]}" ||
      { cat "$LOGS/probe.err" >&2; die "the probe session gave no GTID within 10 s (log: $LOGS/probe.err)"; }
    t=$EPOCHREALTIME
    printf '%s\t%s\n' "${t/,/.}" "$gtid" >>"$out"
    k=$((k + 1))
    next=$((t0 + k * PROBE_MS * 1000))
    ((next < end)) || break
    t=${EPOCHREALTIME/[.,]/}
    wait_us=$((next - t))
    ((wait_us > 0)) && sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
  done
  eval "exec ${PROBE[1]}>&-"
  wait "$pid" 2>/dev/null || true
  PROBE_OWN=""
}

# load_phase NAME: the sysbench load for DURATION s with the probe loop beside it (the caller
# quiesces first); sets LOAD_T0 / LOAD_T1 (epoch s) and records NAME_tps (mean per-second TPS
# after the warm-up), NAME_secs, NAME_events (the transactions it committed: sysbench's and the
# probes', from @@gtid_binlog_pos) and NAME_server_cpu
# (the source mariadbd's utime + stime during the load).
load_phase() {
  local name=$1 t u0 s0 u1 s1 g0 g1
  g0=$(gtid_seq "$(sql -e "SELECT @@gtid_binlog_pos")")
  read -r u0 s0 < <(proc_cpu "$SRC_PID")
  start_load 0 "the probes"
  LOAD_T0=$SB_T0
  probe_loop "$DURATION" "$LOGS/probes-$name.tsv"
  stop_load "$LOGS/sysbench-$name.log"
  LOAD_T1=$(now)
  read -r u1 s1 < <(proc_cpu "$SRC_PID")
  g1=$(gtid_seq "$(sql -e "SELECT @@gtid_binlog_pos")")
  kv "${name}_server_cpu" "$(gawk -v x=$((u1 - u0 + s1 - s0)) -v t="$CLK_TCK" 'BEGIN { printf "%.2f", x / t }')"
  kv "${name}_secs" "$(gawk -v a="$LOAD_T0" -v b="$LOAD_T1" 'BEGIN { printf "%.2f", b - a }')"
  kv "${name}_events" "$((g1 - g0))"
  t=$(tps "$(gawk -v a="$LOAD_T0" -v w="$LOAD_WARMUP_SECS" 'BEGIN { printf "%.3f", a + w }')" "$LOAD_T1")
  [[ -n $t ]] || die "no sysbench per-second report in the $name load (log: $LOGS/sysbench-$name.log)"
  kv "${name}_tps" "$t"
  # the spread of the per-second TPS in the same window (noisy neighbours show here)
  kv "${name}_tps_sd" "$(gawk -v a="$LOAD_T0" -v w="$LOAD_WARMUP_SECS" -v b="$LOAD_T1" '
    /^\[ *[0-9]+s \]/ { t = a + $2 - 0.5; for (i = 3; i < NF; i++) if ($i == "tps:") v = $(i + 1) + 0
      if (t >= a + w && t <= b) { n++; s += v; q += v * v } }
    END { if (n > 1) printf "%.1f", sqrt((q - s * s / n) / (n - 1)) }' "$LOGS/sysbench-$name.log")"
  kv "${name}_probes" "$(wc -l <"$LOGS/probes-$name.tsv")"
  log "$name load: $DURATION s of sysbench oltp_write_only ($THREADS threads), $(wc -l <"$LOGS/probes-$name.tsv") probes; TPS $t"
}

# proc_cpu PID: "utime stime" of PID in clock ticks (fields 14 and 15 of /proc/PID/stat).
proc_cpu() { sed 's/^.*) //' "/proc/$1/stat" | gawk '{ print $12, $13 }'; }
# proc_hwm PID: VmHWM of PID in KiB.
proc_hwm() { gawk '$1 == "VmHWM:" { print $2 }' "/proc/$1/status"; }

# stored_tsv [merged]: the archiver's "stored" lines as "epoch-time file start end last_gtid
# waited_ms"; with merged, its "merged" lines (one segment that replaces the small ones stored
# since the last merge: `--merge-size`, `--merge-every`) as "epoch-time file start end segments".
stored_tsv() {
  local filter='select(.msg == "binlog-archive: stored") | [.time, .file, .start, .end, .last_gtid, .waited_ms]'
  [[ ${1:-} == merged ]] && filter='select(.msg == "binlog-archive: merged") | [.time, .file, .start, .end, .segments]'
  jq -R -r "fromjson? | $filter | @tsv" \
    "$LOGS/archive.log" | gawk -F'\t' -v OFS='\t' '
    # RFC 3339 (slog JSON: nanoseconds, Z or an offset) to epoch seconds
    function epoch(s,   d, frac, off, sign) {
      if (!match(s, /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$/, d)) return ""
      frac = d[7] == "" ? 0 : d[7] + 0; off = 0
      if (d[8] != "Z") { sign = substr(d[8], 1, 1) == "-" ? -1 : 1; off = sign * (substr(d[8], 2, 2) * 3600 + substr(d[8], 5, 2) * 60) }
      return sprintf("%.6f", mktime(d[1] " " d[2] " " d[3] " " d[4] " " d[5] " " d[6], 1) + frac - off) }
    { t = epoch($1); if (t == "") { print "bench: unparsed time " $1 > "/dev/stderr"; exit 1 }; $1 = t; print }'
}

# archived GTID: whether the archive log has stored a segment whose last_gtid reaches GTID.
archived() {
  local d=${1%%-*} s
  s=$(gtid_seq "$1")
  stored_tsv | gawk -F'\t' -v d="$d" -v s="$s" '{ split($5, g, "-") } g[1] == d && g[3] + 0 >= s + 0 { f = 1 } END { exit !f }'
}

# stop_archiver: SIGTERM, wait up to 60 s (it stores what it received first), then SIGKILL; sets
# ARCH_RC.
stop_archiver() {
  local i
  ARCH_RC=""
  [[ -n $ARCH_PID ]] || return 0
  kill -TERM "$ARCH_PID" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do kill -0 "$ARCH_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$ARCH_PID" 2>/dev/null; then
    log "warning: ferry binlog-archive did not stop within 60 s of SIGTERM; killing it"
    kill -KILL "$ARCH_PID" 2>/dev/null || true
  fi
  ARCH_RC=0; wait "$ARCH_PID" 2>/dev/null || ARCH_RC=$?
  ARCH_PID=""
}

# binlog_scan PROBES STORED FILE...: decodes the source's binlog FILEs (mariadb-binlog) and prints
# "P<TAB>gtid<TAB>file<TAB>end" for the Xid event (the commit) of every probe transaction of
# PROBES, and "S<TAB>file<TAB>end<TAB>inside" for every segment end of STORED (stored_tsv lines):
# inside 1 if the segment ends within a transaction (after its GTID event, before its Xid event,
# or the Query event that ends a DDL or a non-transactional group).
binlog_scan() {
  local probes=$1 stored=$2 f; shift 2
  for f in "$@"; do
    mariadb-binlog --no-defaults "$f" | gawk -v file="$(basename "$f")" -v probes="$probes" -v stored="$stored" -v OFS='\t' '
      BEGIN { while ((getline l < probes) > 0) { split(l, x, "\t"); want[x[2]] = 1 }
              while ((getline l < stored) > 0) { split(l, x, "\t"); if (x[2] == file) seg[x[4]] = 1 } }
      function resolve() { if (cur != "" && (cur in seg)) print "S", file, cur, ingroup; cur = ""; qpend = 0 }
      /^# at [0-9]+$/ { resolve(); next }
      /^#[0-9]+ .* end_log_pos [0-9]+ / {
        resolve()                       # a header ends the event before (Annotate_rows and
        match($0, /end_log_pos [0-9]+/); cur = substr($0, RSTART + 12, RLENGTH - 12)   # Table_map share one "# at")
        if (match($0, /\tGTID [0-9]+-[0-9]+-[0-9]+/)) { g = substr($0, RSTART + 6, RLENGTH - 6); ingroup = 1; ddl = ($0 !~ / trans$/) }
        else if ($0 ~ /\tXid = [0-9]+/) { if (g in want) print "P", g, file, cur; ingroup = 0 }
        else if ($0 ~ /\tQuery\t/ && ingroup) { if (ddl) ingroup = 0; else qpend = 1 }
        next }
      qpend && /^COMMIT\/\*!\*\/;$/ { ingroup = 0 }
      END { resolve() }'
  done
}

# lag_col COLUMN: "median p99 max min n" of the non-empty values of that column of $LOGS/lags.tsv
# (p99: nearest rank).
lag_col() {
  gawk -F'\t' -v c="$1" '$c != "" { print $c }' "$LOGS/lags.tsv" | sort -g | gawk '
    { v[++n] = $1 }
    END { if (!n) { print "\t\t\t\t0"; exit }
      p = int(0.99 * n); if (p < 0.99 * n) p++
      m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      printf "%.1f\t%.1f\t%.1f\t%.1f\t%d\n", m, v[p], v[n], v[1], n }'
}

# lag_stats PROBES LO HI FILE...: the lag of every probe (step 4) into $LOGS/lags.tsv ("commit-time
# gtid lag-ms commit-lag-ms"), from the stored lines and the binlog FILEs; records probes, those
# not covered, lag median/p99/max both ways, and the segments stored between LO and HI (epoch s;
# the load window).
lag_stats() {
  local probes=$1 lo=$2 hi=$3 med p99 max min n cmed cp99 cmax cmin cn miss cmiss nocommit segs wmed wmax raw mid merges mhold mbytes
  shift 3
  stored_tsv >"$LOGS/stored.tsv"
  binlog_scan "$probes" "$LOGS/stored.tsv" "$@" >"$LOGS/binlog-scan.tsv"
  gawk -F'\t' -v OFS='\t' '$1 == "P" { print $2, $3, $4 }' "$LOGS/binlog-scan.tsv" >"$LOGS/probe-commits.tsv"
  gawk -F'\t' -v OFS='\t' -v lags="$LOGS/lags.tsv" '
    FILENAME == ARGV[1] { n++; T[n] = $1; F[n] = $2; E[n] = $4 + 0; split($5, g, "-"); D[n] = g[1]; S[n] = (g[3] == "") ? -1 : g[3] + 0; next }
    FILENAME == ARGV[2] { CF[$1] = $2; CE[$1] = $3 + 0; next }
    { split($2, g, "-"); d = g[1]; s = g[3] + 0; a = b = ""
      # the brief rule: the first stored line whose last_gtid (same domain) reaches the probe
      if (!(d in p)) p[d] = 1
      while (p[d] <= n && !(D[p[d]] == d && S[p[d]] >= s)) p[d]++
      if (p[d] <= n) a = sprintf("%.3f", (T[p[d]] - $1) * 1000); else miss++
      # strict: the first stored line whose segment ends at or after the probe'"'"'s Xid event
      if ($2 in CF) {
        if (!q) q = 1
        while (q <= n && !(F[q] > CF[$2] || (F[q] == CF[$2] && E[q] >= CE[$2]))) q++
        if (q <= n) b = sprintf("%.3f", (T[q] - $1) * 1000); else cmiss++
      } else nocommit++
      print $1, $2, a, b > lags }
    END { print miss + 0, cmiss + 0, nocommit + 0 }' "$LOGS/stored.tsv" "$LOGS/probe-commits.tsv" "$probes" >"$LOGS/unmatched.txt"
  read -r miss cmiss nocommit <"$LOGS/unmatched.txt"
  kv rpo_probes "$(wc -l <"$probes")"
  kv rpo_unmatched "$miss"; kv rpo_commit_unmatched "$((cmiss + nocommit))"
  IFS=$'\t' read -r med p99 max min n < <(lag_col 3)
  kv rpo_med "$med"; kv rpo_p99 "$p99"; kv rpo_max "$max"; kv rpo_min "$min"; kv rpo_matched "$n"
  IFS=$'\t' read -r cmed cp99 cmax cmin cn < <(lag_col 4)
  kv rpoc_med "$cmed"; kv rpoc_p99 "$cp99"; kv rpoc_max "$cmax"; kv rpoc_min "$cmin"; kv rpoc_matched "$cn"
  kv rpo_differ "$(gawk -F'\t' '$3 != $4 { n++ } END { print n + 0 }' "$LOGS/lags.tsv")"
  # the segments stored during the load: waited_ms, raw bytes, how many ended inside a transaction
  gawk -F'\t' -v a="$lo" -v b="$hi" '
    FILENAME == ARGV[1] { if ($1 == "S") inside[$2, $3] = $4; next }
    $1 >= a && $1 <= b { n++; w[n] = $6 + 0; raw += $4 - $3; mid += inside[$2, $4] + 0 }
    END { if (!n) { print "0\t\t\t0\t0"; exit }
      asort(w); printf "%d\t%s\t%s\t%.0f\t%d\n", n, (n % 2) ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2, w[n], raw, mid }' \
    "$LOGS/binlog-scan.tsv" "$LOGS/stored.tsv" >"$LOGS/seg-stats.txt"
  IFS=$'\t' read -r segs wmed wmax raw mid <"$LOGS/seg-stats.txt"
  kv seg_load "$segs"; kv seg_waited_med "$wmed"; kv seg_waited_max "$wmax"; kv seg_raw_load "$raw"; kv seg_mid_load "$mid"
  kv seg_total "$(wc -l <"$LOGS/stored.tsv")"
  # the merges during the load: each runs in the receive loop, after the store it follows
  stored_tsv merged >"$LOGS/merged.tsv"
  read -r merges mhold mbytes < <(gawk -F'\t' -v a="$lo" -v b="$hi" '
    FILENAME == ARGV[1] { st[++n] = $1; next }
    $1 >= a && $1 <= b { m++; bytes += $4 - $3; prev = ""
      for (i = 1; i <= n && st[i] <= $1; i++) prev = st[i]
      if (prev != "" && ($1 - prev) * 1000 > hold) hold = ($1 - prev) * 1000 }
    END { printf "%d %.0f %.0f\n", m, hold, m ? bytes / m : 0 }' "$LOGS/stored.tsv" "$LOGS/merged.tsv")
  kv merges_load "$merges"; kv merge_hold_max "$mhold"; kv merge_bytes "$mbytes"
  kv merges_total "$(wc -l <"$LOGS/merged.tsv")"
  kv seg_raw_total "$(gawk -F'\t' '{ s += $4 - $3 } END { printf "%.0f", s }' "$LOGS/stored.tsv")"
  log "RPO: $(wc -l <"$probes") probes, lag median $med ms, p99 $p99 ms, max $max ms ($miss not covered by a stored line); to the commit event stored: median $cmed, p99 $cp99, max $cmax ms; $segs segments stored during the load, waited_ms median $wmed, max $wmax"
}

# logline LOG PREFIX KEY: the value of KEY on the last line of ferry's text LOG whose msg starts
# with PREFIX ("" if none).
logline() {
  gawk -v m="msg=\"$2" -v k="$3" 'index($0, m) { v = ""
      if (match($0, " " k "=(\"[^\"]*\"|[^ ]*)")) v = substr($0, RSTART + length(k) + 2, RLENGTH - length(k) - 2) }
    END { gsub(/"/, "", v); print v }' "$1"
}
# godur DURATION: a Go duration (1m2.5s, 850ms) in seconds ("" if it is not one).
godur() {
  gawk -v s="$1" 'BEGIN { t = 0; if (s == "") exit
    while (s != "") {
      if (!match(s, /^[0-9]+(\.[0-9]+)?/)) { print ""; exit }
      x = substr(s, 1, RLENGTH) + 0; s = substr(s, RLENGTH + 1)
      if (s ~ /^ms/) { t += x / 1e3; s = substr(s, 3) } else if (s ~ /^us/) { t += x / 1e6; s = substr(s, 3) }
      else if (s ~ /^ns/) { t += x / 1e9; s = substr(s, 3) } else if (s ~ /^h/) { t += x * 3600; s = substr(s, 2) }
      else if (s ~ /^m/) { t += x * 60; s = substr(s, 2) } else if (s ~ /^s/) { t += x; s = substr(s, 2) }
      else { print ""; exit } }
    printf "%.3f\n", t }'
}

# checksum_on DATADIR NAME EXTRA...: a server (socket only) on DATADIR (EXTRA: more mariadbd
# options), CHECKSUM TABLE of every sbtest table vs the source's; records check_NAME.
checksum_on() {
  local dir=$1 name=$2 res; shift 2
  log "check $name: CHECKSUM TABLE on $dir vs the source"
  stop_stale "$RPIDF" "$dir"
  start_server REST_PID "$dir" "$RSOCK" "$RPIDF" "$BENCH_DIR/restored.err" --skip-networking "$@"
  rsql -e "CHECKSUM TABLE $TABLE_LIST" >"$LOGS/checksum-$name.txt" 2>&1 || true
  stop_restored
  if cmp -s "$LOGS/checksum-source.txt" "$LOGS/checksum-$name.txt"; then res="OK ($TABLES/$TABLES tables equal the source's)"
  else res="MISMATCH (diff $LOGS/checksum-source.txt $LOGS/checksum-$name.txt)"; FAILED+=("check $name: $res"); fi
  kv "check_$name" "$res"
  log "check $name: $res"
}

# ferry_apply RUN: (a) of step 6.
ferry_apply() {
  local r=$1 flog took tx tps bytes
  clean_restored "$X_REST"
  drop_caches
  timed ferry-pitr "$r" "$X_REST" "$(q "$FERRY") restore --repo $(q "$PREPO") --to-gtid $FINAL --datadir $(q "$X_REST") --use-memory $PREPARE_MEMORY${REPLAY_THREADS:+ --replay-threads $REPLAY_THREADS}"
  flog="$LOGS/ferry-pitr-$r.log"
  took=$(godur "$(logline "$flog" "point-in-time: applied" took)")
  tx=$(logline "$flog" "point-in-time: applying the archived binlog" transactions)
  bytes=$(logline "$flog" "point-in-time: applying the archived binlog" bytes)
  tps=$(logline "$flog" "point-in-time: applied" transactions_per_s)
  [[ -n $took && -n $tx ]] || die "ferry restore --to-gtid (run $r) logged no 'point-in-time: applied ... took=' / 'applying ... transactions=' (log: $flog)"
  [[ $tx == "$NTX" ]] || FAILED+=("ferry-pitr run $r: applied $tx transactions, the GTIDs from the backup to FINAL are $NTX")
  kv "ferry_took-$r" "$took"; kv "ferry_tx-$r" "$tx"; kv "ferry_bytes-$r" "$bytes"; kv "ferry_logged_tps-$r" "$tps"
  kv "ferry_threads-$r" "$(logline "$flog" "point-in-time: applying the archived binlog" threads)"
  log "  ferry apply (run $r): $tx transactions, $bytes bytes, took $took s ($tps tx/s logged)"
  if ((r == RUNS)) && [[ $SKIP_CHECK != 1 ]]; then checksum_on "$X_REST" ferry; fi
  clean_restored "$X_REST"
}

# binlog_apply RUN: (b) of step 6.
binlog_apply() {
  local r=$1 t0 t1 t2 t3 logsize
  clean_restored "$Y_REST"
  drop_caches
  timed ferry-restore "$r" "$Y_REST" "$(q "$FERRY") restore --repo $(q "$PREPO") $BK_ID --datadir $(q "$Y_REST") --use-memory $PREPARE_MEMORY"
  logsize=$(stat -c %s "$Y_REST/ib_logfile0")
  Y_OPTS=(--innodb-buffer-pool-size="$PREPARE_MEMORY" --innodb-log-file-size="$logsize"
          --innodb-flush-log-at-trx-commit=0 --skip-log-bin)
  stop_stale "$RPIDF" "$Y_REST"
  t0=$(now)
  start_server REST_PID "$Y_REST" "$RSOCK" "$RPIDF" "$BENCH_DIR/restored.err" --skip-networking "${Y_OPTS[@]}"
  t1=$(now)
  timed mb-apply "$r" 0 "mariadb-binlog --no-defaults --start-position=$BK_POS $BINLOG_FILES --stop-position=$END_POS | mariadb --no-defaults -S $(q "$RSOCK") -uroot"
  t2=$(now)
  stop_restored
  t3=$(now)
  kv "mb_start-$r" "$(gawk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
  kv "mb_stop-$r" "$(gawk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.3f", b - a }')"
  log "  mariadb-binlog | mariadb (run $r): $NTX transactions in $(wall_of mb-apply "$r") s (server start $(kvget "mb_start-$r") s, shutdown $(kvget "mb_stop-$r") s)"
  if ((r == RUNS)) && [[ $SKIP_CHECK != 1 ]]; then checksum_on "$Y_REST" mb "${Y_OPTS[@]}"; fi
  clean_restored "$Y_REST"
}

pitr_cleanup() {
  local rc=$?
  set +e
  [[ -n $PROBE_OWN ]] && kill -TERM "$PROBE_OWN" 2>/dev/null
  [[ -n $ARCH_PID ]] && stop_archiver
  [[ -n $REF_PID ]] && kill -TERM "$REF_PID" 2>/dev/null && wait "$REF_PID" 2>/dev/null
  [[ -n $SRC_PID && $KEEP_SERVER != 1 ]] && kill -0 "$SRC_PID" 2>/dev/null && sql -e "DROP DATABASE IF EXISTS pitr" 2>/dev/null
  return "$rc"
}
trap 'pitr_cleanup; cleanup' EXIT

# --- setup ------------------------------------------------------------------------------------------
bench_init
need jq jq
need mariadb-binlog mariadb-client
build_ferry
: >"$KV"
FAILED=()
cp -f "$RPIDF" "$RPIDF.pitr" 2>/dev/null || true  # stop_stale removes the pid file: check both
stop_stale "$RPIDF" "$X_REST"                     # restored datadirs of an interrupted run
mv -f "$RPIDF.pitr" "$RPIDF" 2>/dev/null || true
stop_stale "$RPIDF" "$Y_REST"
rm -rf "$PREPO" "$IDF"; clean_restored "$X_REST" "$Y_REST"
load_dataset
[[ $(sql -e "SELECT @@GLOBAL.binlog_format") == ROW ]] || die "the server does not run with binlog_format=ROW"
sql -e "DROP DATABASE IF EXISTS pitr; CREATE DATABASE pitr;
        CREATE TABLE pitr.probe (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, at DATETIME(6) NOT NULL)"
data_sizes
log "datadir $DATA: $DATA_BYTES bytes; loads of $DURATION s (sysbench oltp_write_only, $THREADS threads), a probe every $PROBE_MS ms; $RUNS apply run(s)"

# --- 1: the baseline load, no archiver ------------------------------------------------------------------
quiesce
load_phase base

# --- 1b: the same load beside the stock binlog streaming client (a reference) -----------------------
# What any replication client costs the server (its binlog dump thread), apart from ferry: the
# same load while `mariadb-binlog --read-from-remote-server --raw --stop-never` copies the binlog
# into a directory, from a RESET MASTER on.
if [[ $SKIP_REF != 1 ]]; then
  sql -e "RESET MASTER; TRUNCATE pitr.probe"
  rm -rf "$REFDIR"; mkdir -p "$REFDIR"
  first=$(sql -e "SHOW MASTER STATUS" | cut -f1)
  (cd "$REFDIR" && exec mariadb-binlog --no-defaults --read-from-remote-server --socket="$SOCK" --user=root \
    --raw --stop-never "$first") </dev/null >/dev/null 2>"$LOGS/ref-stream.log" &
  REF_PID=$!
  for ((i = 0; i < 300; i++)); do
    kill -0 "$REF_PID" 2>/dev/null || { cat "$LOGS/ref-stream.log" >&2; die "mariadb-binlog --stop-never exited (log: $LOGS/ref-stream.log)"; }
    (($(sql -e "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'") > 0)) && break
    sleep 0.1
  done
  ((i < 300)) || die "mariadb-binlog --stop-never did not connect within 30 s (log: $LOGS/ref-stream.log)"
  quiesce
  read -r RU0 RS0 < <(proc_cpu "$REF_PID")
  load_phase ref
  read -r RU1 RS1 < <(proc_cpu "$REF_PID")
  kv ref_hwm_kib "$(proc_hwm "$REF_PID")"
  kill -TERM "$REF_PID" 2>/dev/null || true
  wait "$REF_PID" 2>/dev/null || true
  REF_PID=""
  kv ref_cpu_load "$(gawk -v x=$((RU1 - RU0 + RS1 - RS0)) -v t="$CLK_TCK" 'BEGIN { printf "%.2f", x / t }')"
  kv ref_bytes "$(du -sb "$REFDIR" | cut -f1)"
  rm -rf "$REFDIR"
fi

# --- 2+3: the archiver, the backup ---------------------------------------------------------------------
sql -e "RESET MASTER; TRUNCATE pitr.probe"
mkdir -p "$PREPO"
ARCH_CMD=("$FERRY" --log-format json --log-level debug binlog-archive --repo "$PREPO" --socket "$SOCK" --user root)
[[ -n $FLUSH_INTERVAL ]] && ARCH_CMD+=(--flush-interval "$FLUSH_INTERVAL")
# shellcheck disable=SC2206  # ARCHIVE_ARGS: words on purpose
ARCH_CMD+=($ARCHIVE_ARGS)
log "starting: ${ARCH_CMD[*]} (log: $LOGS/archive.log)"
"${ARCH_CMD[@]}" </dev/null >/dev/null 2>"$LOGS/archive.log" &
ARCH_PID=$!
ARCH_T0=$(now)
for ((i = 0; i < 300; i++)); do
  kill -0 "$ARCH_PID" 2>/dev/null || { tail -n 15 "$LOGS/archive.log" >&2; die "ferry binlog-archive exited (log: $LOGS/archive.log)"; }
  archived "$(sql -e "SELECT @@gtid_binlog_pos")" && break
  sleep 0.1
done
((i < 300)) || die "ferry binlog-archive stored nothing up to the server's GTID position within 30 s (log: $LOGS/archive.log)"
log "binlog-archive (pid $ARCH_PID) follows the server; archive at $(sql -e "SELECT @@gtid_binlog_pos")"

timed ferry-backup 1 "$PREPO" "$(q "$FERRY") backup --repo $(q "$PREPO") --socket $(q "$SOCK") --user root --parallel $PARALLEL $FERRY_ARGS >$(q "$IDF")"
BK_ID=$(tr -d ' \n' <"$IDF")
MANIFEST="$PREPO/backups/$BK_ID/manifest.json"
[[ -n $BK_ID && -f $MANIFEST ]] || die "ferry backup --repo printed id '$BK_ID', but there is no $MANIFEST"
jq -e . "$MANIFEST" >/dev/null 2>&1 || die "$MANIFEST is not plain JSON (an encrypted backup? leave --encrypt-to out of FERRY_ARGS)"
BK_FILE=$(jq -r '.coordinates.binlog_file // ""' "$MANIFEST")
BK_POS=$(jq -r '.coordinates.binlog_pos // ""' "$MANIFEST")
BK_GTID=$(jq -r '.coordinates.gtid_binlog_pos // ""' "$MANIFEST")
[[ -n $BK_FILE && $BK_POS =~ ^[0-9]+$ ]] || die "$MANIFEST has no coordinates.binlog_file / binlog_pos"
BK_SEQ=$(gtid_seq "$BK_GTID")
kv backup_id "$BK_ID"; kv backup_pos "$BK_FILE:$BK_POS"; kv backup_gtid "$BK_GTID"
log "backup $BK_ID at $BK_FILE:$BK_POS, GTID $BK_GTID"

# --- 4: the load with the archiver ----------------------------------------------------------------------
quiesce
read -r U0 S0 < <(proc_cpu "$ARCH_PID")
load_phase arch
read -r U1 S1 < <(proc_cpu "$ARCH_PID")

# --- 5: the end of the load: FINAL, the archiver's last segment, its cost -------------------------------
FINAL=$(sql -e "SELECT @@gtid_binlog_pos")
FINAL_SEQ=$(gtid_seq "$FINAL")
read -r END_FILE END_POS _ < <(sql -e "SHOW MASTER STATUS")
NTX=$((FINAL_SEQ - BK_SEQ))
kv final_gtid "$FINAL"; kv final_pos "$END_FILE:$END_POS"; kv ntx "$NTX"
for ((i = 0; i < 600; i++)); do
  kill -0 "$ARCH_PID" 2>/dev/null || { tail -n 15 "$LOGS/archive.log" >&2; die "ferry binlog-archive exited during the load (log: $LOGS/archive.log)"; }
  archived "$FINAL" && break
  sleep 0.1
done
((i < 600)) || die "ferry binlog-archive did not store $FINAL within 60 s of the end of the load (log: $LOGS/archive.log)"
read -r U2 S2 < <(proc_cpu "$ARCH_PID")
HWM=$(proc_hwm "$ARCH_PID")
ARCH_T1=$(now)
stop_archiver
kv arch_rc "$ARCH_RC"
[[ $ARCH_RC == 0 ]] || FAILED+=("ferry binlog-archive exited with status $ARCH_RC after SIGTERM")
ticks() { gawk -v x="$1" -v t="$CLK_TCK" 'BEGIN { printf "%.2f", x / t }'; }
kv arch_user_load "$(ticks $((U1 - U0)))"; kv arch_sys_load "$(ticks $((S1 - S0)))"
kv arch_cpu_load "$(ticks $((U1 - U0 + S1 - S0)))"
kv arch_cpu_total "$(ticks $((U2 + S2)))"
kv arch_secs "$(gawk -v a="$ARCH_T0" -v b="$ARCH_T1" 'BEGIN { printf "%.1f", b - a }')"
kv arch_hwm_kib "$HWM"
kv load_secs "$(gawk -v a="$LOAD_T0" -v b="$LOAD_T1" 'BEGIN { printf "%.2f", b - a }')"
kv archive_bytes "$(du -sb "$PREPO/binlogs" | cut -f1)"
kv binlog_bytes "$(sql -e "SHOW BINARY LOGS" | gawk '{ s += $2 } END { printf "%.0f", s }')"
log "archiver: $(kvget arch_cpu_load) CPU s (user $(kvget arch_user_load), sys $(kvget arch_sys_load)) during the $(kvget load_secs) s load, $(kvget arch_cpu_total) s in all; max RSS $((HWM / 1024)) MiB; exit status $ARCH_RC"

# The source's binlog files (binlog.index holds ./NAME lines, oldest first; RESET MASTER before the
# archiver: all of them are the archived ones): all for the probes' commits, those from the
# backup's on for mariadb-binlog.
ALL_BINLOGS=() BINLOG_FILES=""
while read -r f; do
  f=$(basename "$f")
  [[ -f $DATA/$f ]] || die "binlog file $DATA/$f listed in binlog.index is missing"
  ALL_BINLOGS+=("$DATA/$f")
  [[ $f < "$BK_FILE" ]] || BINLOG_FILES+=" $(q "$DATA/$f")"
  [[ $f == "$END_FILE" ]] && break
done <"$DATA/binlog.index"
[[ $BINLOG_FILES == *"$(q "$DATA/$END_FILE")" ]] || die "binlog.index does not lead from $BK_FILE to $END_FILE"
kv binlog_files "$(echo "$BINLOG_FILES" | wc -w)"
lag_stats "$LOGS/probes-arch.tsv" "$LOAD_T0" "$LOAD_T1" "${ALL_BINLOGS[@]}"

sql -e "CHECKSUM TABLE $TABLE_LIST" >"$LOGS/checksum-source.txt"
log "to apply: $NTX transactions, $BK_GTID -> $FINAL ($BK_FILE:$BK_POS to $END_FILE:$END_POS)"

# --- 6: apply, alternating --------------------------------------------------------------------------
TOOLS=(ferry mb)
for ((r = 1; r <= RUNS; r++)); do
  for tool in $(order "$r"); do
    if [[ $tool == ferry ]]; then ferry_apply "$r"; else binlog_apply "$r"; fi
  done
done

# --- 7: the baseline load again (the machine drifts: the TPS baseline is the mean of both) ----------
if [[ $BASE_AFTER == 1 ]]; then
  quiesce
  load_phase base2
fi

# --- report ---------------------------------------------------------------------------------------------
describe_env
VERSIONS+="; $(ver mariadb-binlog --version | sed 's/ for debian.*//;s/^.*Ver/mariadb-binlog/')"

report() {
  report_gawk -v kvfile="$KV" -v check="$([[ $SKIP_CHECK == 1 ]] && echo "not run (SKIP_CHECK=1)")" \
      -v duration="$DURATION" -v threads="$THREADS" -v warm="$LOAD_WARMUP_SECS" -v probems="$PROBE_MS" \
      -v flush="${FLUSH_INTERVAL:-500ms (default)}" -v archargs="$ARCHIVE_ARGS" -v pmem="$PREPARE_MEMORY" \
      -v rthreads="${REPLAY_THREADS:-default}" -v ferryargs="$FERRY_ARGS" -v nproc="$(nproc)" '
    FILENAME == kvfile { K[$1] = $2; next }'"$AWK_LIB"'
    function kagg(key,   i, v, m) { m = 0; for (i = 1; i <= runs; i++) if ((key "-" i) in K) v[++m] = K[key "-" i]; return m ? median(v, m) : "" }
    function mb(x) { return x == "" ? "–" : sprintf("%.1f", x / 1e6) }
    function tp(n, s) { return (s == "" || s <= 0) ? "" : n / s }
    function lrow(name, k) {
      printf "| %s | %.1f | %s | %s | %.2f | %s |\n", name, K[k "_tps"], f(K[k "_tps_sd"], "%s"), K[k "_events"], K[k "_server_cpu"],
        f(K[k "_events"] > 0 ? 1e6 * K[k "_server_cpu"] / K[k "_events"] : "", "%.0f") }
    END {
      printf "## Point-in-time recovery: ferry binlog-archive and restore --to-gtid vs mariadb-binlog | mariadb, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb)\n", tables, rows, databytes / 1e9
      printf "- server: 1 GiB buffer pool, 512 MiB redo, `--log-bin --server-id=1 --binlog-format=ROW`, sync_binlog 0 (default)\n"
      printf "- loads: `sysbench oltp_write_only --threads=%d --rate=0` for %d s each (TPS: mean of the per-second reports after %d s), beside a probe commit every %d ms through one `mariadb` session\n", threads, duration, warm, probems
      printf "- archiver: `ferry binlog-archive --repo DIR --flush-interval %s --log-format json --log-level debug%s` into a directory repository (zstd)\n\n", flush, archargs == "" ? "" : " " archargs
      print "### Archive delay (RPO) and cost, under the load"
      print "\n| lag of a committed probe until ferry has stored it | probes | median ms | p99 ms | max ms | min ms |"
      print "|---|---|---|---|---|---|"
      printf "| to the first `stored` line whose last_gtid reaches its GTID | %d | %s | %s | %s | %s |\n", K["rpo_matched"], K["rpo_med"], K["rpo_p99"], K["rpo_max"], K["rpo_min"]
      printf "| to the first `stored` segment that holds its commit (Xid) event | %d | %s | %s | %s | %s |\n", K["rpoc_matched"], K["rpoc_med"], K["rpoc_p99"], K["rpoc_max"], K["rpoc_min"]
      printf "\nlag = the time of that `binlog-archive: stored` log line (after the store completed) minus the client'"'"'s time right after the probe'"'"'s COMMIT returned. %d probes; not covered by any stored line: %d (last_gtid), %d (commit event); the two rules differ for %d probe(s). Segments stored during the load: %d (one per flush interval under this load), waited_ms median %s, max %s; %d of them end inside a transaction (its GTID event stored, its commit not yet: the last_gtid rule then counts that transaction a segment early).\n",
        K["rpo_probes"], K["rpo_unmatched"], K["rpo_commit_unmatched"], K["rpo_differ"], K["seg_load"], f(K["seg_waited_med"], "%s"), f(K["seg_waited_max"], "%s"), K["seg_mid_load"]
      ls = K["load_secs"]
      print "\n| archiver | value |\n|---|---|"
      printf "| CPU s during the %.1f s load (utime + stime) | %.2f (user %.2f, sys %.2f; %.1f %% of one core) |\n", ls, K["arch_cpu_load"], K["arch_user_load"], K["arch_sys_load"], 100 * K["arch_cpu_load"] / ls
      printf "| CPU s over its life (%.1f s: start, backup, load, last store) | %.2f |\n", K["arch_secs"], K["arch_cpu_total"]
      printf "| max RSS (VmHWM) MiB | %.1f |\n", K["arch_hwm_kib"] / 1024
      printf "| binlog stored during the load: raw MB, MB/s | %s, %.2f |\n", mb(K["seg_raw_load"]), K["seg_raw_load"] / 1e6 / ls
      printf "| whole archive: segments stored, merges, raw MB, bytes in REPO/binlogs at the end MB (zstd) | %d, %d, %s, %s |\n", K["seg_total"], K["merges_total"], mb(K["seg_raw_total"]), mb(K["archive_bytes"])
      printf "| merges during the load (`--merge-size`/`--merge-every`): count, mean raw MB, longest gap from the store before it to its line ms | %d, %s, %s |\n", K["merges_load"], mb(K["merge_bytes"]), K["merge_hold_max"]
      printf "| exit status after SIGTERM | %s |\n", K["arch_rc"]
      tb = ("base2_tps" in K) ? (K["base_tps"] + K["base2_tps"]) / 2 : K["base_tps"]; ta = K["arch_tps"]
      print "\n| sysbench oltp_write_only | TPS | per-second TPS stddev | transactions committed (with the probes) | source mariadbd CPU s in the load | its CPU ms per 1000 transactions |\n|---|---|---|---|---|---|"
      lrow("1. baseline: without a replication client", "base")
      if ("ref_tps" in K) lrow("1b. reference: with `mariadb-binlog --read-from-remote-server --raw --stop-never`", "ref")
      lrow("4. with `ferry binlog-archive`", "arch")
      if ("base2_tps" in K) lrow("7. baseline again, after the rest", "base2")
      if ("ref_tps" in K) {
        tr = K["ref_tps"]
        printf "\nThe reference client (the stock streaming copy, same dump protocol, no compression, no store per interval) used %.2f CPU s (%.1f %% of one core) in its load and %.1f MiB max RSS; it copied %.1f MB.\n",
          K["ref_cpu_load"], 100 * K["ref_cpu_load"] / K["ref_secs"], K["ref_hwm_kib"] / 1024, K["ref_bytes"] / 1e6
      }
      printf "\nIn this order on the same dataset, each after quiesce (RESET MASTER before 1b and 2). The TPS baseline of the ratios is %s. Transactions and server CPU are over each whole load; TPS and its spread leave out the first %d s.\n", ("base2_tps" in K) ? sprintf("the mean of 1 and 7, %.1f", tb) : "load 1", warm

      print "\n### Apply: `ferry restore --to-gtid` vs `mariadb-binlog | mariadb`"
      printf "\n- backup %s (`ferry backup --repo`, archiver running, server idle): %s, GTID %s; target FINAL %s (end %s): **%d transactions** (the source'"'"'s binlog since the RESET MASTER before the archiver: %.1f MB)\n",
        K["backup_id"], K["backup_pos"], K["backup_gtid"], K["final_gtid"], K["final_pos"], K["ntx"], K["binlog_bytes"] / 1e6
      printf "- (a) `ferry restore --repo DIR --to-gtid FINAL --datadir X --use-memory %s` (replay threads: %s = %s): apply time = `took=` of its `point-in-time: applied` line (private server start on the prepared copy, parallel applier to FINAL, clean shutdown)\n", pmem, rthreads, K["ferry_threads-" runs]
      printf "- (b) `ferry restore --repo DIR ID --datadir Y --use-memory %s`, a server on Y (`--innodb-buffer-pool-size=%s --innodb-flush-log-at-trx-commit=0 --skip-log-bin`, the restored redo size), then `mariadb-binlog --start-position=POS FILES --stop-position=END | mariadb` (%d file(s))\n", pmem, pmem, K["binlog_files"]
      printf "- %d run(s) each, alternating, cold page cache; medians\n\n", runs
      ft = kagg("ferry_took"); mw = agg(W, "mb-apply", "med"); ms = kagg("mb_start"); mq = kagg("mb_stop")
      mall = (mw == "" ? "" : mw + ms + mq)
      print "| apply | transactions | apply s | tx/s | whole command s | check |"
      print "|---|---|---|---|---|---|"
      printf "| (a) ferry restore --to-gtid: `took=` | %s | %s | %s | %s (download, prepare, apply) | %s |\n", kagg("ferry_tx"), f(ft, "%.2f"), f(tp(K["ntx"], ft), "%.0f"), f(agg(W, "ferry-pitr", "med"), "%.2f"), check != "" ? check : K["check_ferry"]
      printf "| (b) mariadb-binlog \\| mariadb | %d | %s | %s | ferry restore ID %s + server start %s + pipe %s + shutdown %s | %s |\n", K["ntx"], f(mw, "%.2f"), f(tp(K["ntx"], mw), "%.0f"),
        f(agg(W, "ferry-restore", "med"), "%.2f"), f(ms, "%.2f"), f(mw, "%.2f"), f(mq, "%.2f"), check != "" ? check : K["check_mb"]
      printf "| (b) with server start and shutdown (as `took=` counts them) | %d | %s | %s | – | – |\n", K["ntx"], f(mall, "%.2f"), f(tp(K["ntx"], mall), "%.0f")
      printf "\nCPU s (user + sys, /usr/bin/time): the whole `ferry restore --to-gtid` %s (ferry and the private mariadbd of its prepare and replay, children it waits for); `mariadb-binlog | mariadb` %s (the two clients only, not the server applying it)\n",
        f(agg(C, "ferry-pitr", "med"), "%.2f"), f(agg(C, "mb-apply", "med"), "%.2f")

      print "\n| ratio | value | target | met |\n|---|---|---|---|"
      r = ratio(ta, tb); printf "| sysbench TPS with the archiver / baseline | %s | – | – |\n", r
      if ("ref_tps" in K) { r = ratio(tr, tb); printf "| sysbench TPS with the reference streaming client / baseline | %s | – | – |\n", r }
      if ("ref_tps" in K) { r = ratio(ta, tr); printf "| sysbench TPS with the archiver / with the reference streaming client | %s | – | – |\n", r }
      r = (K["rpo_p99"] == "") ? "–" : sprintf("%.0f ms", K["rpo_p99"]); printf "| archive lag p99 (last_gtid rule) | %s | < 1000 ms (sub-second RPO) | %s |\n", r, (K["rpo_p99"] == "") ? "–" : (K["rpo_p99"] + 0 < 1000 ? "yes" : "**no**")
      r = (K["rpoc_p99"] == "") ? "–" : sprintf("%.0f ms", K["rpoc_p99"]); printf "| archive lag p99 (commit event stored) | %s | < 1000 ms (sub-second RPO) | %s |\n", r, (K["rpoc_p99"] == "") ? "–" : (K["rpoc_p99"] + 0 < 1000 ? "yes" : "**no**")
      r = ratio(mw, ft); printf "| apply tx/s: ferry (took) / mariadb-binlog \\| mariadb (pipe) | %s | ≥ 3 | %s |\n", r, r == "–" ? "–" : (r + 0 >= 3 ? "yes" : "**no**")
      r2 = ratio(mall, ft); printf "| apply tx/s: ferry (took) / mariadb-binlog \\| mariadb with server start + shutdown | %s | – | – |\n", r2
      print "\ncheck: a server on the restored datadir; CHECKSUM TABLE of every sbtest table vs the idle source at FINAL (so X and Y also equal each other)."
    }' "$KV" "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw data in $RAW and $KV; logs in $LOGS"
((${#FAILED[@]} == 0)) || die "$(printf '%s; ' "${FAILED[@]}")"
