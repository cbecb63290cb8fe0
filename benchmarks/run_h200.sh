#!/usr/bin/env bash
# The H200 benchmarks in one command (for the device tool), within one time budget:
#
#     bash benchmarks/run_h200.sh                     # the GEMM LLM suite (matmul.py), bf16 and fp16
#     bash benchmarks/run_h200.sh --dtypes bfloat16   # any matmul.py option is passed on
#     bash benchmarks/run_h200.sh gemm [options]      # the same, named
#     bash benchmarks/run_h200.sh memory [options]    # the memory-bound suite (memory_bound.py)
#     bash benchmarks/run_h200.sh attention [options] # prefill attention (attention.py) vs SDPA flash/cuDNN, FlexAttention
#     bash benchmarks/run_h200.sh decode [options]    # decode, paged decode, MLA (attention_decode.py) vs copy bandwidth
#     bash benchmarks/run_h200.sh lowprec [options]   # fp8/int8 scaled GEMM, quantization (lowprec.py) vs torch._scaled_mm/_int_mm
#     bash benchmarks/run_h200.sh conv [options]      # convolutions (conv.py) vs cuDNN, fused conv+bn+relu vs eager
#     bash benchmarks/run_h200.sh kernelbench [options]  # KernelBench level 2 (kernelbench_speed.py) vs eager and torch.compile;
#                                                        # needs carry=["benchmarks/kernelbench_src"] (fetched with its --fetch)
#     bash benchmarks/run_h200.sh all                 # gemm and memory, sharing the budget
#     bash benchmarks/run_h200.sh calibrate           # the calibration microbenchmarks (calibrate.py) alone
#     BENCH_CALIBRATE=1 bash benchmarks/run_h200.sh gemm   # calibrate first, then the suite in the time left
#     bash benchmarks/run_h200.sh --print-plan [gemm|memory|all]   # the steps' time limits; runs nothing
#
# The first argument picks the suite (matmul, memory, attention, decode, lowprec, conv, calibrate or all; default matmul; gemm is matmul); the others go to that
# suite's script (`all` takes none: run the suites separately to pass options).
#
# Time: the whole script, from its first line to its last, ends within BENCH_TOTAL seconds (default
# 540, leaving 60 s of the device tool's 600 s for the machine's start and the transfers). It runs
# steps in order, each under `timeout`: SIGINT at the step's limit, SIGKILL BENCH_GRACE seconds
# later (default 10):
#   header    nvidia-smi, versions, the device                 limit BENCH_HEADER_S (30)
#   gpucheck  only with BENCH_GPUCHECK=1: "${GPUCHECK_CMD[@]}"  limit BENCH_GPUCHECK_S (60)
#   calibrate with BENCH_CALIBRATE=1 or the calibrate suite: calibrate.py  limit BENCH_CALIBRATE_S (90); it
#             starts no microbenchmark after --time-limit (the limit less 30 s) and each is capped at 300 ms
#             of kernel time, so the compiles dominate (15 kernels; about 20 s compiled for sm_90 here, CPU)
#   install   memory and all: unpack the Liger wheel           limit BENCH_INSTALL_S (15)
#   gemm      matmul.py                                      the time left (all: BENCH_GEMM_SHARE %, 50)
#   memory    memory_bound.py                                  the time left
#   attention attention.py                                     the time left
#   decode    attention_decode.py                              the time left
#   lowprec   lowprec.py                                       the time left
#   conv      conv.py                                          the time left
#   kernelbench kernelbench_speed.py                           the time left
#   copy      measured JSON into benchmarks/results/h200/      limit BENCH_COPY_S (10)
# A step's limit is computed when it starts, from the time left: the worst case (limit + grace + 1 s
# of rounding) of every later step is kept back, so time a step did not use goes to the suites. A
# suite's script gets --total-time 60 s before its limit (no new shape or case starts after it; an
# option given here wins); at SIGINT it skips what is left, writes its JSON and prints its table.
# `--print-plan` prints each step's limit as if every earlier step used its whole limit and grace,
# and the sum (worst_case=...): tests/benchmarks/test_device_budget.py checks it against 540 s.
# None of this has run on a GPU yet: the grace (time to write the JSON after SIGINT) is a guess.
#
# Installs nothing from a registry (the device image has torch, Triton and CUDA, and no network, maybe
# no pip): the package is imported from src/ through PYTHONPATH. For `memory` and `all`, the
# Liger-Kernel wheel in benchmarks/wheels/ (BENCH_WHEELS; put there by benchmarks/fetch_wheels.sh;
# ignored by git, so the device call must name it: carry=["benchmarks/wheels"]) is unpacked (a wheel is
# a zip; Liger is pure Python) by benchmarks/unpack_wheel.py into /tmp/bench_site (BENCH_SITE), which goes on
# PYTHONPATH; without it the Liger column reads "unavailable". Everything written lands in "$OUT"
# (default ./out):
#   $OUT/run_h200.log (every step), $OUT/matmul.log, $OUT/matmul_<date>.json, $OUT/matmul_<date>_<time>.db
#   $OUT/memory_bound.log, $OUT/memory_bound_<date>.json (and a tuning DB if the tuned pass ran)
#   $OUT/attention.log, $OUT/attention_<date>.json
#   $OUT/attention_decode.log, $OUT/attention_decode_<date>.json
#   $OUT/conv.log, $OUT/conv_<date>.json
# and a measured, non-dry JSON is also copied to benchmarks/results/h200/ in this checkout (on the device
# machine that copy does not come back: copy $OUT's JSON into benchmarks/results/h200/ where you commit).
# Exit status: the highest of the suites' and gpucheck's (124: a limit was reached; 137: killed after it).
set -uo pipefail
cd "$(dirname "$0")/.."
PLAN=0
if [ "${1:-}" = --print-plan ]; then PLAN=1; shift; fi
SUITE=gemm
case "${1:-}" in
  gemm|memory|attention|decode|lowprec|conv|kernelbench|calibrate|all) SUITE="$1"; shift ;;
  matmul) SUITE=gemm; shift ;;
  -*|"") ;;
  *) echo "run_h200.sh: unknown suite '$1' (expected matmul, memory, attention, decode, lowprec, conv, kernelbench, calibrate or all, then that suite's options)" >&2; exit 2 ;;
