"""The all-reduce as an op of the tuning pipeline: what it computes, for the search, the verifier,
the tuning DB and dispatch (:mod:`.family`).

``all_reduce``: ``W`` ranks each hold ``N`` elements; every rank gets their sum. In one process the
ranks' tensors are the rows of one input ``x`` [W, N] and the result is [N] (every rank's copy is
the same: the variant checks it). The reference sums in fp32 (fp64 for the oracle) and rounds once.
Attribute ``topology`` (``nvlink``, ``pcie``, ``multinode``): the fabric the cost model prices,
part of the tuning key.

Error contract: the one-shot and two-shot algorithms sum in fp32 and round once, but the ring
carries the dtype on the wire and rounds each hop's partial sum (as NCCL does), so the contract
allows W roundings in the dtype: ``|out - exact| <= (W u_dtype) sum_p |x_p| + u_dtype |exact|``.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ..core.dtypes import UNIT_ROUNDOFF
from ..core.error_contract import ErrorContract
from ..core.opspec import Axis, OpSpec, Problem, draw
from ..cost.comm_model import TOPOLOGIES

MAX_WORLD = 64


class AllReduceSpec(OpSpec):
    """``out = sum_p x[p]`` (see the module docstring)."""

    name = "all_reduce"
    axes = (Axis("N", "elements of each rank's tensor"),
            Axis("W", "ranks (the world size)", reduction=True, max_size=MAX_WORLD))
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    attr_choices = {"topology": tuple(TOPOLOGIES)}

    def large_scale(self, p: Problem) -> float:
        return float(torch.finfo(p.dtype).max) / (8 * p.shape["W"])  # the sum of W stays finite

    def make_inputs(self, p: Problem, gen: torch.Generator, dist: str = "normal",
                    device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        scale = self.large_scale(p) if dist == "large" else 1.0
        return {"x": draw((p.shape["W"], p.shape["N"]), dist, gen, p.dtype, device, scale)}

    def outputs(self, p: Problem) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
        return (((p.shape["N"],), p.dtype),)

    def reference(self, inputs: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        x = inputs["x"]
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        return x.to(acc).sum(0).to(x.dtype)

    def error_scale(self, inputs64: Mapping[str, torch.Tensor], attrs: Mapping[str, Any]) -> torch.Tensor:
        return inputs64["x"].abs().sum(0)

    def contract(self, p: Problem) -> ErrorContract:
        u = UNIT_ROUNDOFF[p.dtype_name]
        return ErrorContract(out_dtype=p.dtype_name, u_out=u, u_acc=u, reduction_len=p.shape["W"], ref_factor=None)

    def flops(self, p: Problem) -> float:
        return float((p.shape["W"] - 1) * p.shape["N"])

    def min_bytes(self, p: Problem) -> float:
        """One rank's traffic: its own tensor in, the W - 1 peers' read, the result out."""
        return float((p.shape["W"] + 1) * p.shape["N"] * p.dtype.itemsize)


ALL_REDUCE = AllReduceSpec()
SPECS = (ALL_REDUCE,)
