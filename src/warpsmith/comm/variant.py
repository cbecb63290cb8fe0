"""The all-reduce's variant for the tuning pipeline: its space (algorithm x programs x chunk), its
cost model (the alpha-beta model of :mod:`warpsmith.cost.comm_model`, *predicted*), its default (the
model's best config) and its launcher.

The launcher runs the collective the way ``warpsmith.comm.all_reduce`` runs it (the same runtime,
flag protocol and Triton kernels), over a world of ``W`` threads of this process
(:func:`.local.run_threads`), rank ``p``'s input being ``x[p]``; it checks every rank got the same
result and returns it. So what the pipeline's verifier establishes for a config is the kernels'
arithmetic and the protocol's execution for that config on ``W`` ranks on the CPU (under the
interpreter); the protocol's interleavings are model-checked (:mod:`.modelcheck`), and the
multi-process path is tested against gloo (tests/comm). Nothing here has run on a GPU.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ..core.config import Knobs
from ..core.errors import InvalidInputError, WarpsmithError
from ..core.opspec import Problem
from ..core.variant import Config, Variant, source_hash
from ..cost import comm_model
from ..space import Enum, Space
from ..targets import Target
from . import kernel as K
from . import runtime
from .local import run_threads

IMPLEMENTED = tuple(runtime.ALL_REDUCE)


@dataclass(frozen=True, kw_only=True)
class SymmetricKnobs(Knobs):
    algorithm: str
    programs: int
    chunk: int


class Symmetric(Variant):
    """One-shot, two-shot or ring over symmetric buffers (docs/ops/comm.md)."""

    op = "all_reduce"
    name = "symmetric"
    knobs = SymmetricKnobs
    cost_model = "comm"
    kernel_modules = (K,)

    def source_hash(self) -> str:
        """The kernels', the runtime's (protocol execution, launch geometry) and this launcher's."""
        return source_hash(K, runtime, sys.modules[__name__])

    def algorithms(self, p: Problem) -> tuple[str, ...]:
        topo = p.attrs["topology"]
        return tuple(a for a in comm_model.available("all_reduce", p.shape["W"], topo) if a in IMPLEMENTED)

    def space(self, p: Problem, target: Target) -> Space:
        d = self.default_config(p, target)
        return Space({"algorithm": Enum(self.algorithms(p), d["algorithm"]),
                      "programs": Enum(comm_model.PROGRAMS, d["programs"]),
                      "chunk": Enum(comm_model.CHUNKS, d["chunk"])})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        if c["algorithm"] not in self.algorithms(p):
            return (f"algorithm {c['algorithm']} is not available with {p.shape['W']} ranks on "
                    f"{p.attrs['topology']} (implemented and available: {', '.join(self.algorithms(p)) or 'none'})")
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        """The alpha-beta model's best (algorithm, programs, chunk) for this size, world and topology."""
        alg, programs, chunk = comm_model.best_config("all_reduce", self.nbytes(p), p.shape["W"], p.attrs["topology"],
                                                      p.dtype.itemsize, self.algorithms(p))
        return {"algorithm": alg, "programs": programs, "chunk": chunk}

    @staticmethod
    def nbytes(p: Problem) -> int:
        return p.shape["N"] * p.dtype.itemsize

    def predict_ms(self, p: Problem, c: Mapping[str, Any]) -> float:
        """The alpha-beta model's time for the config (predicted; cost/cost.py's ``comm`` model)."""
        return 1e3 * comm_model.predict_config_s("all_reduce", c["algorithm"], self.nbytes(p), p.shape["W"],
                                                 p.attrs["topology"], c["programs"], c["chunk"] * p.dtype.itemsize)

    def launch(self, inputs: Mapping[str, torch.Tensor], p: Problem, config: Mapping[str, Any],
               out: Any = None) -> torch.Tensor:
        x = inputs["x"]
        if x.dim() != 2 or x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise InvalidInputError("all_reduce x", "a [W, N] CPU tensor of float32, float16 or bfloat16 (the "
                                    "ranks' tensors; the world of threads shares CPU memory)",
                                    f"{tuple(x.shape)} {x.dtype} on {x.device}")
        world, n = x.shape
        fn, how = runtime.ALL_REDUCE[config["algorithm"]], runtime.Launch(config["programs"], config["chunk"])
        capacity = max(16, -(-n * x.element_size() // 16) * 16)
        outs = run_threads(lambda w: fn(w, x[w.rank].contiguous(), how), world, capacity=capacity)
        for r, o in enumerate(outs[1:], 1):  # bitwise, a NaN equal to a NaN
            if not bool(((o == outs[0]) | (o.isnan() & outs[0].isnan())).all()):
                raise WarpsmithError(f"all_reduce {dict(config)}: rank {r} got a different result from rank 0")
        if out is None:
            return outs[0]
        out.copy_(outs[0])
        return out


VARIANTS = (Symmetric(),)
