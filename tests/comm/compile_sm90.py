"""Run by tests/comm/test_gpu_compile.py under WARPSMITH_COMPILE_ONLY=sm_90: every comm kernel, as
the runtime launches it for a 2-rank world, compiled for sm_90 (nothing runs; peers' flags preset
so that the host waits pass). Prints one line per compiled kernel name."""
import sys
import tempfile

import torch

from warpsmith.comm import runtime
from warpsmith.comm.protocol import CommError
from warpsmith.comm.symmetric import SymmetricWorld
from warpsmith.core._compile_only import recording
from warpsmith.core._triton import COMPILE_ONLY_ARCH

assert COMPILE_ONLY_ARCH == "sm_90", COMPILE_ONLY_ARCH
folder = tempfile.mkdtemp()
SymmetricWorld(folder, 1, 2, 1 << 12).create()  # the peer's buffer file
w = SymmetricWorld(folder, 0, 2, 1 << 12).create().map()
w.signal[:2, 1] = 1 << 20  # the peer is "ahead": every wait passes
w.peers_headers = lambda: {}  # and it issued the same collectives
dtype = getattr(torch, sys.argv[1])
with recording() as rec:
    x = torch.zeros(37, 5, dtype=dtype)
    runtime.all_reduce_one_shot(w, x)
    runtime.all_reduce_two_shot(w, x)
    runtime.all_reduce_ring(w, x)
    runtime.all_reduce_quantized(w, x, "int8")
    runtime.all_reduce_quantized(w, x, "fp8")
    runtime.all_gather(w, x)
    runtime.reduce_scatter(w, x)
    runtime.all_reduce_add_rms_norm(w, x, x.clone(), torch.ones(5, dtype=dtype), 1e-6)
    runtime.all_reduce_add_rms_norm(w, x, x.clone(), torch.ones(5, dtype=dtype), 1e-6, fp8_out=True)
    runtime.matmul_reduce_scatter(w, x, torch.zeros(19, 5, dtype=dtype))
    w.timeout_s = 0.0  # nothing runs: its status stays "not done", so it raises after one launch
    try:
        runtime.all_reduce_in_kernel(w, x)
    except CommError:
        pass
print("\n".join(sorted({r.fn.__name__ for r in rec})))
w.close(remove=True)
