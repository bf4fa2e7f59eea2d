#!/bin/bash
# Regenerates the page fixtures of internal/innodb from a private MariaDB server.
# Usage: internal/innodb/testdata/gen.sh   (as root; needs mariadbd, mariadb-install-db,
# mariadb and the file_key_management plugin). The scratch datadir stays in $W for
# inspection; the server is stopped by pid at the end.
set -euo pipefail

OUT=$(cd "$(dirname "$0")" && pwd)
W=${W:-/tmp/innodbfx}
SOCK=$W/s.sock

rm -rf "$W"
mkdir -p "$W"
# One AES key (id 1) for ENCRYPTED=YES tables.
echo "1;$(printf '%064x' 0x0123456789abcdef)" >"$W/keys.txt"

mariadb-install-db --no-defaults --datadir="$W/d" --user=root >"$W/install.log" 2>&1

mariadbd --no-defaults --user=root --datadir="$W/d" --socket="$SOCK" --skip-networking \
	--innodb-buffer-pool-size=32M --innodb-log-file-size=16M \
	--plugin-load-add=file_key_management \
	--file-key-management-filename="$W/keys.txt" \
	--log-error="$W/err.log" --pid-file="$W/d.pid" &
PID=$!
stop() { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.2; done

sql() { mariadb --no-defaults -uroot --socket="$SOCK" fx -e "$1"; }
mariadb --no-defaults -uroot --socket="$SOCK" -e "CREATE DATABASE fx"

COLS="(id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB"
# full_crc32 tablespaces (the 10.11 default); ROW_FORMAT=COMPRESSED is always legacy.
sql "CREATE TABLE fcrc32 $COLS"
sql "CREATE TABLE zip $COLS ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"
sql "CREATE TABLE pcomp $COLS PAGE_COMPRESSED=1"
sql "CREATE TABLE enc $COLS ENCRYPTED=YES ENCRYPTION_KEY_ID=1"
sql "CREATE TABLE pcomp_enc $COLS PAGE_COMPRESSED=1 ENCRYPTED=YES ENCRYPTION_KEY_ID=1"
# legacy (pre-full_crc32) tablespaces: the algorithm applies at CREATE time.
sql "SET GLOBAL innodb_checksum_algorithm=crc32"
sql "CREATE TABLE crc32 $COLS"
sql "CREATE TABLE pcomp_legacy $COLS PAGE_COMPRESSED=1"
sql "CREATE TABLE enc_legacy $COLS ENCRYPTED=YES ENCRYPTION_KEY_ID=1"
sql "CREATE TABLE pcomp_enc_legacy $COLS PAGE_COMPRESSED=1 ENCRYPTED=YES ENCRYPTION_KEY_ID=1"
sql "SET GLOBAL innodb_checksum_algorithm=full_crc32"

TABLES="fcrc32 zip pcomp enc pcomp_enc crc32 pcomp_legacy enc_legacy pcomp_enc_legacy"
for t in $TABLES; do
	sql "INSERT INTO $t SELECT seq, CONCAT('row ', seq, ' ', REPEAT(CHAR(65 + seq % 26), seq % 50)) FROM seq_1_to_60"
done

# copy.sh MODE: "before" = page 3 of every table, "after" = pages 0..3, gzip'd into
# testdata. It runs from inside the client session holding FLUSH TABLES ... FOR EXPORT,
# so every page of those tables is on disk and stays put while it is copied.
cat >"$W/copy.sh" <<EOF
#!/bin/bash
set -e
for t in $TABLES; do
	ps=16384; [ \$t = zip ] && ps=8192
	if [ "\$1" = before ]; then skip=3 n=1; else skip=0 n=4; fi
	dd if=$W/d/fx/\$t.ibd bs=\$ps skip=\$skip count=\$n status=none | gzip -9n >$OUT/\$t.\$1.gz
done
EOF
chmod +x "$W/copy.sh"
list=$(echo "$TABLES" | sed 's/ /, /g')
snapshot() {
	printf 'FLUSH TABLES %s FOR EXPORT;\n\\! %s %s\nUNLOCK TABLES;\n' "$list" "$W/copy.sh" "$1" |
		mariadb --no-defaults -uroot --socket="$SOCK" fx
}

# The clustered index root (page 3) before an UPDATE, then every table after it.
snapshot before
for t in $TABLES; do sql "UPDATE $t SET v = CONCAT(v, ' updated') WHERE id % 7 = 0"; done
snapshot after

# System tablespace pages 0..7 after a clean shutdown.
stop
trap - EXIT
dd if="$W/d/ibdata1" bs=16384 count=8 status=none | gzip -9n >"$OUT/ibdata1.pages.gz"
ls -l "$OUT"
