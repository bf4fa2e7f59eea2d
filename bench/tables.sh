#!/usr/bin/env bash
# bench/tables.sh: many small tablespaces (issue 25, point 1). ferry against mariadb-backup and
# against the copy and read limits, on datadirs of N tables (100 per schema, 1 in 20 MyISAM,
# 3 rows each), for each N of TABLE_COUNTS.
#
# Same method as bench/backup.sh (shared code: bench/lib.sh): a private mariadbd, cold page cache
# and no dirty pages before every timed run, each command under /usr/bin/time, each followed by a
# separately timed `sync` (mariadb-backup leaves writeback behind; the ratios count it). Per N, in
# one invocation, RUNS times each, alternating who goes first:
#   1. backup to a directory: ferry backup --target-dir vs mariadb-backup --backup;
#   2. restore: ferry restore --target-dir of its backup vs mariadb-backup --prepare + --copy-back
#      (of a fresh backup taken untimed before each run: --prepare changes it), each step timed;
#      and the moving restores: ferry restore --move (of an untimed copy of its backup) vs
#      mariadb-backup --prepare + --move-back (of a fresh backup);
#   3. the limits on the same bytes: a parallel read (xargs -P cat) and a parallel cp of ferry's
#      backup files to the same disk (restores are compared with the cp: issue 25, point 4), and
#      a read and a cp of one file that holds them all (the "same bytes in a few large files" of
#      issue 25, point 1);
#   4. a directory repository: ferry backup --repo and ferry restore --repo;
#   5. streams to a file: ferry backup --stream --compress none vs mariadb-backup --stream=xbstream,
#      and their restores: ferry restore --from vs mbstream -x + --prepare + --copy-back;
#   6. correctness: a server on ferry's restored datadir (step 2) has N tables (per engine as the
#      source) and CHECKSUM TABLE of SAMPLE tables spread over the schemas (both engines) equal to
#      the source's.
# Prints a markdown report per N and writes them to $BENCH_DIR/tables-results.md. Needs root.
#
#   bench/tables.sh                              # 20,000 and 100,000 tables, 3 runs each
#   TABLE_COUNTS=2000 RUNS=1 bench/tables.sh     # checks the script in a few minutes
#
# Options (environment), defaults in brackets (the common ones: lib.sh):
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: datadirs tables-N (built once, kept), backups, logs-tables/
#   TABLE_COUNTS ["20000 100000"]     table counts, each a multiple of 100
#   RUNS [3]                          timed runs of every command
#   PARALLEL [2]                      --parallel of both tools (backup, restore, mbstream -x,
#                                     copy-back) and the number of cp / cat processes
#   PREPARE_MEMORY [256M]             mariadb-backup --prepare --use-memory
#   TABLE_CACHE [4000]                the server's table_open_cache and innodb_open_files (the
#                                     server closes tablespaces LRU; open_files_limit: the hard limit)
#   SAMPLE [200]                      tables whose CHECKSUM TABLE the check compares
#   MB_ARGS                           extra arguments for mariadb-backup --backup
#   QUIET_MAX [120] TOOL_TIMEOUT [1800] FERRY FERRY_ARGS KEEP_SERVER   as in lib.sh
#   SKIP_DIR=1 SKIP_MOVE=1 SKIP_LIMITS=1 SKIP_REPO=1 SKIP_STREAM=1 SKIP_CHECK=1   leave out steps
#                                     1+2 / the moving restores / 3 / 4 / 5 / 6 (3, 6 need step 1)
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TABLE_COUNTS=${TABLE_COUNTS:-20000 100000}
TABLE_CACHE=${TABLE_CACHE:-4000}
SAMPLE=${SAMPLE:-200}
MB_ARGS=${MB_ARGS:-}
SKIP_DIR=${SKIP_DIR:-0}
SKIP_LIMITS=${SKIP_LIMITS:-0}
SKIP_MOVE=${SKIP_MOVE:-0}
SKIP_REPO=${SKIP_REPO:-0}
SKIP_STREAM=${SKIP_STREAM:-0}

