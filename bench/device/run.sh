#!/usr/bin/env bash
# On the lent machine, inside pg.sh and mdb.sh (see pack.sh): the
# many-core report (the pool under contention, the point select from 1 to
# 256 goroutines) and where a default-deny reset costs. About 5 minutes.
B=.dev/bin
echo "== default-deny reset, one serial caller"
$B/integration.test -test.run '^$' -test.bench '^BenchmarkDefaultDenyReset$' -test.benchtime 5000x -test.count 5 2>&1 | tee $OUT/default-deny.txt
echo "== where the reset's cost lands"
$B/resetbeside -rounds 3 2>&1 | tee $OUT/resetbeside.txt
echo "== the pool under contention"
$B/bench.test -test.run '^$' -test.bench '^BenchmarkPool(Parallel|AcquireRelease)$' -test.cpu 1,2,4,8,16 -test.benchtime 1s 2>&1 | tee $OUT/pool.txt
echo "== point select, 1 to 256 goroutines"
$B/loadtest -only '/select/' -rounds 2 -cell 2s -warmup 300ms -exhaust=false -out $OUT/lt 2>&1 | tail -5
mv $OUT/lt/results.md $OUT/loadtest.md; mv $OUT/lt/chart.png $OUT/chart.png; rm -rf $OUT/lt
