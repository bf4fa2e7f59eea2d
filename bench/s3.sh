#!/usr/bin/env bash
# bench/s3.sh: ferry backup --repo s3://… against mariadb-backup --stream=xbstream | zstd -1 |
# aws s3 cp -, and ferry restore --repo against aws s3 cp - | zstd -d | mbstream -x + prepare +
# copy-back, on the same sysbench dataset, with a local S3 server (versitygw, posix backend on
# disk under $BENCH_DIR, 127.0.0.1 only).
#
# Same method as bench/backup.sh and bench/stream.sh (shared code: bench/lib.sh): a private
# mariadbd (1 GiB buffer pool, 512 MiB redo, binlog on), cold page cache and no dirty pages before
# every timed run, each command (a whole pipeline: children's CPU counts) under
# /usr/bin/time -f '%e %U %S %M'. In addition, the peak memory of every timed command is sampled:
# the sum of the RSS of all its processes (every descendant) every MEM_INTERVAL s, so a pipeline
# counts all its stages (/usr/bin/time's %M is only the largest process). The S3 server's memory
# and CPU count for neither side. The S3 requests of every timed command are counted too: the lines
# the S3 server's access log (--access-log, one line per request) gained while it ran. Measures, in
# one invocation, RUNS times each, alternating:
#   1. backup into S3: ferry backup --repo s3://bench/ferry-N vs mariadb-backup --backup
#      --stream=xbstream | zstd -1 -T$ZSTD_THREADS | aws s3 cp - s3://bench/mb-N.xbs.zst, and
#      ferry backup --stream --compress zstd >/dev/null (the same work without the network);
#      stored bytes and objects from ferry list --json and aws s3api head-object;
#   1b. copy (ferry only): ferry copy of the last ferry backup from s3://bench/ferry-N to a second
#      prefix s3://bench/copy-R of the same server, RUNS times (cold cache), and the ratio of its
#      throughput to the backup's (the same stored bytes to the same target: backup wall / copy
#      wall; aim ≥ 0.9);
#   1c. resume (ferry only): ferry backup --repo s3://bench/resume-R (the command of 1), killed
#      (kill -9) once the bytes under that prefix in the S3 server's data dir reach half of the last
#      full backup's stored bytes, then ferry backup --repo s3://bench/resume-R --resume timed (cold
#      cache), RUNS times; its wall against the full backup's (aim ≤ 0.6x) and what it kept and
#      uploaded (its "resumed backup" log line);
#   2. ferry verify of the last ferry backup (once, informational);
#   3. restore from S3 (cold cache, datadir removed first): ferry restore --repo … ID vs
#      aws s3 cp - | zstd -d | mbstream -x, mariadb-backup --prepare, mariadb-backup --copy-back,
#      each followed by a separately timed `sync`;
#   4. correctness: start a server on ferry's restored datadir and compare CHECKSUM TABLE of every
#      sbtest table with the (idle) source.
# Prints a markdown report and writes it to $BENCH_DIR/s3-results.md. Needs root.
#
#   bench/s3.sh                        # 14 tables x 1M rows (~4 GB datadir), 3 runs each
#   SMALL=1 bench/s3.sh                # 4 x 100k rows: checks the script in a few minutes
#   SKIP_FERRY=1 bench/s3.sh           # only the stock pipeline (e.g. while cmd/ferry does not build)
#
# Options (environment), defaults in brackets:
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), S3 data, awscli venv, logs-s3/
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RUNS [3]                          timed runs of every command
#   PARALLEL [2]                      --parallel for both tools (backup, mbstream -x, copy-back)
#   DOWNLOADS [8]                     ferry restore --parallel (objects downloaded at once)
#   ZSTD_THREADS [nproc]              zstd -T for mariadb-backup's stream (ferry compresses on every core)
#   PREPARE_MEMORY [256M]             mariadb-backup --prepare --use-memory (ferry restore's default)
#   S3_PORT [9310]                    port of the S3 server (bound to 127.0.0.1)
#   VERSITYGW [$REPO/.bin/versitygw]  S3 server binary (built from tools/go.mod if missing)
#   AWS_VENV [$BENCH_DIR/venv-aws]    venv holding awscli (pip install awscli if missing)
#   MEM_INTERVAL [0.2]                seconds between two memory samples
#   PORT [3310]                       TCP port of the private server (bound to 127.0.0.1)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a single timed command is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry backup --repo` only (e.g. "--part-size 64M --uploads 16")
#   SKIP_FERRY=1 SKIP_RESTORE=1 SKIP_CHECK=1   leave out ferry / the restore runs / the check
#   SKIP_COPY=1                       leave out the ferry copy runs (1b)
#   SKIP_RESUME=1                     leave out the interrupted + resumed backups (1c)
#   RESUME_AT [50]                    kill the interrupted backup at this % of the full backup's stored bytes
#   KEEP_SERVER=1                     leave the private mariadbd running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DOWNLOADS=${DOWNLOADS:-8}
ZSTD_THREADS=${ZSTD_THREADS:-$(nproc)}
S3_PORT=${S3_PORT:-9310}
VERSITYGW=${VERSITYGW:-$REPO/.bin/versitygw}
AWS_VENV=${AWS_VENV:-$BENCH_DIR/venv-aws}
MEM_INTERVAL=${MEM_INTERVAL:-0.2}
SKIP_RESTORE=${SKIP_RESTORE:-0}
SKIP_COPY=${SKIP_COPY:-0}
SKIP_RESUME=${SKIP_RESUME:-0}
RESUME_AT=${RESUME_AT:-50}

