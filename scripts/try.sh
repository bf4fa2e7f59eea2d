#!/usr/bin/env bash
# Try ferry end to end on this machine: install MariaDB if missing, start a
# scratch server (private datadir, socket and port under $TRY_DIR), load some data and
# keep writing to it, take a hot backup with ferry, restore it into a new datadir, start
# the restored copy and compare table checksums with the source at the backup point.
# Run it as root, or as a user with sudo (it runs itself again through sudo, keeping
# TRY_DIR and PORT). Settings: TRY_DIR (/var/tmp/ferry-try), PORT (3391).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "try.sh: run it as root (no sudo here)" >&2; exit 1; }
  exec sudo --preserve-env=TRY_DIR,PORT,PATH,GOPATH,GOCACHE,GOMODCACHE "$0" "$@"
fi
cd "$(dirname "$0")/.."
TRY_DIR=${TRY_DIR:-/var/tmp/ferry-try}
PORT=${PORT:-3391}

if ! [ -x /usr/sbin/mariadbd ] || ! command -v mariadb-backup >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-backup >/dev/null
fi
go build -o "$TRY_DIR/ferry" ./cmd/ferry
FERRY="$TRY_DIR/ferry"

src="$TRY_DIR/src"; sock="$TRY_DIR/src.sock"
stop_pid() {
  local pid; pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null && while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  rm -f "$1"
}
cleanup() { stop_pid "$TRY_DIR/src.pid"; stop_pid "$TRY_DIR/restored.pid"; [ -n "${writer:-}" ] && kill "$writer" 2>/dev/null; true; }
trap cleanup EXIT
stop_pid "$TRY_DIR/src.pid"; stop_pid "$TRY_DIR/restored.pid"
rm -rf "$src" "$TRY_DIR/backup" "$TRY_DIR/restored"
mkdir -p "$TRY_DIR"
mariadb-install-db --no-defaults --user=root --datadir="$src" --auth-root-authentication-method=normal >/dev/null
/usr/sbin/mariadbd --no-defaults --user=root --datadir="$src" --socket="$sock" --port="$PORT" \
  --bind-address=127.0.0.1 --pid-file="$TRY_DIR/src.pid" --log-error="$TRY_DIR/src.err" \
  --log-bin=binlog --server-id=1 --innodb-log-file-size=16M 2>/dev/null &
for _ in $(seq 100); do mariadb -S "$sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.2; done
M="mariadb -S $sock -uroot"
$M -e "CREATE DATABASE demo; CREATE TABLE demo.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(100), n INT) ENGINE=InnoDB;
       INSERT INTO demo.t (v, n) SELECT REPEAT('x', 90), seq FROM demo.seq_1_to_200000;"
# Keep writing while the backup runs.
( while true; do $M -e "INSERT INTO demo.t (v, n) SELECT REPEAT('y', 90), seq FROM demo.seq_1_to_500" 2>/dev/null || exit; done ) &
writer=$!

echo "== ferry backup (the server keeps taking writes)"
"$FERRY" backup --socket "$sock" --user root --target-dir "$TRY_DIR/backup"
kill "$writer"; wait "$writer" 2>/dev/null || true; writer=""
echo "== ferry restore (copies, verifies, prepares with the stock mariadbd, renames into place)"
"$FERRY" restore --target-dir "$TRY_DIR/backup" --datadir "$TRY_DIR/restored"
/usr/sbin/mariadbd --no-defaults --user=root --datadir="$TRY_DIR/restored" --socket="$TRY_DIR/restored.sock" \
  --skip-networking --pid-file="$TRY_DIR/restored.pid" --log-error="$TRY_DIR/restored.err" 2>/dev/null &
for _ in $(seq 100); do mariadb -S "$TRY_DIR/restored.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.2; done
rows=$(mariadb -S "$TRY_DIR/restored.sock" -uroot -N -e 'SELECT COUNT(*) FROM demo.t')
gtid=$(awk -F'\t' '{print $3}' "$TRY_DIR/backup/xtrabackup_binlog_info")
# GTIDs 1-3 created the schema and loaded 200000 rows; every later one added 500 rows.
want=$(( 200000 + (${gtid##*-} - 3) * 500 ))
echo "restored server is up: demo.t has $rows rows at GTID $gtid, expected $want (backup in $TRY_DIR/backup)"
[ "$rows" -eq "$want" ] && echo "OK: the restored copy holds exactly the transactions up to the backup's GTID"
