#!/usr/bin/env bash
# bench/slowsink.sh: a stream backup under a write load into a slow sink, with a small redo log.
# `ferry backup --stream --compress none` against `mariadb-backup --backup --stream=xbstream`,
# each piped through `pv -q -L SINK_RATE` (20 MiB/s) into a file, while sysbench oltp_write_only
# runs on a server whose redo log is only REDO_SIZE (64M). The data copy then lasts minutes and the
# server writes its redo log over many times meanwhile: ferry must spool the redo (--tmpdir) and
# complete; the stock tool is expected to lose the race (a redo-log-overwritten error), which is
# recorded as its result, not treated as a failure of this script.
#
# Same private server and dataset as bench/backup.sh (shared code: bench/lib.sh): 1 GiB buffer
# pool, binlog on, but started with --innodb-log-file-size=REDO_SIZE (MariaDB 10.11 resizes
# ib_logfile0 at startup; the other scripts resize it back to 512M when they start the server).
# Per run, for each tool (alternating the order on even runs, see lib.sh `order`):
#   1. no dirty pages, page cache dropped (lib.sh quiesce), RESET MASTER;
#   2. sysbench oltp_write_only (LOAD_THREADS threads, --rate=0, --report-interval=1) starts;
#      after LOAD_WARMUP_SECS, LOAD_BASE_SECS of load alone are the TPS baseline;
#   3. the backup, timed by lib.sh `timed`: TOOL | pv -q -L SINK_RATE >FILE. The pipeline's exit
#      statuses are recorded (a failed backup is a result); recorded: wall time, the stream's bytes,
#      the redo the server wrote meanwhile (Innodb_lsn_current before and after), and for ferry the
#      "redo copy finished" log line's redo_bytes and spool_peak_bytes; for a failed backup its
#      first error line;
#   4. the load stops; TPS during the backup = mean of sysbench's per-second TPS inside the timed
#      window;
#   5. correctness, once (ferry's first complete stream; SKIP_CHECK=1 leaves it out), with the
#      source idle: `ferry restore --from FILE --datadir D`, a server (socket only) on D must pass
#      mariadb-check --all-databases (CHECK TABLE) and hold as many rows per sbtest table as the
#      source before the load (oltp_write_only's delete + insert keeps that count at every commit).
# Prints a markdown report and writes it to $BENCH_DIR/slowsink-results.md. Needs root. Exits
# non-zero at the end if a ferry backup failed or the check did not pass.
#
#   bench/slowsink.sh                    # 14 x 1M rows (~4 GB datadir): ~3.7 GB at 20 MiB/s, ~4 min per tool
#   SMALL=1 bench/slowsink.sh            # 4 x 100k rows: checks the script in a few minutes
#   SINK_RATE=50m REDO_SIZE=128M bench/slowsink.sh
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), stream file, logs-slowsink/
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [1]                          runs of every tool
#   PARALLEL [2]                      --parallel for both tools and ferry restore
#   SINK_RATE [20m]                   pv -L: the sink's bytes per second (k, m, g: KiB, MiB, GiB)
#   REDO_SIZE [64M]                   the server's --innodb-log-file-size during this bench
#   LOAD_THREADS [2]                  sysbench oltp_write_only threads (unthrottled)
#   LOAD_WARMUP_SECS [5]              load seconds before the baseline window
#   LOAD_BASE_SECS [10]               load-only seconds just before the backup: the TPS baseline
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a backup is killed (recorded as a failure, 124)
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry backup` (e.g. "--tmpdir /big/disk")
#   SKIP_FERRY=1 FERRY_ONLY=1         leave out ferry / mariadb-backup
#   SKIP_CHECK=1                      leave out the restore check
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
RUNS=${RUNS:-1}                                   # lib.sh's default is 3; a run is minutes long
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SINK_RATE=${SINK_RATE:-20m}
REDO_SIZE=${REDO_SIZE:-64M}
LOAD_BASE_SECS=${LOAD_BASE_SECS:-10}

LOGS="$BENCH_DIR/logs-slowsink"                   # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/slowsink-results.md"
OUT="$BENCH_DIR/slowsink.xbstream"                # the stream of the current run (the sink's file)
F_REST="$BENCH_DIR/slowsink-restored"             # ferry restore --datadir, then the check's server
RCF="$BENCH_DIR/slowsink.rc"                      # PIPESTATUS of the current backup pipeline
SIZEF="$BENCH_DIR/slowsink.size"                  # the stream's bytes (lib.sh timed's @FILE)
CLEAN_PATHS=("$OUT" "$RCF" "$SIZEF")
CLEAN_RESTORED=("$F_REST")

[[ $SINK_RATE =~ ^[1-9][0-9]*[kmgKMG]?$ ]] || die "SINK_RATE must be a pv -L rate such as 20m, not '$SINK_RATE'"
[[ $REDO_SIZE =~ ^[1-9][0-9]*[KMG]$ ]] || die "REDO_SIZE must be a size such as 64M, not '$REDO_SIZE'"
[[ $LOAD_THREADS =~ ^[1-9][0-9]*$ ]] || die "LOAD_THREADS must be a positive integer"
[[ $LOAD_WARMUP_SECS =~ ^[0-9]+$ ]] || die "LOAD_WARMUP_SECS must be a whole number of seconds"
[[ $LOAD_BASE_SECS =~ ^[1-9][0-9]*$ ]] || die "LOAD_BASE_SECS must be a positive number of seconds"
[[ $SKIP_FERRY == 1 && $FERRY_ONLY == 1 ]] && die "SKIP_FERRY=1 and FERRY_ONLY=1 leave nothing to run"

# start_source (lib.sh's, overridden): the same server, but with the small redo log (the last
# --innodb-log-file-size wins over start_server's 512M).
start_source() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1 --innodb-log-file-size="$REDO_SIZE"
}

# --- helpers (the load, logval, res_row, the restore check's parts: lib.sh) --------------------------
lsn() { sql -e "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'" | cut -f2; }
# first_error LOG: the first two lines of a backup's LOG that report the failure, joined with
# " / " (mariadb-backup: "Was only able to copy log from A to B, not C" and "Try increasing the
# innodb_log_file_size"); "" if none.
first_error() {
  grep -m2 -E 'level=ERROR|\[ERROR\]|FATAL|[Oo]verwritten|[Ee]rror:|Was only able to copy log|Try increasing' "$1" |
    tr -s '\t ' '  ' | gawk '{ printf "%s%s", (NR > 1) ? " / " : "", $0 }' | cut -c1-500 || true
}
# mb_redo LOG: the redo mariadb-backup's LOG says it copied ("Redo log (from LSN A to B) was
# copied": B - A), "" if it has no such line (a failed backup).
mb_redo() {
  gawk 'match($0, /Redo log \(from LSN [0-9]+ to [0-9]+\) was copied/) {
      split(substr($0, RSTART, RLENGTH), w, " "); v = w[7] - w[5] }
    END { if (v != "") printf "%.0f", v }' "$1"
}

# --- correctness ----------------------------------------------------------------------------------
# check_stream: restores $OUT with ferry restore --from and checks the restored datadir (step 5
# above); the source must be idle. Sets CHECK.
check_stream() {
  local fails=()
  clean_restored "$F_REST"
  drop_caches
  timed ferry-restore 1 "$F_REST" "$(q "$FERRY") restore --from $(q "$OUT") --datadir $(q "$F_REST") --parallel $PARALLEL"
  log "check: restored datadir $F_REST (server start, CHECK TABLE, rows per table)"
  start_restored "$F_REST"
  check_tables_rows
  stop_restored
  set_check "server started; mariadb-check all $(grep -c ' OK$' "$LOGS/check-tables.txt") tables OK; $TABLES/$TABLES sbtest tables with their $(gawk '{ s += $2 } END { print s }' "$LOGS/counts-source.txt") rows"
  clean_restored "$F_REST"
}

# --- one run --------------------------------------------------------------------------------------
# sink_run TOOL RUN: one backup of TOOL (ferry or mb) under load into the slow sink; appends its
# line to $RES; the check runs on ferry's first complete stream.
sink_run() {
  local tool=$1 r=$2 label="$1" cmd t0 t1 l0 l1 base during wall bytes st ok err="" redo="" spool="" flog
  rm -f "$OUT" "$RCF" "$SIZEF"
  if [[ $tool == ferry ]]; then
    cmd="$(q "$FERRY") backup --socket $(q "$SOCK") --user root --stream --compress none --parallel $PARALLEL $FERRY_ARGS"
  else
    cmd="mariadb-backup --no-defaults --backup --stream=xbstream --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL"
  fi
  # The pipeline's statuses go to $RCF, so that a failed backup is measured, not fatal; the inner
  # timeout turns a hang into status 124 (the outer one of `timed` gets 60 s more).
  cmd="timeout -k 10 $TOOL_TIMEOUT $cmd | pv -q -L $SINK_RATE >$(q "$OUT"); echo \"\${PIPESTATUS[*]}\" >$(q "$RCF"); stat -c %s $(q "$OUT") >$(q "$SIZEF")"
  quiesce
  sql -e "RESET MASTER"
  start_load $((LOAD_WARMUP_SECS + LOAD_BASE_SECS)) "the backup"
  l0=$(lsn); t0=$(now)
  TOOL_TIMEOUT=$((TOOL_TIMEOUT + 60)) timed "$label" "$r" "@$SIZEF" "$cmd"
  t1=$(now); l1=$(lsn)
  stop_load "$LOGS/$label-$r.sysbench.log"
  base=$(tps "$(gawk -v t="$t0" -v b="$LOAD_BASE_SECS" 'BEGIN { printf "%.3f", t - b }')" "$t0")
  during=$(tps "$t0" "$t1")
  wall=$(wall_of "$label" "$r")
  read -r bytes <"$SIZEF" || bytes=0
  read -r st <"$RCF" || st="?"
  ok=1; [[ $st =~ ^(0\ )*0$ ]] || ok=0
  flog="$LOGS/$label-$r.log"
  if [[ $tool == ferry ]]; then
    redo=$(logval "$flog" "redo copy finished" redo_bytes)
    spool=$(logval "$flog" "redo copy finished" spool_peak_bytes)
  else
    redo=$(mb_redo "$flog")
  fi
  ((ok)) || err=$(first_error "$flog")
  [[ $ok == 1 || -n $err ]] || err=$(tail -n1 "$flog" | cut -c1-400)
  res_row "$tool" "$r" "$ok" "$st" "$wall" "$bytes" "$((l1 - l0))" "$redo" "$spool" "${base:-}" "${during:-}" "$err"
  log "$(printf '  %-8s run %s: %s (exit statuses %s) after %s s; stream %s B; server redo %s B; redo shipped %s B, spool peak %s B; TPS %s baseline, %s during' \
    "$tool" "$r" "$( ((ok)) && echo completed || echo FAILED)" "$st" "$wall" "$bytes" "$((l1 - l0))" "${redo:-–}" "${spool:-–}" "${base:-–}" "${during:-–}")"
  [[ -n $err ]] && log "  $tool error: $err"
  if [[ $tool == ferry && $ok == 1 && $SKIP_CHECK != 1 && $CHECK == "not run"* ]]; then check_stream; fi
  rm -f "$OUT"
}

# --- setup ------------------------------------------------------------------------------------------
bench_init
need pv pv
need mariadb-check mariadb-client
build_ferry
RES="$LOGS/slowsink.tsv"; : >"$RES"               # one line per run (fields: report below)
stop_stale "$RPIDF" "$F_REST"
ERR_OFF=$(stat -c %s "$BENCH_DIR/src.err" 2>/dev/null || echo 0)   # src.err grows across starts
load_dataset
want=$(numfmt --from=iec "$REDO_SIZE")
have=$(sql -e "SELECT @@GLOBAL.innodb_log_file_size")
[[ $have == "$want" ]] || die "the server runs with innodb_log_file_size=$have, not $REDO_SIZE ($want)"
tail -c +$((ERR_OFF + 1)) "$BENCH_DIR/src.err" | grep -a 'Resizing redo log'  | sed 's/^/bench: server: /' >&2 || true

TOOLS=(ferry mb)
[[ $SKIP_FERRY == 1 ]] && TOOLS=(mb)
[[ $FERRY_ONLY == 1 ]] && TOOLS=(ferry)
CHECK="not run"
[[ $SKIP_CHECK == 1 ]] && CHECK="not run (SKIP_CHECK=1)"
[[ $SKIP_FERRY == 1 ]] && CHECK="not run (SKIP_FERRY=1)"

rm -f "$OUT"; clean_restored "$F_REST"
quiesce
data_sizes
count_rows sql >"$LOGS/counts-source.txt"         # the rows per table every commit keeps
check_free 3
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); redo log $REDO_SIZE; sink pv -L $SINK_RATE; $RUNS run(s) of ${TOOLS[*]}"

# --- the runs -----------------------------------------------------------------------------------
for ((r = 1; r <= RUNS; r++)); do
  for tool in $(order "$r"); do
    sink_run "$tool" "$r"
  done
done
[[ $CHECK == "not run" ]] && CHECK="not run (no complete ferry stream)"

# --- report -----------------------------------------------------------------------------------
describe_env
VERSIONS+="; $(ver pv --version | sed 's/ - Copyright.*//')"

report() {
  report_gawk -v rate="$SINK_RATE" -v redosize="$REDO_SIZE" -v check="$CHECK" \
      -v lthreads="$LOAD_THREADS" -v lbase="$LOAD_BASE_SECS" -v lwarm="$LOAD_WARMUP_SECS" \
      -v ferryargs="$FERRY_ARGS" -v restore="$(gawk -F'\t' '$1 == "ferry-restore" { print $3 }' "$RAW")" "$AWK_FUNCS"'
    # $RES: tool run ok statuses wall stream_bytes server_redo redo_bytes spool_peak tps_base tps_during error
    function mib(x) { return x == "" ? "–" : sprintf("%.1f", x / 1048576) }
    { row[++n] = $0 }
    END {
      tl["ferry"] = "`ferry backup --stream --compress none`"; tl["mb"] = "`mariadb-backup --backup --stream=xbstream`"
      printf "## Slow sink: stream backups under load through `pv -L %s` with a %s redo log, ferry vs mariadb-backup, %s\n\n", rate, redosize, date
      printf "- machine: %s (server, load, backup, pv and the sink file all on this host)\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (what the tools read) at the start\n", tables, rows, databytes / 1e9, ddbytes / 1e9
      printf "- server: 1 GiB buffer pool, `--innodb-log-file-size=%s`, binlog on\n", redosize
      printf "- load during every backup: `sysbench oltp_write_only --threads=%d --rate=0` (unthrottled); baseline: mean per-second TPS of the %d s before the backup (after %d s of warm-up)\n", lthreads, lbase, lwarm
      printf "- backup: `TOOL --parallel %d | pv -q -L %s > FILE` (same disk), timed as one pipeline; %d run(s) per tool%s\n\n", par, rate, runs, ferryargs == "" ? "" : "; ferry backup " ferryargs
      print "| tool | run | result | wall s | stream MB | stream MiB/s | server redo written MiB | redo shipped MiB | spool peak MiB | TPS baseline | TPS during | TPS kept |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        split(row[i], x, "\t")
        printf "| %s | %s | %s | %.2f | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", tl[x[1]], x[2],
          x[3] == 1 ? "completed" : "**failed** (exit " x[4] ")", x[5], x[6] / 1e6,
          (x[5] > 0) ? sprintf("%.1f", x[6] / 1048576 / x[5]) : "–", mib(x[7]), mib(x[8]), mib(x[9]),
          f(x[10], "%.1f"), f(x[11], "%.1f"), (x[10] > 0 && x[11] != "") ? sprintf("%.0f %%", 100 * x[11] / x[10]) : "–"
      }
      print "\nserver redo written: Innodb_lsn_current after − before the backup (the log is " redosize "). redo shipped: ferry: `redo_bytes` of its `redo copy finished` log line (from the server'"'"'s checkpoint before the backup, so it includes redo written before the backup started); mariadb-backup: B − A of its `Redo log (from LSN A to B) was copied` line. spool peak: ferry'"'"'s `spool_peak_bytes` (the most redo held in `--tmpdir` while the sink was slower than the server). exit: the pipeline'"'"'s statuses (tool, pv)."
      for (i = 1; i <= n; i++) { split(row[i], x, "\t"); if (x[12] != "") printf "\n%s run %s, first error line: `%s`\n", x[1] == "ferry" ? "ferry" : "mariadb-backup", x[2], x[12] }
      printf "\nCheck (`ferry restore --from FILE` of ferry'"'"'s first complete stream%s; server on it: mariadb-check --all-databases, rows per sbtest table vs the source before the load): **%s**\n",
        restore == "" ? "" : sprintf(", %.2f s", restore), check
    }' "$RES"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RES and $RAW"
gawk -F'\t' '$1 == "ferry" && $3 != 1 { bad = 1 } END { exit bad }' "$RES" || die "a ferry backup did not complete (see $RESULTS)"
[[ $CHECK == OK* || $CHECK == "not run ("*"=1)" ]] || die "check: $CHECK"
