#!/usr/bin/env bash
# Packs a relocatable MariaDB server for a lent machine (the `device` tool),
# which has no MariaDB and reaches no registry, into .dev/ of the project
# checkout (ignored through .git/info/exclude):
#   - mdb.tar.xz: this machine's Debian mariadbd, mariadb and mariadb-admin,
#     their shared libraries and loader (patchelf'd to load from /tmp/mdb/lib),
#     error messages, charsets and the system-table SQL under share/;
#   - mdb.sh, which on that machine starts MariaDB and runs a command.
# Usage, from the project root (goes well with ../shared/device/pack.sh):
#   bench/device/pack-mariadb.sh
# Then call the device tool with carry [".dev"] and a command such as
#   bash .dev/mdb.sh .dev/bin/loadtest -out $OUT/lt
#   bash .dev/pg.sh bash .dev/mdb.sh .dev/bin/loadtest -out $OUT/lt
set -euo pipefail
root=$(git rev-parse --show-toplevel)
dev=$root/.dev
mkdir -p "$dev" "$root/.git/info"
grep -qx '/.dev/' "$root/.git/info/exclude" 2>/dev/null || echo /.dev/ >>"$root/.git/info/exclude"
command -v patchelf >/dev/null || { apt-get update -qq && apt-get install -y -qq patchelf >/dev/null; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
M=$w/mdb
mkdir -p $M/bin $M/lib $M/share
cp /usr/sbin/mariadbd /usr/bin/mariadb /usr/bin/mariadb-admin $M/bin/
S=/usr/share/mysql
cp -r $S/charsets $S/mysql_system_tables.sql $S/mysql_performance_tables.sql $S/mysql_system_tables_data.sql \
  $S/maria_add_gis_sp_bootstrap.sql $S/mysql_sys_schema.sql $M/share/
for d in $S/*/errmsg.sys; do mkdir -p $M/share/"$(basename "$(dirname "$d")")" && cp "$d" "$_"/; done
for b in $M/bin/*; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u | while read -r l; do cp -L "$l" $M/lib/; done
cp -L /lib64/ld-linux-x86-64.so.2 $M/lib/
for b in $M/bin/*; do patchelf --set-interpreter /tmp/mdb/lib/ld-linux-x86-64.so.2 --set-rpath /tmp/mdb/lib "$b"; done
for l in $M/lib/*.so*; do [ "$(basename "$l")" = ld-linux-x86-64.so.2 ] || patchelf --set-rpath /tmp/mdb/lib "$l"; done
(cd "$w" && XZ_OPT=-6 tar -cJf "$dev/mdb.tar.xz" mdb)
cp "$(dirname "$0")/mdb.sh" "$dev/mdb.sh"
ls -l "$dev/mdb.tar.xz"
