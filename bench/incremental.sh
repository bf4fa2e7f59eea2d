#!/usr/bin/env bash
# bench/incremental.sh: incremental backups and the restore of a chain, ferry against
# mariadb-backup, on the same sysbench dataset and server, in one invocation.
#
# Same private server and dataset as bench/backup.sh (shared code: bench/lib.sh): 1 GiB buffer
# pool, binlog on, but started with --innodb-log-file-size=REDO_SIZE (2G: the log must still hold
# everything since the full backup for ferry's redo method). Every timed backup starts on an idle
# server after quiesce (no dirty pages, page cache dropped); every restore with a cold page cache.
# Each command runs under lib.sh's `timed` (wall, user + sys CPU, max RSS). In order:
#   1. full backups, RUNS times each, alternating: `ferry backup --target-dir F --parallel P` and
#      `mariadb-backup --backup --target-dir M --parallel=P`; the last of each is the base F / M.
#      CHECKSUM TABLE of every sbtest table is saved (the state F and M hold).
#   2. the change ("update 1"): `sysbench UPDATE_TEST --events=E --time=0 --threads=2 run` with
#      E = UPDATE_PCT % of TABLES x TABLE_SIZE (default oltp_update_index, 1 %: E random
#      `UPDATE sbtestN SET k=k+1 WHERE id=?`, tables uniform, ids from sysbench 1.0's default
#      --rand-type=special: 75 % uniform in the middle 1 % of the ids, 25 % gaussian around the
#      middle), then `SET GLOBAL innodb_max_purge_lag_wait=0` (purge done, so that the changed
#      pages stay the same for every incremental below). 1 % of the rows is not 1 % of the pages:
#      k is random, so the updates touch nearly every page of the secondary index k_1, plus the
#      clustered leaf pages of the rows, undo and rollback segment pages. With SMALL=1 (4 x 100k
#      rows, 4000 updates) that was about 1500 of 14100 InnoDB pages (10.6 %); with
#      UPDATE_TEST=oltp_update_non_index (column c, no secondary index) about 1000 (7.1 %). The
#      report gives the number for every run (see "changed pages").
#   3. incrementals on the same bases and the same change, RUNS times each:
#      (a) `ferry backup --incremental-basedir F` with the redo method (the server's log still
#          holds everything since F's start_lsn), alternating with
#      (c) `mariadb-backup --backup --incremental-basedir M` (reads every page);
#      then `SET GLOBAL innodb_log_file_size=SCAN_REDO_SIZE` (MariaDB 10.11 resizes the log
#      online: the new ib_logfile0 starts at the current LSN, so it no longer holds F's start_lsn)
#      and
#      (b) `ferry backup --incremental-basedir F` again, which now falls back to the page-LSN scan
#          (reads every page, keeps those whose LSN is above F's start_lsn).
#      The script fails unless ferry's log line `incremental: changed pages by redo|scan` and its
#      manifest's incremental.method say redo for (a) and scan for (b).
#      Recorded: wall time, CPU, RSS; stored bytes (sum of the .delta files, and the whole backup
#      dir); the pages in the deltas (a .delta of N pages of size S holds N - ceil(N / (S/4))
#      data pages: one header page per cluster of up to S/4 - 1 pages).
#      Changed pages (the reference): the data pages of mariadb-backup's incremental (c), i.e. the
#      pages whose LSN is above M's to_lsn, found by the other tool reading every page of every
#      InnoDB file; ferry's scan (b) counts the same thing from F's start_lsn (shown beside it).
#      The pages the redo names also include pages changed and then freed (purge frees undo
#      pages and merges index pages; a freed page is not written back, so its LSN in the file
#      stays old): (a) may store more than the reference.
#   4. a chain: the last (b) is I1 (on F, the change of update 1); for k = 2..CHAIN (5): another
#      update (same size, "update k"), then `ferry backup --incremental-basedir I(k-1)` -> Ik
#      (redo method again: the resized log holds I(k-1)'s start) and `mariadb-backup --backup
#      --incremental-basedir MI(k-1)` -> MIk (MI1 = the last (c)); each timed once. CHECKSUM TABLE
#      of the source is saved again (the state Ik and MIk hold).
#   5. restores, RUNS times each, alternating (odd runs in this order, even runs reversed), cold
#      page cache, each target removed first:
#        ferry full:   `ferry restore --target-dir F --datadir X --parallel P --use-memory PREPARE_MEMORY
#                      --recovery M` for each mode M of RECOVERY (native: ferry applies the redo;
#                      server: the stock mariadbd's crash recovery), and the apply or recovery
#                      time it logs (took= of "prepare: redo applied natively; ..." or "prepare:
#                      recovery finished")
#        ferry chain:  `ferry restore --target-dir F --incremental-dir I1 ... --incremental-dir I5 --datadir X ...`
#                      the same way, for each mode
#        mb full:      `cp -a M W`, `mariadb-backup --prepare --use-memory=PREPARE_MEMORY --target-dir=W`,
#                      `mariadb-backup --copy-back --parallel=P --target-dir=W --datadir=Z`
#        mb chain:     the same with, between prepare and copy-back, `mariadb-backup --prepare
#                      --target-dir=W --incremental-dir=MIk` for k = 1..5 in order
#      (mariadb-backup prepares in place, and --prepare --incremental-dir deletes the .delta files
#      it applied, so M, and for the chain the MIk, are copied first: the copy is the first step,
#      timed on its own like every step; ferry restore copies the backup itself and leaves F and
#      the Ik untouched). The script fails if a restore changed its inputs (file list, sizes and
#      mtimes of F, M, the Ik and MIk compared before and after the first run).
#      Check of the last run of each: a server (socket only) on the restored datadir, CHECKSUM
#      TABLE of every sbtest table must equal the source's saved at step 1 (full) or step 4
#      (chain); any mismatch makes the script exit non-zero after the report, and so does a ferry
#      restore that failed (the other restores still run; the report lists it with its log's
#      last line).
# The updates change rows of the shared dataset (same tables, same row count), as the write loads
# of the other scripts do.
# Ratios and targets: ferry redo / ferry full wall <= 0.10; ferry redo / mariadb-backup
# incremental wall <= 0.20; ferry scan / mariadb-backup incremental wall <= 0.80; ferry .delta
# bytes / changed-page bytes <= 1.10; ferry chain restore / ferry full restore wall <= 1.30.
# Prints a markdown report and writes it to $BENCH_DIR/incremental-results.md. Needs root. Disk,
# besides the dataset: about 4x the datadir without ib_logfile0 (two full backups, mariadb-backup's
# working copy and its restored datadir) plus 2 x CHAIN incrementals (each about the changed
# pages).
#
#   bench/incremental.sh                     # 14 x 1M rows (~4 GB datadir), 3 runs each
#   SMALL=1 RUNS=1 bench/incremental.sh      # 4 x 100k rows: checks the script in a few minutes
#   UPDATE_TEST=oltp_update_non_index bench/incremental.sh   # a change of the clustered index only
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), backups, logs-incremental/
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [3]                          timed runs of every full backup, incremental (a) (b) (c) and restore
#   PARALLEL [2]                      --parallel for both tools (backups, ferry restore, copy-back)
#   PREPARE_MEMORY [256M]             ferry restore --use-memory and mariadb-backup --prepare --use-memory
#   REDO_SIZE [2G]                    the server's --innodb-log-file-size (must hold the redo since F)
#   SCAN_REDO_SIZE [1G]               online resize before (b) (must differ from REDO_SIZE; holds the
#                                     redo of one update for the chain)
#   UPDATE_TEST [oltp_update_index]   the sysbench test of every update (oltp_update_non_index,
#                                     oltp_write_only, ...)
#   UPDATE_PCT [1]                    events of every update, in % of TABLES x TABLE_SIZE
#   UPDATE_THREADS [2]                sysbench threads of every update
#   RAND_TYPE [special]               sysbench --rand-type of every update (special is sysbench's default)
#   CHAIN [5]                         incrementals in the restored chain (>= 1)
#   RECOVERY ["native server"]        ferry restore --recovery modes measured (auto, native, server)
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for every `ferry backup`
#   SKIP_CHECK=1                      leave out the checks of the restored datadirs
#   KEEP_SERVER=1                     leave the private server running at the end
#   KEEP_BACKUPS=1                    leave the backups in BENCH_DIR/incremental at the end (to time
#                                     restores of the same chain again by hand)
# The server keeps the log size of the last step (SCAN_REDO_SIZE); the other scripts set theirs
# again when they start it.
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
REDO_SIZE=${REDO_SIZE:-2G}
SCAN_REDO_SIZE=${SCAN_REDO_SIZE:-1G}
UPDATE_TEST=${UPDATE_TEST:-oltp_update_index}
UPDATE_PCT=${UPDATE_PCT:-1}
UPDATE_THREADS=${UPDATE_THREADS:-2}
RAND_TYPE=${RAND_TYPE:-special}
CHAIN=${CHAIN:-5}
RECOVERY=${RECOVERY:-native server}

