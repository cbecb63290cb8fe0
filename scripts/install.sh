#!/usr/bin/env bash
# Install warpsmith (editable, with test dependencies) into the active Python environment.
#
# torch is chosen before anything else asks for it, because a plain `pip install torch`
# pulls a multi-GB CUDA build even where there is no GPU:
#   - torch already importable          -> kept as it is (CUDA, ROCm or CPU build);
#   - an NVIDIA or AMD GPU is present   -> pip's default torch for this platform;
#   - no GPU                            -> the CPU build: torch==$WARPSMITH_TORCH_VERSION (default 2.13.0),
#                                          from $WARPSMITH_TORCH_INDEX if set (a wheel index of CPU builds).
# Triton 3.6's CPU interpreter needs numpy < 2.4 (3.9's works with 2.4): fixed up at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
pip_install() { "$PY" -m pip install --disable-pip-version-check "$@"; }
# "True" for a CPU build of the installed torch, read from torch/version.py without importing torch:
# right after torch is installed numpy is not (the CPU wheel does not depend on it), and torch
# imported without numpy warns "Failed to initialize NumPy"
torch_is_cpu_build() {
    "$PY" - <<'PYEOF'
import importlib.util, pathlib
path = pathlib.Path(importlib.util.find_spec("torch").origin).with_name("version.py")
v = {}
exec(compile(path.read_text(), str(path), "exec"), v)
print(v.get("cuda") is None and v.get("hip") is None)
PYEOF
}

if "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "install: keeping torch $("$PY" -c 'import torch; print(torch.__version__)')"
elif command -v nvidia-smi >/dev/null 2>&1 || command -v rocm-smi >/dev/null 2>&1; then
    echo "install: GPU found, installing torch for it"
    pip_install torch
else
    version=${WARPSMITH_TORCH_VERSION:-2.13.0}
    echo "install: no GPU found, installing the CPU build of torch $version"
    if [ -n "${WARPSMITH_TORCH_INDEX:-}" ]; then
        pip_install "torch==$version" --index-url "$WARPSMITH_TORCH_INDEX"
    else
        pip_install "torch==$version"
    fi
    if [ "$(torch_is_cpu_build)" != "True" ]; then
        echo "install: warning: the torch just installed is a GPU build; set WARPSMITH_TORCH_INDEX to a CPU wheel index" >&2
    fi
fi

pip_install -e ".[dev]"

"$PY" - <<'PYEOF' || pip_install "numpy<2.4"
import sys
from importlib.metadata import version
triton = tuple(int(x) for x in version("triton").split(".")[:2])
numpy = tuple(int(x) for x in version("numpy").split(".")[:2])
sys.exit(1 if triton < (3, 9) and numpy >= (2, 4) else 0)
PYEOF
echo "install: done ($("$PY" -c 'import warpsmith, torch, triton; print("warpsmith", warpsmith.__version__, "| torch", torch.__version__, "| triton", triton.__version__)'))"
