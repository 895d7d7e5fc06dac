#!/usr/bin/env python3
"""breakdown.py: where the instructions of one operation go, per package and
per function, for two benchmarks side by side (issue 39).

    bench/breakdown.py BIN BENCH-A BENCH-B [N]

runs each benchmark of the test binary BIN under callgrind at N and 2N
iterations (GOMAXPROCS=1, GOGC=off, no async preemption, as
bench/instructions.sh does), takes each function's own instructions (not
those of what it calls) at 2N minus those at N, divided by N, and prints the
packages and the functions whose cost differs most between A and B.
Recursion levels (callgrind's f'2) are folded into f. Needs valgrind.

Example (pooldriver against tuned database/sql, PostgreSQL, 1 goroutine):

    (cd bench && go test -c -o /tmp/b.test .)
    b='^BenchmarkRealServerPointSelect$/^postgres$/^goroutines=1$'
    bench/breakdown.py /tmp/b.test "$b/^pooldriver$" "$b/^sql-tuned$" 40000
"""
import collections
import os
import re
import subprocess
import sys
import tempfile


def run(binary, bench, n, out):
    env = dict(os.environ, GOMAXPROCS="1", GOGC="off", GODEBUG="asyncpreemptoff=1")
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, binary,
                    "-test.run", "^$", "-test.bench", bench, "-test.benchtime", "%dx" % n],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", out],
                          capture_output=True, text=True, check=True).stdout
    own = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*(\[.*\])?$", line)
        if not m or ":" not in m.group(2):
            continue
        fn = m.group(2).split(":", 1)[1]
        fn = re.sub(r"\s*\([\d,]+x\)", "", fn).strip()
        fn = re.sub(r"'\d+$", "", fn)
        own[fn] += int(m.group(1).replace(",", ""))
    return own


def per_op(binary, bench, n, tmp):
    a = run(binary, bench, n, os.path.join(tmp, "a"))
    b = run(binary, bench, 2 * n, os.path.join(tmp, "b"))
    return {k: (b[k] - a[k]) / n for k in set(a) | set(b)}


def package(fn):
    fn = re.sub(r"\(.*?\)\.", "", fn)
    m = re.match(r"([\w./-]+?)\.\w", fn)
    return m.group(1) if m else fn


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    binary, bench_a, bench_b = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) == 5 else 40000
    with tempfile.TemporaryDirectory() as tmp:
        a = per_op(binary, bench_a, n, tmp)
        b = per_op(binary, bench_b, n, tmp)
    print("instructions per operation: A %.0f, B %.0f (A/B %.3f)" % (sum(a.values()), sum(b.values()),
                                                                    sum(a.values()) / sum(b.values())))
    pa, pb = collections.Counter(), collections.Counter()
    for k, v in a.items():
        pa[package(k)] += v
    for k, v in b.items():
        pb[package(k)] += v
    print("\n| package | A | B | A - B |\n|---|---|---|---|")
    for k in sorted(set(pa) | set(pb), key=lambda k: -abs(pa[k] - pb[k]))[:15]:
        print("| %s | %.0f | %.0f | %+.0f |" % (k, pa[k], pb[k], pa[k] - pb[k]))
    print("\n| function | A | B | A - B |\n|---|---|---|---|")
    for k in sorted(set(a) | set(b), key=lambda k: -abs(a.get(k, 0) - b.get(k, 0)))[:30]:
        print("| %s | %.0f | %.0f | %+.0f |" % (k, a.get(k, 0), b.get(k, 0), a.get(k, 0) - b.get(k, 0)))


if __name__ == "__main__":
    main()
