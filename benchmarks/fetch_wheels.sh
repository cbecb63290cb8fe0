#!/usr/bin/env bash
# Downloads the wheels the memory-bound benchmark needs on the device machine, which has no network:
# Liger-Kernel (pure Python; its needs, torch and triton, are on the device image, so --no-deps) into
# benchmarks/wheels/ (ignored by git). Run it here, then name the folder in the device call's carry:
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
rm -f wheels/liger_kernel-*.whl  # one version only (run_h200.sh takes the last by name)
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  -d wheels "liger-kernel==${LIGER_VERSION}"
ls -l wheels/liger_kernel-*.whl