LOGS="$BENCH_DIR/logs-tables"
RESULTS="$BENCH_DIR/tables-results.md"
SOCK="$BENCH_DIR/tables.sock"
PIDF="$BENCH_DIR/tables.pid"
BK_F="$BENCH_DIR/tables-bk-ferry"                 # ferry backup --target-dir
BK_M="$BENCH_DIR/tables-bk-mb"                    # mariadb-backup --backup --target-dir
F_REST="$BENCH_DIR/tables-restored-ferry"         # every ferry restore's datadir
M_UNPACK="$BENCH_DIR/tables-mb-prepared"          # copy of BK_M (or unpacked stream), prepared
M_REST="$BENCH_DIR/tables-restored-mb"            # mariadb-backup --copy-back --datadir
F_MOVE="$BENCH_DIR/tables-bk-ferry-to-move"       # copy of BK_F that ferry restore --move consumes
CP_DEST="$BENCH_DIR/tables-cp"                    # the parallel cp's copy
BIG="$BENCH_DIR/tables-onefile"                   # ferry's backup files in one file, and its copy
BIG2="$BENCH_DIR/tables-onefile-copy"
REPO_F="$BENCH_DIR/tables-repo"                   # ferry's directory repository
XBS_F="$BENCH_DIR/tables-ferry.xbs"               # stream files
XBS_M="$BENCH_DIR/tables-mb.xbs"
SIZEF="$BENCH_DIR/tables-stream-size.out"
CLEAN_PATHS=("$BK_F" "$BK_M" "$F_MOVE" "$M_UNPACK" "$M_REST" "$CP_DEST" "$BIG" "$BIG2" "$REPO_F" "$XBS_F" "$XBS_M" "$SIZEF")
CLEAN_RESTORED=("$F_REST")

for n in $TABLE_COUNTS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] && ((n % 100 == 0)) || die "TABLE_COUNTS: $n is not a positive multiple of 100"
done
[[ $SAMPLE =~ ^[1-9][0-9]*$ ]] || die "SAMPLE must be a positive integer"
bench_init
need mbstream mariadb-backup
need xargs findutils
build_ferry
[[ -n $FERRY ]] || die "this script compares ferry with the limits: SKIP_FERRY=1 leaves nothing to measure"
HARD_NOFILE=$(ulimit -Hn)
[[ $HARD_NOFILE == unlimited ]] && HARD_NOFILE=1048576

# tables_server: starts the source server of $DATA, with the table caches of TABLE_CACHE.
tables_server() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$DATA.err" --skip-networking --skip-log-bin \
    --open-files-limit="$HARD_NOFILE" --table-open-cache="$TABLE_CACHE" \
    --table-definition-cache="$TABLE_CACHE" --innodb-open-files="$TABLE_CACHE" "$@"
}

# gen_tables N WORKER WORKERS: the SQL that creates the schemas s00000... whose number modulo
# WORKERS is WORKER, 100 tables tNNNNN each (1 in 20 MyISAM), 3 rows per table.
gen_tables() {
  gawk -v n="$1" -v w="$2" -v nw="$3" 'BEGIN { for (t = 0; t < n; t++) { s = int(t / 100); if (s % nw != w) continue
    if (t % 100 == 0) printf "CREATE DATABASE s%05d; USE s%05d;\n", s, s
    e = (t % 20 == 19) ? "MyISAM" : "InnoDB"
    printf "CREATE TABLE t%05d (id INT PRIMARY KEY, a INT, b VARCHAR(64)) ENGINE=%s;\n", t, e
    printf "INSERT INTO t%05d VALUES (1,%d,\"x%d\"),(2,%d,\"y%d\"),(3,%d,\"z%d\");\n", t, t, t, t, t, t, t } }'
}

