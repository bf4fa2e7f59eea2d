#!/usr/bin/env bash
# bench/backup.sh: ferry backup against mariadb-backup --backup on the same sysbench dataset.
#
# The method of bench/README.md (backup.sh): a private mariadbd (1 GiB buffer pool,
# 512 MiB redo, binlog on), cold page cache and no dirty pages before every timed run, each
# command under /usr/bin/time -f '%e %U %S %M'. Measures, in one invocation:
#   1. the raw read limit: O_DIRECT dd of every datadir file but ib_logfile0, RUNS times; and the
#      same-disk copy limit: a parallel cp of the same files into $BENCH_DIR, then sync;
#   2. ferry backup and mariadb-backup --backup (same --parallel), RUNS times each, alternating,
#      each followed by a separately timed `sync`;
#   3. correctness: prepare + restore the last ferry backup, start a server on it and compare
#      CHECKSUM TABLE of every sbtest table with the (idle) source;
#   4. each tool once under a sysbench oltp_write_only load: the write TPS kept meanwhile, the
#      transactions the server lost to the backup ((baseline TPS - TPS during) x duration) and the
#      duration against ferry's idle one; ferry at defaults (its pace), with --pace off (full
#      speed) and with --max-impact $GENTLE_IMPACT (gentle mode).
# Prints a markdown report and writes it to $BENCH_DIR/results.md. Needs root (drop_caches).
# Settings, servers, dataset, quiesce and timing helpers shared with stream.sh: bench/lib.sh.
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
#   GENTLE_IMPACT [10]                --max-impact of the gentle ferry run under load
#   SKIP_GENTLE=1                     leave out the gentle run (it takes minutes on the full set)
#   SKIP_UNPACED=1                    leave out the --pace off run under load
#   SKIP_FERRY=1 SKIP_LOAD=1 SKIP_CHECK=1   leave out ferry / the load phase / the restore check
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOAD_BASE_SECS=${LOAD_BASE_SECS:-20}
LOAD_GAP_SECS=${LOAD_GAP_SECS:-15}
LOAD_MAX_SECS=${LOAD_MAX_SECS:-1200}
SKIP_LOAD=${SKIP_LOAD:-0}
GENTLE_IMPACT=${GENTLE_IMPACT:-10}

BK_FERRY="$BENCH_DIR/bk-ferry"                    # backup dirs (removed before each run)
BK_MB="$BENCH_DIR/bk-mariabackup"
CP_DIR="$BENCH_DIR/cp-limit"                      # the same-disk copy (removed after each run)
RESTORED="$BENCH_DIR/restored"                    # datadir of the restore check
RESULTS="$BENCH_DIR/results.md"
CLEAN_PATHS=("$RESTORED")

bench_init
build_ferry
stop_stale "$RPIDF" "$RESTORED"
load_dataset

FERRY_CMD="$(q "${FERRY:-ferry}") backup --socket $(q "$SOCK") --user root --target-dir $(q "$BK_FERRY") --parallel $PARALLEL $FERRY_ARGS"
FERRY_GENTLE_CMD="$FERRY_CMD --max-impact $GENTLE_IMPACT"
FERRY_UNPACED_CMD="$FERRY_CMD --pace off"
# The same-disk copy limit: every file dd reads, copied by PARALLEL cp's onto the disk the
# backups go to, and made durable (the sync is part of it: the backup tools' is timed apart).
CP_CMD="mkdir -p $(q "$CP_DIR") && cd $(q "$DATA") && find . -type f ! -name ib_logfile0 -print0 | xargs -0 -r -n 16 -P $PARALLEL cp --parents -t $(q "$CP_DIR") && sync"
MB_CMD="mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --target-dir=$(q "$BK_MB") --parallel=$PARALLEL"

