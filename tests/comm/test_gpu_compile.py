"""The comm kernels compile for an H100/H200 (sm_90) with Triton's real back end and ptxas,
compile-only (warpsmith.core._compile_only): they have never run on a GPU."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("dtype", ["bfloat16"])
def test_comm_kernels_compile_for_sm90(dtype):
    env = {**os.environ, "WARPSMITH_COMPILE_ONLY": "sm_90", "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(HERE / "compile_sm90.py"), dtype], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["copy_kernel", "dequant_reduce_kernel", "gather_kernel", "matmul_push_tiles_kernel",
                                "one_shot_in_kernel", "quantize_block_kernel", "reduce_add_rms_norm_kernel", "reduce_kernel",
                                "reduce_tiles_kernel"]
