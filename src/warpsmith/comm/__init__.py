"""Collectives over symmetric buffers: all_reduce (one-shot, two-shot), all_gather, reduce_scatter,
all_reduce fused with residual add + RMSNorm (optionally an fp8 output), and the reduce-scatter of a
row-parallel GEMM's output tiles as they finish, as Triton kernels with a flag protocol of their own
(:mod:`.protocol`, model-checked by :mod:`.modelcheck`); algorithms chosen by the alpha-beta model
of :mod:`warpsmith.cost.comm_model`; ``torch.distributed`` where no symmetric buffers exist.
See docs/ops/comm.md."""
from .api import (all_gather, all_reduce, all_reduce_, all_reduce_add_rms_norm, attach, choose, detach, fallback_reason,
                  matmul_reduce_scatter, reduce_scatter)
from .protocol import CollectiveMismatchError, CommError, CommTimeoutError
from .tp import RowParallelLinear

__all__ = ["all_reduce", "all_reduce_", "all_gather", "reduce_scatter", "all_reduce_add_rms_norm",
           "matmul_reduce_scatter", "attach", "detach", "fallback_reason", "choose", "CommError", "CommTimeoutError", "CollectiveMismatchError",
           "RowParallelLinear"]
