#!/usr/bin/env bash
# Runs go-sql-driver/mysql's and pgx stdlib's own test suites against
# pooldriver, at the versions pooldriver's go.mod requires, and fails on any
# failure that neither the plain driver shows on this machine (the baseline)
# nor KNOWN_DIFFERENCES lists as a deliberate difference.
#
# Each suite is copied from the module cache into a temporary directory
# (nothing of theirs enters this repository), its test files rewritten so
# that every *sql.DB is opened by the overlay in testdata/<suite>/, and run
# once per mode with a go.work that builds it against this checkout:
#
#   plain    the driver itself: the baseline
#   wrap     sql.OpenDB(pooldriver.Wrap(connector)), no dialect linked in
#   dialect  the same with pooldriver's dialect linked in
#   new      pooldriver.New(dsn) where the test opens by DSN
#
# Usage: integration/upstream/run.sh [mysql] [pgx]     (default: both)
#
# Environment:
#   UPSTREAM_MODES     pooldriver modes to run (default "wrap dialect new")
#   UPSTREAM_TIMEOUT   go test -timeout of one run (default 8m)
#   UPSTREAM_REV       test this commit of pooldriver (git archive) instead
#                      of the working tree
#   UPSTREAM_KEEP=1    keep the temporary directory (its path is printed)
#   MYSQL_TEST_ADDR, MYSQL_TEST_USER, MYSQL_TEST_PASS, MYSQL_TEST_DBNAME
#                      go-sql-driver's own variables (default
#                      127.0.0.1:3306, root, no password, pooldriver_upstream)
#   PGX_TEST_DATABASE  pgx's own variable (default
#                      postgres://postgres@127.0.0.1:5432/pooldriver_upstream?sslmode=disable)
# The default databases are created with the mysql and psql clients when
# they are installed; otherwise they must exist.
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
GO=${GO:-go}
modes=${UPSTREAM_MODES:-wrap dialect new}
timeout=${UPSTREAM_TIMEOUT:-8m}
known=$here/KNOWN_DIFFERENCES
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(mysql pgx)

export MYSQL_TEST_ADDR=${MYSQL_TEST_ADDR:-127.0.0.1:3306}
export MYSQL_TEST_USER=${MYSQL_TEST_USER:-root}
export MYSQL_TEST_PASS=${MYSQL_TEST_PASS:-}
export MYSQL_TEST_DBNAME=${MYSQL_TEST_DBNAME:-pooldriver_upstream}
export PGX_TEST_DATABASE=${PGX_TEST_DATABASE:-postgres://postgres@127.0.0.1:5432/pooldriver_upstream?sslmode=disable}

for m in $modes; do
	case $m in wrap | dialect | new) ;; *)
		echo "UPSTREAM_MODES: unknown mode $m (want wrap, dialect, new)" >&2
		exit 2
		;;
	esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pooldriver-upstream.XXXXXX")
if [ "${UPSTREAM_KEEP:-}" = 1 ]; then
	echo "temporary directory (kept): $tmp"
else
	trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fi

log() { printf '== %s\n' "$*"; }

# pooldriver's source: the working tree, or a commit of it.
pd=$repo
if [ -n "${UPSTREAM_REV:-}" ]; then
	pd=$tmp/pooldriver
	mkdir -p "$pd"
	git -C "$repo" archive "$UPSTREAM_REV" | tar -x -C "$pd"
	log "pooldriver at $(git -C "$repo" rev-parse --short "$UPSTREAM_REV")"
else
	rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null) || rev="?"
	git -C "$repo" diff --quiet HEAD -- . 2>/dev/null || rev+=" (with local changes)"
	log "pooldriver: working tree of $repo at $rev"
fi