LOGS="$BENCH_DIR/logs-s3"                         # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/s3-results.md"
S3_DATA="$BENCH_DIR/s3-data"                      # versitygw posix backend: one dir per bucket
GW_PIDF="$BENCH_DIR/s3-gateway.pid"
ACCESS_LOG="$LOGS/s3-access.log"                  # versitygw --access-log: one line per request
S3_URL="http://127.0.0.1:$S3_PORT"
BUCKET=bench
F_REST="$BENCH_DIR/restored-s3-ferry"             # ferry restore --datadir
M_UNPACK="$BENCH_DIR/restored-s3-mb-unpacked"     # mbstream -x -C, then --prepare
M_REST="$BENCH_DIR/restored-s3-mb"                # mariadb-backup --copy-back --datadir
IDF="$BENCH_DIR/s3-backup-id.out"                 # stdout of ferry backup --repo: the backup id
AWS_EMPTY="$BENCH_DIR/s3-aws-empty"               # AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE
CLEAN_PATHS=("$S3_DATA" "$F_REST" "$M_UNPACK" "$M_REST" "$IDF" "$AWS_EMPTY")
[[ $DOWNLOADS =~ ^[1-9][0-9]*$ ]] || die "DOWNLOADS must be a positive integer"
[[ $S3_PORT =~ ^[1-9][0-9]*$ ]] || die "S3_PORT must be a port number"
[[ $MEM_INTERVAL =~ ^[0-9]*\.?[0-9]+$ ]] || die "MEM_INTERVAL must be a number of seconds"
[[ $RESUME_AT =~ ^[1-9][0-9]?$ ]] || die "RESUME_AT must be a percentage from 1 to 99"

# Both tools get the endpoint and keys from the standard variables, and nothing from the caller's
# AWS profile (empty config and credentials files), so both sides run with stock settings.
export AWS_ENDPOINT_URL="$S3_URL" AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=ferrybench AWS_SECRET_ACCESS_KEY
AWS_SECRET_ACCESS_KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export AWS_CONFIG_FILE="$AWS_EMPTY" AWS_SHARED_CREDENTIALS_FILE="$AWS_EMPTY"
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION

# --- the S3 server, awscli, the memory sampler --------------------------------------------------
GW_PID=""; MEM_PID=""
AWS="$AWS_VENV/bin/aws"

# setup_awscli: awscli from PyPI in a venv under BENCH_DIR (never an aws found on PATH).
setup_awscli() {
  [[ -x $AWS ]] && return 0
  need python3 python3
  python3 -c 'import ensurepip' 2>/dev/null || need_pkg python3-venv
  log "installing awscli from PyPI into $AWS_VENV"
  rm -rf "$AWS_VENV"
  { python3 -m venv "$AWS_VENV" && "$AWS_VENV/bin/pip" install -q awscli; } >"$LOGS/awscli-install.log" 2>&1 ||
    { tail -n 15 "$LOGS/awscli-install.log" >&2; die "installing awscli into $AWS_VENV failed"; }
  [[ -x $AWS ]] || die "no $AWS after pip install awscli"
}
# need_pkg PACKAGE: apt-get install a package that has no command of its own to test.
need_pkg() {
  dpkg -s "$1" >/dev/null 2>&1 && return 0
  log "installing $1"
  if [[ $apt_updated == 0 ]]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null || die "apt-get install $1 failed"
}

# build_versitygw: builds the pinned versitygw (tools/go.mod) into VERSITYGW if it is missing.
build_versitygw() {
  local go
  [[ -x $VERSITYGW ]] && return 0
  go=$(command -v go || echo /usr/local/go/bin/go)
  [[ -x $go ]] || die "$VERSITYGW is missing and go is not found to build it (set VERSITYGW=/path/to/versitygw)"
  log "building versitygw (tools/go.mod) into $VERSITYGW"
  mkdir -p "$(dirname "$VERSITYGW")"
  (cd "$REPO/tools" && "$go" build -o "$VERSITYGW" github.com/versity/versitygw/cmd/versitygw) \
    >"$LOGS/versitygw-build.log" 2>&1 ||
    { tail -n 15 "$LOGS/versitygw-build.log" >&2; die "building versitygw failed (log: $LOGS/versitygw-build.log)"; }
}

