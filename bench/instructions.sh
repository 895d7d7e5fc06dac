#!/usr/bin/env bash
# instructions.sh: pooldriver's own overhead in instructions per operation,
# which, unlike time, is the same on every x86-64 CPU: the wall-time ratio of
# the same code reads 1.09 on one 2-vCPU VM and 1.20 on another
# (docs/performance.md). Each loop runs under callgrind twice, at n and 2n
# iterations; the difference divided by n is the cost of one operation
# without the setup. GOMAXPROCS=1 and no GC or async preemption, so that the
# count is the code's, not the scheduler's. With a real server, the
# scheduler's loops while waiting for the server still add a few percent
# that vary with the machine's load: REPEAT=3 measures each cell three
# times and keeps the median. cpu.rdtscp=off: the runtime's cputicks uses
# RDTSCP where the CPU has it, which valgrind 3.19 cannot decode (SIGILL on
# some machines); the fenced RDTSC it falls back to counts the same.
#
#   bench/instructions.sh [fake|postgres|postgres-background|mysql|mysql-background|all]   (from the repository root)
#
# fake (the default): BenchmarkExec and BenchmarkQuery of the root package,
# plain database/sql against pooldriver, serial. postgres: the bench
# module's point select at 64 goroutines with a cancellable context,
# tuned database/sql against pooldriver (the server of
# POOLDRIVER_POSTGRES_DSN, else the local default); postgres-background:
# the same with context.Background(); mysql, mysql-background: the same
# against MySQL/MariaDB (POOLDRIVER_MYSQL_DSN, else the local default).
# all: the whole table in one run, every contender side by side: PostgreSQL (tuned database/sql,
# pooldriver, pgxpool) and MySQL/MariaDB (tuned, pooldriver) at 1 and 64
# goroutines with context.Background() and a cancellable context, and the
# fake server; a markdown table with the ratios (SERVERS=postgres: the
# PostgreSQL rows and the fake server only). Needs valgrind.
set -euo pipefail
shopt -s inherit_errexit
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# count BIN BENCH N: the instructions callgrind collected running BENCH N times.
count() {
	GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/out" "$1" -test.run '^$' -test.bench "$2" -test.benchtime "$3x" \
		>"$tmp/stdout" 2>"$tmp/stderr" || { cat "$tmp/stdout" "$tmp/stderr" >&2; exit 1; }
	grep -q 'ns/op' "$tmp/stdout" || { echo "instructions.sh: $2 did not run (a real-server benchmark skips when its server is unreachable)" >&2; exit 1; }
	awk '/Collected :/ { print $NF }' "$tmp/stderr"
}

# per BIN BENCH N: instructions per operation of BENCH (the median of
# REPEAT measurements).
per() {
	local a b i all=()
	for ((i = 0; i < ${REPEAT:-1}; i++)); do
		a=$(count "$1" "$2" "$3")
		b=$(count "$1" "$2" $(($3 * 2)))
		[[ -n $a && -n $b ]] || { echo "instructions.sh: callgrind reported no count for $2" >&2; exit 1; }
		all+=($(((b - a) / $3)))
	done
	printf '%s\n' "${all[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# compare BIN LABEL BASE-BENCH POOLED-BENCH N
compare() {
	local base pooled
	base=$(per "$1" "$3" "$5")
	pooled=$(per "$1" "$4" "$5")
	awk -v l="$2" -v b="$base" -v p="$pooled" 'BEGIN { printf "%s: %d instructions per operation through pooldriver, %d plain: %.3f×\n", l, p, b, p / b }'
}

case ${1:-fake} in
fake)
	(cd "$root" && go test -c -o "$tmp/pd.test" .)
	for bench in Exec Query; do
		compare "$tmp/pd.test" "$bench serial (fake server)" "^Benchmark$bench\$/^plain\$" "^Benchmark$bench\$/^pooldriver\$" 100000
	done
	;;
postgres | postgres-background | mysql | mysql-background)
	server=${1%-background} name=PostgreSQL
	[[ $server == mysql ]] && name=MySQL/MariaDB
	bench="^BenchmarkRealServerPointSelectCancelCtx\$/^$server\$/^goroutines=64\$" ctx='cancellable context'
	if [[ $1 == *-background ]]; then
		bench="^BenchmarkRealServerPointSelect\$/^$server\$/^goroutines=64\$" ctx='context.Background()'
	fi
	(cd "$root/bench" && go test -c -o "$tmp/b.test" .)
	compare "$tmp/b.test" "$name point select, 64 goroutines, $ctx (plain = tuned database/sql)" \
		"$bench/^sql-tuned\$" "$bench/^pooldriver\$" 20000
	;;
all)
	(cd "$root" && go test -c -o "$tmp/pd.test" .)
	(cd "$root/bench" && go test -c -o "$tmp/b.test" .)
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "–"; else printf "%.3f×", a / b }'; }
	echo "| case | tuned database/sql | pooldriver | pgxpool | pooldriver / tuned | pooldriver / pgxpool |"
	echo "|---|---|---|---|---|---|"
	for server in ${SERVERS:-postgres mysql}; do
		for g in 1 64; do
			for ctx in background cancel; do
				bench="^BenchmarkRealServerPointSelect\$/^$server\$/^goroutines=$g\$"
				label="$server, $g goroutine(s), context.Background()"
				if [[ $ctx == cancel ]]; then
					bench="^BenchmarkRealServerPointSelectCancelCtx\$/^$server\$/^goroutines=$g\$"
					label="$server, $g goroutine(s), cancellable context"
				fi
				tuned=$(per "$tmp/b.test" "$bench/^sql-tuned\$" 20000)
				pd=$(per "$tmp/b.test" "$bench/^pooldriver\$" 20000)
				pgx=""
				[[ $server == postgres ]] && pgx=$(per "$tmp/b.test" "$bench/^pgxpool\$" 20000)
				echo "| $label | $tuned | $pd | ${pgx:-–} | $(ratio "$pd" "$tuned") | $(ratio "$pd" "$pgx") |"
			done
		done
	done
	for bench in Exec Query; do
		plain=$(per "$tmp/pd.test" "^Benchmark$bench\$/^plain\$" 100000)
		pd=$(per "$tmp/pd.test" "^Benchmark$bench\$/^pooldriver\$" 100000)
		echo "| fake server, serial $bench (plain database/sql as tuned) | $plain | $pd | – | $(ratio "$pd" "$plain") | – |"
	done
	;;
*)
	echo "usage: bench/instructions.sh [fake|postgres|postgres-background|mysql|mysql-background|all]" >&2
	exit 2
	;;
esac
