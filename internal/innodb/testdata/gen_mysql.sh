#!/bin/bash
# Regenerates the MySQL page fixtures of internal/innodb (mysql_*.gz) from private
# MySQL 8.0 servers. Usage: internal/innodb/testdata/gen_mysql.sh (as root; needs
# mysqld under $MYSQL_BASEDIR, default /opt/mysql-8.0, and the mariadb client, which
# talks to MySQL over the socket). The scratch datadirs stay in $W for inspection;
# each server is stopped by pid.
set -euo pipefail

OUT=$(cd "$(dirname "$0")" && pwd)
B=${MYSQL_BASEDIR:-/opt/mysql-8.0}
W=${W:-/tmp/innodbfx-mysql}
SOCK=$W/s.sock
PID=

rm -rf "$W"
mkdir -p "$W"

# start DIR ARGS...: initialize DIR with ARGS (innodb_page_size needs its own
# datadir) and start a server on it.
start() {
	local d=$1
	shift
	"$B/bin/mysqld" --no-defaults --initialize-insecure --basedir="$B" --datadir="$W/$d" \
		--lc-messages-dir="$B/share" --user=root "$@" >"$W/$d.init.log" 2>&1
	"$B/bin/mysqld" --no-defaults --basedir="$B" --datadir="$W/$d" --lc-messages-dir="$B/share" \
		--user=root --mysqlx=OFF --skip-networking --socket="$SOCK" --log-error="$W/$d.err" \
		--pid-file="$W/$d.pid" --innodb-buffer-pool-size=64M "$@" &
	PID=$!
	for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.2; done
	mariadb --no-defaults -uroot --socket="$SOCK" -e "CREATE DATABASE fx"
}
# stop shuts the server down slowly (purge done, every page flushed).
stop() {
	[ -n "$PID" ] || return 0
	sql "SET GLOBAL innodb_fast_shutdown=0" || true
	kill -TERM "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	PID=
}
trap stop EXIT
sql() { mariadb --no-defaults -uroot --socket="$SOCK" fx -e "$1"; }
# pages FILE PAGESIZE SKIP COUNT NAME: gzip'd pages of a file into testdata.
pages() { dd if="$1" bs="$2" skip="$3" count="$4" status=none | gzip -9n >>"$OUT/$5"; }

COLS="(id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB"
ROWS="WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 60)
	SELECT n, CONCAT('row ', n, ' ', REPEAT(CHAR(65 + n % 26), n % 50)) FROM s"

# 16 KiB pages. Each checksum algorithm is set with SET GLOBAL before its tables are
# created; a table's pages are flushed (by FLUSH TABLES ... FOR EXPORT) while it is set.
start d16
# name:algorithm:options
CASES="crc32:crc32: zip8:crc32:ROW_FORMAT=COMPRESSED+KEY_BLOCK_SIZE=8 zip4:crc32:ROW_FORMAT=COMPRESSED+KEY_BLOCK_SIZE=4
innodb:innodb: zip8_innodb:innodb:ROW_FORMAT=COMPRESSED+KEY_BLOCK_SIZE=8
none:none: zip8_none:none:ROW_FORMAT=COMPRESSED+KEY_BLOCK_SIZE=8"
for c in $CASES; do
	IFS=: read -r t algo opts <<<"$c"
	sql "SET GLOBAL innodb_checksum_algorithm=$algo"
	sql "CREATE TABLE $t $COLS ${opts//+/ }"
	sql "INSERT INTO $t $ROWS"
	ps=16384
	case $opts in *SIZE=8) ps=8192 ;; *SIZE=4) ps=4096 ;; esac
	# Page 4 (the clustered index root; page 3 is the SDI root) before an UPDATE,
	# pages 0..4 after it.
	printf 'FLUSH TABLES %s FOR EXPORT;\n\\! dd if=%s bs=%s skip=4 count=1 status=none | gzip -9n >%s\nUNLOCK TABLES;\n' \
		"$t" "$W/d16/fx/$t.ibd" "$ps" "$OUT/mysql_$t.before.gz" | mariadb --no-defaults -uroot --socket="$SOCK" fx
	sql "UPDATE $t SET v = CONCAT(v, ' updated') WHERE id % 7 = 0"
	printf 'FLUSH TABLES %s FOR EXPORT;\n\\! dd if=%s bs=%s count=5 status=none | gzip -9n >%s\nUNLOCK TABLES;\n' \
		"$t" "$W/d16/fx/$t.ibd" "$ps" "$OUT/mysql_$t.after.gz" | mariadb --no-defaults -uroot --socket="$SOCK" fx
done
sql "SET GLOBAL innodb_checksum_algorithm=crc32"
# Transparent page compression: pages 1.. are type 14 once flushed.
for a in zlib lz4; do
	sql "CREATE TABLE pcomp_$a $COLS COMPRESSION='$a'"
	sql "INSERT INTO pcomp_$a $ROWS"
done
# A general tablespace (flags SHARED|SDI).
sql "CREATE TABLESPACE gts ADD DATAFILE 'gts.ibd' ENGINE=InnoDB"
sql "CREATE TABLE g $COLS TABLESPACE gts"
sql "INSERT INTO g $ROWS"
stop
rm -f "$OUT"/mysql_pcomp_*.pages.gz "$OUT"/mysql_gts.pages.gz "$OUT"/mysql_sys_*.pages.gz
for a in zlib lz4; do pages "$W/d16/fx/pcomp_$a.ibd" 16384 0 4 "mysql_pcomp_$a.pages.gz"; done
pages "$W/d16/gts.ibd" 16384 0 4 mysql_gts.pages.gz
pages "$W/d16/ibdata1" 16384 0 8 mysql_sys_ibdata1.pages.gz
pages "$W/d16/mysql.ibd" 16384 0 4 mysql_sys_dd.pages.gz
pages "$W/d16/undo_001" 16384 0 4 mysql_sys_undo.pages.gz

# 4 KiB pages: a descriptor page (every 4096 pages) describes 16 extents, and a big
# table gets XDES_FSEG_FRAG extents (here the first one of page 12288's); DELETEs free
# whole extents and pages in it. Kept: pages 0..3 and the descriptor page 12288.
start d4 --innodb-page-size=4k
sql "CREATE TABLE holes (id INT PRIMARY KEY, v VARCHAR(2000)) ENGINE=InnoDB"
sql "SET SESSION cte_max_recursion_depth = 100000; INSERT INTO holes WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 30000)
	SELECT n, REPEAT('h', 1500) FROM s"
# The second range lies in the leased extent at page 12288.
sql "DELETE FROM holes WHERE id BETWEEN 5000 AND 25000 OR id BETWEEN 26400 AND 26700"
stop
rm -f "$OUT"/mysql_xdes4k.pages.gz
pages "$W/d4/fx/holes.ibd" 4096 0 4 mysql_xdes4k.pages.gz
pages "$W/d4/fx/holes.ibd" 4096 12288 1 mysql_xdes4k.pages.gz
trap - EXIT
ls -l "$OUT"/mysql_*
