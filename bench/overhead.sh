#!/usr/bin/env bash
# overhead.sh: pooldriver's own overhead over plain database/sql on the fake
# server (BenchmarkExec and BenchmarkQuery in the root package), as the
# median of per-run ratios. Each run measures plain and pooldriver back to
# back in one process, so a ratio is taken under one machine state; on a
# shared VM single runs still vary by ±20%, hence many runs.
#
#   bench/overhead.sh [runs] [variant]     (from the repository root)
#
# runs: how many runs per benchmark (default 21); variant: the pooldriver
# sub-benchmark to compare (default "pooldriver"; also pooldriver-idle4,
# pooldriver-task, pooldriver-session).
set -euo pipefail
runs=${1:-21}
variant=${2:-pooldriver}
bin=$(mktemp)
go test -c -o "$bin" .
median() { # the median, minimum and maximum of the numbers on stdin
	sort -n | awk '{ v[NR] = $1 } END { printf "%.2f× (%.2f–%.2f)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
out=$(mktemp)
trap 'rm -f "$bin" "$out"' EXIT
for bench in Exec Query; do
	: >"$out"
	for _ in $(seq "$runs"); do
		"$bin" -test.run '^$' -test.bench "^Benchmark$bench\$/^(plain|plain-cancelctx|$variant)(-parallel)?\$" -test.benchtime=200000x |
			awk -v v="$variant" '/ns\/op/ { n = $1; sub(/^Benchmark[A-Za-z]+\//, "", n); sub(/-[0-9]+$/, "", n); t[n] = $3 }
				END {
					base = (v ~ /task|session/) ? "plain-cancelctx" : "plain"
					printf "%s %s\n", t[v] / t[base], t[v "-parallel"] / t[base "-parallel"]
				}' >>"$out"
	done
	echo "$bench $variant / plain: serial $(cut -d' ' -f1 "$out" | median), parallel $(cut -d' ' -f2 "$out" | median), $runs runs"
done
