#!/usr/bin/env bash
# bench/clone.sh: clone a running MariaDB server onto a "new host" over a shaped network link, to
# a running replica: ferry serve + ferry clone --start --replicate (compression none and auto)
# against the mariadb-backup pipeline (mariadb-backup --backup --stream=xbstream | socat ->
# socat | mbstream -x, --prepare, --move-back, start, CHANGE MASTER ... MASTER_USE_GTID, START
# SLAVE), while sysbench oltp_write_only runs on the donor.
#
# Network: two network namespaces, ferry-donor (10.213.0.1/24) and ferry-rcpt (10.213.0.2/24),
# joined by a veth pair; both veth ends are shaped (egress) with tc tbf to RATE Mbit/s, or not
# shaped at all for RATE 0. The donor is the private mariadbd of bench/lib.sh (same dataset,
# 1 GiB buffer pool, 512 MiB redo, binlog on, server-id 1), started inside ferry-donor and bound
# to 10.213.0.1; sysbench, mariadb-backup and ferry serve use its unix socket. The recipient is a
# fresh empty datadir per run with its own my.cnf (port 3311, bound to 10.213.0.2, server-id 2),
# started inside ferry-rcpt; it is stopped and removed after each run.
#
# Per link rate and run, for each tool (alternating the order on even runs, see lib.sh `order`):
#   1. no dirty pages, page cache dropped (lib.sh quiesce), RESET MASTER on the donor;
#   2. sysbench oltp_write_only (LOAD_THREADS threads, --rate=0, --report-interval=1) starts on
#      the donor; after LOAD_WARMUP_SECS, LOAD_BASE_SECS of load alone are the TPS baseline;
#   3. the clone, timed as one wall clock from its start until the recipient is a running
#      replica (IO + SQL thread Yes, Seconds_Behind_Master not NULL):
#        ferry: `ferry serve --once` in ferry-donor (started before the load), then the timed
#               `ferry clone --from 10.213.0.1:4444 ... --compress none|auto --start --replicate`
#               in ferry-rcpt;
#        mariadb-backup: socat | mbstream -x in ferry-rcpt, mariadb-backup --stream | socat in
#               ferry-donor, --prepare, --move-back, mariadbd start, gtid_slave_pos from
#               BINLOG_GTID_POS(file, pos) of mariadb-backup's binlog info, CHANGE MASTER,
#               START SLAVE, wait for both threads;
#   4. the load stops; TPS during the copy = mean of sysbench's per-second TPS inside the timed
#      window; TPS drop = 1 - during / baseline; bytes on the wire = donor veth tx bytes;
#   5. correctness, once per tool (the first run; SKIP_CHECK=1 leaves it out): the replica waits
#      for the donor's gtid_binlog_pos (MASTER_GTID_WAIT), then CHECKSUM TABLE of every sbtest
#      table must match the donor's (the script fails on a mismatch).
# Before the runs of each rate, a raw socat transfer of LINK_TEST_MB MiB measures the link.
# Prints a markdown report and writes it to $BENCH_DIR/clone-results.md. Needs root (network
# namespaces, tc, drop_caches). The write load changes rows of the shared dataset (same tables,
# same row count), as backup.sh's load phase does.
#
# FAMILY=mysql: the same with the private MySQL 8.0.30+ server and set of bench/mysql.sh (lib.sh's
# load_mysql_dataset: MYSQL_BASE, MY_DATA; gtid_mode=ON, binlog on, innodb_flush_method
# MYSQL_FLUSH) as the donor, a recipient my.cnf for mysqld of MYSQL_BASE (ferry clone finds it and
# starts it, then CHANGE REPLICATION SOURCE ... SOURCE_AUTO_POSITION=1), and, as there is no stock
# clone tool to run beside it, a raw transfer instead of the mariadb-backup pipeline: "tar", the
# files ferry reads (MY_FIND: the datadir without #innodb_redo, #innodb_temp, *.dblwr) through
# `tar -c | socat` in ferry-donor -> `socat | tar -x` in ferry-rcpt, under the same load. Its link
# limit is the bytes ferry reads at the rate socat measured on the link (not the nominal rate), and
# the check waits with WAIT_FOR_EXECUTED_GTID_SET for the donor's gtid_executed.
#
#   bench/clone.sh                                # 14 x 1M rows (~4 GB), rates 500 1000 4000 unshaped, 1 run
#   FAMILY=mysql bench/clone.sh                   # MySQL 8.0: ferry none/auto and a raw tar, rates 1000 unshaped
#   SMALL=1 RATES="1000" bench/clone.sh           # 4 x 100k rows at 1 Gbit/s: checks the script quickly
#   SKIP_FERRY=1 bench/clone.sh                   # only the mariadb-backup pipeline (MySQL: the tar)
#   FERRY_ONLY=1 bench/clone.sh                   # only ferry (none and auto)
#
# Options (environment), defaults in brackets:
#   FAMILY [mariadb]                  mariadb, or mysql (see above; MYSQL_BASE, MYSQL_FLUSH: lib.sh)
#   BENCH_DIR [/var/tmp/ferry-bench]  work dir: dataset (kept and reused), recipient datadir, logs-clone/
#                                     (FAMILY=mysql: logs-clone-mysql/, clone-mysql-results.md)
#   SMALL [0]                         1: TABLES=4 TABLE_SIZE=100000 unless those are set
#   TABLES [14] TABLE_SIZE [1000000]  sysbench dataset; each size gets its own datadir
#   RATES ["500 1000 4000 0"]         link rates in Mbit/s; 0 = unshaped veth (FAMILY=mysql: ["1000 0"])
#   RUNS [1]                          runs of every (rate, tool)
#   PARALLEL [2]                      mariadb-backup --parallel, mbstream -x -p, --move-back --parallel
#   PREPARE_MEMORY [256M]             mariadb-backup --prepare --use-memory
#   LOAD_THREADS [2]                  sysbench oltp_write_only threads on the donor (unthrottled)
#   LOAD_WARMUP_SECS [5]              load seconds before the baseline window
#   LOAD_BASE_SECS [10]               load-only seconds just before the copy: the TPS baseline
#   LINK_TEST_MB [256]                MiB sent with socat to measure each link (0: no link test)
#   REPL_TIMEOUT [600]                seconds to wait for a running / caught-up replica
#   PORT [3310]                       TCP port of the donor (bound to 10.213.0.1 in ferry-donor)
#   QUIET_MAX [120]                   max seconds to wait for 0 dirty pages before a run
#   TOOL_TIMEOUT [1800]               seconds before a single clone is killed
#   FERRY                             use this ferry binary instead of building ./cmd/ferry
#   FERRY_ARGS                        extra arguments for `ferry clone`
#   SKIP_FERRY=1 FERRY_ONLY=1         leave out ferry / the mariadb-backup pipeline (MySQL: the tar)
#   SKIP_CHECK=1                      leave out the CHECKSUM TABLE comparison
#   KEEP_SERVER=1                     leave the donor server (and the namespaces) running at the end
set -euo pipefail