esac
if [ "$SUITE" = all ] && [ $# -gt 0 ]; then
  echo "run_h200.sh: 'all' takes no options (the suites' options differ): run 'gemm ...' and 'memory ...' separately" >&2
  exit 2
fi

# ---------------------------------------------------------------------------------------- the budget
TOTAL="${BENCH_TOTAL:-540}"      # seconds for the whole script
GRACE="${BENCH_GRACE:-10}"       # SIGKILL this long after a step's SIGINT
SLACK=1                          # $SECONDS counts whole seconds: one more per step
SHARE="${BENCH_GEMM_SHARE:-50}"  # all: percent of the suites' time for gemm (memory gets the rest)
TAIL=60                          # a suite starts nothing new in the last TAIL s of its limit
STEPS=(header)
[ "${BENCH_GPUCHECK:-0}" = 1 ] && STEPS+=(gpucheck)
[ "${BENCH_CALIBRATE:-0}" = 1 ] && [ "$SUITE" != calibrate ] && STEPS+=(calibrate)
case "$SUITE" in
  gemm)   STEPS+=(gemm copy) ;;
  memory) STEPS+=(install memory copy) ;;
  attention) STEPS+=(attention copy) ;;
  decode) STEPS+=(decode copy) ;;
  lowprec) STEPS+=(lowprec copy) ;;
  conv) STEPS+=(conv copy) ;;
  kernelbench) STEPS+=(kernelbench copy) ;;
  calibrate) STEPS+=(calibrate copy) ;;
  all)    STEPS+=(install gemm memory copy) ;;
esac

fixed_limit() {  # a fixed step's limit; -1 for a suite (which gets the time left)
  case "$1" in
    header) echo "${BENCH_HEADER_S:-30}" ;;
    gpucheck) echo "${BENCH_GPUCHECK_S:-60}" ;;
    calibrate) echo "${BENCH_CALIBRATE_S:-90}" ;;
    install) echo "${BENCH_INSTALL_S:-15}" ;;
    copy) echo "${BENCH_COPY_S:-10}" ;;
    *) echo -1 ;;
  esac
}

limit_of() {  # STEP ELAPSED: STEP's limit when it starts ELAPSED s into the script (0: no time left)
  local step="$1" after=0 suites_after=0 seen=0 s f limit
  for s in "${STEPS[@]}"; do  # keep back the worst case of every later step (a suite: its grace)
    if (( seen )); then
      f=$(fixed_limit "$s")
      if (( f < 0 )); then suites_after=$(( suites_after + 1 )); f=0; fi
      after=$(( after + f + GRACE + SLACK ))
    fi
    [ "$s" = "$step" ] && seen=1
  done
  local room=$(( TOTAL - $2 - after - GRACE - SLACK ))
  f=$(fixed_limit "$step")
  if (( f >= 0 )); then limit=$(( f < room ? f : room ))
  elif (( suites_after )); then limit=$(( room * SHARE / 100 ))
  else limit=$room
  fi
  echo $(( limit > 0 ? limit : 0 ))
}

start_by() { echo $(( $1 > 2 * TAIL ? $1 - TAIL : $1 / 2 )); }  # a suite's --total-time

if (( PLAN )); then  # each step's limit if every earlier one used its limit and grace: the worst case
  echo "plan suite=$SUITE total=$TOTAL grace=$GRACE slack=$SLACK"
  t=0
  for s in "${STEPS[@]}"; do
    l=$(limit_of "$s" "$t")
    extra=""; (( $(fixed_limit "$s") < 0 )) && extra=" total_time=$(start_by "$l")"
    echo "step $s limit=$l grace=$GRACE slack=$SLACK$extra"
    (( l > 0 )) && t=$(( t + l + GRACE + SLACK ))
  done
  echo "worst_case=$t"
  exit 0
fi