# tables_dataset N: sets DATA and LOADED for N tables, builds that datadir unless DATA.loaded
# exists (two sessions fed generated SQL; no durable commits or .frm files meanwhile: 4x faster;
# a slow shutdown at the end), and starts its server. A datadir without DATA.loaded is never
# removed: it may be someone else's.
tables_dataset() {
  local n=$1 t0
  DATA="$BENCH_DIR/tables-$n"; LOADED="$DATA.loaded"
  stop_stale "$PIDF" "$DATA"
  if [[ -f $LOADED ]]; then
    log "reusing the dataset in $DATA"
    tables_server
    return
  fi
  [[ ! -e $DATA ]] || die "$DATA exists without $LOADED: remove it (an interrupted build) to build it again, or touch $LOADED to use it as it is"
  log "creating the dataset: $n tables in $((n / 100)) schemas (a minute or two for 20,000 on the 2-core VM)"
  mariadb-install-db --no-defaults --user=root --datadir="$DATA" \
    --auth-root-authentication-method=normal >"$LOGS/install-db.log" 2>&1 ||
    { tail -n 15 "$LOGS/install-db.log" >&2; die "mariadb-install-db failed"; }
  tables_server --innodb-flush-log-at-trx-commit=0 --skip-sync-frm
  t0=$(now)
  (gen_tables "$n" 0 2 | sql && echo ok >"$LOGS/gen-0.ok") >"$LOGS/gen-0.log" 2>&1 &
  local p0=$!
  (gen_tables "$n" 1 2 | sql && echo ok >"$LOGS/gen-1.ok") >"$LOGS/gen-1.log" 2>&1 &
  wait $p0 $! || true
  [[ -f $LOGS/gen-0.ok && -f $LOGS/gen-1.ok ]] ||
    { cat "$LOGS"/gen-*.log >&2; die "creating the tables failed (logs: $LOGS/gen-*.log)"; }
  rm -f "$LOGS"/gen-*.ok
  # A slow shutdown leaves nothing to purge or merge, then a restart at the run's settings.
  sql -e "SET GLOBAL innodb_fast_shutdown = 0"
  stop_pid "$SRC_PID"; SRC_PID=""
  log "dataset loaded in $(gawk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
  touch "$LOADED"
  tables_server
}

# run_keys KEY...: RUNS times each command CMD[KEY], timed as KEY, in the order given on odd runs
# and reversed on even runs; before each, PREP[KEY] (a bash string, untimed) and quiesce (no dirty
# pages, cold cache); after each a separately timed sync, labelled sync-KEY. SIZE[KEY] is timed's SIZE.
run_keys() {
  local r k keys
  for ((r = 1; r <= RUNS; r++)); do
    keys=("$@")
    ((r % 2)) || mapfile -t keys < <(printf '%s\n' "$@" | tac)
    for k in "${keys[@]}"; do
      bash -o pipefail -c "${PREP[$k]:-true}" >"$LOGS/prep-$k.log" 2>&1 ||
        { tail -n 15 "$LOGS/prep-$k.log" >&2; die "preparing $k failed (log: $LOGS/prep-$k.log)"; }
      quiesce
      timed "$k" "$r" "${SIZE[$k]}" "${CMD[$k]}"
      timed "sync-$k" "$r" 0 sync
    done
  done
}

# sample_tables N: SAMPLE table names spread over the schemas, about 1 in 4 MyISAM.
sample_tables() {
  gawk -v n="$1" -v k="$SAMPLE" 'BEGIN { if (k > n) k = n
    for (i = 0; i < k; i++) { b = int(i * n / k); b -= b % 20
      t = b + ((i % 4 == 3) ? 19 : i % 19); if (t >= n) t = n - 1
      printf "%ss%05d.t%05d", (i ? "," : ""), int(t / 100), t } }'
}

