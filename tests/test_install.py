"""scripts/install.sh, run against a stand-in Python: pip calls are recorded, not run, and each module
is importable only once the step that installs it has run (torch after `pip install torch`, numpy
after `pip install -e .[dev]`), as in a fresh environment. Nothing is installed."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ]; then
    echo "$*" >> "$FAKE_STATE/pip.log"
    case "$*" in
        *" -e "*) echo all > "$FAKE_STATE/state" ;;
        *torch*) echo torch > "$FAKE_STATE/state" ;;
    esac
    exit 0
fi
case "$(cat "$FAKE_STATE/state")" in
    none) export FAKE_BLOCK="torch numpy" ;;
    torch) export FAKE_BLOCK="numpy" ;;
    *) export FAKE_BLOCK="" ;;
esac
export PYTHONPATH="$FAKE_STATE/site${PYTHONPATH:+:$PYTHONPATH}"
exec "$REAL_PYTHON" "$@"
"""

BLOCKER = """import os, sys

_blocked = set(os.environ.get("FAKE_BLOCK", "").split())


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.mark.skipif(bool(shutil.which("nvidia-smi") or shutil.which("rocm-smi")),
                    reason="install.sh takes its GPU branch here")
def test_install_on_a_cpu_machine_does_not_import_torch_before_numpy(tmp_path):
    """Issue 27: the CPU branch checked the torch build by importing torch right after installing it,
    before numpy (which the CPU wheel does not depend on) was installed: torch then printed
    "Failed to initialize NumPy". The build is now read from torch/version.py."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    (tmp_path / "state").write_text("none\n")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARPSMITH_TORCH")}
    env.update(PYTHON=str(fake), FAKE_STATE=str(tmp_path), REAL_PYTHON=sys.executable)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")], capture_output=True, text=True,
                       timeout=300, env=env)
    output = r.stdout + r.stderr
    assert r.returncode == 0, output[-3000:]
    pip = (tmp_path / "pip.log").read_text()
    assert "torch==2.13.0" in pip and "-e .[dev]" in pip, pip  # the CPU branch ran, against the stand-in
    assert "install: no GPU found" in output and "install: done (warpsmith" in output, output[-3000:]
    assert "Failed to initialize NumPy" not in output, output[-3000:]
    assert "is a GPU build" not in output, output[-3000:]