# --- settings (common ones and the shared functions: lib.sh) ----------------------------------
RUNS=${RUNS:-1}                                   # lib.sh's default is 3; a clone run is long
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FAMILY=${FAMILY:-mariadb}
[[ $FAMILY == mariadb || $FAMILY == mysql ]] || die "FAMILY must be mariadb or mysql, not '$FAMILY'"
if [[ $FAMILY == mysql ]]; then RATES=${RATES:-1000 0}; else RATES=${RATES:-500 1000 4000 0}; fi
LOAD_BASE_SECS=${LOAD_BASE_SECS:-10}
LINK_TEST_MB=${LINK_TEST_MB:-256}
REPL_TIMEOUT=${REPL_TIMEOUT:-600}

DONOR_NS=ferry-donor; RCPT_NS=ferry-rcpt
DONOR_VETH=veth-fdonor; RCPT_VETH=veth-frcpt
DONOR_IP=10.213.0.1; RCPT_IP=10.213.0.2
FERRY_PORT=4444; MB_PORT=4445; TEST_PORT=4446; C_PORT=3311   # MB_PORT: the stock pipeline's (mb, tar)
REPL_USER=repl; REPL_PASSWORD=replpw

LOGS="$BENCH_DIR/logs-clone"                      # per-command logs (the other scripts keep theirs)
RESULTS="$BENCH_DIR/clone-results.md"
if [[ $FAMILY == mysql ]]; then LOGS+="-mysql"; RESULTS="$BENCH_DIR/clone-mysql-results.md"; fi
C_DATA="$BENCH_DIR/clone-rdata"                   # the recipient's datadir (one run at a time)
C_STAGE="$BENCH_DIR/clone-stage"                  # mbstream -x -C, then --prepare, --move-back; tar -x -C
C_CNF="$BENCH_DIR/clone-rcpt.cnf"                 # the recipient's my.cnf
C_SOCK="$BENCH_DIR/clone-rcpt.sock"
C_PIDF="$BENCH_DIR/clone-rcpt.pid"
TOKEN="$BENCH_DIR/clone-token"                    # ferry serve / clone shared secret (mode 600)
REPLPW="$BENCH_DIR/clone-replpw"                  # ferry clone --repl-password-file
DONOR_SERVER="$BENCH_DIR/clone-donor-server"      # exec ip netns exec ferry-donor mariadbd (or mysqld) "$@"
SERVER_NAME=mariadbd; [[ $FAMILY == mysql ]] && SERVER_NAME=mysqld
CLEAN_PATHS=("$C_DATA" "$C_STAGE" "$C_CNF" "$TOKEN" "$REPLPW" "$DONOR_SERVER")
MY_OPTS=(--port="$PORT" --bind-address="$DONOR_IP" --log-bin=binlog --server-id=1    # FAMILY=mysql's donor
         --gtid-mode=ON --enforce-gtid-consistency=ON --innodb-flush-method="$MYSQL_FLUSH")