# run_tool TOOL LABEL RUN: removes TOOL's previous backup dir, then times a backup into it. The
# other tool's last backup is kept, so the last ferry backup survives the loop for the check.
run_tool() {
  case $1 in
    ferry) rm -rf "$BK_FERRY"; timed "$2" "$3" "$BK_FERRY" "$FERRY_CMD" ;;
    ferry-gentle) rm -rf "$BK_FERRY"; timed "$2" "$3" "$BK_FERRY" "$FERRY_GENTLE_CMD" ;;
    ferry-unpaced) rm -rf "$BK_FERRY"; timed "$2" "$3" "$BK_FERRY" "$FERRY_UNPACED_CMD" ;;
    *) rm -rf "$BK_MB"; timed "$2" "$3" "$BK_MB" "$MB_CMD" ;;
  esac
}

TOOLS=(ferry mariabackup)
LOAD_TOOLS=(ferry mariabackup ferry-unpaced ferry-gentle)   # the two defaults first, side by side
[[ ${SKIP_UNPACED:-0} == 1 ]] && LOAD_TOOLS=("${LOAD_TOOLS[@]/ferry-unpaced/}")
[[ ${SKIP_GENTLE:-0} == 1 ]] && LOAD_TOOLS=("${LOAD_TOOLS[@]/ferry-gentle/}")
LOAD_TOOLS=($(printf '%s\n' "${LOAD_TOOLS[@]}" | grep .))
[[ $SKIP_FERRY == 1 ]] && TOOLS=(mariabackup) && LOAD_TOOLS=(mariabackup)

# --- 1+2: idle runs, cold cache ---------------------------------------------------------------
rm -rf "$BK_FERRY" "$BK_MB"
quiesce
data_sizes
check_free 3
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); $RUNS runs, --parallel $PARALLEL"

for ((r = 1; r <= RUNS; r++)); do
  quiesce
  timed dd "$r" "$DD_BYTES" "$DD_CMD"
  rm -rf "$CP_DIR"; quiesce
  timed cp "$r" "$DD_BYTES" "$CP_CMD"
  rm -rf "$CP_DIR"
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
  rm -rf "$RESTORED"
  drop_caches
  timed ferry-prepare 1 0 "$(q "$FERRY") prepare --target-dir $(q "$BK_FERRY")"
  drop_caches
  timed ferry-restore 1 "$RESTORED" "$(q "$FERRY") restore --target-dir $(q "$BK_FERRY") --datadir $(q "$RESTORED")"
  check_restored "$RESTORED"
  rm -rf "$RESTORED" "$CP_DIR"
  # The restore's limit (issue 25, point 4): a parallel cp of the same prepared backup's
  # files to the same disk, with its sync (ferry's restore syncs before it returns).
  drop_caches
  timed cp-backup 1 "$BK_FERRY" "mkdir -p $(q "$CP_DIR") && cd $(q "$BK_FERRY") && find . -type f -print0 | xargs -0 -r -n 16 -P $PARALLEL cp --parents -t $(q "$CP_DIR") && sync"
  rm -rf "$CP_DIR"
fi
rm -rf "$BK_FERRY"

# --- 4: each tool once under a sysbench write load ----------------------------------------------
# since T0: the seconds from T0 (an earlier `now`) until now. The TPS of a window below is lib.sh's
# `tps FROM TO 0 %.1f -`: FROM and TO in seconds since sysbench started, "-" for no report in it.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

