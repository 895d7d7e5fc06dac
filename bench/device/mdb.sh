#!/usr/bin/env bash
# On the lent machine: unpack .dev/mdb.tar.xz (made by pack-mariadb.sh) to
# /tmp/mdb, bootstrap a datadir in /tmp/mdbdata (root, empty password), start
# mariadbd on 127.0.0.1:${MYPORT:-3306} as root (database test), export
# POOLDRIVER_MYSQL_DSN, run the command given, stop the server and exit with
# the command's status. Extra server options may be given in MDB_OPTS.
# Usage: bash .dev/mdb.sh COMMAND ARGS...   (may be nested in .dev/pg.sh)
set -u
D=$(cd "$(dirname "$0")" && pwd)
P=${MYPORT:-3306}; B=/tmp/mdb; DD=/tmp/mdbdata
[ -x $B/bin/mariadbd ] || python3 - "$D" <<'PY'
import sys, tarfile
with tarfile.open(f"{sys.argv[1]}/mdb.tar.xz") as t:
    t.extractall("/tmp")
PY
echo "$($B/bin/mariadbd --no-defaults --version)"
opts=(--no-defaults --user=root --basedir=$B --datadir=$DD --lc-messages-dir=$B/share
  --character-sets-dir=$B/share/charsets --plugin-dir=$B/lib/plugin)
if [ ! -d $DD/mysql ]; then
  mkdir -p $DD
  { printf '%s\n' "CREATE DATABASE IF NOT EXISTS mysql;" "USE mysql;" "SET @auth_root_socket=NULL;"
    cat $B/share/mysql_system_tables.sql $B/share/mysql_performance_tables.sql $B/share/mysql_system_tables_data.sql \
      $B/share/maria_add_gis_sp_bootstrap.sql $B/share/mysql_sys_schema.sql
  } | $B/bin/mariadbd "${opts[@]}" --bootstrap --log-warnings=0 --enforce-storage-engine= \
      --max_allowed_packet=8M --net_buffer_length=16K >/tmp/mdb-bootstrap.log 2>&1 ||
    { tail -20 /tmp/mdb-bootstrap.log; rm -rf $DD; exit 1; }
fi
$B/bin/mariadbd "${opts[@]}" --bind-address=127.0.0.1 --port=$P --socket=/tmp/mdb.sock \
  --pid-file=$DD/mdb.pid --max-connections=600 --innodb-buffer-pool-size=1G ${MDB_OPTS:-} >/tmp/mdb.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid' EXIT
cli=($B/bin/mariadb --no-defaults -h127.0.0.1 -P$P -uroot)
for i in $(seq 120); do
  "${cli[@]}" -e 'CREATE DATABASE IF NOT EXISTS test' 2>/dev/null && break
  kill -0 $pid 2>/dev/null && [ $i -lt 120 ] || { echo "mariadbd did not start:"; tail -20 /tmp/mdb.log; exit 1; }
  sleep 0.5
done
export POOLDRIVER_MYSQL_DSN="mysql://root@tcp(127.0.0.1:$P)/test"
"$@"; rc=$?
exit $rc