[[ $LOAD_THREADS =~ ^[1-9][0-9]*$ ]] || die "LOAD_THREADS must be a positive integer"
[[ $LOAD_WARMUP_SECS =~ ^[0-9]+$ ]] || die "LOAD_WARMUP_SECS must be a whole number of seconds"
[[ $LOAD_BASE_SECS =~ ^[1-9][0-9]*$ ]] || die "LOAD_BASE_SECS must be a positive number of seconds"
[[ $LINK_TEST_MB =~ ^[0-9]+$ ]] || die "LINK_TEST_MB must be a whole number of MiB"
[[ $REPL_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "REPL_TIMEOUT must be a positive number of seconds"
for rate in $RATES; do [[ $rate =~ ^[0-9]+$ ]] || die "RATES must be Mbit/s numbers (0 = unshaped), not '$rate'"; done
[[ -n ${RATES// /} ]] || die "RATES is empty"
[[ $SKIP_FERRY == 1 && $FERRY_ONLY == 1 ]] && die "SKIP_FERRY=1 and FERRY_ONLY=1 leave nothing to run"

# --- network namespaces and shaping -----------------------------------------------------------
NET_UP=0; SERVE_PID=""

# net_setup: (re)creates both namespaces and the veth pair between them; dies if it cannot.
net_setup() {
  local ns out
  for ns in "$DONOR_NS" "$RCPT_NS"; do
    if ip netns list | gawk '{ print $1 }' | grep -qx "$ns"; then
      log "removing the namespace $ns left by an earlier invocation"
      ip netns del "$ns" || die "ip netns del $ns failed"
    fi
  done
  out=$(ip netns add "$DONOR_NS" 2>&1) ||
    die "ip netns add $DONOR_NS failed ($out): this benchmark needs network namespaces (root with CAP_SYS_ADMIN and CAP_NET_ADMIN; a container must be privileged)"
  NET_UP=1
  ip netns add "$RCPT_NS" || die "ip netns add $RCPT_NS failed"
  ip link add "$DONOR_VETH" netns "$DONOR_NS" type veth peer name "$RCPT_VETH" netns "$RCPT_NS" ||
    die "cannot create the veth pair $DONOR_VETH / $RCPT_VETH between $DONOR_NS and $RCPT_NS"
  ip -n "$DONOR_NS" addr add "$DONOR_IP/24" dev "$DONOR_VETH"
  ip -n "$RCPT_NS" addr add "$RCPT_IP/24" dev "$RCPT_VETH"
  for ns in "$DONOR_NS" "$RCPT_NS"; do ip -n "$ns" link set lo up; done
  ip -n "$DONOR_NS" link set "$DONOR_VETH" up
  ip -n "$RCPT_NS" link set "$RCPT_VETH" up
  log "network: $DONOR_NS $DONOR_IP ($DONOR_VETH) <-> $RCPT_NS $RCPT_IP ($RCPT_VETH)"
}

# shape RATE: tbf at RATE Mbit/s on the egress of both veth ends (burst: 10 ms at the rate, at
# least 64 KiB; latency 50 ms), or no qdisc at all for RATE 0.
shape() {
  local burst=$(($1 * 1000000 / 8 / 100)) ns dev
  ((burst >= 65536)) || burst=65536
  for ns in "$DONOR_NS" "$RCPT_NS"; do
    dev=$DONOR_VETH; [[ $ns == "$RCPT_NS" ]] && dev=$RCPT_VETH
    if (($1 == 0)); then
      tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    else
      tc -n "$ns" qdisc replace dev "$dev" root tbf rate "${1}mbit" burst "$burst" latency 50ms ||
        die "tc qdisc replace dev $dev root tbf rate ${1}mbit failed (is sch_tbf available?)"
    fi
  done
  log "link: $(rate_name "$1") ($(tc -n "$DONOR_NS" qdisc show dev "$DONOR_VETH" | head -n1))"
}
rate_name() { if (($1 == 0)); then echo unshaped; else echo "$1 Mbit/s"; fi; }

# link_test RATE: sends LINK_TEST_MB MiB of zeros with socat from the donor to the recipient
# namespace; sets LINK_MBIT[RATE] (also a connectivity check).
declare -A LINK_MBIT
link_test() {
  local n=$((LINK_TEST_MB * 1048576)) rx t0 t1 got
  ((n > 0)) || n=1048576                          # LINK_TEST_MB=0: connectivity check only
  ip netns exec "$RCPT_NS" socat -u "TCP-LISTEN:$TEST_PORT,bind=$RCPT_IP,reuseaddr" STDOUT 2>"$LOGS/link-test.err" |
    wc -c >"$LOGS/link-test.out" &
  rx=$!
  t0=$(now)
  head -c "$n" /dev/zero | ip netns exec "$DONOR_NS" socat -u STDIN "TCP:$RCPT_IP:$TEST_PORT,retry=100,interval=0.1" 2>>"$LOGS/link-test.err" ||
    { cat "$LOGS/link-test.err" >&2; die "socat $DONOR_NS -> $RCPT_IP:$TEST_PORT failed"; }
  wait "$rx" || true
  t1=$(now)
  got=$(cat "$LOGS/link-test.out")
  [[ $got == "$n" ]] || { cat "$LOGS/link-test.err" >&2; die "link test: $got of $n bytes arrived in $RCPT_NS"; }
  if ((LINK_TEST_MB > 0)); then
    LINK_MBIT[$1]=$(gawk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n * 8 / 1e6 / (b - a) }')
    log "link test ($(rate_name "$1")): $LINK_TEST_MB MiB in $(gawk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s = ${LINK_MBIT[$1]} Mbit/s"
  fi
}
wire_tx() { ip netns exec "$DONOR_NS" cat "/sys/class/net/$DONOR_VETH/statistics/tx_bytes"; }

# --- donor and recipient servers --------------------------------------------------------------
# start_source (lib.sh's, overridden): the same server (dataset, options, server-id 1, binlog),
# but inside the donor namespace and bound to its veth address. `ip netns exec` execs mariadbd,
# so SRC_PID and the pid file stay mariadbd's; lib.sh's MARIADBD is shadowed only here.
start_source() {
  local MARIADBD=$DONOR_SERVER
  start_server SRC_PID "$DATA" "$SOCK" "$PIDF" "$BENCH_DIR/src.err" \
    --port="$PORT" --bind-address="$DONOR_IP" --log-bin=binlog --server-id=1
}
# start_donor: the donor of FAMILY in the donor namespace, on its dataset (built first if needed),
# binlog dropped (lib.sh's load_dataset, or load_mysql_dataset with MY_OPTS and MYSQLD shadowed).
start_donor() {
  if [[ $FAMILY == mysql ]]; then
    local MYSQLD=$DONOR_SERVER
    use_mysql
    load_mysql_dataset "${MY_OPTS[@]}"
  else
    load_dataset
  fi
}

# write_cnf ERRLOG: the recipient's my.cnf (also read by ferry clone --defaults-file).
write_cnf() {
  cat >"$C_CNF" <<EOF
[mysqld]
user=root
datadir=$C_DATA
socket=$C_SOCK
pid-file=$C_PIDF
log-error=$1
port=$C_PORT
bind-address=$RCPT_IP
server-id=2
innodb-buffer-pool-size=1G
EOF
  if [[ $FAMILY == mysql ]]; then
    cat >>"$C_CNF" <<EOF
basedir=$MYSQL_BASE
lc-messages-dir=$MYSQL_BASE/share
mysqlx=OFF
log-bin=binlog
gtid-mode=ON
enforce-gtid-consistency=ON
innodb-redo-log-capacity=512M
innodb-flush-method=$MYSQL_FLUSH
EOF
  else
    echo "innodb-log-file-size=512M" >>"$C_CNF"
  fi
}

# stop_recipient: stops the recipient mariadbd (or mysqld) by the pid in its pid file (if it is the
# server of C_CNF, also one left by an interrupted invocation) and removes its datadir.
stop_recipient() {
  local pid
  pid=$(cat "$C_PIDF" 2>/dev/null) || pid=""
  if [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) =~ ^(mariadbd|mysqld)$ ]] &&
     tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -Fq -e "$C_CNF" -e "$C_DATA"; then
    stop_pid "$pid"
  fi
  rm -f "$C_PIDF"
  rm -rf "$C_STAGE"; clean_restored "$C_DATA"
}

# stop_serve: waits up to 60 s for `ferry serve --once` to exit by itself, then kills it.
stop_serve() {
  local i
  [[ -n $SERVE_PID ]] || return 0
  for ((i = 0; i < 600; i++)); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SERVE_PID" 2>/dev/null; then
    log "warning: ferry serve --once (pid $SERVE_PID) still running after the clone; stopping it"
    kill -TERM "$SERVE_PID" 2>/dev/null || true
  fi
  wait "$SERVE_PID" 2>/dev/null || log "warning: ferry serve exited with status $? (log: $SERVE_LOG)"
  SERVE_PID=""
}

# csql ARGS: the mariadb client on the recipient.
csql() { mariadb --no-defaults -S "$C_SOCK" -uroot -N -B "$@"; }

# wait_server TIMEOUT-S: until the recipient answers on its socket.
wait_server() {
  local end=$((SECONDS + $1))
  until csql -e 'SELECT 1' >/dev/null 2>&1; do
    ((SECONDS < end)) || { echo "recipient mariadbd did not answer on $C_SOCK within $1 s" >&2; return 1; }
    sleep 0.1
  done
}

# wait_replica TIMEOUT-S: until the recipient's IO and SQL threads run and Seconds_Behind_Master
# is set; fails at once on a replication error that stopped a thread.
wait_replica() {
  local end=$((SECONDS + $1)) st io sq sbm
  while :; do
    st=$(mariadb --no-defaults -S "$C_SOCK" -uroot -e 'SHOW SLAVE STATUS\G' 2>/dev/null) || st=""
    io=$(sed -n 's/^ *Slave_IO_Running: //p' <<<"$st")
    sq=$(sed -n 's/^ *Slave_SQL_Running: //p' <<<"$st")
    sbm=$(sed -n 's/^ *Seconds_Behind_Master: //p' <<<"$st")
    [[ $io == Yes && $sq == Yes && -n $sbm && $sbm != NULL ]] && return 0
    if [[ $sq == No && -n $st ]] && grep -Eq '^ *Last_(IO|SQL)_Errno: [1-9]' <<<"$st" ||
       { [[ $io == No ]] && grep -Eq '^ *Last_IO_Errno: [1-9]' <<<"$st"; }; then
      printf 'replication stopped with an error:\n%s\n' "$st" >&2; return 1
    fi
    ((SECONDS < end)) || { printf 'no running replica within %s s:\n%s\n' "$1" "${st:-(no SHOW SLAVE STATUS)}" >&2; return 1; }
    sleep 0.1
  done
}

# mb_clone: the mariadb-backup pipeline, timed by `timed` as one command (exported functions,
# run by its `bash -c`); writes "STEP seconds" lines to $MB_STEPS.
mb_clone() {
  set -euo pipefail
  local t0 t1 rx f binfo file pos gtid
  t0=$(now)
  : >"$MB_STEPS"
  ip netns exec "$RCPT_NS" bash -o pipefail -c "socat -u TCP-LISTEN:$MB_PORT,bind=$RCPT_IP,reuseaddr STDOUT | mbstream -x -p $PARALLEL -C $(q "$C_STAGE")" &
  rx=$!
  ip netns exec "$DONOR_NS" bash -o pipefail -c "mariadb-backup --no-defaults --backup --stream=xbstream \
--socket=$(q "$SOCK") --user=root --datadir=$(q "$DATA") --parallel=$PARALLEL \
| socat -u STDIN TCP:$RCPT_IP:$MB_PORT,retry=100,interval=0.1"
  wait "$rx"
  t1=$(now); echo "transfer $(gawk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$MB_STEPS"; t0=$t1
  mariadb-backup --no-defaults --prepare --use-memory="$PREPARE_MEMORY" --target-dir="$C_STAGE"
  t1=$(now); echo "prepare $(gawk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$MB_STEPS"; t0=$t1
  binfo=""
  for f in xtrabackup_binlog_info mariadb_backup_binlog_info; do [[ -f $C_STAGE/$f ]] && binfo=$(cat "$C_STAGE/$f"); done
  read -r file pos _ <<<"$binfo"
  [[ -n $file && $pos =~ ^[0-9]+$ ]] || { echo "no binlog position in $C_STAGE/xtrabackup_binlog_info: '$binfo'" >&2; return 1; }
  mariadb-backup --no-defaults --move-back --parallel="$PARALLEL" --target-dir="$C_STAGE" --datadir="$C_DATA"
  t1=$(now); echo "move-back $(gawk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$MB_STEPS"; t0=$t1
  ip netns exec "$RCPT_NS" "$MARIADBD" --defaults-file="$C_CNF" </dev/null >/dev/null 2>&1 &
  wait_server "$REPL_TIMEOUT"
  t1=$(now); echo "start $(gawk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$MB_STEPS"; t0=$t1
  # The binlog info's GTID column holds one domain; BINLOG_GTID_POS gives the whole position.
  gtid=$(mariadb --no-defaults -S "$SOCK" -uroot -N -B -e "SELECT BINLOG_GTID_POS('$file', $pos)")
  [[ $gtid != NULL ]] || { echo "BINLOG_GTID_POS('$file', $pos) on the donor: '$gtid'" >&2; return 1; }
  echo "binlog position $file:$pos = GTID $gtid"
  csql -e "SET GLOBAL gtid_slave_pos = '$gtid'; CHANGE MASTER TO MASTER_HOST = '$DONOR_IP', MASTER_PORT = $PORT,
    MASTER_USER = '$REPL_USER', MASTER_PASSWORD = '$REPL_PASSWORD', MASTER_USE_GTID = slave_pos; START SLAVE"
  wait_replica "$REPL_TIMEOUT"
  t1=$(now); echo "replicate $(gawk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$MB_STEPS"
}

# tar_copy: the raw transfer of FAMILY=mysql (timed by `timed` like mb_clone): the files ferry
# reads (MY_FIND) through `tar -c | socat` in the donor namespace -> `socat | tar -x -C C_STAGE` in
# the recipient's. tar's status 1 (a file changed as it was read: the load runs) is not an error.
tar_copy() {
  set -euo pipefail
  local rx
  ip netns exec "$RCPT_NS" bash -o pipefail -c "socat -u TCP-LISTEN:$MB_PORT,bind=$RCPT_IP,reuseaddr STDOUT | tar -x -C $(q "$C_STAGE")" &
  rx=$!
  ip netns exec "$DONOR_NS" bash -o pipefail -c "cd $(q "$MY_DATA") && find . -type f $MY_FIND -print0 \
| { tar --null -T - -c -f - --warning=no-file-changed || [ \$? = 1 ]; } \
| socat -u STDIN TCP:$RCPT_IP:$MB_PORT,retry=100,interval=0.1"
  wait "$rx"
}
export -f mb_clone tar_copy csql wait_server wait_replica now q
MB_STEPS="$LOGS/mb-steps.out"
# shellcheck disable=SC2090 # MY_FIND is find tests, expanded into tar_copy's command line
export DONOR_NS RCPT_NS DONOR_IP RCPT_IP MB_PORT PORT SOCK DATA PARALLEL PREPARE_MEMORY C_STAGE C_DATA \
  C_CNF C_SOCK MARIADBD REPL_TIMEOUT REPL_USER REPL_PASSWORD MB_STEPS MY_DATA MY_FIND

# --- correctness ----------------------------------------------------------------------------------
# check_clone TOOL: after the load stopped, waits until the replica has applied the donor's
# gtid_binlog_pos (MySQL: gtid_executed) and compares CHECKSUM TABLE of every sbtest table; dies on
# a mismatch.
declare -A CHECK
check_clone() {
  local pos res tables wait=MASTER_GTID_WAIT
  tables=$(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")
  if [[ $FAMILY == mysql ]]; then
    pos=$(sql -e "SELECT REPLACE(@@GLOBAL.gtid_executed, '\n', '')")
    wait=WAIT_FOR_EXECUTED_GTID_SET               # 0 once applied, as MASTER_GTID_WAIT
  else
    pos=$(sql -e "SELECT @@GLOBAL.gtid_binlog_pos")
  fi
  res=$(csql -e "SELECT $wait('$pos', $REPL_TIMEOUT)") || die "$wait failed on the recipient"
  [[ $res == 0 ]] || die "$1: the replica did not reach the donor's GTID $pos within $REPL_TIMEOUT s"
  sql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-donor-$1.txt"
  csql -e "CHECKSUM TABLE $tables" >"$LOGS/checksum-replica-$1.txt"
  if ! cmp -s "$LOGS/checksum-donor-$1.txt" "$LOGS/checksum-replica-$1.txt"; then
    diff "$LOGS/checksum-donor-$1.txt" "$LOGS/checksum-replica-$1.txt" >&2 || true
    die "$1: CHECKSUM TABLE of the replica differs from the donor's (GTID $pos; see $LOGS/checksum-*-$1.txt)"
  fi
  CHECK[$1]="OK ($TABLES/$TABLES tables at GTID $pos)"
  log "check $1: ${CHECK[$1]}"
}

# --- one run ------------------------------------------------------------------------------------
# clone_run RATE TOOL RUN: one timed clone under load (see the top of this file); appends
# "rate tool run wall tps_base tps_copy wire_bytes" to $RES.
clone_run() {
  local rate=$1 tool=$2 r=$3 label="$2-$1" cmd i t0 t1 w0 w1 base during wall size=$C_DATA
  stop_recipient
  mkdir -p "$C_DATA"
  write_cnf "$LOGS/$label-$r.$SERVER_NAME.err"
  quiesce
  sql -e "RESET MASTER"
  if [[ $tool == ferry-* ]]; then
    SERVE_LOG="$LOGS/$label-$r.serve.log"
    ip netns exec "$DONOR_NS" "$FERRY" serve --listen "$DONOR_IP:$FERRY_PORT" --token-file "$TOKEN" \
      --socket "$SOCK" --user root --once </dev/null >"$SERVE_LOG" 2>&1 &
    SERVE_PID=$!
    for ((i = 0; i < 300; i++)); do
      [[ -n $(ip netns exec "$DONOR_NS" ss -Hltn "sport = :$FERRY_PORT") ]] && break
      kill -0 "$SERVE_PID" 2>/dev/null || { tail -n 15 "$SERVE_LOG" >&2; die "ferry serve exited (log: $SERVE_LOG)"; }
      sleep 0.1
    done
    ((i < 300)) || die "ferry serve does not listen on $DONOR_IP:$FERRY_PORT after 30 s (log: $SERVE_LOG)"
    # (the start time heads the log: what ferry does before its first line is part of the wall)
    cmd="date -u +'bench: clone command started %FT%T.%3NZ' && ip netns exec $RCPT_NS $(q "$FERRY") clone --from $DONOR_IP:$FERRY_PORT --token-file $(q "$TOKEN") \
--datadir $(q "$C_DATA") --defaults-file $(q "$C_CNF") --compress ${tool#ferry-} --start --replicate \
--repl-user $REPL_USER --repl-password-file $(q "$REPLPW") $FERRY_ARGS"
  elif [[ $tool == tar ]]; then
    rm -rf "$C_STAGE"; mkdir -p "$C_STAGE"
    cmd=tar_copy size=$C_STAGE
  else
    rm -rf "$C_STAGE"; mkdir -p "$C_STAGE"
    cmd=mb_clone
  fi
  start_load $((LOAD_WARMUP_SECS + LOAD_BASE_SECS)) "the copy"
  w0=$(wire_tx); t0=$(now)
  timed "$label" "$r" "$size" "$cmd"
  t1=$(now); w1=$(wire_tx)
  if [[ $tool != tar ]]; then
    wait_replica 10 || die "$label run $r: no running replica after the clone command succeeded"
  fi
  stop_load "$LOGS/$label-$r.sysbench.log"
  base=$(tps "$(gawk -v t="$t0" -v b="$LOAD_BASE_SECS" 'BEGIN { printf "%.3f", t - b }')" "$t0")
  during=$(tps "$t0" "$t1")
  wall=$(wall_of "$label" "$r")
  res_row "$rate" "$tool" "$r" "$wall" "${base:-}" "${during:-}" $((w1 - w0))
  log "$(printf '  %-18s run %s: %s s %s, %s MB on the wire, TPS %s baseline, %s during the copy' \
    "$label" "$r" "$wall" "$([[ $tool == tar ]] && echo 'for the raw transfer' || echo 'to a running replica')" \
    $(((w1 - w0) / 1000000)) "${base:-–}" "${during:-–}")"
  if [[ $tool == mb ]]; then
    while read -r step secs; do printf '%s\t%s\t%s\t%s\n' "$rate" "$r" "$step" "$secs" >>"$STEPS"; done <"$MB_STEPS"
  fi
  if [[ $SKIP_CHECK != 1 && $tool != tar && -z ${CHECK[$tool]:-} ]]; then check_clone "$tool"; fi
  stop_serve
  stop_recipient
}

# clone_cleanup: the EXIT trap's first part (lib.sh's cleanup runs next with the same exit
# status): stops ferry serve and the recipient server, removes the namespaces.
clone_cleanup() {
  local rc=$?
  set +e
  [[ -n $SB_PID ]] && kill -TERM "$SB_PID" 2>/dev/null && wait "$SB_PID" 2>/dev/null
  SB_PID=""
  if [[ -n $SERVE_PID ]]; then kill -TERM "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; fi
  stop_recipient
  if [[ $NET_UP == 1 ]]; then
    if [[ $KEEP_SERVER == 1 ]]; then log "KEEP_SERVER=1: namespaces $DONOR_NS and $RCPT_NS left in place"
    else ip netns del "$RCPT_NS" 2>/dev/null; ip netns del "$DONOR_NS" 2>/dev/null; fi
  fi
  return "$rc"
}
trap 'clone_cleanup; cleanup' EXIT

# --- setup ------------------------------------------------------------------------------------
bench_init
need socat socat
need mbstream mariadb-backup
need ip iproute2
need tc iproute2
need ss iproute2
[[ $FAMILY == mariadb || -x $MYSQLD ]] || die "no mysqld at $MYSQLD (set MYSQL_BASE to a MySQL 8.0.30+ installation)"
build_ferry
if [[ $SKIP_FERRY != 1 ]]; then
  for sub in serve clone; do
    "$FERRY" "$sub" --help >/dev/null 2>&1 || die "$FERRY has no working '$sub' command (run with SKIP_FERRY=1 to benchmark only mariadb-backup)"
  done
fi
RES="$LOGS/clone.tsv"; : >"$RES"                  # one line per run: rate tool run wall tps tps wire
STEPS="$LOGS/mb-steps.tsv"; : >"$STEPS"           # mariadb-backup's steps: rate run step seconds
stop_recipient
net_setup
server_bin=$MARIADBD; [[ $FAMILY == mysql ]] && server_bin=$MYSQLD
printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$DONOR_NS" "$server_bin" >"$DONOR_SERVER"
chmod 755 "$DONOR_SERVER"
start_donor
sql -e "CREATE USER IF NOT EXISTS '$REPL_USER'@'%' IDENTIFIED BY '$REPL_PASSWORD';
  ALTER USER '$REPL_USER'@'%' IDENTIFIED BY '$REPL_PASSWORD'; GRANT REPLICATION SLAVE ON *.* TO '$REPL_USER'@'%'"
(umask 077; od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$TOKEN"; printf %s "$REPL_PASSWORD" >"$REPLPW")

STOCK=mb; [[ $FAMILY == mysql ]] && STOCK=tar   # the yardstick run beside ferry
TOOLS=(ferry-none ferry-auto "$STOCK")
[[ $SKIP_FERRY == 1 ]] && TOOLS=("$STOCK")
[[ $FERRY_ONLY == 1 ]] && TOOLS=(ferry-none ferry-auto)

quiesce
if [[ $FAMILY == mysql ]]; then
  mysql_sizes; DATA=$MY_DATA DATA_BYTES=$MY_DATA_BYTES DD_BYTES=$MY_DD_BYTES
  read_by="read by ferry and the tar: without #innodb_redo, #innodb_temp, *.dblwr"
else
  data_sizes; read_by="without ib_logfile0"
fi
check_free 3
log "donor datadir $DATA: $DATA_BYTES bytes ($DD_BYTES $read_by); rates: $RATES; $RUNS run(s) of ${TOOLS[*]}"

# --- the runs -----------------------------------------------------------------------------------
for rate in $RATES; do
  shape "$rate"
  link_test "$rate"
  for ((r = 1; r <= RUNS; r++)); do
    for tool in $(order "$r"); do
      clone_run "$rate" "$tool" "$r"
    done
  done
done
shape 0

# --- report -----------------------------------------------------------------------------------
describe_env
VERSIONS+="; $(socat -V 2>/dev/null | sed -n 's/^socat version \([^ ]*\) .*/socat \1/p' | head -n1)"
LINKS=""; for rate in $RATES; do LINKS+="$rate=${LINK_MBIT[$rate]:-} "; done
if [[ $FAMILY == mysql ]]; then VERSIONS="$MY_VERSION; $VERSIONS"; fi
TARGET=""; [[ $FAMILY == mysql ]] && TARGET=1.2   # ferry × link limit the issue asks for (MySQL clone)
CHECKS=""; for tool in "${TOOLS[@]}"; do [[ $tool == tar ]] && continue; CHECKS+="$tool: ${CHECK[$tool]:-not run$([[ $SKIP_CHECK == 1 ]] && echo ' (SKIP_CHECK=1)')}; "; done

report() {
  report_gawk -v rates="$RATES" -v links="$LINKS" -v checks="$CHECKS" \
      -v lthreads="$LOAD_THREADS" -v lbase="$LOAD_BASE_SECS" -v lwarm="$LOAD_WARMUP_SECS" \
      -v ferryargs="$FERRY_ARGS" -v pmem="$PREPARE_MEMORY" -v linkmb="$LINK_TEST_MB" -v steps="$STEPS" \
      -v fam="$FAMILY" -v stock="$STOCK" -v target="$TARGET" -v myflush="$MYSQL_FLUSH" "$AWK_FUNCS"'
    # $RES: rate tool run wall tps_base tps_copy wire_bytes -> per (rate, tool): n, V[key, rate, tool, i]
    { k = $1 SUBSEP $2; i = ++n[k]; V["wall", k, i] = $4; V["base", k, i] = $5; V["copy", k, i] = $6
      V["wire", k, i] = $7; V["drop", k, i] = ($5 != "" && $5 > 0 && $6 != "") ? 100 * (1 - $6 / $5) : "" }
    # median of V[key, rate, tool, 1..n] over the runs that have a value; "" if none
    function med(key, rate, tool,   k, i, m, v) {
      k = rate SUBSEP tool; m = 0
      for (i = 1; i <= n[k]; i++) if (V[key, k, i] != "") v[++m] = V[key, k, i] + 0
      return m ? median(v, m) : "" }
    function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "–" : sprintf("%.2f", a / b) }
    function rname(rate) { return rate == 0 ? "unshaped" : rate " Mbit/s" }
    # the link limit of a rate: bytes read / rate; unshaped (and every rate of MySQL): / the
    # socat-measured rate (marked *)
    function limit(rate) { if (rate > 0 && fam != "mysql") return ddbytes * 8 / (rate * 1e6)
      return (L[rate] != "" && L[rate] > 0) ? ddbytes * 8 / (L[rate] * 1e6) : "" }
    function xlim(w, rate,   l) { l = limit(rate); return (w == "" || l == "") ? "–" : sprintf("%.2f", w / l) }
    END {
      nr = split(rates, R, " "); split(links, LL, " ")
      for (i in LL) { split(LL[i], p, "="); L[p[1]] = p[2] }
      while ((getline line < steps) > 0) { split(line, s, "\t"); ST[s[1], s[3]] += s[4]; SN[s[1], s[3]]++; if (!(s[3] in seen)) { seen[s[3]] = 1; so[++ns] = s[3] } }
      tl["ferry-none"] = "ferry none"; tl["ferry-auto"] = "ferry auto"; tl["mb"] = "mariadb-backup"; tl["tar"] = "raw tar"
      my = fam == "mysql"
      if (my) printf "## Clone of MySQL to a running replica over a shaped link: ferry serve/clone vs the link limit and a raw tar | socat, %s\n\n", date
      else printf "## Clone to a running replica over a shaped link: ferry serve/clone vs the mariadb-backup pipeline, %s\n\n", date
      printf "- machine: %s (donor, recipient and the load all on this host)\n- versions: %s\n", machine, versions
      if (my) printf "- dataset: sysbench %d tables x %d rows in MySQL (gtid_mode ON, binlog on, innodb_flush_method %s, 1 GiB buffer pool, 512M redo); donor datadir %.3f GB (du -sb), %.3f GB without #innodb_redo, #innodb_temp and *.dblwr (what ferry reads: the bytes of the link limit)\n", tables, rows, myflush, databytes / 1e9, ddbytes / 1e9
      else printf "- dataset: sysbench %d tables x %d rows; donor datadir %.3f GB (du -sb), %.3f GB without ib_logfile0 (the bytes of the link limit)\n", tables, rows, databytes / 1e9, ddbytes / 1e9
      printf "- link: veth between two network namespaces, tc tbf on both ends (egress; burst 10 ms, latency 50 ms); link test: %s MiB through socat\n", linkmb
      printf "- load on the donor during every run: `sysbench oltp_write_only --threads=%d --rate=0` (unthrottled); baseline: mean per-second TPS of the %d s before the copy (after %d s of warm-up); TPS drop = 1 - TPS during the copy / baseline\n", lthreads, lbase, lwarm
      printf "- time: from the start of the clone until the recipient is a running replica (IO and SQL threads Yes, Seconds_Behind_Master not NULL); %d run(s) per rate and tool (median), order alternating per run\n", runs
      printf "- ferry: `ferry serve --once` (donor) + `ferry clone --compress none|auto --start --replicate`%s (recipient)\n", ferryargs == "" ? "" : " " ferryargs
      if (my) printf "- raw tar (the yardstick; no stock clone tool here): `find DATADIR -type f` (the same files) `| tar -c | socat` (donor namespace) -> `socat | tar -x` (recipient namespace), under the same load; time from its start until tar -x ends. Link limit = the bytes ferry reads × 8 / the rate socat measured on the link (marked *)\n\n"
      else printf "- mariadb-backup: `mariadb-backup --backup --stream=xbstream --parallel=%d | socat` -> `socat | mbstream -x -p %d`, `--prepare --use-memory=%s`, `--move-back`, mariadbd start, `SET GLOBAL gtid_slave_pos = BINLOG_GTID_POS(file, pos)`, `CHANGE MASTER ... MASTER_USE_GTID=slave_pos`, `START SLAVE`\n\n", par, par, pmem
      sn = my ? "tar" : "mb"
      printf "| link | socat Mbit/s | link limit s | ferry none s | ferry auto s | %s s | ferry none / %s | ferry auto / %s | ferry none × link limit | ferry auto × link limit | TPS drop ferry none | TPS drop ferry auto | TPS drop %s |\n", tl[stock], sn, sn, sn
      print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= nr; i++) {
        rt = R[i]; fn = med("wall", rt, "ferry-none"); fa = med("wall", rt, "ferry-auto"); mb = med("wall", rt, stock)
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rname(rt), f(L[rt], "%.0f"),
          f(limit(rt), "%.2f") ((rt == 0 || my) && limit(rt) != "" ? "*" : ""), f(fn, "%.2f"), f(fa, "%.2f"), f(mb, "%.2f"),
          ratio(fn, mb), ratio(fa, mb), xlim(fn, rt), xlim(fa, rt),
          f(med("drop", rt, "ferry-none"), "%.0f %%"), f(med("drop", rt, "ferry-auto"), "%.0f %%"), f(med("drop", rt, stock), "%.0f %%")
      }
      if (my) print "\n\\* the link limit at the rate socat measured on the same link."
      else for (i = 1; i <= nr; i++) if (R[i] == 0 && limit(0) != "") print "\n\\* unshaped: the link limit at the rate socat measured on the same link."
      if (target != "") {
        print ""
        for (i = 1; i <= nr; i++) for (t = 1; t <= 2; t++) {
          tool = (t == 1) ? "ferry-none" : "ferry-auto"; x = xlim(med("wall", R[i], tool), R[i])
          if (x != "–") printf "- %s, %s: %s × the link limit (target ≤ %s): %s\n", rname(R[i]), tl[tool], x, target, (x + 0 <= target + 0) ? "met" : "**not met**"
        }
      }
      print "\nPer rate and tool (medians of the runs):\n"
      print "| link | tool | n | time s | × link limit | MB on the wire | avg Mbit/s on the wire | TPS baseline | TPS during copy | TPS drop |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= nr; i++) {
        rt = R[i]
        for (t = 1; t <= 3; t++) {
          tool = (t == 1) ? "ferry-none" : (t == 2) ? "ferry-auto" : stock
          k = rt SUBSEP tool; if (!n[k]) continue
          w = med("wall", rt, tool); wb = med("wire", rt, tool)
          printf "| %s | %s | %d | %s | %s | %.0f | %s | %s | %s | %s |\n", rname(rt), tl[tool], n[k], f(w, "%.2f"), xlim(w, rt),
            wb / 1e6, (w > 0) ? sprintf("%.0f", wb * 8 / 1e6 / w) : "–", f(med("base", rt, tool), "%.1f"),
            f(med("copy", rt, tool), "%.1f"), f(med("drop", rt, tool), "%.1f %%")
        }
      }
      if (ns) {
        all = ""
        for (i = 1; i <= nr; i++) { rt = R[i]; out = ""
          for (j = 1; j <= ns; j++) if (SN[rt, so[j]]) out = out sprintf("%s%s %.2f", out == "" ? "" : ", ", so[j], ST[rt, so[j]] / SN[rt, so[j]])
          if (out != "") all = all (all == "" ? "" : "; ") rname(rt) ": " out }
        printf "\nmariadb-backup steps (mean s): %s.\n", all
      }
      gsub(/; $/, "", checks)
      printf "\nCheck (replica caught up to the donor after the load, CHECKSUM TABLE of every table vs the donor): %s\n", checks
    }' "$RES"
}
report | tee "$RESULTS"
log "results written to $RESULTS; raw per-run data in $RES, $STEPS and $RAW"