LOAD_LINES=""
if [[ $SKIP_LOAD != 1 ]]; then
  rm -rf "$BK_FERRY" "$BK_MB"
  quiesce
  log "load phase: sysbench oltp_write_only, $LOAD_THREADS threads; baseline ${LOAD_BASE_SECS} s"
  t0=$(now)
  sysbench oltp_write_only "${SB_OPTS[@]}" --threads="$LOAD_THREADS" --report-interval=1 \
    --time="$LOAD_MAX_SECS" run >"$SB_LOG" 2>&1 &
  SB_PID=$!
  sleep "$LOAD_BASE_SECS"
  declare -A WIN_S WIN_E
  for tool in "${LOAD_TOOLS[@]}"; do
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
  BASE_TPS=$(tps "$warm" "$LOAD_BASE_SECS" 0 %.1f -)
  for tool in "${LOAD_TOOLS[@]}"; do
    s=${WIN_S[$tool]} e=${WIN_E[$tool]}
    before=$(tps "$(awk -v s="$s" -v g="$LOAD_GAP_SECS" 'BEGIN { print s - g }')" "$s" 0 %.1f -)
    during=$(tps "$s" "$e" 0 %.1f -)
    after=$(tps "$e" "$(awk -v e="$e" -v g="$LOAD_GAP_SECS" 'BEGIN { print e + g }')" 0 %.1f -)
    LOAD_LINES+="$tool $s $e $before $during $after;"
  done
fi

# --- report -----------------------------------------------------------------------------------
describe_env