LOGS="$BENCH_DIR/logs-incremental"                # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/incremental-results.md"
BK="$BENCH_DIR/incremental"                       # every backup of this script
F_FULL="$BK/ferry-full"                           # F
M_FULL="$BK/mb-full"                              # M
F_REDO="$BK/ferry-redo"                           # (a), removed once measured
M_WORK="$BK/mb-work"                              # mariadb-backup's copy of M, prepared in place
M_WORK_INC="$BK/mb-work-incs"                     # its copies of the MIk (--prepare consumes their .delta files)
F_REST="$BENCH_DIR/incremental-restored-ferry"    # ferry restore --datadir
M_REST="$BENCH_DIR/incremental-restored-mb"       # mariadb-backup --copy-back --datadir
f_inc() { echo "$BK/ferry-inc$1"; }               # Ik (I1 = the last (b))
m_inc() { echo "$BK/mb-inc$1"; }                  # MIk (MI1 = the last (c))
CLEAN_PATHS=("$BK" "$M_REST")
[[ ${KEEP_BACKUPS:-0} == 1 ]] && CLEAN_PATHS=("$M_REST")
CLEAN_RESTORED=("$F_REST")

[[ $SKIP_FERRY == 1 || $FERRY_ONLY == 1 ]] && die "this script compares ferry with mariadb-backup: SKIP_FERRY=1 / FERRY_ONLY=1 are not supported"
[[ $REDO_SIZE =~ ^[1-9][0-9]*[KMG]$ ]] || die "REDO_SIZE must be a size such as 2G, not '$REDO_SIZE'"
[[ $SCAN_REDO_SIZE =~ ^[1-9][0-9]*[KMG]$ ]] || die "SCAN_REDO_SIZE must be a size such as 1G, not '$SCAN_REDO_SIZE'"
for m in $RECOVERY; do [[ $m =~ ^(auto|native|server)$ ]] || die "RECOVERY must list auto, native or server, not '$m'"; done
[[ -n ${RECOVERY// /} ]] || die "RECOVERY is empty"
[[ $UPDATE_PCT =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "UPDATE_PCT must be a number (percent of the rows)"
[[ $UPDATE_THREADS =~ ^[1-9][0-9]*$ ]] || die "UPDATE_THREADS must be a positive integer"
[[ $CHAIN =~ ^[1-9][0-9]*$ ]] || die "CHAIN must be a positive integer"
REDO_BYTES=$(numfmt --from=iec "$REDO_SIZE")
SCAN_REDO_BYTES=$(numfmt --from=iec "$SCAN_REDO_SIZE")
((REDO_BYTES != SCAN_REDO_BYTES)) || die "SCAN_REDO_SIZE must differ from REDO_SIZE (an online resize to the same size does nothing)"
EVENTS=$(gawk -v t="$TABLES" -v s="$TABLE_SIZE" -v p="$UPDATE_PCT" 'BEGIN { e = int(t * s * p / 100 + 0.5); print (e < 1) ? 1 : e }')

# start_source (lib.sh's, overridden): the same server with the large redo log (the last
# --innodb-log-file-size wins over start_server's 512M).
start_source() {
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address=127.0.0.1 --log-bin=binlog --server-id=1 --innodb-log-file-size="$REDO_SIZE"
}

# --- helpers (and lib.sh's timed, wall_of, logval) ------------------------------------------------
KV="$LOGS/incremental.kv"                         # key<TAB>value: what the report prints besides $RAW
kv() { printf '%s\t%s\n' "$1" "$2" >>"$KV"; }
lsn() { sql -e "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'" | cut -f2; }
# log_first_lsn: the first LSN the server's ib_logfile0 holds (header bytes 8..15, big-endian).
log_first_lsn() {
  od -An -t u1 -j 8 -N 8 "$DATA/ib_logfile0" | gawk '{ for (i = 1; i <= NF; i++) v = v * 256 + $i } END { printf "%.0f\n", v }'
}
mjson() { jq -r "$2" "$1/ferry_manifest.json"; }  # mjson DIR FILTER: a field of DIR's ferry manifest

# delta_stats DIR [LIST]: "files bytes pages data_pages" of the .delta files under DIR (see the
# header); with LIST, "data_pages bytes file" of each file into LIST.
delta_stats() {
  find "$1" -type f -name '*.delta' -printf '%s %P\n' | sort -k2 | gawk -v p="$PAGE" -v list="${2:-/dev/null}" '
    { n = int($1 / p); c = int((n + p / 4 - 1) / (p / 4)); if (c < 1) c = 1
      f++; b += $1; t += n; d += n - c; printf "%d %d %s\n", n - c, $1, $2 >list }
    END { printf "%d %.0f %d %d\n", f, b, t, d }'
}
# record_incr KEY DIR: delta_stats of DIR and its size into $KV as KEY_files, KEY_bytes, ...; the
# pages per file into $LOGS/deltas-KEY.txt.
record_incr() {
  local files bytes pages data
  read -r files bytes pages data < <(delta_stats "$2" "$LOGS/deltas-$1.txt")
  kv "$1_files" "$files"; kv "$1_bytes" "$bytes"; kv "$1_pages" "$pages"; kv "$1_data" "$data"
  kv "$1_dir" "$(du -sb "$2" | cut -f1)"
  log "  $1: $files .delta files, $bytes bytes, $data data pages ($pages pages with the cluster headers)"
}

# ferry_inc LABEL RUN DIR BASE WANT: times `ferry backup --incremental-basedir BASE` into DIR and
# dies unless its log line and manifest both say method WANT.
ferry_inc() {
  local label=$1 r=$2 dir=$3 base=$4 want=$5 flog got mm why
  rm -rf "$dir"
  quiesce
  timed "$label" "$r" "$dir" "$FERRY_BK --target-dir $(q "$dir") --incremental-basedir $(q "$base")"
  flog="$LOGS/$label-$r.log"
  got=$(grep -o 'msg="incremental: changed pages by [a-z]*"' "$flog" | tail -n1 | gawk '{ v = $NF; gsub(/"/, "", v); print v }')
  mm=$(mjson "$dir" '.incremental.method // ""')
  why=$(grep 'msg="incremental: changed pages by' "$flog" | tail -n1 | sed 's/.* why=//; s/ from_lsn=.*//; s/^"//; s/"$//')
  [[ $got == "$want" && $mm == "$want" ]] ||
    die "$label (run $r): ferry used method '${got:-none}' (log) / '${mm:-none}' (manifest), not $want; why: ${why:-?} (log: $flog)"
  kv "$label-${r}_why" "$why"
  kv "$label-${r}_pages_from_redo" "$(logval "$flog" "incremental: changed pages by $want" pages_from_redo)"
}

# mb_inc LABEL RUN DIR BASE: times `mariadb-backup --backup --incremental-basedir BASE` into DIR.
mb_inc() {
  rm -rf "$3"
  quiesce
  timed "$1" "$2" "$3" "$MB_BK --target-dir=$(q "$3") --incremental-basedir=$(q "$4")"
}

# update K: the change before incremental K (see the header), then purge; records its redo.
update() {
  local k=$1 l0 l1 t0 t1
  l0=$(lsn); t0=$(now)
  sysbench "$UPDATE_TEST" "${SB_OPTS[@]}" --threads="$UPDATE_THREADS" --events="$EVENTS" --time=0 --rate=0 \
    --rand-type="$RAND_TYPE" run >"$LOGS/update-$k.log" 2>&1 ||
    { tail -n 15 "$LOGS/update-$k.log" >&2; die "sysbench $UPDATE_TEST (update $k) failed (log: $LOGS/update-$k.log)"; }
  sql -e "SET GLOBAL innodb_max_purge_lag_wait=0"
  l1=$(lsn); t1=$(now)
  kv "update${k}_redo" "$((l1 - l0))"
  log "update $k: $EVENTS events of $UPDATE_TEST in $(gawk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s (with purge), $((l1 - l0)) bytes of redo"
}

# holds_since LSN WHAT: dies unless the server's log holds every LSN from LSN on (ferry's redo
# method reads it from there).
holds_since() {
  local first cur
  first=$(log_first_lsn); cur=$(lsn)
  ((first <= $1)) || die "the server's redo log starts at LSN $first, after $2's start $1: ferry could not use the redo method"
  (($(sql -e "SELECT @@GLOBAL.innodb_log_file_size") > cur - $1)) ||
    die "$((cur - $1)) bytes of redo since $2's start do not fit in the server's log: raise REDO_SIZE / SCAN_REDO_SIZE"
}

# tree_state DIR...: path, size and mtime of every file under each DIR (restores must not change them).
tree_state() { local d; for d in "$@"; do find "$d" -printf '%p %s %T@\n'; done | sort; }

# check_against DATADIR EXPECTED NAME: a server (socket only) on DATADIR; CHECKSUM TABLE of every
# sbtest table must equal the file EXPECTED (saved from the source). Records NAME's result in $KV.
check_against() {
  local res tables
  tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
  log "check $3: CHECKSUM TABLE on $1 vs $(basename "$2")"
  start_restored "$1"
  rsql -e "CHECKSUM TABLE $tables" >"$LOGS/check-$3.txt" 2>&1 || true
  stop_restored
  if cmp -s "$2" "$LOGS/check-$3.txt"; then res="OK ($TABLES/$TABLES tables)"
  else res="MISMATCH (see $LOGS/check-$3.txt vs $2)"; FAILED+=("check $3: $res"); fi
  kv "check_$3" "$res"
  log "check $3: $res"
}

# --- setup --------------------------------------------------------------------------------------
bench_init
need jq jq
build_ferry
: >"$KV"
FAILED=()
cp -f "$RPIDF" "$RPIDF.incremental" 2>/dev/null || true   # stop_stale removes the pid file: check
stop_stale "$RPIDF" "$F_REST"                               # both restored datadirs of an
mv -f "$RPIDF.incremental" "$RPIDF" 2>/dev/null || true     # interrupted run
stop_stale "$RPIDF" "$M_REST"
rm -rf "$BK" "$M_REST"; clean_restored "$F_REST"
mkdir -p "$BK"
ERR_OFF=$(stat -c %s "$BENCH_DIR/src.err" 2>/dev/null || echo 0)   # src.err grows across starts
load_dataset
have=$(sql -e "SELECT @@GLOBAL.innodb_log_file_size")
[[ $have == "$REDO_BYTES" ]] || die "the server runs with innodb_log_file_size=$have, not $REDO_SIZE ($REDO_BYTES)"
tail -c +$((ERR_OFF + 1)) "$BENCH_DIR/src.err" | grep -a 'Resizing redo log' | sed 's/^/bench: server: /' >&2 || true
PAGE=$(sql -e "SELECT @@GLOBAL.innodb_page_size")

FERRY_BK="$(q "$FERRY") backup --socket $(q "$SOCK") --user root --parallel $PARALLEL $FERRY_ARGS"
MB_BK="mariadb-backup --no-defaults --backup --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL"

quiesce
data_sizes
check_free 4
INNODB_BYTES=$(find "$DATA" -type f \( -name '*.ibd' -o -name 'ibdata*' -o -name 'undo[0-9]*' \) -printf '%s\n' | gawk '{ s += $1 } END { printf "%.0f", s }')
kv page_size "$PAGE"; kv innodb_pages "$((INNODB_BYTES / PAGE))"
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0; $((INNODB_BYTES / PAGE)) InnoDB pages of $PAGE); redo log $REDO_SIZE; $RUNS run(s); updates: $EVENTS events of $UPDATE_TEST; chain of $CHAIN"

# --- 1: full backups --------------------------------------------------------------------------------
TOOLS=(ferry mb)
for ((r = 1; r <= RUNS; r++)); do
  for tool in $(order "$r"); do
    if [[ $tool == ferry ]]; then
      rm -rf "$F_FULL"; quiesce
      timed ferry-full "$r" "$F_FULL" "$FERRY_BK --target-dir $(q "$F_FULL")"
    else
      rm -rf "$M_FULL"; quiesce
      timed mb-full "$r" "$M_FULL" "$MB_BK --target-dir=$(q "$M_FULL")"
    fi
  done
done
F_START=$(mjson "$F_FULL" .start_lsn)
kv ferry_full_start_lsn "$F_START"
TABLE_LIST=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
sql -e "CHECKSUM TABLE $TABLE_LIST" >"$LOGS/checksum-full.txt"

# --- 2+3: update 1; incrementals (a) and (c), then (b) after the log resize ---------------------------
update 1
for ((r = 1; r <= RUNS; r++)); do
  for tool in $(order "$r"); do
    if [[ $tool == ferry ]]; then
      holds_since "$F_START" "the full backup F"
      ferry_inc ferry-redo "$r" "$F_REDO" "$F_FULL" redo
    else
      mb_inc mb-inc "$r" "$(m_inc 1)" "$M_FULL"
    fi
  done
done
record_incr redo "$F_REDO"
record_incr mb "$(m_inc 1)"
rm -rf "$F_REDO"

log "resizing the server's redo log online to $SCAN_REDO_SIZE (SET GLOBAL innodb_log_file_size)"
sql -e "SET GLOBAL innodb_log_file_size=$SCAN_REDO_BYTES"
for ((i = 0; i < 600; i++)); do
  [[ ! -e $DATA/ib_logfile101 && $(stat -c %s "$DATA/ib_logfile0") == $((SCAN_REDO_BYTES)) ]] && break
  sleep 0.5
done
((i < 600)) || die "the online resize of the redo log to $SCAN_REDO_SIZE did not finish in 5 min (see $BENCH_DIR/src.err)"
first=$(log_first_lsn)
((first > F_START)) || die "after the resize the log still starts at LSN $first, before F's start $F_START: ferry would not scan"
log "the server's log now starts at LSN $first (F's start_lsn: $F_START)"
for ((r = 1; r <= RUNS; r++)); do
  ferry_inc ferry-scan "$r" "$(f_inc 1)" "$F_FULL" scan
done
record_incr scan "$(f_inc 1)"

# --- 4: the rest of the chain ----------------------------------------------------------------------
for ((k = 2; k <= CHAIN; k++)); do
  update "$k"
  holds_since "$(mjson "$(f_inc $((k - 1)))" .start_lsn)" "incremental I$((k - 1))"
  ferry_inc ferry-chain "$k" "$(f_inc "$k")" "$(f_inc $((k - 1)))" redo
  mb_inc mb-chain "$k" "$(m_inc "$k")" "$(m_inc $((k - 1)))"
  record_incr "chain${k}_ferry" "$(f_inc "$k")"
  record_incr "chain${k}_mb" "$(m_inc "$k")"
done
sql -e "CHECKSUM TABLE $TABLE_LIST" >"$LOGS/checksum-chain.txt"

# --- 5: restores ---------------------------------------------------------------------------------------
INC_ARGS="" MB_INC_STEPS="" M_INCS=""
for ((k = 1; k <= CHAIN; k++)); do
  INC_ARGS+=" --incremental-dir $(q "$(f_inc "$k")")"
  M_INCS+=" $(q "$(m_inc "$k")")"
  MB_INC_STEPS+=" && $(step_time mb-chain-prepare-inc) mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_WORK") --incremental-dir=$(q "$M_WORK_INC/$(basename "$(m_inc "$k")")")"
done
F_RESTORE="$(q "$FERRY") restore --target-dir $(q "$F_FULL") --datadir $(q "$F_REST") --parallel $PARALLEL --use-memory $PREPARE_MEMORY"
declare -A CMD
for m in $RECOVERY; do
  CMD[ferry-restore-full-$m]="$F_RESTORE --recovery $m"
  CMD[ferry-restore-chain-$m]="$F_RESTORE$INC_ARGS --recovery $m"
done
mb_restore() {  # mb_restore LABEL COPY [INC-STEPS]: copy, prepare, [incrementals], copy-back
  printf '%s' "$(step_time "$1-copy") bash -o pipefail -c $(q "$2") \
&& $(step_time "$1-prepare") mariadb-backup --no-defaults --prepare --use-memory=$PREPARE_MEMORY --target-dir=$(q "$M_WORK")${3:-} \
&& $(step_time "$1-copyback") mariadb-backup --no-defaults --copy-back --parallel=$PARALLEL --target-dir=$(q "$M_WORK") --datadir=$(q "$M_REST")"
}
CMD[mb-restore-full]=$(mb_restore mb-full "cp -a $(q "$M_FULL") $(q "$M_WORK")")
CMD[mb-restore-chain]=$(mb_restore mb-chain "cp -a $(q "$M_FULL") $(q "$M_WORK") && mkdir $(q "$M_WORK_INC") && cp -a$M_INCS $(q "$M_WORK_INC")/" "$MB_INC_STEPS")

INPUTS=("$F_FULL" "$M_FULL")
for ((k = 1; k <= CHAIN; k++)); do INPUTS+=("$(f_inc "$k")" "$(m_inc "$k")"); done
tree_state "${INPUTS[@]}" >"$LOGS/inputs-before.txt"

TOOLS=()
for m in $RECOVERY; do TOOLS+=("ferry-restore-full-$m" "ferry-restore-chain-$m"); done
TOOLS+=(mb-restore-full mb-restore-chain)
for ((r = 1; r <= RUNS; r++)); do
  for what in $(order "$r"); do
    clean_restored "$F_REST"; rm -rf "$M_REST" "$M_WORK" "$M_WORK_INC"
    drop_caches
    RC=0
    if [[ $what == ferry-* ]]; then
      timed_rc "$what" "$r" "$F_REST" "${CMD[$what]}"
      ((RC == 0)) || kv "failed_$what" 1               # its times are no result: no ratio from them
      # the apply's or the recovery's own time, from ferry's log
      took=$(logval "$LOGS/$what-$r.log" "prepare: redo applied natively; the copy needs no recovery" took)
      [[ -n $took ]] || took=$(logval "$LOGS/$what-$r.log" "prepare: recovery finished" took)
      kv "took_$what-$r" "$(secs "$took")"
      if grep -q 'prepare: the stock server recovers the copy instead of ferry' "$LOGS/$what-$r.log"; then
        finding "$what run $r fell back to the server's recovery: $(grep 'prepare: the stock server recovers' "$LOGS/$what-$r.log" | tail -n1)"
      fi
      if [[ $what == *-native ]] && ((RC == 0)) && ! grep -q 'prepare: redo applied natively' "$LOGS/$what-$r.log"; then
        finding "$what run $r: exit 0 but no native apply line (log: $LOGS/$what-$r.log)"
      fi
    else
      timed "$what" "$r" "$M_REST" "${CMD[$what]}"
    fi
    if ((r == 1)); then
      tree_state "${INPUTS[@]}" >"$LOGS/inputs-after.txt"
      cmp -s "$LOGS/inputs-before.txt" "$LOGS/inputs-after.txt" ||
        die "$what changed the backups it restored from (diff $LOGS/inputs-before.txt $LOGS/inputs-after.txt)"
    fi
    if ((r == RUNS && RC == 0)) && [[ $SKIP_CHECK != 1 ]]; then
      case $what in
        ferry-restore-full-*) check_against "$F_REST" "$LOGS/checksum-full.txt" "ferry-${what#ferry-restore-}" ;;
        ferry-restore-chain-*) check_against "$F_REST" "$LOGS/checksum-chain.txt" "ferry-${what#ferry-restore-}" ;;
        mb-restore-full) check_against "$M_REST" "$LOGS/checksum-full.txt" mb-full ;;
        mb-restore-chain) check_against "$M_REST" "$LOGS/checksum-chain.txt" mb-chain ;;
      esac
    fi
  done