# check_tables N DATADIR: starts a server on a restored DATADIR; sets CHECK.
check_tables() {
  local n=$1 dir=$2 sample fails=()
  sample=$(sample_tables "$n")
  log "restore check: tables per engine and CHECKSUM TABLE of $SAMPLE tables, source vs $dir"
  local count="SELECT ENGINE, COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 's_____' GROUP BY ENGINE ORDER BY ENGINE"
  sql -e "$count" >"$LOGS/check-engines-source-$n.txt"
  sql -e "CHECKSUM TABLE $sample" >"$LOGS/check-checksum-source-$n.txt"
  stop_stale "$RPIDF" "$dir"
  start_server REST_PID "$dir" "$RSOCK" "$RPIDF" "$BENCH_DIR/restored.err" --skip-networking --skip-log-bin \
    --open-files-limit="$HARD_NOFILE" --table-open-cache="$TABLE_CACHE" \
    --table-definition-cache="$TABLE_CACHE" --innodb-open-files="$TABLE_CACHE"
  rsql -e "$count" >"$LOGS/check-engines-restored-$n.txt" || fails+=("counting the tables failed")
  rsql -e "CHECKSUM TABLE $sample" >"$LOGS/check-checksum-restored-$n.txt" || fails+=("CHECKSUM TABLE failed")
  stop_restored
  local got
  got=$(gawk '{ s += $2 } END { print s + 0 }' "$LOGS/check-engines-restored-$n.txt")
  ((got == n)) || fails+=("$got tables restored, want $n")
  cmp -s "$LOGS/check-engines-source-$n.txt" "$LOGS/check-engines-restored-$n.txt" || fails+=("tables per engine differ")
  cmp -s "$LOGS/check-checksum-source-$n.txt" "$LOGS/check-checksum-restored-$n.txt" || fails+=("checksums differ")
  grep -q NULL "$LOGS/check-checksum-restored-$n.txt" && fails+=("a sample table has no checksum")
  set_check "$n tables, $(gawk -F'\t' '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }' "$LOGS/check-engines-restored-$n.txt"); $SAMPLE checksums equal"
}

# --- one table count ----------------------------------------------------------------------------
# measure N: every step of the header for N tables; appends its report to $RESULTS.
measure() {
  local n=$1
  RAW="$LOGS/raw-$n.tsv"; : >"$RAW"
  tables_dataset "$n"
  rm -rf "${CLEAN_PATHS[@]}"; clean_restored "$F_REST"
  quiesce
  data_sizes
  check_free 5
  log "datadir $DATA: $n tables, $DATA_BYTES bytes, $(find "$DATA" -name '*.ibd' | wc -l) .ibd files; $RUNS runs, --parallel $PARALLEL"

  local f m
  f=$(q "$FERRY"); m="mariadb-backup --no-defaults"
  declare -gA CMD=() SIZE=() PREP=()
  CMD[ferry-backup]="$f backup --socket $(q "$SOCK") --user root --target-dir $(q "$BK_F") --parallel $PARALLEL $FERRY_ARGS"
  CMD[mb-backup]="$m --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --target-dir=$(q "$BK_M") --parallel=$PARALLEL --open-files-limit=$HARD_NOFILE $MB_ARGS"
  SIZE[ferry-backup]=$BK_F; SIZE[mb-backup]=$BK_M
  PREP[ferry-backup]="rm -rf $(q "$BK_F")"; PREP[mb-backup]="rm -rf $(q "$BK_M")"

  CMD[ferry-restore]="$f restore --target-dir $(q "$BK_F") --datadir $(q "$F_REST") --parallel $PARALLEL"
  CMD[mb-restore]="$(step_time mb-dir-prepare) $m --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_UNPACK") \
&& $(step_time mb-dir-copyback) $m --copy-back --parallel=$PARALLEL --target-dir=$(q "$M_UNPACK") --datadir=$(q "$M_REST")"
  SIZE[ferry-restore]=$F_REST; SIZE[mb-restore]=$M_REST
  # Only one restored datadir at a time (disk space); mariadb-backup prepares a fresh backup of its
  # own, taken untimed (--prepare changes the backup it works on).
  local rests
  rests="$(q "$F_REST") $(q "$M_UNPACK") $(q "$M_REST") $(q "$F_MOVE")"
  PREP[ferry-restore]="rm -rf $rests"
  PREP[mb-restore]="rm -rf $rests && ${CMD[mb-backup]//$(q "$BK_M")/$(q "$M_UNPACK")}"
  CMD[ferry-move]="$f restore --target-dir $(q "$F_MOVE") --move --datadir $(q "$F_REST") --parallel $PARALLEL"
  CMD[mb-move]="$(step_time mb-move-prepare) $m --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_UNPACK") \
