#!/usr/bin/env bash
# bench/stream.sh: ferry backup --stream against mariadb-backup --backup --stream=xbstream (piped
# into zstd / lz4), and ferry restore --from against the stock unpack + prepare + copy-back path,
# on the same sysbench dataset.
#
# Same method as bench/backup.sh (shared code: bench/lib.sh): a private mariadbd (1 GiB buffer
# pool, 512 MiB redo, binlog on), cold page cache and no dirty pages before every timed run, each
# command (a whole pipeline: children's CPU counts) under /usr/bin/time -f '%e %U %S %M'.
# Measures, in one invocation, RUNS times each, alternating ferry / mariadb-backup:
#   1. the raw read limit: O_DIRECT dd of every datadir file but ib_logfile0;
#   2. uncompressed: ferry --stream --compress none >/dev/null vs mariadb-backup --stream >/dev/null;
#   3. zstd: ferry --compress zstd | wc -c vs mariadb-backup --stream | zstd -1 -T$ZSTD_THREADS | wc -c;
#   4. lz4:  ferry --compress lz4 | wc -c  vs mariadb-backup --stream | lz4 -1 | wc -c;
#   5. ferry --compress zstd --encrypt-to (key from ferry keygen) | wc -c (informational);
#   6. restore of a saved compressed stream (cold cache): ferry restore --from ferry.xbs.zst
#      vs zstd -d | mbstream -x, mariadb-backup --prepare, mariadb-backup --copy-back, each
#      followed by a separately timed `sync`;
#   7. correctness: start a server on ferry's restored datadir and compare CHECKSUM TABLE of every
#      sbtest table with the (idle) source.
# Prints a markdown report and writes it to $BENCH_DIR/stream-results.md. Needs root.
#
#   bench/stream.sh                    # 14 tables x 1M rows (~4 GB datadir), 3 runs each
#   SMALL=1 bench/stream.sh            # 4 x 100k rows: checks the script in a few minutes
#   SKIP_FERRY=1 bench/stream.sh       # everything but ferry (e.g. while cmd/ferry does not build)
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), stream files, logs-stream/
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [3]                          timed runs of every command
#   PARALLEL [2]                      --parallel for both tools (backup, mbstream -x, copy-back, restore)
#   ZSTD_THREADS [nproc]              zstd -T for mariadb-backup's stream (ferry compresses on every core)
#   PREPARE_MEMORY [256M]             mariadb-backup --prepare --use-memory (ferry restore's default)
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry backup` (e.g. "--max-memory 512M")
#   SKIP_FERRY=1 SKIP_RESTORE=1 SKIP_CHECK=1   leave out ferry / the restore runs / the check
#   KEEP_SERVER=1                     leave the private server running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ZSTD_THREADS=${ZSTD_THREADS:-$(nproc)}
SKIP_RESTORE=${SKIP_RESTORE:-0}

LOGS="$BENCH_DIR/logs-stream"                     # per-command logs (backup.sh keeps logs/)
RESULTS="$BENCH_DIR/stream-results.md"
F_XBS="$BENCH_DIR/ferry.xbs.zst"                  # saved streams for the restore runs: ferry's
M_XBS="$BENCH_DIR/mb.xbs.zst"                     # (zstd inside), mariadb-backup's | zstd -1
KEY="$BENCH_DIR/stream-age-key.txt"               # age identity from ferry keygen
F_REST="$BENCH_DIR/restored-ferry"                # ferry restore --datadir
M_UNPACK="$BENCH_DIR/restored-mb-unpacked"        # mbstream -x -C, then --prepare
M_REST="$BENCH_DIR/restored-mb"                   # mariadb-backup --copy-back --datadir
SIZEF="$BENCH_DIR/stream-size.out"                # wc -c of the last compressed stream
CLEAN_PATHS=("$F_XBS" "$M_XBS" "$KEY" "$F_REST" "$M_UNPACK" "$M_REST" "$SIZEF")

bench_init
need zstd zstd
need lz4 lz4
need mbstream mariadb-backup
build_ferry
stop_stale "$RPIDF" "$F_REST"
load_dataset

FERRY_STREAM="$(q "${FERRY:-ferry}") backup --socket $(q "$SOCK") --user root --stream --parallel $PARALLEL $FERRY_ARGS"
MB_STREAM="mariadb-backup --no-defaults --backup --stream=xbstream --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL"
WC="wc -c >$(q "$SIZEF")"
declare -A CMD SIZE
CMD[ferry-none]="$FERRY_STREAM --compress none >/dev/null";  SIZE[ferry-none]=0
CMD[mb-none]="$MB_STREAM >/dev/null";                         SIZE[mb-none]=0
CMD[ferry-zstd]="$FERRY_STREAM --compress zstd | $WC";        SIZE[ferry-zstd]="@$SIZEF"
CMD[mb-zstd]="$MB_STREAM | zstd -1 -T$ZSTD_THREADS -q -c | $WC"; SIZE[mb-zstd]="@$SIZEF"
CMD[ferry-lz4]="$FERRY_STREAM --compress lz4 | $WC";          SIZE[ferry-lz4]="@$SIZEF"
CMD[mb-lz4]="$MB_STREAM | lz4 -1 -q -c | $WC";                SIZE[mb-lz4]="@$SIZEF"

TOOLS=(ferry mb)
[[ $SKIP_FERRY == 1 ]] && TOOLS=(mb)
# order RUN: the tools in the order of that run (odd runs ferry first, even runs mariadb-backup).

# --- 1-5: streams of the idle server, cold cache ------------------------------------------------
rm -rf "${CLEAN_PATHS[@]}"
quiesce
data_sizes
check_free 4
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); $RUNS runs, --parallel $PARALLEL"

if [[ $SKIP_FERRY != 1 ]]; then
  PUB=$("$FERRY" keygen --output "$KEY" 2>"$LOGS/keygen.log") || { cat "$LOGS/keygen.log" >&2; die "ferry keygen failed"; }
  PUB=$(printf '%s\n' "$PUB" | grep -m1 -o 'age1[0-9a-z]*') || die "ferry keygen printed no age1... public key"
  CMD[ferry-age]="$FERRY_STREAM --compress zstd --encrypt-to $PUB | $WC"; SIZE[ferry-age]="@$SIZEF"
fi

for ((r = 1; r <= RUNS; r++)); do
  quiesce
  timed dd "$r" "$DD_BYTES" "$DD_CMD"
  for mode in none zstd lz4; do
    for tool in $(order "$r"); do
      quiesce
      timed "$tool-$mode" "$r" "${SIZE[$tool-$mode]}" "${CMD[$tool-$mode]}"
    done
  done
  if [[ $SKIP_FERRY != 1 ]]; then
    quiesce
    timed ferry-age "$r" "${SIZE[ferry-age]}" "${CMD[ferry-age]}"
  fi
done

# --- 6: restore from a saved compressed stream, cold cache ---------------------------------------
# The source stays idle from here on, so the check compares with the state the streams captured.
CHECK="not run (SKIP_CHECK=1)"
[[ $SKIP_RESTORE == 1 ]] && CHECK="not run (SKIP_RESTORE=1)"
[[ $SKIP_FERRY == 1 ]] && CHECK="not run (SKIP_FERRY=1)"
F_XBS_BYTES=""; M_XBS_BYTES=""
if [[ $SKIP_RESTORE != 1 ]]; then
  log "saving the streams for the restore runs (not part of the results)"
  if [[ $SKIP_FERRY != 1 ]]; then
    timed save-ferry 1 0 "$FERRY_STREAM --compress zstd >$(q "$F_XBS")"
    F_XBS_BYTES=$(stat -c %s "$F_XBS")
  fi
  timed save-mb 1 0 "$MB_STREAM | zstd -1 -T$ZSTD_THREADS -q -c >$(q "$M_XBS")"
  M_XBS_BYTES=$(stat -c %s "$M_XBS")

  CMD[ferry-restore]="$(q "${FERRY:-ferry}") restore --from $(q "$F_XBS") --datadir $(q "$F_REST") --parallel $PARALLEL"
  # The stock path as one command; each step is also timed on its own (labels mb-unpack, ...).
  CMD[mb-restore]=$(stock_restore_cmd mb-unpack "zstd -d -q -c $(q "$M_XBS") | mbstream -x -p $PARALLEL -C $(q "$M_UNPACK")")
  restore_runs timed
  rm -f "$M_XBS"

  # --- 7: correctness of ferry's last restore --------------------------------------------------
  if [[ $SKIP_FERRY != 1 && $SKIP_CHECK != 1 ]]; then
    check_restored "$F_REST"
  fi
  rm -rf "$F_REST" "$F_XBS"
fi

# --- report -----------------------------------------------------------------------------------
describe_env
VERSIONS+="; $(ver zstd --version | sed 's/^\*\*\* //;s/ (64-bit)//;s/, by.*//;s/ CLI//'); $(ver lz4 --version | sed 's/^\*\*\* //;s/ command line interface 64-bits//;s/, by.*//')"

report() {
  report_gawk -v zt="$ZSTD_THREADS" -v check="$CHECK" \
      -v skipferry="$SKIP_FERRY" -v skiprestore="$SKIP_RESTORE" -v ferryargs="$FERRY_ARGS" \
      -v fxbs="$F_XBS_BYTES" -v mxbs="$M_XBS_BYTES" -v pmem="$PREPARE_MEMORY" "$AWK_LIB"'
    # stream row: the stream size (median; also as % of what dd reads) and MB/s of data read
    # (what dd reads / median wall)
    function srow(name, label,   gb, wmed, b) {
      gb = databytes / 1e9
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – | – |\n", name; return }
      wmed = agg(W, label, "med"); b = (label == "dd") ? 0 : agg(B, label, "med")
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %s | %.0f |\n", name, cnt[label],
        wmed, agg(W, label, "min"), agg(U, label, "med"), agg(S, label, "med"), agg(C, label, "med") / gb,
        agg(R, label, "max") / 1024, (b > 0) ? sprintf("%.0f", b / 1e6) : "–",
        (b > 0) ? sprintf("%.1f %%", 100 * b / ddbytes) : "–", ddbytes / 1e6 / wmed }
    # restore row: the restored datadir size and the separately timed sync
    function rrow(name, label,   gb, b, sy) {
      gb = databytes / 1e9
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – |\n", name; return }
      b = agg(B, label, "med"); sy = agg(W, "sync-" label, "med")
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %s |\n", name, cnt[label],
        agg(W, label, "med"), agg(W, label, "min"), agg(U, label, "med"), agg(S, label, "med"),
        agg(C, label, "med") / gb, agg(R, label, "max") / 1024, (b > 0) ? sprintf("%.0f", b / 1e6) : "–", f(sy, "%.2f") }
    # ratio row: label a over label b in array A, median (and min if withmin); met if <= lim
    function rat(name, A, a, b, lim, tgt, withmin,   r) {
      r = ratio(agg(A, a, "med"), agg(A, b, "med"))
      printf "| %s | %s | %s | %s | %s |\n", name, r, withmin ? ratio(agg(A, a, "min"), agg(A, b, "min")) : "–",
        tgt, lim == "" ? "–" : met(r, lim) }
    # largest max RSS of the stream runs (labels TOOL-none/zstd/lz4/age)
    function maxrss(tool,   l, m, v) {
      m = ""
      for (l in cnt) if (index(l, tool "-") == 1 && l ~ /-(none|zstd|lz4|age)$/) { v = agg(R, l, "max"); if (m == "" || v > m) m = v }
      return m }
    END {
      gb = databytes / 1e9
      printf "## ferry backup --stream vs mariadb-backup --stream=xbstream, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (what dd reads)\n", tables, rows, databytes / 1e9, ddbytes / 1e9
      printf "- %d cold-cache runs each (page cache dropped, 0 dirty pages), alternating ferry / mariadb-backup, --parallel %d; mariadb-backup piped into `zstd -1 -T%d` / `lz4 -1`%s\n", runs, par, zt, ferryargs == "" ? "" : "; ferry " ferryargs
      printf "- each row times the whole pipeline (`bash -o pipefail -c`): CPU includes the compressor and `wc`\n\n"
      print "| what | n | wall s median | wall s min | user s | sys s | CPU s/GB datadir | max RSS MiB | stream MB | stream / data read | MB/s read (median) |"
      print "|---|---|---|---|---|---|---|---|---|---|---|"
      srow("raw `dd iflag=direct` (all but ib_logfile0)", "dd")
      if (skipferry != 1) srow("`ferry --stream --compress none >/dev/null`", "ferry-none")
      srow("`mariadb-backup --stream=xbstream >/dev/null`", "mb-none")
      if (skipferry != 1) srow("`ferry --stream --compress zstd \\| wc -c`", "ferry-zstd")
      srow("`mariadb-backup --stream=xbstream \\| zstd -1 \\| wc -c`", "mb-zstd")
      if (skipferry != 1) srow("`ferry --stream --compress lz4 \\| wc -c`", "ferry-lz4")
      srow("`mariadb-backup --stream=xbstream \\| lz4 -1 \\| wc -c`", "mb-lz4")
      if (skipferry != 1) srow("`ferry --stream --compress zstd --encrypt-to age1… \\| wc -c`", "ferry-age")

      print "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|"
      if (skipferry != 1) {
        rat("ferry none / raw dd, wall", W, "ferry-none", "dd", 1.10, "≤ 1.10", 1)
        rat("ferry none / mariadb-backup stream, wall", W, "ferry-none", "mb-none", "", "–", 1)
      }
      rat("mariadb-backup stream / raw dd, wall", W, "mb-none", "dd", "", "–", 1)
      if (skipferry != 1) {
        rat("ferry zstd / mariadb-backup \\| zstd -1, wall", W, "ferry-zstd", "mb-zstd", 0.70, "≤ 0.70", 1)
        rat("ferry zstd / mariadb-backup \\| zstd -1, stream size", B, "ferry-zstd", "mb-zstd", 1.05, "≤ 1.05")
        rat("ferry zstd / mariadb-backup \\| zstd -1, CPU s per GB", C, "ferry-zstd", "mb-zstd", "", "–")
        rat("ferry lz4 / mariadb-backup \\| lz4 -1, wall", W, "ferry-lz4", "mb-lz4", 0.70, "≤ 0.70", 1)
        rat("ferry lz4 / mariadb-backup \\| lz4 -1, stream size", B, "ferry-lz4", "mb-lz4", 1.05, "≤ 1.05")
        rat("ferry lz4 / mariadb-backup \\| lz4 -1, CPU s per GB", C, "ferry-lz4", "mb-lz4", "", "–")
        rat("ferry zstd + age / ferry zstd, wall", W, "ferry-age", "ferry-zstd", "", "–", 1)
        rat("ferry zstd + age / ferry zstd, CPU s", C, "ferry-age", "ferry-zstd", "", "–")
        fr = maxrss("ferry"); mr = maxrss("mb")
        printf "| ferry / mariadb-backup, max RSS of all stream runs (%s / %s MiB) | %s | – | – | – |\n", f(fr / 1024, "%.0f"), f(mr / 1024, "%.0f"), ratio(fr, mr)
      }

      if (skiprestore != 1) {
        printf "\nRestore from a saved compressed stream (cold cache; stream files: ferry zstd %s MB, mariadb-backup | zstd -1 %s MB); "\
          "the stock path is one `bash -c` of the three steps, each also timed on its own; `mariadb-backup --prepare --use-memory=%s`:\n\n",
          fxbs == "" ? "–" : sprintf("%.0f", fxbs / 1e6), mxbs == "" ? "–" : sprintf("%.0f", mxbs / 1e6), pmem
        print "| restore | n | wall s median | wall s min | user s | sys s | CPU s/GB datadir | max RSS MiB | datadir MB | sync after s |"
        print "|---|---|---|---|---|---|---|---|---|---|"
        if (skipferry != 1) rrow("`ferry restore --from ferry.xbs.zst`", "ferry-restore")
        rrow("stock: unpack + prepare + copy-back", "mb-restore")
        rrow("&nbsp;&nbsp;1. `zstd -d \\| mbstream -x`", "mb-unpack")
        rrow("&nbsp;&nbsp;2. `mariadb-backup --prepare`", "mb-prepare")
        rrow("&nbsp;&nbsp;3. `mariadb-backup --copy-back`", "mb-copyback")
        if (skipferry != 1) {
          print "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|"
          r = ratio(agg(W, "ferry-restore", "med"), agg(W, "mb-restore", "med"))
          printf "| ferry restore / stock path, wall | %s | %s | < 1 (ferry faster) | %s |\n", r,
            ratio(agg(W, "ferry-restore", "min"), agg(W, "mb-restore", "min")), r == "–" ? "–" : (r + 0 < 1 ? "yes" : "**no**")
          rat("ferry restore / stock path, CPU s", C, "ferry-restore", "mb-restore", "", "–")
          printf "| ferry restore / stock path, max RSS | %s | – | – | – |\n", ratio(agg(R, "ferry-restore", "max"), agg(R, "mb-restore", "max"))
        }
      }
      printf "\nRestore check (server on ferry'"'"'s last restored datadir, CHECKSUM TABLE vs the source): **%s**\n", check
    }' "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW"
