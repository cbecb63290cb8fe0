#!/usr/bin/env bash
# The H200 benchmarks in one command (for the device tool):
#
#     bash benchmarks/run_h200.sh                     # the GEMM LLM suite (matmul.py), bf16 then fp16
#     bash benchmarks/run_h200.sh --dtypes bfloat16   # any matmul.py option is passed on
#     bash benchmarks/run_h200.sh matmul [options]    # the same, named (or: gemm)
#     bash benchmarks/run_h200.sh memory [options]    # the memory-bound suite (memory_bound.py)
#     bash benchmarks/run_h200.sh all                 # both, each shortened to fit one 600 s call
#
# The first argument picks the suite (matmul, memory or all; default matmul; gemm is matmul); the others go to that
# suite's script (`all` takes none: run the suites separately to pass options).
#
# Installs nothing from a registry (the device image has torch, Triton and CUDA, and no network): the
# package is imported from src/ through PYTHONPATH. For `memory` and `all`, a Liger-Kernel wheel in
# benchmarks/wheels/ (put there by benchmarks/fetch_wheels.sh; ignored by git, so the device call must
# name it: carry=["benchmarks/wheels"]) is installed with pip --no-index --no-deps into /tmp/bench_site;
# without it the Liger column reads "unavailable". Everything written lands in "$OUT" (default ./out):
#   $OUT/matmul.log, $OUT/matmul_<date>.json, $OUT/matmul_<date>_<time>.db
#   $OUT/memory_bound.log, $OUT/memory_bound_<date>.json (and a tuning DB if the tuned pass ran)
# and a measured, non-dry JSON is also copied to benchmarks/results/h200/ in this checkout (on the device
# machine that copy does not come back: copy $OUT's JSON into benchmarks/results/h200/ where you commit).
#
# Each suite's Python gets SIGINT at its time limit: it then skips what is left, writes the JSON and
# prints the table all the same (SIGKILL 30 s later). Limits, in seconds:
#   gemm alone:   BENCH_TIMEOUT_GEMM, else BENCH_TIMEOUT, else 540
#   memory alone: BENCH_TIMEOUT_MEMORY, else BENCH_TIMEOUT, else 400 (the script stops starting cases 60 s earlier)
#   all:          BENCH_TIMEOUT_GEMM (default 270) then BENCH_TIMEOUT_MEMORY (default 250)
set -uo pipefail
cd "$(dirname "$0")/.."
SUITE=gemm
case "${1:-}" in
  gemm|memory|all) SUITE="$1"; shift ;;
  matmul) SUITE=gemm; shift ;;
  -*|"") ;;
  *) echo "run_h200.sh: unknown suite '$1' (expected matmul, memory or all, then that suite's options)" >&2; exit 2 ;;
esac
if [ "$SUITE" = all ] && [ $# -gt 0 ]; then
  echo "run_h200.sh: 'all' takes no options (the suites' options differ): run 'gemm ...' and 'memory ...' separately" >&2
  exit 2
fi
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-$(command -v python3 || command -v python)}"  # the device image names it python3

header() {  # nvidia-smi, versions and the device, at the top of each suite's log
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) commit: $(git rev-parse --short HEAD 2>/dev/null || echo none) suite: $1"
  nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
  "$PY" - <<'PY'
import sys
import warpsmith
from warpsmith.targets import current_device, versions
from warpsmith.targets.detect import driver_version
dev = current_device()
print("warpsmith from", warpsmith.__file__)
print("versions", {**versions(), "driver": driver_version()})
print("device", dev.kind, dev.name, "target", dev.target.name, "measured", dev.measured)
if not dev.measured:
    print("WARNING: no GPU detected: timings will be predicted (gemm) or absent (memory), not measured", file=sys.stderr)
elif dev.target.name != "h200":
    print(f"WARNING: this is {dev.name}, not an H200: results belong in benchmarks/results/{dev.target.name}/", file=sys.stderr)
PY
}

install_liger() {  # Liger-Kernel (pure Python) from a carried wheel, never from the network
  local whl
  whl=$(ls benchmarks/wheels/liger_kernel-*.whl 2>/dev/null | tail -n 1)
  if [ -z "$whl" ]; then
    echo "liger: no wheel in benchmarks/wheels/ (run benchmarks/fetch_wheels.sh here and carry benchmarks/wheels): Liger column unavailable"
    return 0
  fi
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/bench_site "$whl"; then
    echo "liger: installed $(basename "$whl") into /tmp/bench_site"
  else
    echo "liger: pip install of $whl failed: Liger column unavailable"
  fi
}

copy_results() {  # only measured, non-dry results are results (a CPU dry run must not land in results/h200/)
  "$PY" - "$OUT" benchmarks/results/h200 "$1" <<'PY'
import json, shutil, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob(f"{sys.argv[3]}_*.json")):
    doc = json.loads(f.read_text())
    if doc.get("dry_run") is False and doc.get("timing_kind") == "measured":
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, sys.argv[2])
        print(f"copied {f} to {sys.argv[2]}/")
    else:
        print(f"not copied to {sys.argv[2]}/ (dry run or not measured): {f}")
PY
}

run_gemm() {  # $1: time limit; then matmul.py's options
  local limit="$1"; shift
  local log="$OUT/matmul.log"
  header gemm 2>&1 | tee "$log"
  timeout -s INT -k 30 "$limit" "$PY" benchmarks/matmul.py --out "$OUT" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  copy_results matmul >>"$log" 2>&1
  return "$rc"
}

run_memory() {  # $1: time limit; then memory_bound.py's options (a --total-time given there wins)
  local limit="$1"; shift
  local log="$OUT/memory_bound.log"
  { header memory; install_liger; } 2>&1 | tee "$log"
  # install_liger ran in the pipeline's subshell: export its PYTHONPATH here too
  if [ -d /tmp/bench_site/liger_kernel ]; then export PYTHONPATH="/tmp/bench_site:$PYTHONPATH"; fi
  local start=$(( limit > 120 ? limit - 60 : limit / 2 ))  # no case starts after this
  timeout -s INT -k 30 "$limit" "$PY" benchmarks/memory_bound.py --out "$OUT" --total-time "$start" "$@" 2>&1 \
    | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  copy_results memory_bound >>"$log" 2>&1
  return "$rc"
}

case "$SUITE" in
  gemm)   run_gemm "${BENCH_TIMEOUT_GEMM:-${BENCH_TIMEOUT:-540}}" "$@"; exit $? ;;
  memory) run_memory "${BENCH_TIMEOUT_MEMORY:-${BENCH_TIMEOUT:-400}}" "$@"; exit $? ;;
  all)
    tg="${BENCH_TIMEOUT_GEMM:-270}"
    run_gemm "$tg" --total-time $(( tg > 120 ? tg - 60 : tg / 2 )); rc1=$?
    run_memory "${BENCH_TIMEOUT_MEMORY:-250}"; rc2=$?
    exit $(( rc1 > rc2 ? rc1 : rc2 )) ;;
esac