&& $(step_time mb-move-moveback) $m --move-back --target-dir=$(q "$M_UNPACK") --datadir=$(q "$M_REST")"
  SIZE[ferry-move]=$F_REST; SIZE[mb-move]=$M_REST
  PREP[ferry-move]="rm -rf $rests && cp -a $(q "$BK_F") $(q "$F_MOVE")"
  PREP[mb-move]=${PREP[mb-restore]}

  CMD[read]="find $(q "$BK_F") -type f -print0 | xargs -0 -P $PARALLEL -n 500 cat >/dev/null"
  CMD[cp]="cd $(q "$BK_F") && find . -mindepth 1 -type d -printf $(q "$CP_DEST/%P\0") | xargs -0 -r mkdir -p \
&& find . -type f -print0 | xargs -0 -P $PARALLEL -n 500 cp --parents -t $(q "$CP_DEST")"
  SIZE[read]=$BK_F; SIZE[cp]=$CP_DEST
  PREP[cp]="rm -rf $(q "$CP_DEST") && mkdir -p $(q "$CP_DEST")"
  CMD[read-1file]="cat $(q "$BIG") >/dev/null"
  CMD[cp-1file]="cp $(q "$BIG") $(q "$BIG2")"
  PREP[cp-1file]="rm -f $(q "$BIG2")"

  CMD[ferry-repo-backup]="$f backup --socket $(q "$SOCK") --user root --repo $(q "$REPO_F") --parallel $PARALLEL $FERRY_ARGS"
  CMD[ferry-repo-restore]="$f restore --repo $(q "$REPO_F") latest --datadir $(q "$F_REST") --parallel $PARALLEL"
  SIZE[ferry-repo-backup]=$REPO_F; SIZE[ferry-repo-restore]=$F_REST
  PREP[ferry-repo-backup]="rm -rf $(q "$REPO_F") && mkdir -p $(q "$REPO_F")"
  PREP[ferry-repo-restore]="rm -rf $(q "$F_REST")"

  CMD[ferry-stream]="$f backup --socket $(q "$SOCK") --user root --stream --compress none --parallel $PARALLEL $FERRY_ARGS >$(q "$XBS_F") && stat -c %s $(q "$XBS_F") >$(q "$SIZEF")"
  CMD[mb-stream]="$m --backup --stream=xbstream --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL --open-files-limit=$HARD_NOFILE $MB_ARGS >$(q "$XBS_M") && stat -c %s $(q "$XBS_M") >$(q "$SIZEF")"
  SIZE[ferry-stream]=@$SIZEF; SIZE[mb-stream]=@$SIZEF
  CMD[ferry-stream-restore]="$f restore --from $(q "$XBS_F") --datadir $(q "$F_REST") --parallel $PARALLEL"
  CMD[mb-stream-restore]="$(step_time mb-stream-unpack) bash -c $(q "mbstream -x -p $PARALLEL -C $(q "$M_UNPACK") <$(q "$XBS_M")") \
&& $(step_time mb-stream-prepare) $m --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_UNPACK") \
&& $(step_time mb-stream-copyback) $m --copy-back --parallel=$PARALLEL --target-dir=$(q "$M_UNPACK") --datadir=$(q "$M_REST")"
  SIZE[ferry-stream-restore]=$F_REST; SIZE[mb-stream-restore]=$M_REST
  PREP[ferry-stream-restore]="rm -rf $rests"
  PREP[mb-stream-restore]="rm -rf $rests && mkdir -p $(q "$M_UNPACK")"

  CHECK="not run"
  if [[ $SKIP_DIR != 1 ]]; then
    run_keys ferry-backup mb-backup
    rm -rf "$BK_M"
    run_keys mb-restore ferry-restore   # ferry last on odd runs: an odd RUNS leaves its datadir for the check
    rm -rf "$M_UNPACK" "$M_REST"
    if [[ $SKIP_CHECK != 1 ]]; then
      [[ -d $F_REST ]] || timed ferry-restore-for-check 1 0 "${PREP[ferry-restore]} && ${CMD[ferry-restore]}"
      check_tables "$n" "$F_REST"
    else
      CHECK="not run (SKIP_CHECK=1)"
    fi
    clean_restored "$F_REST"
    if [[ $SKIP_MOVE != 1 ]]; then
      run_keys ferry-move mb-move
      clean_restored "$F_REST"; rm -rf "$M_UNPACK" "$M_REST" "$F_MOVE"
    fi
    if [[ $SKIP_LIMITS != 1 ]]; then
      run_keys cp read
      rm -rf "$CP_DEST"
      find "$BK_F" -type f -print0 | xargs -0 cat >"$BIG"
      SIZE[read-1file]=$(stat -c %s "$BIG"); SIZE[cp-1file]=${SIZE[read-1file]}
      run_keys cp-1file read-1file
      rm -f "$BIG" "$BIG2"
    fi
    rm -rf "$BK_F"
  fi
  if [[ $SKIP_REPO != 1 ]]; then
    run_keys ferry-repo-backup
    run_keys ferry-repo-restore
    clean_restored "$F_REST"; rm -rf "$REPO_F"
  fi
  if [[ $SKIP_STREAM != 1 ]]; then
    run_keys ferry-stream mb-stream
    run_keys ferry-stream-restore mb-stream-restore
    clean_restored "$F_REST"; rm -rf "$M_UNPACK" "$M_REST" "$XBS_F" "$XBS_M"
  fi
  stop_pid "$SRC_PID"; SRC_PID=""
  report "$n" | tee -a "$RESULTS"
}