# ---------------------------------------------------------------------------------------- the steps
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-$(command -v python3 || command -v python)}"  # the device image names it python3
export PY
SITE="${BENCH_SITE:-/tmp/bench_site}"
WHEELS="${BENCH_WHEELS:-benchmarks/wheels}"
# The optional pre-step (off unless BENCH_GPUCHECK=1; its limit BENCH_GPUCHECK_S): a static compile check.
GPUCHECK_CMD=("$PY" -m warpsmith.cli.main gpucheck --target h200 --json "$OUT/gpucheck.json")
RC=0

run_step() {  # STEP LIMIT LOG CMD...: CMD under STEP's limit, its output teed to run_h200.log and LOG
  local step="$1" limit="$2" log="$3"; shift 3
  if (( limit < 1 )); then
    echo "== step $step: skipped (no time left: ${SECONDS} s of ${TOTAL} s used)" | tee -a "$OUT/run_h200.log"
    return 0
  fi
  echo "== step $step: limit ${limit} s, grace ${GRACE} s (${SECONDS} s of ${TOTAL} s used)" | tee -a "$OUT/run_h200.log" "$log"
  timeout -s INT -k "$GRACE" "$limit" "$@" 2>&1 | tee -a "$OUT/run_h200.log" "$log"
  local rc=${PIPESTATUS[0]}
  if (( rc )); then echo "== step $step: exit status $rc" | tee -a "$OUT/run_h200.log" "$log"; fi
  return "$rc"
}

header() {  # nvidia-smi, versions and the device
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
export -f header

step() {  # STEP [suite options]: run one step of STEPS
  local s="$1"; shift
  local limit; limit=$(limit_of "$s" "$SECONDS")
  case "$s" in
    header) run_step header "$limit" "$OUT/header.log" bash -c 'header "$1"' _ "$SUITE" ;;
    gpucheck)  # its status counts in the script's, but the suites run whatever it says
      run_step gpucheck "$limit" "$OUT/gpucheck.log" "${GPUCHECK_CMD[@]}" || RC=$(( $? > RC ? $? : RC )) ;;
    calibrate)  # measured peaks for targets/calibration.py; its status counts, the suites run anyway
      run_step calibrate "$limit" "$OUT/calibrate.log" "$PY" benchmarks/calibrate.py --target h200 --out "$OUT" \
        --time-limit $(( limit > 60 ? limit - 30 : limit / 2 )) || RC=$(( $? > RC ? $? : RC )) ;;
    install)  # Liger-Kernel (pure Python) from a carried wheel, never from the network, no pip
      local whl; whl=$(ls "$WHEELS"/liger_kernel-*.whl 2>/dev/null | tail -n 1)
      if [ -z "$whl" ]; then
        echo "liger: no wheel in $WHEELS/ (run benchmarks/fetch_wheels.sh here and carry benchmarks/wheels): Liger column unavailable" \
          | tee -a "$OUT/run_h200.log"
      elif run_step install "$limit" "$OUT/install.log" "$PY" benchmarks/unpack_wheel.py --dest "$SITE" "$whl"; then
        export PYTHONPATH="$SITE:$PYTHONPATH"
      else
        echo "liger: unpacking $whl failed: Liger column unavailable" | tee -a "$OUT/run_h200.log"
      fi ;;
    gemm|memory|attention|decode|lowprec|conv|kernelbench)
      local script=matmul; [ "$s" = memory ] && script=memory_bound; [ "$s" = attention ] && script=attention
      [ "$s" = decode ] && script=attention_decode
      [ "$s" = lowprec ] && script=lowprec
      [ "$s" = conv ] && script=conv
      [ "$s" = kernelbench ] && script=kernelbench_speed
      cat "$OUT/header.log" >"$OUT/$script.log" 2>/dev/null
      run_step "$s" "$limit" "$OUT/$script.log" "$PY" "benchmarks/$script.py" --out "$OUT" \
        --total-time "$(start_by "$limit")" "$@" || RC=$(( $? > RC ? $? : RC )) ;;
    copy)  # only measured, non-dry results are results (a CPU dry run must not land in results/h200/)
      run_step copy "$limit" "$OUT/copy.log" "$PY" - "$OUT" benchmarks/results/h200 <<'PY'
import json, shutil, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    try:
        doc = json.loads(f.read_text())
    except ValueError as exc:
        print(f"not copied (unreadable: {exc}): {f}")
        continue
    if doc.get("benchmark") not in ("matmul", "memory_bound", "attention", "attention_decode", "lowprec", "conv",
                                   "kernelbench", "calibration"):
        continue
    if doc.get("dry_run") is False and doc.get("timing_kind") == "measured":
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, sys.argv[2])
        print(f"copied {f} to {sys.argv[2]}/")
    else:
        print(f"not copied to {sys.argv[2]}/ (dry run or not measured): {f}")
PY
      ;;
  esac
}

rm -f "$OUT"/{run_h200,header,gpucheck,calibrate,install,copy}.log  # this run's logs only (the suites' are rewritten)
for s in "${STEPS[@]}"; do step "$s" "$@"; done
echo "== run_h200.sh $SUITE: done in ${SECONDS} s of ${TOTAL} s, exit status $RC" | tee -a "$OUT/run_h200.log"
exit "$RC"
