#!/usr/bin/env bash
# Packs everything bench/device/run.sh needs on a lent many-core machine
# (the workplace's `device` tool) into .dev/ of the checkout: PostgreSQL
# (../shared/device/pack.sh, which also writes .dev/pg.sh), MariaDB
# (pack-mariadb.sh, .dev/mdb.sh), static, stripped builds of the load test,
# the bench and integration test binaries and cmd/resetbeside, and run.sh.
# About 55 MB; the device tool carries at most 64 MiB with the checkout.
#   bench/device/pack.sh
# then call the device tool with carry [".dev"] and the command
#   bash .dev/pg.sh bash .dev/mdb.sh bash .dev/run.sh
# (results under $OUT: loadtest.md, chart.png, pool.txt, default-deny.txt,
# resetbeside.txt).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
"$root/../shared/device/pack.sh"
bash bench/device/pack-mariadb.sh
rm -f .dev/bin/*
export CGO_ENABLED=0
flags=(-trimpath -ldflags='-s -w')
(cd bench && go build "${flags[@]}" -o ../.dev/bin/loadtest ./cmd/loadtest &&
  go build "${flags[@]}" -o ../.dev/bin/resetbeside ./cmd/resetbeside &&
  go test -c "${flags[@]}" -o ../.dev/bin/bench.test .)
go test -c "${flags[@]}" -o .dev/bin/integration.test ./integration
xz -9 -T2 -f .dev/bin/*
cp bench/device/run.sh .dev/run.sh
du -sh .dev
