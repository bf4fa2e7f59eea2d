#!/usr/bin/env bash
# bench/sst.sh: Galera SST methods side by side: ferry, mariabackup and rsync, each joining a
# node to a two-node cluster on loopback while sysbench oltp_write_only runs on the donor.
#
# The donor n1 is a Galera node (1 GiB buffer pool, 512M redo log, binlog on) whose datadir
# holds a sysbench dataset, built once per size and reused; it is bootstrapped anew for each
# run. Per run and method (the order alternates between runs, lib.sh `order`):
#   1. n1 starts (--wsrep-new-cluster), the page cache is dropped;
#   2. sysbench oltp_write_only (LOAD_THREADS threads, unthrottled, per-second reports) runs on
#      n1; after LOAD_WARMUP_SECS, LOAD_BASE_SECS of load alone are the TPS baseline;
#   3. n2 starts on an empty datadir with wsrep_sst_method=METHOD: the time from its start until
#      it is Synced is the measure; mariadbd's own log gives when the SST ran;
#   4. the load stops: TPS during the join = mean of the per-second TPS from n2's start until
#      Synced; zero-TPS seconds = how many of those seconds committed nothing (rsync's FLUSH
#      TABLES WITH READ LOCK shows there), and the donor's read-only window from its log
#      ("Flushing tables for SST" to "Provider resumed": only a method that asks for FTWRL);
#   5. n2 and n1 stop; n2's datadir is removed.
# Then, once, CHECKSUM TABLE of every sbtest table on n2 (ferry's last join, the load stopped)
# must equal n1's.
#
#   sudo bench/sst.sh                          # 4 x 1M rows (~1 GB of data), 1 run per method
#   sudo TABLES=14 bench/sst.sh                # 14 x 1M rows (~4 GB), the backup.sh set's size
#   sudo SMALL=1 bench/sst.sh                  # 4 x 100k rows: checks the script in a few minutes
#
# Options (environment), defaults in brackets: BENCH_DIR, SMALL, TABLE_SIZE, KEEP_SERVER,
# FERRY, SKIP_FERRY as for backup.sh, and
#   TABLES [4]                 sysbench tables of TABLE_SIZE rows
#   RUNS [1]                   joins per method
#   METHODS ["ferry mariabackup rsync"]
#   LOAD_THREADS [2], LOAD_WARMUP_SECS [5], LOAD_BASE_SECS [10]
#   JOIN_TIMEOUT [1800]        seconds a join may take
#   SST_OPTS                   extra [sst] lines for every method, e.g. "streams=2" (one per line)
# Needs root (drop_caches; the nodes run as the mysql user, as packaged servers do, and so do
# their SST methods: rsync's daemon cannot run as root), galera-4, rsync, socat (installed if
# missing).
set -euo pipefail
TABLES=${TABLES:-4}
RUNS=${RUNS:-1}
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
METHODS=${METHODS:-ferry mariabackup rsync}
LOAD_BASE_SECS=${LOAD_BASE_SECS:-10}
JOIN_TIMEOUT=${JOIN_TIMEOUT:-1800}
SST_OPTS=${SST_OPTS:-}
[[ $SKIP_FERRY == 1 ]] && METHODS=${METHODS//ferry/}
read -r -a TOOLS <<<"$METHODS"
((${#TOOLS[@]})) || die "no METHODS to run"

LOGS="$BENCH_DIR/logs-sst"
RESULTS="$BENCH_DIR/sst-results.md"
G="$BENCH_DIR/galera-${TABLES}x${TABLE_SIZE}"      # n1's datadir (kept), n2's, configs, the shim
GDATA="$G/n1/data"; GLOADED="$G/n1.loaded"
N1SOCK="$G/n1/s.sock"; N2SOCK="$G/n2/s.sock"
SST_USER=sst SST_PASS=sst-bench-secret
SOCK=$N1SOCK                                         # lib.sh's load helpers use the donor's socket
SB_OPTS=(--db-driver=mysql --mysql-socket="$N1SOCK" --mysql-user=root --mysql-db=sbtest
         --tables="$TABLES" --table-size="$TABLE_SIZE")
N1_PID=""; N2_PID=""

# node_cnf N METHOD: writes node N's my.cnf (ports 2330N, gcomm 2N567, IST 2N568, SST 2N444).
node_cnf() {
  local n=$1 method=$2
  mkdir -p "$G/n$n"
  cat >"$G/n$n/my.cnf" <<EOF
[mysqld]
user=mysql
datadir=$G/n$n/data
socket=$G/n$n/s.sock
port=$((23300 + n))
bind-address=127.0.0.1
pid-file=$G/n$n/m.pid
log-error=$G/n$n/error.log
server-id=1
log-bin=mysql-bin
log-slave-updates=ON
binlog_format=ROW
gtid_domain_id=$((10 + n))
wsrep_gtid_mode=ON
wsrep_gtid_domain_id=1
innodb_buffer_pool_size=1G
innodb_log_file_size=512M
innodb_flush_log_at_trx_commit=2
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=/usr/lib/galera/libgalera_smm.so
wsrep_cluster_name=ferry_sst_bench
wsrep_cluster_address=gcomm://127.0.0.1:21567,127.0.0.1:22567
wsrep_node_name=n$n
wsrep_node_address=127.0.0.1:2${n}567
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:2${n}567;ist.recv_addr=127.0.0.1:2${n}568;gcache.size=1G"
wsrep_sst_receive_address=127.0.0.1:2${n}444
wsrep_sst_method=$method
wsrep_slave_threads=2
[sst]
wsrep-sst-auth=$SST_USER:$SST_PASS
$SST_OPTS
EOF
}

# start_node N PIDVAR [ARGS...]: starts node N's mariadbd (the shim's directory first on PATH).
start_node() {
  local n=$1 var=$2; shift 2
  PATH="$G/bin:$PATH" "$MARIADBD" --defaults-file="$G/n$n/my.cnf" "$@" </dev/null >>"$G/n$n/out.log" 2>&1 &
  printf -v "$var" %s "$!"
}
nsql() { local n=$1; shift; mariadb --no-defaults -S "$G/n$n/s.sock" -uroot -N -B "$@"; }
state() { nsql "$1" -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2; }

# wait_synced N PID SECONDS: waits until node N is Synced; dies if its mariadbd exits.
wait_synced() {
  local n=$1 pid=$2 end=$((SECONDS + $3))
  while [[ $(state "$n") != Synced ]]; do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$G/n$n/error.log" >&2; die "n$n exited before it was Synced (log: $G/n$n/error.log)"; }
    ((SECONDS < end)) || die "n$n not Synced within $3 s"
    sleep 0.2
  done
}

bootstrap_n1() {
  sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$GDATA/grastate.dat" 2>/dev/null || true
  start_node 1 N1_PID --wsrep-new-cluster
  wait_synced 1 "$N1_PID" 600
}

stop_nodes() { stop_pid "$N2_PID"; N2_PID=""; stop_pid "$N1_PID"; N1_PID=""; }
sst_exit() { local rc=$?; stop_nodes; (exit "$rc"); cleanup; }  # cleanup exits with the status it is entered with
trap sst_exit EXIT

load_galera_dataset() {
  node_cnf 1 ferry
  if [[ ! -f $GLOADED ]]; then
    log "creating the Galera dataset: sysbench ${TABLES} x ${TABLE_SIZE} rows on n1"
    rm -rf "$GDATA"
    mariadb-install-db --no-defaults --user=mysql --datadir="$GDATA" --auth-root-authentication-method=normal >"$LOGS/install-db.log" 2>&1 ||
      { tail -n 15 "$LOGS/install-db.log" >&2; die "mariadb-install-db failed"; }
    chown -R mysql:mysql "$G/n1"
    bootstrap_n1
    nsql 1 -e "CREATE DATABASE sbtest; CREATE USER $SST_USER@localhost IDENTIFIED BY '$SST_PASS';
      GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO $SST_USER@localhost"
    sysbench oltp_read_write "${SB_OPTS[@]}" --threads=2 prepare >"$LOGS/sysbench-prepare.log" 2>&1 ||
      { tail -n 15 "$LOGS/sysbench-prepare.log" >&2; die "sysbench prepare failed"; }
    nsql 1 -e "FLUSH BINARY LOGS"   # RESET MASTER is refused on a Galera node; rsync ships the newest binlog
    stop_pid "$N1_PID"; N1_PID=""
    touch "$GLOADED"
  fi
  log "n1's datadir: $(du -sh --exclude=galera.cache --exclude='mysql-bin.*' "$GDATA" | cut -f1) (without gcache and binlogs)"
}

# join RUN METHOD: one measured join of n2 by METHOD under load; appends a line to $TSV.
join() {
  local r=$1 m=$2 t0 t1 took base during zero ro lab="$m-$r"
  log "run $r: $m"
  bootstrap_n1
  drop_caches
  SB_LOG="$LOGS/$lab.sysbench.log"
  start_load "$LOAD_WARMUP_SECS" "the $m join"
  sleep "$LOAD_BASE_SECS"
  base=$(tps "$(echo "$(now) - $LOAD_BASE_SECS" | bc)" "$(now)" "" %.1f)
  rm -rf "$G/n2"; node_cnf 2 "$m"; mkdir -p "$G/n2/data"; chown -R mysql:mysql "$G/n2"
  t0=$(now)
  start_node 2 N2_PID
  wait_synced 2 "$N2_PID" "$JOIN_TIMEOUT"
  t1=$(now)
  took=$(echo "$t1 - $t0" | bc)
  during=$(tps "$t0" "$t1" "" %.1f)
  zero=$(gawk -v a="$t0" -v b="$t1" -v t0="$SB_T0" '/^\[ *[0-9]+s \]/ { t = t0 + $2 - 0.5
      for (i = 3; i < NF; i++) if ($i == "tps:") v = $(i + 1) + 0
      if (t >= a && t <= b && v == 0) z++ } END { print z + 0 }' "$SB_LOG")
  # The donor's read-only window: mariadbd's "Flushing tables for SST..." (FTWRL) to its
  # "Provider resumed." (the method said "continue"); ferry and mariabackup never ask for it.
  ro=$(gawk '/^[0-9-]+ [0-9:]+ .*WSREP: Flushing tables for SST/ { s = $2 }
      /^[0-9-]+ [0-9:]+ .*WSREP: Provider resumed/ && s != "" { e = $2 }
      END { if (s != "" && e != "") { split(s, a, ":"); split(e, b, ":")
        print (b[1] * 3600 + b[2] * 60 + b[3]) - (a[1] * 3600 + a[2] * 60 + a[3]) } else print 0 }' "$G/n1/error.log")
  stop_load
  cp "$G/n1/error.log" "$LOGS/$lab.donor.log"; cp "$G/n2/error.log" "$LOGS/$lab.joiner.log"
  printf '%s\t%s\t%.2f\t%s\t%s\t%s\t%s\n' "$m" "$r" "$took" "$base" "$during" "$zero" "$ro" >>"$TSV"
  log "$(printf '%-12s run %s: joiner start -> Synced %6.2f s; TPS %s before, %s during; %s zero-TPS s; donor read-only %s s' \
    "$m" "$r" "$took" "$base" "$during" "$zero" "$ro")"
  if [[ $m == ferry ]]; then check_join; fi
  stop_nodes
  : >"$G/n1/error.log"
  rm -rf "$G/n2/data" "$G"/n2/data.ferry-old-*
}

# check_join: n2 (just joined by ferry) and n1 hold the same data once the load stopped.
check_join() {
  local a b i
  for ((i = 0; i < 300; i++)); do
    [[ $(nsql 1 -e "SHOW STATUS LIKE 'wsrep_last_committed'" | cut -f2) == $(nsql 2 -e "SHOW STATUS LIKE 'wsrep_last_committed'" | cut -f2) ]] && break
    sleep 0.2
  done
  a=$(nsql 1 -e "CHECKSUM TABLE $(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")" | md5sum)
  b=$(nsql 2 -e "CHECKSUM TABLE $(seq -s, -f 'sbtest.sbtest%g' 1 "$TABLES")" | md5sum)
  if [[ $a == "$b" ]]; then CHECK="OK (CHECKSUM TABLE of $TABLES tables equal on n1 and n2 after ferry's join)"
  else CHECK="MISMATCH: CHECKSUM TABLE differs between n1 and n2 after ferry's join"; fi
  log "check: $CHECK"
}

bench_init
[[ -e /usr/lib/galera/libgalera_smm.so ]] || need galera_new_cluster galera-4
need rsync rsync
need socat socat
need bc bc
build_ferry
mkdir -p "$G/bin"
id mysql >/dev/null 2>&1 || die "no mysql user: install mariadb-server"
if [[ -n $FERRY ]]; then "$FERRY" install-sst --dir "$G/bin" >/dev/null; fi
load_galera_dataset
TSV="$LOGS/sst.tsv"; : >"$TSV"; CHECK="not run (no ferry join)"
for ((r = 1; r <= RUNS; r++)); do
  for m in $(order "$r"); do join "$r" "$m"; done
done

{
  describe_env
  echo "### sst.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- machine: $MACHINE"
  echo "- versions: $VERSIONS; galera-4 $(dpkg-query -W -f='${Version}' galera-4 2>/dev/null)"
  echo "- dataset: sysbench ${TABLES} x ${TABLE_SIZE} rows on the donor; load: oltp_write_only, ${LOAD_THREADS} threads, on the donor"
  echo
  echo "| method | runs | joiner start → Synced s (median) | TPS before | TPS during the join | TPS kept | zero-TPS seconds | donor read-only s |"
  echo "|---|---|---|---|---|---|---|---|"
  for m in "${TOOLS[@]}"; do
    gawk -F'\t' -v m="$m" '$1 == m { n++; t[n] = $3; b += $4; d += $5; z += $6; ro += $7 }
      END { if (!n) exit; asort(t); med = (n % 2) ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2
        printf "| %s | %d | %.2f | %.0f | %.0f | %.0f %% | %d | %d |\n", m, n, med, b / n, d / n, 100 * d / b, z, ro }' "$TSV"
  done
  echo
  gawk -F'\t' '{ t[$1] += $3; n[$1]++ } END { if (n["ferry"] && n["mariabackup"]) printf "ferry / mariabackup, join time: %.2f\n", (t["ferry"] / n["ferry"]) / (t["mariabackup"] / n["mariabackup"])
    if (n["ferry"] && n["rsync"]) printf "ferry / rsync, join time: %.2f\n", (t["ferry"] / n["ferry"]) / (t["rsync"] / n["rsync"]) }' "$TSV"
  echo
  echo "Check: $CHECK"
} | tee "$RESULTS"