done
clean_restored "$F_REST"; rm -rf "$M_REST" "$M_WORK" "$M_WORK_INC"

# --- report ---------------------------------------------------------------------------------------------
describe_env

report() {
  report_gawk -v kvfile="$KV" -v check="$([[ $SKIP_CHECK == 1 ]] && echo "not run (SKIP_CHECK=1)")" \
      -v events="$EVENTS" -v utest="$UPDATE_TEST" -v upct="$UPDATE_PCT" -v uthreads="$UPDATE_THREADS" \
      -v randtype="$RAND_TYPE" -v redosize="$REDO_SIZE" -v scanredo="$SCAN_REDO_SIZE" -v chain="$CHAIN" \
      -v pmem="$PREPARE_MEMORY" -v ferryargs="$FERRY_ARGS" -v recovery="$RECOVERY" -v findfile="$LOGS/findings.txt" '
    FILENAME == kvfile { K[$1] = $2; next }'"$AWK_LIB"'
    function mb(x) { return x == "" ? "–" : sprintf("%.1f", x / 1e6) }
    function pct(a, b) { return (a == "" || b == "" || b == 0) ? "–" : sprintf("%.2f %%", 100 * a / b) }
    # one row of the backup table: name, label in $RAW, key of its deltas in $KV ("" for a full)
    function brow(name, label, key,   w) {
      w = agg(W, label, "med")
      printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, cnt[label], f(w, "%.2f"),
        f(agg(W, label, "min"), "%.2f"), f(agg(C, label, "med"), "%.2f"), f(agg(R, label, "max") / 1024, "%.0f"),
        mb(agg(B, label, "med")), key == "" ? "–" : mb(K[key "_bytes"]), key == "" ? "–" : K[key "_data"],
        key == "" ? "–" : pct(K[key "_data"], K["innodb_pages"]) }
    function step(label) { return f(agg(W, label, "med"), "%.2f") }
    # median of the apply or recovery time ferry logged over the runs of label ("" if none)
    function tookmed(label,   i, m, v) { m = 0; for (i = 1; i <= runs; i++) if (K["took_" label "-" i] != "") v[++m] = K["took_" label "-" i] + 0; return m ? median(v, m) : "" }
    # one restore row of ferry: name, label in $RAW, name of its check
    function frow(name, label, ck) {
      printf "| %s | %d | %s | %s | %s | %s | %s %s | %s |\n", name, cnt[label], f(agg(W, label, "med"), "%.2f"), f(agg(W, label, "min"), "%.2f"),
        f(agg(C, label, "med"), "%.2f"), f(agg(R, label, "max") / 1024, "%.0f"), label ~ /-server$/ ? "recovery" : "apply", f(tookmed(label), "%.2f"),
        check != "" ? check : (K["check_" ck] == "" ? "– (failed: see below)" : K["check_" ck]) }
    function sumstep(label,   k, i, s) { k = cnt[label]; if (!k) return ""; for (i = 1; i <= k; i++) s += W[label, i]; return s / runs }
    END {
      ps = K["page_size"]; chg = K["mb_data"] * ps
      printf "## Incremental backups and chain restore: ferry vs mariadb-backup, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0; %d InnoDB pages of %d bytes\n", tables, rows, databytes / 1e9, ddbytes / 1e9, K["innodb_pages"], ps
      printf "- server: 1 GiB buffer pool, `--innodb-log-file-size=%s`, binlog on; before the scan incremental the log is resized online to %s (so that it no longer holds the full backup'"'"'s start)\n", redosize, scanredo
      printf "- every update: `sysbench %s --events=%d --time=0 --threads=%d --rand-type=%s run` (%s %% of the rows, as row updates), then `SET GLOBAL innodb_max_purge_lag_wait=0`; redo written by update 1: %.1f MiB\n", utest, events, uthreads, randtype, upct, K["update1_redo"] / 1048576
      printf "- backups: idle server, no dirty pages, cold page cache, `--parallel %d` both tools%s; %d run(s) each, alternating (medians)\n\n", par, ferryargs == "" ? "" : ", ferry " ferryargs, runs
      print "| backup | n | wall s median | wall s min | CPU s | max RSS MiB | dir MB | .delta MB | data pages in the deltas | of the InnoDB pages |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      brow("`ferry backup` (full, F)", "ferry-full", "")
      brow("`mariadb-backup --backup` (full, M)", "mb-full", "")
      brow("(a) `ferry backup --incremental-basedir F`, method redo", "ferry-redo", "redo")
      brow("(b) `ferry backup --incremental-basedir F`, method scan", "ferry-scan", "scan")
      brow("(c) `mariadb-backup --backup --incremental-basedir M`", "mb-inc", "mb")
      printf "\nchanged pages (reference): the data pages of (c), the pages whose LSN is above M'"'"'s to_lsn: **%d pages, %.1f MB** (%s of the InnoDB pages); ferry'"'"'s scan (b), pages above F'"'"'s start_lsn: %d; pages the redo named for (a): %s\n",
        K["mb_data"], chg / 1e6, pct(K["mb_data"], K["innodb_pages"]), K["scan_data"], K["ferry-redo-" runs "_pages_from_redo"]
      printf "\nferry'"'"'s reasons (log line `incremental: changed pages by ...`): (a) %s; (b) %s\n", K["ferry-redo-" runs "_why"], K["ferry-scan-" runs "_why"]
      fr = agg(W, "ferry-redo", "med"); fs = agg(W, "ferry-scan", "med"); mi = agg(W, "mb-inc", "med"); ff = agg(W, "ferry-full", "med")
      print "\n| ratio | value | target | met |\n|---|---|---|---|"
      r = ratio(fr, ff); printf "| ferry redo incremental / ferry full, wall | %s | ≤ 0.10 | %s |\n", r, met(r, 0.10)
      r = ratio(fr, mi); printf "| ferry redo incremental / mariadb-backup incremental, wall | %s | ≤ 0.20 | %s |\n", r, met(r, 0.20)
      r = ratio(fs, mi); printf "| ferry scan incremental / mariadb-backup incremental, wall | %s | ≤ 0.80 | %s |\n", r, met(r, 0.80)
      r = ratio(K["redo_bytes"], chg); printf "| ferry redo .delta bytes / changed-page bytes | %s | ≤ 1.10 | %s |\n", r, met(r, 1.10)
      r = ratio(K["scan_bytes"], chg); printf "| ferry scan .delta bytes / changed-page bytes | %s | ≤ 1.10 | %s |\n", r, met(r, 1.10)
      printf "| mariadb-backup .delta bytes / changed-page bytes | %s | – | – |\n", ratio(K["mb_bytes"], chg)
      printf "| mariadb-backup incremental / mariadb-backup full, wall | %s | – | – |\n", ratio(mi, agg(W, "mb-full", "med"))

      printf "\nThe chain (I1 = the last (b), MI1 = the last (c); then for each k an update of the same size and one incremental of each tool on the previous one):\n\n"
      print "| k | ferry wall s | ferry method | ferry .delta MB | ferry data pages | mariadb-backup wall s | mariadb-backup .delta MB | mariadb-backup data pages (changed pages) |"
      print "|---|---|---|---|---|---|---|---|"
      printf "| 1 | %s | scan | %s | %d | %s | %s | %d |\n", f(W["ferry-scan", runs], "%.2f"), mb(K["scan_bytes"]), K["scan_data"], f(W["mb-inc", runs], "%.2f"), mb(K["mb_bytes"]), K["mb_data"]
      for (k = 2; k <= chain; k++)
        printf "| %d | %s | redo | %s | %d | %s | %s | %d |\n", k, f(W["ferry-chain", k - 1], "%.2f"), mb(K["chain" k "_ferry_bytes"]), K["chain" k "_ferry_data"],
          f(W["mb-chain", k - 1], "%.2f"), mb(K["chain" k "_mb_bytes"]), K["chain" k "_mb_data"]

      printf "\nRestores (cold page cache, %d run(s) each, alternating; ferry `--parallel %d --use-memory %s`, mariadb-backup `--prepare --use-memory=%s`, `--copy-back --parallel=%d`):\n\n", runs, par, pmem, pmem, par
      print "| restore | n | wall s median | wall s min | CPU s | max RSS MiB | steps (median s) | check |"
      print "|---|---|---|---|---|---|---|---|"
      nm = split(recovery, M, " ")
      for (i = 1; i <= nm; i++) {
        frow("`ferry restore --target-dir F --recovery " M[i] "`", "ferry-restore-full-" M[i], "ferry-full-" M[i])
        frow("`ferry restore --target-dir F --incremental-dir I1 … I" chain " --recovery " M[i] "`", "ferry-restore-chain-" M[i], "ferry-chain-" M[i])
      }
      printf "| mariadb-backup: copy M, `--prepare`, `--copy-back` | %d | %s | %s | %s | %s | copy %s, prepare %s, copy-back %s | %s |\n", cnt["mb-restore-full"], f(agg(W, "mb-restore-full", "med"), "%.2f"), f(agg(W, "mb-restore-full", "min"), "%.2f"),
        f(agg(C, "mb-restore-full", "med"), "%.2f"), f(agg(R, "mb-restore-full", "max") / 1024, "%.0f"), step("mb-full-copy"), step("mb-full-prepare"), step("mb-full-copyback"), check != "" ? check : K["check_mb-full"]
      printf "| mariadb-backup: copy M, `--prepare`, %d x `--prepare --incremental-dir MIk`, `--copy-back` | %d | %s | %s | %s | %s | copy %s, prepare %s, incrementals %s (sum), copy-back %s | %s |\n", chain, cnt["mb-restore-chain"], f(agg(W, "mb-restore-chain", "med"), "%.2f"), f(agg(W, "mb-restore-chain", "min"), "%.2f"),
        f(agg(C, "mb-restore-chain", "med"), "%.2f"), f(agg(R, "mb-restore-chain", "max") / 1024, "%.0f"), step("mb-chain-copy"), step("mb-chain-prepare"), f(sumstep("mb-chain-prepare-inc"), "%.2f"), step("mb-chain-copyback"), check != "" ? check : K["check_mb-chain"]
      mc = agg(W, "mb-restore-chain", "med"); mf = agg(W, "mb-restore-full", "med")
      print "\n| ratio | value | target | met |\n|---|---|---|---|"
      for (i = 1; i <= nm; i++) {
        fc = agg(W, "ferry-restore-chain-" M[i], "med"); ffr = agg(W, "ferry-restore-full-" M[i], "med")
        r = (K["failed_ferry-restore-chain-" M[i]] || K["failed_ferry-restore-full-" M[i]]) ? "– (a restore failed)" : ratio(fc, ffr)
        printf "| ferry chain restore / ferry full restore, wall, `--recovery %s` | %s | ≤ 1.30 | %s |\n", M[i], r, r ~ /^–/ ? "–" : met(r, 1.30)
      }
      printf "| mariadb-backup chain / mariadb-backup full (copy + prepare + copy-back), wall | %s | – | – |\n", ratio(mc, mf)
      for (i = 1; i <= nm; i++)
        printf "| ferry chain restore `--recovery %s` / mariadb-backup chain (copy + prepare + incrementals + copy-back), wall | %s | – | – |\n", M[i],
          K["failed_ferry-restore-chain-" M[i]] ? "– (the restore failed)" : ratio(agg(W, "ferry-restore-chain-" M[i], "med"), mc)
      print "\ncheck: a server on the restored datadir; CHECKSUM TABLE of every sbtest table vs the source'"'"'s when the full backups were taken (full) or after the last incremental (chain). mariadb-backup prepares in place and its `--prepare --incremental-dir` deletes the .delta files it applied, so M (and for the chain the MIk) are copied first (the copy step); ferry restore copies the backups itself and leaves them unchanged (checked). apply / recovery: the `took` ferry logs for its native apply (`prepare: redo applied natively`) or the stock server'"'"'s recovery (`prepare: recovery finished`)."
      nfd = 0
      while ((getline line < findfile) > 0) { if (!nfd++) print "\nFindings (ferry failed or fell back; not worked around):\n"; print "- " line }
    }' "$KV" "$RAW"
}
: >"$LOGS/findings.txt"
((${#FINDINGS[@]} == 0)) || printf '%s\n' "${FINDINGS[@]}" >"$LOGS/findings.txt"
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW and $KV"
FAILED+=("${FINDINGS[@]}")
((${#FAILED[@]} == 0)) || die "$(printf '%s; ' "${FAILED[@]}")"