# start_gateway: stops a gateway left by an interrupted invocation, starts versitygw on an empty
# S3_DATA, waits for any HTTP answer and creates the bucket.
start_gateway() {
  local pid i code
  pid=$(cat "$GW_PIDF" 2>/dev/null) || pid=""
  if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "versitygw.* posix $S3_DATA"; then
    log "stopping the S3 server left running on $S3_DATA (pid $pid)"
    stop_gateway_pid "$pid"
  fi
  rm -f "$GW_PIDF"
  if (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null; then
    die "127.0.0.1:$S3_PORT is in use; pick another S3_PORT"
  fi
  rm -rf "$S3_DATA" "$ACCESS_LOG"; mkdir -p "$S3_DATA"
  "$VERSITYGW" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
    --port "127.0.0.1:$S3_PORT" --quiet --access-log "$ACCESS_LOG" posix "$S3_DATA" </dev/null >"$LOGS/versitygw.log" 2>&1 &
  GW_PID=$!
  echo "$GW_PID" >"$GW_PIDF"
  for ((i = 0; i < 300; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$S3_URL/") || true
    [[ $code =~ ^[1-5][0-9][0-9]$ ]] && break
    kill -0 "$GW_PID" 2>/dev/null || { tail -n 15 "$LOGS/versitygw.log" >&2; die "versitygw exited; log: $LOGS/versitygw.log"; }
    sleep 0.1
  done
  [[ $code =~ ^[1-5][0-9][0-9]$ ]] || die "versitygw did not answer on $S3_URL within 30 s"
  "$AWS" --endpoint-url "$S3_URL" s3 mb "s3://$BUCKET" >"$LOGS/s3-mb.log" 2>&1 ||
    { cat "$LOGS/s3-mb.log" >&2; die "aws s3 mb s3://$BUCKET failed"; }
  log "S3 server: versitygw pid $GW_PID on $S3_URL, data in $S3_DATA, bucket $BUCKET"
}

stop_gateway_pid() {
  local i
  kill -TERM "$1" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

# s3_cleanup: the EXIT trap's first part (lib.sh's cleanup runs next with the same exit status):
# stops the sampler and the S3 server, removes ferry's staging dirs of a failed restore.
s3_cleanup() {
  local rc=$?
  set +e
  [[ -n $MEM_PID ]] && kill -TERM "$MEM_PID" 2>/dev/null
  if [[ -n $GW_PID ]]; then stop_gateway_pid "$GW_PID"; wait "$GW_PID" 2>/dev/null; rm -f "$GW_PIDF"; fi
  rm -rf "$BENCH_DIR/.$(basename "$F_REST").ferry-restore-"*
  return "$rc"
}
trap 's3_cleanup; cleanup' EXIT

# mem_sampler OUT: started in the background just before `timed` (lib.sh), it finds the command
# timed runs (this shell's child /usr/bin/time, whose child is timeout), then every MEM_INTERVAL s
# sums VmRSS over every descendant of timeout (found by parent pid: ferry starts the mariadbd of
# its prepare in a process group of its own, so a process group would miss it). Writes
# "max-sum-KiB sum-of-per-process-VmHWM-KiB samples" to OUT when timeout exits.
mem_sampler() {
  local out=$1 tp="" root="" i pid ppid k v rss hwm sum max=0 n=0 hsum=0 todo
  local -A peak=() kids=()
  set +e
  for ((i = 0; i < 400; i++)); do                 # up to 20 s for time and timeout to start
    [[ -z $tp ]] && tp=$(pgrep -P "$$" -x time | head -n1)
    [[ -n $tp ]] && root=$(pgrep -P "$tp" -x timeout | head -n1)
    [[ -n $root ]] && break
    kill -0 "$$" 2>/dev/null || break
    sleep 0.05
  done
  while [[ -n $root ]] && kill -0 "$root" 2>/dev/null && kill -0 "$$" 2>/dev/null; do
    kids=()
    while read -r pid ppid; do kids[$ppid]+=" $pid"; done < <(ps -e -o pid=,ppid=)
    sum=0; todo=${kids[$root]:-}
    while [[ -n ${todo// /} ]]; do
      read -r pid todo <<<"$todo"
      todo+=" ${kids[$pid]:-}"
      rss=0; hwm=0
      while read -r k v _; do
        case $k in VmRSS:) rss=$v ;; VmHWM:) hwm=$v ;; esac
      done 2>/dev/null <"/proc/$pid/status"
      sum=$((sum + rss))
      ((hwm > ${peak[$pid]:-0})) && peak[$pid]=$hwm
    done
    ((sum > max)) && max=$sum
    n=$((n + 1))
    sleep "$MEM_INTERVAL"
  done
  for pid in "${!peak[@]}"; do hsum=$((hsum + peak[$pid])); done
  echo "$max $hsum $n" >"$out"
}

# measured LABEL RUN SIZE COMMAND: `timed` (lib.sh) with mem_sampler beside it; appends
# "LABEL peak|hwm|samples|gwcpu|requests|reqops VALUE" lines to $EXTRA.
measured() {
  local mem="$LOGS/mem.out" max hsum n gw0 gw1 q0 q1
  rm -f "$mem"
  gw0=$(gw_ticks)
  q0=$(s3_requests)
  mem_sampler "$mem" &
  MEM_PID=$!
  timed "$@"
  wait "$MEM_PID" || true
  MEM_PID=""
  gw1=$(gw_ticks)
  q1=$(s3_requests)
  read -r max hsum n <"$mem" 2>/dev/null || { max=0; hsum=0; n=0; }
  printf '%s\tpeak\t%s\n%s\thwm\t%s\n%s\tsamples\t%s\n' "$1" "$max" "$1" "$hsum" "$1" "$n" >>"$EXTRA"
  extra "$1" gwcpu "$(gawk -v t="$(getconf CLK_TCK)" -v a="$gw0" -v b="$gw1" 'BEGIN { printf "%.2f", (b - a) / t }')"
  log "$(printf '  %-18s run %s: peak memory %5d MiB (sum of RSS, %d samples), sum of per-process peaks %5d MiB; S3 server CPU %s s' \
    "$1" "$2" $((max / 1024)) "$n" $((hsum / 1024)) "$(tail -n1 "$EXTRA" | cut -f3)")"
  s3_request_counts "$1" "$2" "$q0" "$q1"
}
# s3_requests: the lines of the S3 server's access log so far (a header, then one per request).
s3_requests() { if [[ -f $ACCESS_LOG ]]; then wc -l <"$ACCESS_LOG"; else echo 0; fi; }
# s3_request_counts LABEL RUN FROM TO: the requests of access log lines FROM+1..TO (the server logs
# a request before it answers it, so a finished command's are all there): their number and the
# count per operation go to $EXTRA (requests, reqops) and the log, those lines to LABEL-RUN.access.
s3_request_counts() {
  local ops=""
  if (($4 > $3)); then
    sed -n "$(($3 + 1)),$4p" "$ACCESS_LOG" >"$LOGS/$1-$2.access"
    ops=$(grep -o ' s3_[A-Za-z0-9]*' "$LOGS/$1-$2.access" | sort | uniq -c | sort -rn |
      gawk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), substr($2, 4), $1 }')
  fi
  extra "$1" requests $(($4 - $3)); extra "$1" reqops "${ops:-none}"
  log "$(printf '  %-18s run %s: %d S3 requests (%s)' "$1" "$2" $(($4 - $3)) "${ops:-none}")"
}
# gw_ticks: user + sys CPU clock ticks the S3 server has used so far.
gw_ticks() { gawk '{ print $14 + $15 }' "/proc/$GW_PID/stat" 2>/dev/null || echo 0; }
extra() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$EXTRA"; }   # extra LABEL KEY VALUE

# --- setup ------------------------------------------------------------------------------------
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
bench_init
EXTRA="$LOGS/extra.tsv"; : >"$EXTRA"              # peak memory, stored bytes, objects per run
need zstd zstd
need mbstream mariadb-backup
need curl curl
need jq jq
need pgrep procps
setup_awscli
build_ferry
build_versitygw
stop_stale "$RPIDF" "$F_REST"
load_dataset
rm -rf "${CLEAN_PATHS[@]}"
: >"$AWS_EMPTY"
start_gateway

AWSC="$(q "$AWS") --endpoint-url $S3_URL"
FERRY_BK="$(q "${FERRY:-ferry}") backup --socket $(q "$SOCK") --user root --parallel $PARALLEL"
MB_STREAM="mariadb-backup --no-defaults --backup --stream=xbstream --socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL"
CMD_STREAM="$FERRY_BK --stream --compress zstd >/dev/null"
# cmd_backup TOOL RUN [PREFIX [ARGS]]: the backup command of TOOL (ferry or mb) into prefix/key
# ferry-RUN / mb-RUN (ferry: PREFIX instead if given, with ARGS added).
cmd_backup() {
  if [[ $1 == ferry ]]; then echo "$FERRY_BK --repo s3://$BUCKET/${3:-ferry-$2} --compress zstd $FERRY_ARGS ${4:+$4 }>$(q "$IDF")"
  else echo "$MB_STREAM | zstd -1 -T$ZSTD_THREADS -q -c | $AWSC s3 cp --only-show-errors --expected-size $DATA_BYTES - s3://$BUCKET/mb-$2.xbs.zst"; fi
}
# list_backup PREFIX ID LOGNAME: "status stored_size objects size" of backup ID in s3://bench/PREFIX
# (ferry list --json, saved as $LOGS/LOGNAME.json).
list_backup() {
  "$FERRY" list --repo "s3://$BUCKET/$1" --json >"$LOGS/$3.json" 2>"$LOGS/$3.err" ||
    { cat "$LOGS/$3.err" >&2; die "ferry list --repo s3://$BUCKET/$1 failed"; }
  jq -r --arg id "$2" \
    '(if type == "array" then .[] elif has("backups") then .backups[] else . end) | select(.id == $id) | "\(.status) \(.stored_size) \(.objects) \(.size // 0)"' \
    "$LOGS/$3.json" | grep . || die "backup $2 is not in ferry list of s3://$BUCKET/$1 (see $LOGS/$3.json)"
}

TOOLS=(ferry mb)
[[ $SKIP_FERRY == 1 ]] && TOOLS=(mb)
# order RUN: the tools in the order of that run (odd runs ferry first, even runs mariadb-backup).

# --- 1: backups of the idle server into S3, cold cache ----------------------------------------
quiesce
data_sizes
check_free 4
log "datadir $DATA: $DATA_BYTES bytes ($DD_BYTES without ib_logfile0); $RUNS runs, --parallel $PARALLEL"

FERRY_ID=""; FERRY_STORED=0; LAST_RUN=0
for ((r = 1; r <= RUNS; r++)); do
  for tool in $(order "$r"); do
    # Only the last backup of each tool is kept (the restores use it): remove the previous one.
    if ((r > 1)); then
      if [[ $tool == ferry ]]; then "$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --only-show-errors "s3://$BUCKET/ferry-$((r - 1))/"
      else "$AWS" --endpoint-url "$S3_URL" s3 rm --only-show-errors "s3://$BUCKET/mb-$((r - 1)).xbs.zst"; fi
    fi
    quiesce
    measured "$tool-s3" "$r" 0 "$(cmd_backup "$tool" "$r")"
    if [[ $tool == ferry ]]; then
      FERRY_ID=$(tr -d ' \n' <"$IDF")
      [[ -n $FERRY_ID ]] || die "ferry backup --repo printed no backup id (log: $LOGS/ferry-s3-$r.log)"
      read -r status stored objects size < <(list_backup "ferry-$r" "$FERRY_ID" "ferry-list-$r")
      [[ -n $stored ]] || die "no stored size for backup $FERRY_ID in ferry list (see $LOGS/ferry-list-$r.json)"
      FERRY_STORED=$stored
      log "  ferry backup $FERRY_ID: status $status, $stored bytes stored in $objects objects, $size bytes of server files"
      [[ $status == complete ]] || log "warning: ferry list says backup $FERRY_ID is $status, not complete"
      extra ferry-s3 stored "$stored"; extra ferry-s3 objects "$objects"; extra ferry-s3 size "$size"
    else
      stored=$("$AWS" --endpoint-url "$S3_URL" s3api head-object --bucket "$BUCKET" --key "mb-$r.xbs.zst" \
        --query ContentLength --output text) || die "aws s3api head-object mb-$r.xbs.zst failed"
      log "  mariadb-backup | zstd | aws: 1 object of $stored bytes"
      extra mb-s3 stored "$stored"; extra mb-s3 objects 1
    fi
  done
  LAST_RUN=$r
  if [[ $SKIP_FERRY != 1 ]]; then
    quiesce
    measured ferry-stream "$r" 0 "$CMD_STREAM"
  fi
done

# --- 1b: ferry copy of the last ferry backup to a second prefix of the same S3 server -------------
# The same stored bytes go to the same target as the backup's: the throughput ratio copy/backup is
# the backup's wall over the copy's. Each run copies to a new prefix (the previous one removed).
if [[ $SKIP_FERRY != 1 && $SKIP_COPY != 1 ]]; then
  for ((r = 1; r <= RUNS; r++)); do
    ((r > 1)) && "$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --only-show-errors "s3://$BUCKET/copy-$((r - 1))/"
    quiesce
    measured ferry-copy "$r" 0 "$(q "${FERRY:-ferry}") copy --from s3://$BUCKET/ferry-$LAST_RUN --to s3://$BUCKET/copy-$r $(q "$FERRY_ID")"
    grep -q ' 0 objects already there' "$LOGS/ferry-copy-$r.log" ||
      die "ferry copy run $r found objects already in s3://$BUCKET/copy-$r (log: $LOGS/ferry-copy-$r.log)"
  done
  "$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --only-show-errors "s3://$BUCKET/copy-$RUNS/"
fi

# --- 1c: a backup killed half-way, then resumed ---------------------------------------------------
# The backup of 1 into a new prefix, started in the background (cold cache), gets kill -9 once the
# objects under the prefix in the server's data dir (posix backend: one file per object under
# S3_DATA/BUCKET/KEY; an object being written is a temp file elsewhere) hold RESUME_AT % of the last
# full backup's stored bytes. Then `--resume` is timed as the backups are.
# prefix_bytes PREFIX: the bytes of the objects stored under s3://BUCKET/PREFIX/ (0 if none yet).
prefix_bytes() {
  { find "$S3_DATA/$BUCKET/$1" -type f -printf '%s\n' 2>/dev/null || true; } | gawk '{ s += $1 } END { print s + 0 }'
}
# interrupt_backup PREFIX RUN: starts the backup into PREFIX and kill -9s it at RESUME_AT %; returns
# 1 if the backup was stored whole before the kill landed (a small set: a couple of objects).
interrupt_backup() {
  local pfx=$1 r=$2 want pid b=0 t0 i
  want=$((FERRY_STORED * RESUME_AT / 100))
  quiesce
  t0=$(now)
  bash -c "exec $(cmd_backup ferry "$r" "$pfx")" >"$LOGS/ferry-interrupted-$r.log" 2>&1 &
  pid=$!
  for ((i = 0; i < TOOL_TIMEOUT * 20; i++)); do
    b=$(prefix_bytes "$pfx")
    ((b >= want)) && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  b=$(prefix_bytes "$pfx")
  if grep -q 'msg="repository backup stored"' "$LOGS/ferry-interrupted-$r.log"; then
    log "warning: resume run $r skipped: the backup into s3://$BUCKET/$pfx was stored whole before the kill ($b bytes; the set is too small to stop it half-way)"
    RESUME_SKIPPED=$((RESUME_SKIPPED + 1))
    return 1
  fi
  ((b >= want)) || die "the backup into s3://$BUCKET/$pfx ended before it stored $want bytes (log: $LOGS/ferry-interrupted-$r.log)"
  extra ferry-resume killbytes "$b"
  extra ferry-resume killsecs "$(gawk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')"
  log "  interrupted backup run $r: kill -9 after $(tail -n1 "$EXTRA" | cut -f3) s, $b bytes stored under $pfx/ (aim $want)"
}
RESUMED_CHECK=""; RESUME_OK=0; RESUME_BAD=""; RESUME_SKIPPED=0
if [[ $SKIP_FERRY != 1 && $SKIP_RESUME != 1 ]]; then
  for ((r = 1; r <= RUNS; r++)); do
    pfx="resume-$r"
    if ! interrupt_backup "$pfx" "$r"; then
      "$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --only-show-errors "s3://$BUCKET/$pfx/"
      continue
    fi
    quiesce
    measured ferry-resume "$r" 0 "$(cmd_backup ferry "$r" "$pfx" --resume)"
    rid=$(tr -d ' \n' <"$IDF")
    rlog="$LOGS/ferry-resume-$r.log"
    for k in objects_kept stored_bytes_kept stored_bytes_uploaded held_bytes_current held_bytes_sent_again; do
      v=$(gawk -v k="$k" 'index($0, "resumed backup:") && match($0, " " k "=[^ ]*") {
        v = substr($0, RSTART + length(k) + 2, RLENGTH - length(k) - 2) } END { gsub(/"/, "", v); print v }' "$rlog")
      [[ -n $v ]] || die "ferry backup --resume run $r logged no $k (no \"resumed backup\" line: nothing kept?) (log: $rlog)"
      extra ferry-resume "$k" "$v"
    done
    read -r status stored objects size < <(list_backup "$pfx" "$rid" "ferry-resume-list-$r")
    [[ $status == complete ]] || die "the resumed backup $rid is $status, not complete (see $LOGS/ferry-resume-list-$r.json)"
    extra ferry-resume stored "$stored"; extra ferry-resume objects "$objects"; extra ferry-resume size "$size"
    log "  resumed backup $rid: $stored bytes stored in $objects objects, $size bytes of server files"
    # every resumed backup is verified (untimed): the kept objects and the new ones make a sound backup
    if "$FERRY" verify --repo "s3://$BUCKET/$pfx" "$rid" >"$LOGS/ferry-resume-verify-$r.log" 2>&1; then
      RESUME_OK=$((RESUME_OK + 1)); log "  ferry verify of the resumed backup: OK"
    else
      RESUME_BAD+=" $r"; log "  ferry verify of the resumed backup: FAILED (log: $LOGS/ferry-resume-verify-$r.log)"
    fi
    "$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --only-show-errors "s3://$BUCKET/$pfx/"
  done
  RESUMED_CHECK="\`ferry verify\` of each resumed backup: $RESUME_OK OK"
  [[ -z $RESUME_BAD ]] || RESUMED_CHECK+=", **FAILED** in run(s)$RESUME_BAD (logs: $LOGS/ferry-resume-verify-R.log)"
fi

# --- 2+3: verify, restore from S3, cold cache ---------------------------------------------------
# The source stays idle from here on, so the check compares with the state the backups captured.
CHECK="not run (SKIP_CHECK=1)"
[[ $SKIP_RESTORE == 1 ]] && CHECK="not run (SKIP_RESTORE=1)"
[[ $SKIP_FERRY == 1 ]] && CHECK="not run (SKIP_FERRY=1)"
if [[ $SKIP_RESTORE != 1 ]]; then
  F_REPO="s3://$BUCKET/ferry-$LAST_RUN"
  if [[ $SKIP_FERRY != 1 ]]; then
    drop_caches
    measured ferry-verify 1 0 "$(q "$FERRY") verify --repo $F_REPO $(q "$FERRY_ID")"
  fi
  declare -A CMD
  CMD[ferry-restore]="$(q "${FERRY:-ferry}") restore --repo $F_REPO $(q "$FERRY_ID") --datadir $(q "$F_REST") --parallel $DOWNLOADS"
  # The stock path as one command; each step is also timed on its own (labels mb-download, ...).
  CMD[mb-restore]=$(stock_restore_cmd mb-download "$AWSC s3 cp --only-show-errors s3://$BUCKET/mb-$LAST_RUN.xbs.zst - | zstd -d -q -c | mbstream -x -p $PARALLEL -C $(q "$M_UNPACK")")
  restore_runs measured

  # --- 4: correctness of ferry's last restore ---------------------------------------------------
  if [[ $SKIP_FERRY != 1 && $SKIP_CHECK != 1 ]]; then
    check_restored "$F_REST"
  fi
  rm -rf "$F_REST"
fi

# --- report -----------------------------------------------------------------------------------
describe_env
VERSIONS+="; $(ver zstd --version | sed 's/^\*\*\* //;s/ (64-bit)//;s/, by.*//;s/ CLI//'); \
$(ver "$AWS" --version | gawk '{ print $1 " (" $4 ")" }'); \
versitygw $(gawk '$1 == "github.com/versity/versitygw" { print $2; exit }' "$REPO/tools/go.mod") (posix backend)"

report() {
  report_gawk -v zt="$ZSTD_THREADS" -v dl="$DOWNLOADS" -v check="$CHECK" \
      -v skipferry="$SKIP_FERRY" -v skiprestore="$SKIP_RESTORE" -v ferryargs="$FERRY_ARGS" \
      -v pmem="$PREPARE_MEMORY" -v interval="$MEM_INTERVAL" -v extra="$EXTRA" -v ferryid="$FERRY_ID" \
      -v resumeat="$RESUME_AT" -v resumedcheck="$RESUMED_CHECK" -v resumeskipped="$RESUME_SKIPPED" -v la0="$LOAD_START" \
      -v la1="$(cut -d' ' -f1-3 /proc/loadavg)" "$AWK_LIB"'
    # $EXTRA, one line per run and key: LABEL KEY VALUE -> PK (peak), HW (hwm), ST (stored),
    # OB (objects), SZ (size), GC (S3 server CPU s) [LABEL, n], n in the order of the runs as in AWK_LIB
    BEGIN {
      while ((getline line < extra) > 0) {
        split(line, a, "\t"); k = ++xn[a[1], a[2]]
        if (a[2] == "peak") PK[a[1], k] = a[3] + 0; else if (a[2] == "hwm") HW[a[1], k] = a[3] + 0
        else if (a[2] == "stored") ST[a[1], k] = a[3] + 0; else if (a[2] == "objects") OB[a[1], k] = a[3] + 0
        else if (a[2] == "size") SZ[a[1], k] = a[3] + 0; else if (a[2] == "gwcpu") GC[a[1], k] = a[3] + 0
        V[a[1], a[2], k] = a[3]
      }
    }
    # vmed(label, key): the median of the numeric values of KEY over the runs of label ("" if none);
    # vlast(label, key): the last run'"'"'s value
    function vmed(label, key,   m, i, v) {
      m = xn[label, key]; if (!m) return ""
      for (i = 1; i <= m; i++) v[i] = V[label, key, i] + 0
      return median(v, m) }
    function vlast(label, key) { return xn[label, key] ? V[label, key, xn[label, key]] : "" }
    function vmin(label, key,   m, i, v) {
      m = xn[label, key]; if (!m) return ""
      for (i = 1; i <= m; i++) v[i] = V[label, key, i] + 0
      median(v, m); return v[1] }
    function vmax(label, key,   m, i, v) {
      m = xn[label, key]; if (!m) return ""
      for (i = 1; i <= m; i++) v[i] = V[label, key, i] + 0
      median(v, m); return v[m] }
    # req(label): the median S3 requests of label'"'"'s runs, "min-max" added if they differ
    function req(label,   a, b) {
      if (!xn[label, "requests"]) return "–"
      a = vmin(label, "requests"); b = vmax(label, "requests")
      return sprintf("%d", vmed(label, "requests")) (a == b ? "" : sprintf(" (%d–%d)", a, b)) }
    # peak memory of run n of label: the max sampled sum of RSS, at least the largest process (%M)
    function peak(label,   i) {
      for (i = 1; i <= cnt[label]; i++) PM[label, i] = (PK[label, i] > R[label, i]) ? PK[label, i] : R[label, i]
      return agg(PM, label, "max") }
    function mib(kib) { return kib == "" ? "–" : sprintf("%.0f", kib / 1024) }
    function atleast(r, lim) { return r == "–" ? "–" : (r + 0 >= lim ? "yes" : "**no**") }
    # backup row: throughput = what dd reads / median wall; stored bytes and objects (median),
    # objects per GB stored and per GB of server files (ferry list'"'"'s size), S3 requests
    function brow(name, label,   gb, w, st, ob, sz, objs) {
      gb = ddbytes / 1e9
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – | – | – | – | – | – | – |\n", name; return }
      w = agg(W, label, "med"); st = agg(ST, label, "med"); ob = agg(OB, label, "med"); sz = agg(SZ, label, "med")
      objs = (ob == "") ? "–" : (label == "mb-s3" ? "1 (one multipart upload)" : sprintf("%d", ob))
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, cnt[label],
        w, agg(W, label, "min"), agg(C, label, "med"), agg(C, label, "med") / gb, f(agg(GC, label, "med"), "%.2f"), ddbytes / 1048576 / w,
        mib(peak(label)), mib(agg(HW, label, "max")), mib(agg(R, label, "max")),
        st == "" ? "–" : sprintf("%.0f", st / 1e6), objs, (st == "" || st == 0) ? "–" : sprintf("%.1f", ob / (st / 1e9)),
        (sz == "" || sz == 0) ? "–" : sprintf("%.1f", ob / (sz / 1e9)), req(label) }
    # restore row: restored datadir MB and the separately timed sync; steps have no sampled memory
    function rrow(name, label, sampled,   gb, b, sy) {
      gb = ddbytes / 1e9
      if (!cnt[label]) { printf "| %s | 0 | – | – | – | – | – | – | – | – | – | – | – |\n", name; return }
      b = agg(B, label, "med"); sy = agg(W, "sync-" label, "med")
      printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n", name, cnt[label],
        agg(W, label, "med"), agg(W, label, "min"), agg(C, label, "med"), agg(C, label, "med") / gb,
        sampled ? f(agg(GC, label, "med"), "%.2f") : "–",
        sampled ? mib(peak(label)) : "–", sampled ? mib(agg(HW, label, "max")) : "–", mib(agg(R, label, "max")),
        (b > 0) ? sprintf("%.0f", b / 1e6) : "–", f(sy, "%.2f"), sampled ? req(label) : "–" }
    END {
      printf "## ferry backup --repo s3:// vs mariadb-backup --stream | zstd -1 | aws s3 cp -, %s\n\n", date
      printf "- machine: %s\n- versions: %s\n", machine, versions
      printf "- dataset: sysbench %d tables x %d rows; datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (what both tools read: the GB of CPU s/GB and MiB/s)\n", tables, rows, databytes / 1e9, ddbytes / 1e9
      printf "- S3: versitygw (posix backend, data on the same disk as the datadir) on 127.0.0.1, awscli with default settings (multipart, 10 concurrent requests); its CPU and memory count for neither side (its CPU during each command is shown apart: S3 server CPU s)\n"
      printf "- %d cold-cache runs each (page cache dropped, 0 dirty pages), alternating ferry / mariadb-backup, --parallel %d; `zstd -1 -T%d`%s\n", runs, par, zt, ferryargs == "" ? "" : "; ferry " ferryargs
      printf "- CPU: user + sys of the whole command (`bash -o pipefail -c`, every process of a pipeline); peak memory: max over samples every %s s of the summed RSS of all its processes (at least the largest process'"'"'s max RSS); Σ peaks: sum of each process'"'"'s VmHWM (an upper bound: the peaks need not coincide)\n\n", interval
      print "| backup into S3 | n | wall s median | wall s min | CPU s (user + sys) | CPU s/GB | S3 server CPU s | MiB/s (median) | peak memory MiB | Σ per-process peaks MiB | largest process MiB | stored MB | objects | objects per GB stored | objects per GB of server files | S3 requests median (min–max) |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
      if (skipferry != 1) brow("`ferry backup --repo s3://… --compress zstd`", "ferry-s3")
      brow("`mariadb-backup --stream=xbstream \\| zstd -1 \\| aws s3 cp -`", "mb-s3")
      if (skipferry != 1) brow("`ferry backup --stream --compress zstd >/dev/null` (no network)", "ferry-stream")
      if (skipferry != 1 && cnt["ferry-s3"]) {
        sz = agg(SZ, "ferry-s3", "med")
        printf "\nferry list: the last backup `%s` holds %s MB of server files (`size`).\n", ferryid, sz == "" ? "–" : sprintf("%.0f", sz / 1e6)
      }

      if (skipferry != 1) {
        print "\n| ratio (ferry / pipeline) | median | min | target | met (median) |\n|---|---|---|---|---|"
        rw = ratio(agg(W, "ferry-s3", "med"), agg(W, "mb-s3", "med"))
        rwmin = ratio(agg(W, "ferry-s3", "min"), agg(W, "mb-s3", "min"))
        # throughput ratios from the walls themselves (not 1 / a rounded wall ratio)
        rt = ratio(agg(W, "mb-s3", "med"), agg(W, "ferry-s3", "med"))
        printf "| throughput (MiB/s) | %s | %s | ≥ 2.00 | %s |\n", rt, ratio(agg(W, "mb-s3", "min"), agg(W, "ferry-s3", "min")), atleast(rt, 2)
        printf "| wall | %s | %s | ≤ 0.50 | %s |\n", rw, rwmin, met(rw, 0.5)
        printf "| CPU s (per GB) | %s | – | – | – |\n", ratio(agg(C, "ferry-s3", "med"), agg(C, "mb-s3", "med"))
        rp = ratio(peak("ferry-s3"), peak("mb-s3"))
        printf "| peak memory (max of the runs) | %s | – | ≤ 0.50 | %s |\n", rp, met(rp, 0.5)
        printf "| stored bytes | %s | – | – | – |\n", ratio(agg(ST, "ferry-s3", "med"), agg(ST, "mb-s3", "med"))
        printf "| ferry --repo s3 / ferry --stream >/dev/null, wall (cost of the upload) | %s | %s | – | – |\n",
          ratio(agg(W, "ferry-s3", "med"), agg(W, "ferry-stream", "med")), ratio(agg(W, "ferry-s3", "min"), agg(W, "ferry-stream", "min"))
      }

      if (skiprestore != 1) {
        printf "\nRestore from S3 (cold cache, datadir removed first; ferry `--parallel %d` downloads; the stock path is one `bash -c` of the three steps, each also timed on its own, `mariadb-backup --prepare --use-memory=%s`):\n\n", dl, pmem
        print "| restore from S3 | n | wall s median | wall s min | CPU s (user + sys) | CPU s/GB | S3 server CPU s | peak memory MiB | Σ per-process peaks MiB | largest process MiB | datadir MB | sync after s | S3 requests median (min–max) |"
        print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        if (skipferry != 1) rrow("`ferry restore --repo s3://… ID`", "ferry-restore", 1)
        rrow("stock: download + prepare + copy-back", "mb-restore", 1)
        rrow("&nbsp;&nbsp;1. `aws s3 cp - \\| zstd -d \\| mbstream -x`", "mb-download", 0)
        rrow("&nbsp;&nbsp;2. `mariadb-backup --prepare`", "mb-prepare", 0)
        rrow("&nbsp;&nbsp;3. `mariadb-backup --copy-back`", "mb-copyback", 0)
        if (skipferry != 1) {
          rrow("`ferry verify --repo s3://… ID` (informational, once)", "ferry-verify", 1)
          print "\n| ratio (ferry / stock path) | median | min | target | met (median) |\n|---|---|---|---|---|"
          r = ratio(agg(W, "ferry-restore", "med"), agg(W, "mb-restore", "med"))
          printf "| restore wall | %s | %s | ≤ 0.50 (≥ 2x faster) | %s |\n", r,
            ratio(agg(W, "ferry-restore", "min"), agg(W, "mb-restore", "min")), met(r, 0.5)
          printf "| restore CPU s | %s | – | – | – |\n", ratio(agg(C, "ferry-restore", "med"), agg(C, "mb-restore", "med"))
          printf "| restore peak memory | %s | – | – | – |\n", ratio(peak("ferry-restore"), peak("mb-restore"))
        }
      }
      if (skipferry != 1 && cnt["ferry-copy"]) {
        printf "\nCopy of the last ferry backup to a second prefix of the same S3 server (`ferry copy --from s3://bench/ferry-N --to s3://bench/copy-R ID`, cold cache): the same stored bytes to the same target as the backup, so the throughput ratio is the backup'"'"'s wall over the copy'"'"'s.\n\n"
        print "| copy within S3 | n | wall s median | wall s min | CPU s (user + sys) | S3 server CPU s | peak memory MiB | stored MB copied | S3 requests median (min–max) |"
        print "|---|---|---|---|---|---|---|---|---|"
        st = agg(ST, "ferry-s3", "med")
        printf "| `ferry copy` | %d | %.2f | %.2f | %.2f | %s | %s | %s | %s |\n", cnt["ferry-copy"], agg(W, "ferry-copy", "med"), agg(W, "ferry-copy", "min"),
          agg(C, "ferry-copy", "med"), f(agg(GC, "ferry-copy", "med"), "%.2f"), mib(peak("ferry-copy")), st == "" ? "–" : sprintf("%.0f", st / 1e6), req("ferry-copy")
        rc = ratio(agg(W, "ferry-s3", "med"), agg(W, "ferry-copy", "med"))
        printf "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|\n"
        printf "| copy throughput / backup throughput (backup wall / copy wall) | %s | %s | ≥ 0.90 | %s |\n", rc,
          ratio(agg(W, "ferry-s3", "min"), agg(W, "ferry-copy", "min")), atleast(rc, 0.9)
      }
      if (skipferry != 1 && cnt["ferry-resume"]) {
        printf "\nResume (`ferry backup --repo s3://bench/resume-R … --resume`, cold cache) after `kill -9` of the same backup once the objects under its prefix held %d %% of the last full backup'"'"'s stored bytes:\n\n", resumeat
        print "| resumed backup | n | wall s median | wall s min | CPU s (user + sys) | S3 server CPU s | peak memory MiB | killed after s (median) | stored MB at the kill | objects kept | stored MB kept | stored MB uploaded | held MB current | held MB sent again | stored MB / objects (resumed backup) | S3 requests median (min–max) |"
        print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        printf "| `ferry backup --repo … --resume` | %d | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", cnt["ferry-resume"],
          agg(W, "ferry-resume", "med"), agg(W, "ferry-resume", "min"), agg(C, "ferry-resume", "med"), f(agg(GC, "ferry-resume", "med"), "%.2f"),
          mib(peak("ferry-resume")), f(vmed("ferry-resume", "killsecs"), "%.2f"), f(vmed("ferry-resume", "killbytes") / 1e6, "%.0f"),
          f(vmed("ferry-resume", "objects_kept"), "%d"), f(vmed("ferry-resume", "stored_bytes_kept") / 1e6, "%.0f"),
          f(vmed("ferry-resume", "stored_bytes_uploaded") / 1e6, "%.0f"), f(vmed("ferry-resume", "held_bytes_current") / 1e6, "%.1f"),
          f(vmed("ferry-resume", "held_bytes_sent_again") / 1e6, "%.1f"), f(vmed("ferry-resume", "stored") / 1e6, "%.0f"),
          f(vmed("ferry-resume", "objects"), "%d"), req("ferry-resume")
        rr = ratio(agg(W, "ferry-resume", "med"), agg(W, "ferry-s3", "med"))
        printf "\n| ratio | median | min | target | met (median) |\n|---|---|---|---|---|\n"
        printf "| resumed backup wall / full backup wall | %s | %s | ≤ 0.60 | %s |\n", rr,
          ratio(agg(W, "ferry-resume", "min"), agg(W, "ferry-s3", "min")), met(rr, 0.6)
        if (resumedcheck != "") printf "\n%s\n", resumedcheck
      }
      if (skipferry != 1 && resumeskipped > 0)
        printf "\nResume: %d of %d runs not measured: the interrupted backup was stored whole before the kill landed (too small a set).\n", resumeskipped, runs
      printf "\nS3 requests by operation (the last run of each command; all runs: extra.tsv, the lines: logs-s3/LABEL-RUN.access):\n\n| command | requests | by operation |\n|---|---|---|\n"
      split("ferry-s3 mb-s3 ferry-copy ferry-resume ferry-verify ferry-restore mb-restore", L, " ")
      for (i = 1; i in L; i++) if (xn[L[i], "requests"])
        printf "| %s | %s | %s |\n", L[i], vlast(L[i], "requests"), vlast(L[i], "reqops")
      printf "\nLoad average (1, 5, 15 min; /proc/loadavg) when the script started: %s; when it ended: %s.\n", la0, la1
      printf "\nRestore check (server on ferry'"'"'s last restored datadir, CHECKSUM TABLE vs the source): **%s**\n", check
    }' "$RAW"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RAW and $EXTRA"
