"""The ``matmul`` family: ``C = act(A @ B + bias)`` (spec, GEMM kernels, variants ``tiled``, ``splitk``,
``persistent``, launch contracts, the public op).

The family's declaration, which :mod:`warpsmith.ops` reads into the registry: ``SPECS`` (what each op
computes) and ``VARIANTS`` (how, each naming its op, in order of preference). The public function,
custom ops and autograd are in :mod:`.op`.
"""
from .spec import MATMUL, MatmulSpec
from .variant import VARIANTS

SPECS = (MATMUL,)

__all__ = ["SPECS", "VARIANTS", "MATMUL", "MatmulSpec"]