# reachable <host:port>: whether a server answers there.
reachable() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# check_servers drops a suite whose server does not answer (under CI=true
# that is a failure), and makes the default databases where a client can.
check_servers() {
	local s kept=() addr var
	for s in "${suites[@]}"; do
		case $s in
		mysql) addr=$MYSQL_TEST_ADDR var=MYSQL_TEST_ADDR ;;
		pgx)
			var=PGX_TEST_DATABASE
			addr=${PGX_TEST_DATABASE#*://}
			addr=${addr#*@}
			addr=${addr%%[/?]*}
			[[ $addr == *:* ]] || addr+=:5432
			# A key=value DSN is not looked into: go test will say.
			[[ $PGX_TEST_DATABASE == *://* ]] || addr=
			;;
		*)
			echo "unknown suite $s (want mysql, pgx)" >&2
			exit 2
			;;
		esac
		if [ -z "$addr" ] || reachable "$addr"; then
			kept+=("$s")
		elif [ "${CI:-}" = true ]; then
			echo "$s: no server at $addr" >&2
			exit 1
		else
			log "$s: skipped, no server at $addr (set $var)"
		fi
	done
	suites=(${kept[@]+"${kept[@]}"})
	for s in ${suites[@]+"${suites[@]}"}; do
		case $s in
		mysql)
			if command -v mysql >/dev/null; then
				MYSQL_PWD=$MYSQL_TEST_PASS mysql -h "${MYSQL_TEST_ADDR%:*}" -P "${MYSQL_TEST_ADDR##*:}" -u "$MYSQL_TEST_USER" \
					-e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_TEST_DBNAME\`"
			fi
			;;
		pgx)
			local db=${PGX_TEST_DATABASE##*/}
			db=${db%%\?*}
			if command -v psql >/dev/null && [[ $PGX_TEST_DATABASE == postgres://* ]]; then
				local admin=${PGX_TEST_DATABASE%/*}/postgres
				[[ $PGX_TEST_DATABASE == *\?* ]] && admin+="?${PGX_TEST_DATABASE#*\?}"
				psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
					psql "$admin" -qc "CREATE DATABASE \"$db\""
			fi
			;;
		esac
	done
}

# prepare <suite>: copies the upstream module, rewrites its tests, adds the
# overlay and a go.work; prints the package directory.
prepare() {
	local suite=$1 mod pkg ver dir
	case $suite in
	mysql) mod=github.com/go-sql-driver/mysql pkg=. ;;
	pgx) mod=github.com/jackc/pgx/v5 pkg=stdlib ;;
	esac
	ver=$(cd "$repo" && GOWORK=off $GO list -m -f '{{.Version}}' "$mod")
	dir=$(cd "$tmp" && GOWORK=off $GO mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || {
		echo "no source for $mod@$ver" >&2
		return 1
	}
	cp -R "$dir" "$tmp/$suite"
	chmod -R u+w "$tmp/$suite"
	local p=$tmp/$suite/$pkg
	# Every handle through the overlay; Raw through pooldriver.RawConn.
	sed -i -E \
		-e 's/\bsql\.Open\(/pdOpen(/g' \
		-e 's/\bsql\.OpenDB\(/pdOpenDB(/g' \
		-e 's/\bstdlib\.OpenDB\(/pdOpenDB(/g' \
		-e 's/\bstdlib\.OpenDBFromPool\(/pdOpenDBFromPool(/g' \
		-e 's/\b([A-Za-z_][A-Za-z0-9_]*)\.Raw\(func\(/pdRaw(\1, func(/g' \
		-e 's/\bdriverConn\.\(\*stdlib\.Conn\)\.Conn\(\)/pdPgxConn(driverConn)/g' \
		"$p"/*_test.go
	# A newer upstream may open a handle another way: stop rather than run
	# it against the plain driver unnoticed.
	if grep -nE '\bsql\.Open(DB)?\(|\bstdlib\.OpenDB(FromPool)?\(|\.Raw\(|\(\*stdlib\.Conn\)' "$p"/*_test.go >&2; then
		echo "$suite: the lines above open a handle or reach the driver's connection in a way run.sh does not rewrite" >&2
		return 1
	fi
	cp "$here/testdata/$suite"/*.go "$p/"
	cat >"$tmp/$suite.work" <<-EOF
		go 1.25.0

		use (
			./$suite
			$pd
		)
	EOF
	log "$suite: $mod@$ver" >&2
	echo "$p"
}

# parse <log>: "STATUS name" for every test go test -v reported, a test that
# crashed the binary (a panic, the timeout) as FAIL; the crashed tests' names
# go to <log>.crashed. A test that panics is reported FAIL just before the
# panic; a panic outside any test's goroutine, or the timeout, is blamed on
# the tests started and not ended.
parse() {
	awk -v crashed="$1.crashed" '
		function result(name, s) { if (!(name in st)) order[++n] = name; st[name] = s }
		/^=== RUN / { started[$3] = 1; next }
		/^[[:space:]]*--- (PASS|FAIL|SKIP): / {
			s = $2; sub(":", "", s); result($3, s); last = $3; delete started[$3]; next
		}
		/^panic: / && !crash {
			crash = 1
			if (!/test timed out/ && last != "" && st[last] == "FAIL") { print last > crashed; next }
			for (t in started) { result(t, "FAIL"); print t > crashed }
		}
		END { for (i = 1; i <= n; i++) print st[order[i]], order[i] }
	' "$1"
}

# runmode <suite> <pkgdir> <mode> <skip-regexp> [<run-regexp> <name>]:
# runs the suite (the tests run matches), reruns it without the tests that
# crashed the binary (at most 3 times); leaves "STATUS name" lines in
# $tmp/<suite>.<name>.final (name: the mode).
runmode() {
	local suite=$1 p=$2 mode=$3 skip=$4 run=${5:-} tags= try
	local out=$tmp/$suite.${6:-$mode}
	[ "$mode" = plain ] || [ "$mode" = wrap ] || tags="-tags pooldriver_dialect"
	: >"$out.res"
	: >"$out.crashes"
	for try in 1 2 3 4; do
		local start=$SECONDS rc=0
		(cd "$p" && GOWORK=$tmp/$suite.work POOLDRIVER_UPSTREAM_MODE=$mode \
			$GO test -race -count=1 -timeout "$timeout" -v $tags ${run:+-run "$run"} ${skip:+-skip "$skip"} . >"$out.log.$try" 2>&1) || rc=$?
		echo "$((SECONDS - start))" >>"$out.secs"
		rm -f "$out.log.$try.crashed"
		parse "$out.log.$try" >"$out.res.$try"
		if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$out.res.$try"; then
			tail -30 "$out.log.$try" >&2
			echo "$suite/$mode: go test failed without a failing test (above; log $out.log.$try)" >&2
			return 1
		fi
		# Results of tests a crash cut short are superseded by the rerun.
		cat "$out.res.$try" >>"$out.res"
		[ -s "$out.log.$try.crashed" ] || break
		cat "$out.log.$try.crashed" >>"$out.crashes"
		if [ $try = 4 ]; then
			echo "$suite/$mode: still crashing after 3 reruns" >&2
			return 1
		fi
		local top
		top=$(sed 's|/.*||' "$out.crashes" | sort -u | paste -sd'|')
		log "$suite/$mode: crashed in $(paste -sd' ' "$out.log.$try.crashed"); rerun without ^($top)\$" >&2
		skip="${skip:+$skip|}^($top)\$"
	done
	# The last word on each test: a crash's FAIL, else the latest run's.
	awk 'FILENAME == ARGV[1] { crash[$1] = 1; next } { st[$2] = $1; if (!($2 in o)) o[$2] = ++n } END {
		for (t in o) k[o[t]] = t
		for (i = 1; i <= n; i++) { t = k[i]; print (t in crash ? "FAIL" : st[t]), t }
	}' "$out.crashes" "$out.res" >"$out.final"
	echo "$skip" >"$out.skip"
}

# judge <suite> <mode>: compares a pooldriver mode with the baseline;
# prints the differences, returns 1 on any not listed in KNOWN_DIFFERENCES.
judge() {
	local suite=$1 mode=$2
	awk -v suite="$suite" -v mode="$mode" '
		FILENAME == ARGV[1] {
			if ($0 ~ /^[[:space:]]*(#|$)/) next
			if ($1 != suite) next
			nm = split($2, ms, ","); ok = 0
			for (i = 1; i <= nm; i++) if (ms[i] == "*" || ms[i] == mode) ok = 1
			if (!ok) next
			why = $0; sub(/^[[:space:]]*[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]*/, "", why)
			listed[$3] = why; next
		}
		FILENAME == ARGV[2] { base[$2] = $1; next }
		# ARGV[3]: the results of the mode
		{ got[$2] = $1; if ($1 == "FAIL") for (p = $2; sub(/\/[^\/]*$/, "", p);) failkid[p] = 1 }
		function known(t,   p) {
			if (t in listed) return listed[t]
			for (p = t; sub(/\/[^\/]*$/, "", p);) if ((p "/*") in listed) return listed[p "/*"]
			return ""
		}
		END {
			bad = 0
			for (t in got) {
				if (got[t] == "PASS" || (t in failkid)) continue
				if (got[t] == "SKIP" && base[t] != "PASS") continue
				if (got[t] == "FAIL" && base[t] == "FAIL") { printf "  %-58s fails plain too\n", t; continue }
				w = known(t)
				what = got[t] == "FAIL" ? "FAIL" : "SKIP (passes plain)"
				if (w != "") { printf "  %-58s %s, known: %s\n", t, what, w; continue }
				printf "  %-58s %s  <-- NEW\n", t, what; bad = 1
			}
			# A test cut short by a known failure of its parent (a t.Fatal on
			# the parent stops the later subtests) is part of that failure.
			for (t in got) if (got[t] == "FAIL" && !(t in failkid) && known(t) != "") for (p = t; sub(/\/[^\/]*$/, "", p);) cutby[p] = t
			for (t in base) {
				if (base[t] != "PASS" || (t in got)) continue
				for (p = t; sub(/\/[^\/]*$/, "", p) && !(p in cutby););
				if (p in cutby) { printf "  %-58s did not run, after the known failure of %s\n", t, cutby[p]; continue }
				printf "  %-58s did not run (passes plain)  <-- NEW\n", t; bad = 1
			}
			for (t in listed) if (t !~ /\/\*$/ && (t in got) && got[t] == "PASS") printf "  %-58s passes: KNOWN_DIFFERENCES entry unused\n", t
			exit bad
		}
	' "$known" "$tmp/$suite.plain.final" "$tmp/$suite.$mode.final" | sort
}

# counts <results>: pass/fail/skip of the tests without subtests, and the
# failures of tests whose subtests all passed (a failure of their own).
counts() {
	awk '{ st[$2] = $1; for (p = $2; sub(/\/[^\/]*$/, "", p);) { parent[p] = 1; if ($1 == "FAIL") failkid[p] = 1 } }
		END {
			for (t in st) if (!(t in parent) || st[t] == "FAIL" && !(t in failkid)) c[st[t]]++
			printf "%5d %5d %5d", c["PASS"], c["FAIL"], c["SKIP"]
		}' "$1"
}

# secs <file>: the seconds of a mode's runs, reruns included.
secs() { awk '{ s += $1 } END { print s }' "$1"; }

check_servers
status=0
summary=()
for suite in ${suites[@]+"${suites[@]}"}; do
	p=$(prepare "$suite")
	log "$suite/plain (baseline)"
	runmode "$suite" "$p" plain ""
	# What crashes the plain driver on this machine is skipped everywhere.
	baseskip=$(cat "$tmp/$suite.plain.skip")
	summary+=("$(printf '%-6s %-8s %s %6ss' "$suite" plain "$(counts "$tmp/$suite.plain.final")" "$(secs "$tmp/$suite.plain.secs")")")
	for mode in $modes; do
		log "$suite/$mode"
		runmode "$suite" "$p" "$mode" "$baseskip"
		verdict=ok
		if ! judge "$suite" "$mode" | tee "$tmp/$suite.$mode.judge"; then
			# Once more, those tests alone: a timing test that failed under
			# load is told from one that fails every time.
			again=$(sed -n 's/^ *\([^ ]*\) .*<-- NEW$/\1/p' "$tmp/$suite.$mode.judge" | sed 's|/.*||' | sort -u | paste -sd'|')
			log "$suite/$mode: rerun once: ^($again)\$"
			runmode "$suite" "$p" "$mode" "$baseskip" "^($again)\$" "$mode.rerun"
			awk -v again="^($again)(/|\$)" 'FILENAME == ARGV[1] || $2 !~ again' \
				"$tmp/$suite.$mode.rerun.final" "$tmp/$suite.$mode.final" >"$tmp/$suite.$mode.merged"
			mv "$tmp/$suite.$mode.merged" "$tmp/$suite.$mode.final"
			cat "$tmp/$suite.$mode.rerun.secs" >>"$tmp/$suite.$mode.secs"
			if judge "$suite" "$mode"; then
				verdict="ok after a rerun of $again"
			else
				verdict="NEW DIFFERENCES"
				status=1
			fi
		fi
		summary+=("$(printf '%-6s %-8s %s %6ss  %s' "$suite" "$mode" "$(counts "$tmp/$suite.$mode.final")" "$(secs "$tmp/$suite.$mode.secs")" "$verdict")")
	done
	[ -z "$baseskip" ] || log "$suite: skipped in every mode, crashing the plain driver here: $baseskip"
done

echo
printf '%-6s %-8s %5s %5s %5s %7s\n' suite mode pass fail skip time
printf '%s\n' ${summary[@]+"${summary[@]}"}
[ $status = 0 ] || echo "upstream suites: failures under pooldriver that the plain driver does not show and KNOWN_DIFFERENCES does not list (logs: run with UPSTREAM_KEEP=1)" >&2
exit $status