report() {
  report_gawk -v check="$CHECK" -v loadlines="$LOAD_LINES" \
      -v basetps="${BASE_TPS:-}" -v lthreads="$LOAD_THREADS" -v skipferry="$SKIP_FERRY" \
      -v ferryargs="$FERRY_ARGS" -v gentle="$GENTLE_IMPACT" -v gap="$LOAD_GAP_SECS" "$AWK_LIB"'
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
      row("same-disk copy: `cp` x " par " + `sync`", "cp")
      if (skipferry != 1) row("`ferry backup`", "ferry")
      row("`mariadb-backup --backup`", "mariabackup")
      if (skipferry != 1) {
        fw = agg(W, "ferry", "med"); mw = agg(W, "mariabackup", "med"); dw = agg(W, "dd", "med")
        fm = agg(W, "ferry", "min"); mm = agg(W, "mariabackup", "min"); dm = agg(W, "dd", "min")
        fc = agg(C, "ferry", "med"); mc = agg(C, "mariabackup", "med")
        cw = agg(W, "cp", "med"); fs = fw + agg(W, "sync-ferry", "med"); ms = mw + agg(W, "sync-mariabackup", "med")
        fr = agg(R, "ferry", "max"); mr = agg(R, "mariabackup", "max")
        print "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|"
        r = ratio(fw, dw); printf "| ferry / raw dd, wall | %s | %s | ≤ 1.15 | %s |\n", r, ratio(fm, dm), met(r, 1.15)
        r = ratio(fs, cw); printf "| ferry + its sync / same-disk copy limit, wall | %s | – | ≤ 1.20 | %s |\n", r, met(r, 1.20)
        r = ratio(fw, mw); printf "| ferry / mariadb-backup, wall | %s | %s | ≤ 0.80 | %s |\n", r, ratio(fm, mm), met(r, 0.80)
        r = ratio(fs, ms); printf "| ferry / mariadb-backup, wall + sync after | %s | – | ≤ 0.60 | %s |\n", r, met(r, 0.60)
        r = ratio(fc, mc); printf "| ferry / mariadb-backup, CPU s per GB | %s | – | ≤ 0.60 | %s |\n", r, met(r, 0.60)
        r = ratio(fr, mr); printf "| ferry / mariadb-backup, max RSS | %s | – | ferry < 256 MiB | %s |\n", r, fr == "" ? "–" : (fr / 1024 < 256 ? "yes" : "**no**")
        printf "| mariadb-backup / raw dd, wall | %s | %s | – | – |\n", ratio(mw, dw), ratio(mm, dm)
      }
      if (loadlines != "") {
        printf "\nUnder `sysbench oltp_write_only --threads=%d` (baseline: mean of per-second TPS before the first backup: **%s TPS**; TPS before is that of the %d s before each backup)\n\n", lthreads, basetps, gap
        print "| backup under load | wall s | x ferry idle | CPU s | max RSS MiB | TPS before (gap) | TPS during | TPS after (gap) | TPS kept (during / before) | transactions lost ((before - during) x wall) |"
        print "|---|---|---|---|---|---|---|---|---|---|"
        fi_ = agg(W, "ferry", "med")
        nl = split(loadlines, L, ";")
        for (i = 1; i <= nl; i++) {
          if (split(L[i], x, " ") < 6) continue
          lab = x[1] "-load"; w = W[lab, 1]
          # against the TPS just before this backup: the TPS of the load itself drifts over the phase
          kept = (x[5] == "-" || x[4] == "-" || x[4] == 0) ? "–" : sprintf("%.0f %%", 100 * x[5] / x[4])
          lost = (x[5] == "-" || x[4] == "-") ? "" : (x[4] - x[5]) * w
          name = x[1] == "ferry" ? "`ferry backup` (defaults)" : (x[1] == "ferry-gentle" ? "`ferry backup --max-impact " gentle "`" : (x[1] == "ferry-unpaced" ? "`ferry backup --pace off`" : "`mariadb-backup --backup`"))
          printf "| %s | %.2f | %s | %.2f | %.0f | %s | %s | %s | **%s** | **%s** |\n", name,
            w, ratio(w, fi_), C[lab, 1], R[lab, 1] / 1024, x[4], x[5], x[6], kept, f(lost, "%.0f")
          kp[x[1]] = kept; lo[x[1]] = lost; du[x[1]] = w
        }
        print "\n| under load | ferry | mariadb-backup | ratio | target | met |\n|---|---|---|---|---|---|"
        if (("ferry" in kp) && ("mariabackup" in kp))
          printf "| TPS kept | %s | %s | – | ferry keeps more | %s |\n", kp["ferry"], kp["mariabackup"], (kp["ferry"] != "–" && kp["mariabackup"] != "–") ? ((kp["ferry"] + 0 > kp["mariabackup"] + 0) ? "yes" : "**no**") : "–"
        if (("ferry" in lo) && ("mariabackup" in lo)) {
          r = ratio(lo["ferry"], lo["mariabackup"])
          printf "| transactions lost | %s | %s | %s | ≤ 0.50 | %s |\n", f(lo["ferry"], "%.0f"), f(lo["mariabackup"], "%.0f"), r, met(r, 0.50)
        }
        if ("ferry" in du) {
          r = ratio(du["ferry"], fi_)
          printf "| duration / ferry idle (%s s) | %.2f s | %s | %s | ≤ 1.50 | %s |\n", f(fi_, "%.2f"), du["ferry"], ("mariabackup" in du) ? sprintf("%.2f s", du["mariabackup"]) : "–", r, met(r, 1.50)
        }
        if (("ferry-gentle" in kp) && kp["ferry-gentle"] != "–")
          printf "\nTPS kept by ferry --max-impact %s: %s (asked: ≥ %d %%): %s\n", gentle, kp["ferry-gentle"], 100 - gentle, (kp["ferry-gentle"] + 0 >= 100 - gentle) ? "yes" : "**no**"
      }
      printf "\nRestore check (ferry prepare + restore of the last idle ferry backup, CHECKSUM TABLE vs the source): **%s**\n", check
      if (cnt["ferry-prepare"]) printf "(ferry prepare %.2f s, ferry restore %.2f s wall / %.2f CPU s / %.0f MiB RSS)\n", W["ferry-prepare", 1], W["ferry-restore", 1], C["ferry-restore", 1], R["ferry-restore", 1] / 1024
      if (cnt["cp-backup"] && W["cp-backup", 1] > 0) printf "Restore of the prepared backup / parallel cp of its files (%d processes) + sync, same disk: %.2f s / %.2f s = %.2f (target ≤ 1.10: %s)\n", par, W["ferry-restore", 1], W["cp-backup", 1], W["ferry-restore", 1] / W["cp-backup", 1], (W["ferry-restore", 1] / W["cp-backup", 1] <= 1.10) ? "yes" : "**no**"
    }' "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW"