# --- report -----------------------------------------------------------------------------------
# report N: the markdown report of $RAW (one table count).
report() {
  report_gawk -v ntab="$1" -v check="$CHECK" -v ferryargs="$FERRY_ARGS" -v pmem="$PREPARE_MEMORY" \
      -v ibd="$(find "$DATA" -name '*.ibd' | wc -l)" "$AWK_LIB"'
    # wall + the sync after it, median over the runs
    function ws(label,   i, k, v) {
      k = cnt[label]; if (!k) return ""
      for (i = 1; i <= k; i++) v[i] = W[label, i] + W["sync-" label, i]
      return median(v, k) }
    function row(name, label,   w, b, mv) {
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – |\n", name; return }
      w = agg(W, label, "med"); b = agg(B, label, "med"); mv = cnt["ferry-backup"] ? agg(B, "ferry-backup", "med") : ddbytes
      printf "| %s | %d | %.2f | %s | %.2f | %.2f | %.0f | %s | %s |\n", name, cnt[label], w,
        f(agg(W, "sync-" label, "med"), "%.2f"), ws(label), agg(C, label, "med"), agg(R, label, "max") / 1024,
        (b > 0 ? sprintf("%.0f", b / 1e6) : "–"), sprintf("%.0f", mv / 1e6 / ws(label)) }
    function srow(name, label) {
      if (cnt[label]) printf "| &nbsp;&nbsp;%s | %d | %.2f | – | – | %.2f | %.0f | – | – |\n", name, cnt[label],
        agg(W, label, "med"), agg(C, label, "med"), agg(R, label, "max") / 1024 }
    function rat(name, a, b, lim, tgt,   r) {
      if (!cnt[a] || !cnt[b]) return
      r = ratio(ws(a), ws(b))
      printf "| %s | %s | %s | %s | %s |\n", name, r, ratio(agg(W, a, "med"), agg(W, b, "med")), tgt, lim == "" ? "–" : met(r, lim) }
    END {
      printf "## %d tables: ferry vs mariadb-backup and the copy limit, %s\n\n", ntab, date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: %d tables in %d schemas (100 each, 1 in 20 MyISAM, 3 rows each), %d .ibd files; datadir %.3f GB (du -sb)\n", ntab, ntab / 100, ibd, databytes / 1e9
      printf "- %d cold-cache runs each (page cache dropped, 0 dirty pages), alternating, --parallel %d (both tools, cp and cat processes)%s; `mariadb-backup --prepare --use-memory=%s`\n", runs, par, ferryargs == "" ? "" : ", ferry " ferryargs, pmem
      printf "- wall+sync: the command and the `sync` timed after it (the writeback it left); MB: what the command wrote (read, for a read); MB/s: the bytes of ferry'"'"'s directory backup (the data every row moves) over wall+sync\n\n"
      print "| what | n | wall s | sync after s | wall+sync s | CPU s | max RSS MiB | MB | MB/s |"
      print "|---|---|---|---|---|---|---|---|---|"
      row("`ferry backup --target-dir`", "ferry-backup")
      row("`mariadb-backup --backup`", "mb-backup")
      row("`ferry restore --target-dir`", "ferry-restore")
      row("`mariadb-backup --prepare` + `--copy-back`", "mb-restore")
      srow("`--prepare`", "mb-dir-prepare")
      srow("`--copy-back`", "mb-dir-copyback")
      row("`ferry restore --target-dir COPY --move`", "ferry-move")
      row("`mariadb-backup --prepare` + `--move-back`", "mb-move")
      srow("`--prepare`", "mb-move-prepare")
      srow("`--move-back`", "mb-move-moveback")
      row("read limit: `xargs -P cat` of ferry'"'"'s backup", "read")
      row("copy limit: `xargs -P cp` of ferry'"'"'s backup, same disk", "cp")
      row("one file of the same bytes: `cat`", "read-1file")
      row("one file of the same bytes: `cp`, same disk", "cp-1file")
      row("`ferry backup --repo DIR`", "ferry-repo-backup")
      row("`ferry restore --repo DIR latest`", "ferry-repo-restore")
      row("`ferry backup --stream --compress none >file`", "ferry-stream")
      row("`mariadb-backup --stream=xbstream >file`", "mb-stream")
      row("`ferry restore --from file`", "ferry-stream-restore")
      row("`mbstream -x` + `--prepare` + `--copy-back`", "mb-stream-restore")
      srow("`mbstream -x`", "mb-stream-unpack")
      srow("`--prepare`", "mb-stream-prepare")
      srow("`--copy-back`", "mb-stream-copyback")
      print "\n| ratio | wall+sync | wall | target | met (wall+sync) |\n|---|---|---|---|---|"
      rat("ferry backup / mariadb-backup --backup", "ferry-backup", "mb-backup", ntab >= 100000 ? 0.5 : "", ntab >= 100000 ? "≤ 0.5" : "–")
      rat("ferry backup / read limit", "ferry-backup", "read", "", "–")
      rat("ferry restore / prepare + copy-back", "ferry-restore", "mb-restore", ntab >= 100000 ? 0.5 : "", ntab >= 100000 ? "≤ 0.5" : "–")
      rat("ferry restore --move / prepare + move-back", "ferry-move", "mb-move", "", "–")
      rat("ferry backup / read of one file", "ferry-backup", "read-1file", 1.3, "≤ 1.3")
      rat("ferry restore / parallel cp", "ferry-restore", "cp", 1.1, "≤ 1.1")
      rat("ferry restore / cp of one file", "ferry-restore", "cp-1file", 1.3, "≤ 1.3")
      rat("parallel cp / cp of one file (the filesystem'"'"'s cost per file)", "cp", "cp-1file", "", "–")
      rat("mariadb-backup prepare + copy-back / parallel cp", "mb-restore", "cp", "", "–")
      rat("ferry backup --repo / mariadb-backup --backup", "ferry-repo-backup", "mb-backup", "", "–")
      rat("ferry restore --repo / prepare + copy-back", "ferry-repo-restore", "mb-restore", "", "–")
      rat("ferry restore --repo / parallel cp", "ferry-repo-restore", "cp", 1.1, "≤ 1.1")
      rat("ferry backup --repo / read of one file", "ferry-repo-backup", "read-1file", 1.3, "≤ 1.3")
      rat("ferry restore --repo / cp of one file", "ferry-repo-restore", "cp-1file", 1.3, "≤ 1.3")
      rat("ferry --stream / mariadb-backup --stream", "ferry-stream", "mb-stream", "", "–")
      rat("ferry --stream / read of one file", "ferry-stream", "read-1file", 1.3, "≤ 1.3")
      rat("ferry restore --from / mbstream + prepare + copy-back", "ferry-stream-restore", "mb-stream-restore", "", "–")
      printf "\nRestore check (server on ferry'"'"'s restored datadir: tables per engine, CHECKSUM TABLE of a sample vs the source): **%s**\n\n", check
    }' "$RAW"
}

describe_env
: >"$RESULTS"
for n in $TABLE_COUNTS; do measure "$n"; done
log "results written to $RESULTS; raw per-run data in $LOGS/raw-*.tsv"
((${#FINDINGS[@]} == 0)) || { printf 'bench: finding: %s\n' "${FINDINGS[@]}" >&2; exit 1; }
