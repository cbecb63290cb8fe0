#!/usr/bin/env bash
# The GEMM LLM-suite benchmark on an H200, in one command (for the device tool):
#
#     bash benchmarks/run_h200.sh                 # whole suite, bf16 then fp16
#     bash benchmarks/run_h200.sh --dtypes bfloat16   # any gemm_llm.py option is passed on
#
# Installs nothing (the device image has torch, Triton and CUDA, and no network): the package
# is imported from src/ through PYTHONPATH. Everything it writes lands in "$OUT" (default ./out):
#   $OUT/gemm_llm.log                  the whole log (nvidia-smi, versions, progress, the table)
#   $OUT/gemm_llm_<date>.json          the results;  $OUT/gemm_llm_<date>_<time>.db  the tuning DB
# and a measured, non-dry JSON is also copied to benchmarks/results/h200/ in this checkout (on the device machine
# that copy does not come back: copy $OUT's JSON into benchmarks/results/h200/ where you commit).
#
# Python gets SIGINT at BENCH_TIMEOUT seconds (default 540, under the device tool's 600 s limit):
# it then skips the remaining shapes, writes the JSON and prints the table all the same.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
LOG="$OUT/gemm_llm.log"

{
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)"
  nvidia-smi || echo "nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
  python - <<'PY'
import sys
import warpsmith
from warpsmith.targets import current_device, versions
from warpsmith.targets.detect import driver_version
dev = current_device()
print("warpsmith from", warpsmith.__file__)
print("versions", {**versions(), "driver": driver_version()})
print("device", dev.kind, dev.name, "target", dev.target.name, "measured", dev.measured)
if not dev.measured:
    print("WARNING: no GPU detected: timings will be predicted, not measured", file=sys.stderr)
elif dev.target.name != "h200":
    print(f"WARNING: this is {dev.name}, not an H200: results belong in benchmarks/results/{dev.target.name}/", file=sys.stderr)
PY
} 2>&1 | tee "$LOG"

timeout -s INT -k 30 "${BENCH_TIMEOUT:-540}" python benchmarks/gemm_llm.py --out "$OUT" "$@" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}

# Only measured, non-dry results are results (a dry run on a CPU must not land in results/h200/).
python - "$OUT" benchmarks/results/h200 >>"$LOG" 2>&1 <<'PY'
import json, shutil, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("gemm_llm_*.json")):
    doc = json.loads(f.read_text())
    if doc.get("dry_run") is False and doc.get("timing_kind") == "measured":
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, sys.argv[2])
        print(f"copied {f} to {sys.argv[2]}/")
    else:
        print(f"not copied to {sys.argv[2]}/ (dry run or predicted timings): {f}")
PY
exit "$rc"
