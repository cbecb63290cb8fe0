#!/usr/bin/env bash
# Downloads the wheels the benchmarks need on the device machine, which has no network, into
# benchmarks/wheels/ (ignored by git): Liger-Kernel for the memory-bound baselines (pure Python; its
# needs, torch and triton, are on the device image, so --no-deps) and z3-solver, which warpsmith's
# prover imports and the device image lacks (seen 2026-12-04: matmul.py stopped at `import z3`;
# a py3-none-manylinux wheel carrying its own libz3.so, about 38 MB). Run it here, then name the
# folder in the device call's carry:
#
#     bash benchmarks/fetch_wheels.sh
#     run(command="bash benchmarks/run_h200.sh memory", carry=["benchmarks/wheels"], timeout_s=600)
#
# run_h200.sh unpacks it into /tmp/bench_site with benchmarks/unpack_wheel.py (a wheel is a zip; no pip needed).
# LIGER_VERSION picks the version (default 0.8.5: py3-none-any, needs torch >= 2.1.2, triton >= 2.3.1).
set -euo pipefail
cd "$(dirname "$0")"
LIGER_VERSION="${LIGER_VERSION:-0.8.5}"
mkdir -p wheels
Z3_VERSION="${Z3_VERSION:-$(python3 -c 'import importlib.metadata as m; print(m.version("z3-solver"))' 2>/dev/null || echo 4.13.4.0)}"
rm -f wheels/liger_kernel-*.whl wheels/z3_solver-*.whl  # one version each (run_h200.sh takes the last by name)
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  -d wheels "liger-kernel==${LIGER_VERSION}"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d wheels "z3-solver==${Z3_VERSION}"
ls -l wheels/liger_kernel-*.whl wheels/z3_solver-*.whl
