#!/usr/bin/env bash
# Every suite in one device call, for a session that is lent an H200 for a short time:
#
#     bash benchmarks/fetch_wheels.sh      # here, once: Liger-Kernel and z3-solver into benchmarks/wheels/
#     run(command="bash benchmarks/h200_session.sh", carry=["benchmarks/wheels"], timeout_s=590)
#
# First every wheel in benchmarks/wheels/ (BENCH_WHEELS) is unpacked into BENCH_SITE and put on
# PYTHONPATH (z3-solver: the prover imports it and the device image has none).
# Runs benchmarks/run_h200.sh once per suite, each with its share of SESSION_TOTAL seconds (default
# 540) as its BENCH_TOTAL, in the order below (the cheapest correctness signal first), then packs
# what they wrote into at most eight files in $OUT (the device tool brings back eight):
#   $OUT/session.log        every suite's run_h200.log, in order, and the final table
#   $OUT/results.tgz        everything the suites wrote (logs, JSON, tuning DBs)
#   $OUT/<suite>_<date>.json  the measured JSON of up to five suites, for benchmarks/results/h200/
# SESSION_SUITES picks the suites and their shares: "suite:seconds ..." (a suite's seconds include its
# header step). Exit status: the highest of the suites'.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL="${OUT:-$PWD/out}"
WORK="${SESSION_WORK:-/tmp/h200_session}"
SUITES="${SESSION_SUITES:-gemm:120 memory:90 attention:85 decode:75 lowprec:80 conv:70}"
rm -rf "$WORK"; mkdir -p "$WORK" "$FINAL"
RC=0
SITE="${BENCH_SITE:-/tmp/bench_site}"
WHEELS=("${BENCH_WHEELS:-benchmarks/wheels}"/*.whl)
if [ -f "${WHEELS[0]}" ] && "${PYTHON:-python3}" benchmarks/unpack_wheel.py --dest "$SITE" "${WHEELS[@]}" | tee -a "$FINAL/session.log"; then
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "no wheels unpacked from ${BENCH_WHEELS:-benchmarks/wheels}/ (run benchmarks/fetch_wheels.sh here and carry the folder)" | tee -a "$FINAL/session.log"
fi
for item in $SUITES; do
  suite="${item%%:*}"; secs="${item##*:}"
  args=()
  [ "$suite" = gemm ] && args=(--dtypes bfloat16 --groups llm)
  echo "=================== $suite: ${secs} s (${SECONDS} s used)" | tee -a "$FINAL/session.log"
  OUT="$WORK/$suite" BENCH_TOTAL="$secs" bash benchmarks/run_h200.sh "$suite" "${args[@]}" >"$WORK/$suite.stdout" 2>&1
  rc=$?; RC=$(( rc > RC ? rc : RC ))
  cat "$WORK/$suite/run_h200.log" >>"$FINAL/session.log" 2>/dev/null || cat "$WORK/$suite.stdout" >>"$FINAL/session.log"
  echo "=================== $suite: exit status $rc (${SECONDS} s used)" | tee -a "$FINAL/session.log"
done
tar czf "$FINAL/results.tgz" -C "$WORK" . 2>/dev/null
n=0
for f in "$WORK"/*/*.json; do
  [ -f "$f" ] || continue
  case "$(basename "$f")" in gpucheck.json) continue ;; esac
  (( n < 5 )) || break
  cp "$f" "$FINAL/" && n=$(( n + 1 ))
done
echo "=================== the tables (tail of each suite's log)"
for item in $SUITES; do
  suite="${item%%:*}"
  echo "---- $suite"
  tail -n 25 "$WORK/$suite.stdout" 2>/dev/null
done
echo "== h200_session.sh: done in ${SECONDS} s, exit status $RC"
exit "$RC"
