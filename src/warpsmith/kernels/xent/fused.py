"""Fused linear cross-entropy: ``cross_entropy(hidden @ weight.T + bias, target)`` without the (M, V) logits.

Rows are processed in chunks of CHUNK rows. Per chunk:

1. ``z = h_c @ W^T + b`` by warpsmith's GEMM (``runtime.dispatch`` on a ``matmul`` problem: the best
   verified matmul record for that shape, else its heuristic default; fp32 accumulation, result in the
   input dtype) into one reused (CHUNK, V) buffer;
2. the cross-entropy kernel (``xent_fwd_kernel``) writes the chunk's row losses and, when gradients
   are wanted, overwrites ``z`` in place with ``dz = s (softmax - smoothed one-hot)``: the buffer is
   private, so writing in place is always safe. ``s`` is 1/count for a mean (computed before the first
   chunk by a one-program kernel), as torch scales its logits' gradient before the GEMMs: the
   rounding of dz and of the GEMM results to the input dtype then happens at the gradients' own
   magnitude;
3. ``grad_hidden[c] = dz @ W`` (written by the GEMM into its rows) and ``grad_weight += dz^T @ h_c``
   (the GEMM returns the input dtype: this launcher accumulates the chunks' products in fp32 and casts
   once at the end), ``grad_bias += sum over rows of dz`` (torch.sum with fp32 accumulation).

warpsmith's GEMM (not torch.matmul) is used so that the whole op runs on the kernels warpsmith
verifies and tunes, on any Triton target; the error contract composes the GEMM's contract
(spec/matmul.py). GEMM configs that are not deterministic (atomic split-K) are never used here, so
the fused op stays deterministic. fp32 GEMMs are always IEEE (no tf32), as the contract assumes.

``fused_linear_cross_entropy`` computes the gradients in the forward, for a unit upstream gradient,
in the input dtype (autograd's backward scales them by the upstream gradient);
``fused_linear_cross_entropy_backward`` recomputes the chunks with a given upstream gradient (needed
for ``reduction="none"``, whose per-row gradient must scale the rows before the weight-gradient GEMM,
and used for float16, whose loss scaling must reach the logits' gradient before it is rounded).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from ..._triton import triton
from ...errors import InvalidInputError
from ...search.memory_model import MemoryWork
from ...space import Enum, Pow2, Space
from ...spec import Problem
from ...targets import Target
from .. import common
from ..base import Config, Variant, scratch
from . import kernel as K
from .variant import MAX_BLOCK_V, WARPS, block_invalid, default_warps, emulate, grad_scale, np2, reduce_rows

CHUNK_FLOOR_BYTES = 32 * 2**20  # a chunk of logits may always take this much memory
_MATH = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def chunk_limit_bytes(p: Problem) -> int:
    """The largest logits chunk allowed: as large as the hidden states, or CHUNK_FLOOR_BYTES."""
    return max(p.shape["M"] * p.shape["H"] * p.dtype.itemsize, CHUNK_FLOOR_BYTES)


def gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    """``out = a @ b (+ bias)`` by warpsmith's dispatched GEMM (deterministic configs only, IEEE fp32)."""
    from ...kernels.registry import get_variant
    from ...runtime.dispatch import select
    from ...spec.matmul import MATMUL
    from ...targets import current_device

    layout = ("t" if a.stride(-1) != 1 else "n") + ("t" if b.stride(-1) != 1 else "n")
    p = MATMUL.problem({"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}, a.dtype,
                       {"bias": bias is not None, "layout": layout})
    choice = select(p)
    v, cfg = choice.variant, choice.config
    if not v.is_deterministic(cfg):
        v = get_variant("matmul", "tiled")
        cfg = v.default_config(p, current_device().target)
    inputs = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    return v.launch(inputs, p, cfg, out=out)


class _Fused(Variant):
    cost_model = "memory"
    kernel_modules = (K, common)
    name = "chunked"
    backward = False

    # ---- space, validity, heuristic --------------------------------------------------------
    def space(self, problem: Problem, target: Target) -> Space:
        M, V = problem.shape["M"], problem.shape["V"]
        d = self.default_config(problem, target)
        return Space({"CHUNK": Pow2(8, max(8, np2(M)), d["CHUNK"]),
                      "BLOCK_V": Pow2(min(64, np2(V)), min(np2(V), MAX_BLOCK_V), d["BLOCK_V"]),
                      "ROWS": Pow2(1, 16, d["ROWS"]), "num_warps": Enum(WARPS, d["num_warps"])})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        rows = min(c["CHUNK"], p.shape["M"])
        size = rows * p.shape["V"] * p.dtype.itemsize
        if size > chunk_limit_bytes(p):
            return (f"a chunk of {rows} rows of logits takes {size} B > {chunk_limit_bytes(p)} B "
                    "(the larger of the hidden states and the chunk floor)")
        return block_invalid(c["ROWS"], c["BLOCK_V"], c["num_warps"])

    def default_config(self, p: Problem, target: Target) -> Config:
        M, V = p.shape["M"], p.shape["V"]
        chunk = 8
        while chunk < np2(M) and 2 * chunk * V * p.dtype.itemsize <= chunk_limit_bytes(p):
            chunk *= 2
        bv = np2(V) if np2(V) <= 4096 else 4096
        rows = max(1, min(16, chunk, 4096 // bv))
        return {"CHUNK": chunk, "BLOCK_V": bv, "ROWS": rows, "num_warps": default_warps(rows, bv)}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["CHUNK"], "V": config["BLOCK_V"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        """The cross-entropy kernels' contracts; the GEMMs are matmul's, proved with matmul's records."""
        from .contract import for_config

        return for_config(self, problem, config)

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        M, H, V, e = p.shape["M"], p.shape["H"], p.shape["V"], p.dtype.itemsize
        C = min(c["CHUNK"], M)
        n = -(-M // C)
        grads = p.attrs["grads"]
        hid, wgt = grads in ("all", "hidden"), grads == "all"
        single = c["BLOCK_V"] >= V
        gemms = 1 + hid + wgt
        moved = n * V * H * e * gemms  # the weight, once per chunk and GEMM
        moved += M * H * e * (1 + wgt) + M * V * e  # hidden read by the GEMMs; the logits written
        moved += M * V * e * (1 + (1 + (0 if single else 1)) * hid + hid + wgt)  # CE read/write, GEMMs read dz
        moved += (M * H * e if hid else 0) + (n * V * H * (2 * e + 8) if wgt else 0)  # grad rows, fp32 sums
        tiles = n * (-(-C // 128)) * (-(-V // 128)) * (1 + wgt) + n * (-(-C // 128)) * (-(-H // 128)) * hid
        return MemoryWork(bytes_moved=float(moved), programs=n * -(-C // c["ROWS"]) + tiles, num_warps=c["num_warps"],
                          block_bytes=c["ROWS"] * c["BLOCK_V"] * e, steps=-(-V // c["BLOCK_V"]) * (1 if single else 2),
                          regs_per_thread=2 * c["ROWS"] * c["BLOCK_V"] // (32 * c["num_warps"]) + 24,
                          launches=n * (2 + 2 * hid + 2 * wgt) + 1, flops=2.0 * M * V * H * gemms,
                          math_kind=_MATH[p.dtype])

    # ---- launch -------------------------------------------------------------------------------
    @staticmethod
    def _operands(inputs: Mapping[str, torch.Tensor], p: Problem):
        h, w, t, b = inputs["hidden"], inputs["weight"], inputs["target"], inputs.get("bias")
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        for name, x, shape in (("hidden", h, (M, H)), ("weight", w, (V, H)), ("target", t, (M,))) + (
                (("bias", b, (V,)),) if p.attrs["bias"] else ()):
            if x is None or tuple(x.shape) != shape:
                raise InvalidInputError(f"shape of {name}", str(shape), None if x is None else str(tuple(x.shape)))
        return h, w, t, b if p.attrs["bias"] else None

    def _ce(self, z, t, rows_out, s, kind, stride_s, p, c, write_loss: bool, write_grad: bool) -> None:
        eps = float(p.attrs["label_smoothing"])
        K.xent_fwd_kernel[(triton.cdiv(z.shape[0], c["ROWS"]),)](
            z, t, rows_out, z, z, s, z.shape[0], z.shape[1], int(p.attrs["ignore_index"]), eps,
            z.stride(0), z.stride(1), t.stride(0), rows_out.stride(0), z.stride(0), z.stride(1), stride_s,
            ROWS=c["ROWS"], BLOCK_V=c["BLOCK_V"], SINGLE=c["BLOCK_V"] >= z.shape[1], SMOOTH=eps > 0,
            WRITE_LOSS=write_loss, WRITE_STATS=False, WRITE_GRAD=write_grad, SCALE=kind,
            EMULATE=emulate(z.dtype), num_warps=c["num_warps"])

    def _chunks(self, inputs, p: Problem, c: Mapping[str, Any], rows_out: torch.Tensor | None, scale: tuple,
                gh: torch.Tensor | None, gw: torch.Tensor | None, gb: torch.Tensor | None) -> None:
        """The chunk loop: logits, cross-entropy (row losses into ``rows_out`` unless None; with gh, the
        logits' gradient in place, scaled per ``scale`` = (tensor, SCALE kind, stride)), gradient GEMMs
        into gh (rows), the fp32 sums of gw and gb (cast into them at the end)."""
        h, w, t, b = self._operands(inputs, p)
        M, V = p.shape["M"], p.shape["V"]
        dev, f32 = h.device, torch.float32
        C = min(c["CHUNK"], M)
        logits = scratch((C, V), p.dtype, dev)
        pw = scratch(tuple(gw.shape), p.dtype, dev) if gw is not None else None
        gw_acc = scratch(tuple(gw.shape), f32, dev) if gw is not None else None
        gb_acc = scratch((V,), f32, dev) if gb is not None else None
        s, kind, stride_s = scale
        for i, c0 in enumerate(range(0, M, C)):
            c1 = min(c0 + C, M)
            z = gemm(h[c0:c1], w.t(), b, logits[: c1 - c0])
            self._ce(z, t[c0:c1], rows_out[c0:c1] if rows_out is not None else z, s[c0:c1] if kind == 2 else s,
                     kind, stride_s, p, c, rows_out is not None, gh is not None)
            if gh is None:
                continue
            gemm(z, w, None, gh[c0:c1])
            if gw is not None:
                part = gemm(z.t(), h[c0:c1], None, pw)
                gw_acc.copy_(part) if i == 0 else gw_acc.add_(part)
            if gb is not None:
                col = z.sum(0, dtype=f32)
                gb_acc.copy_(col) if i == 0 else gb_acc.add_(col)
        if gw is not None:
            gw.copy_(gw_acc)
        if gb is not None:
            gb.copy_(gb_acc)

    @staticmethod
    def _outputs(p: Problem, device: torch.device, out: Any, with_loss: bool) -> list[torch.Tensor | None]:
        """[loss,] gh, gw, gb (None where not computed), allocated unless ``out`` gives them."""
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        hid = p.op.endswith("backward") or p.attrs["grads"] != "none"
        wgt = p.attrs["grads"] == "all"
        shapes = ([() if p.attrs["reduction"] != "none" else (M,)] if with_loss else []) + [
            (M, H) if hid else None, (V, H) if wgt else None, (V,) if wgt and p.attrs["bias"] else None]
        given = iter(list(out) if isinstance(out, (tuple, list)) else [out]) if out is not None else None
        return [None if sh is None else next(given) if given else torch.empty(sh, dtype=p.dtype, device=device)
                for sh in shapes]


class FusedLinearCrossEntropy(_Fused):
    """Loss, and with ``grads`` the gradients for a unit upstream gradient (input dtype)."""

    op = "fused_linear_cross_entropy"

    def launch(self, inputs, problem, config, out=None):
        t = inputs["target"]
        M, reduction = problem.shape["M"], problem.attrs["reduction"]
        outs = self._outputs(problem, t.device, out, with_loss=True)
        loss, gh = outs[0], outs[1]
        mean = reduction == "mean"
        if mean and gh is not None:  # the gradient of a mean: 1 / count, before the GEMMs (as torch)
            scale = grad_scale(t, torch.ones((), dtype=torch.float32, device=t.device),
                               problem.attrs["ignore_index"], "mean")
        else:
            scale = (t, 0, 0)
        rows_out = loss if reduction == "none" else scratch((M,), torch.float32, t.device)
        self._chunks(inputs, problem, config, rows_out, scale, *outs[1:])
        if reduction != "none":
            reduce_rows(rows_out, t, loss, problem.attrs["ignore_index"], mean)
        result = tuple(x for x in outs if x is not None)
        return result if len(result) > 1 else result[0]


class FusedLinearCrossEntropyBackward(_Fused):
    """Gradients for a given upstream gradient, recomputing the chunks (input dtype)."""

    op = "fused_linear_cross_entropy_backward"
    backward = True

    def launch(self, inputs, problem, config, out=None):
        t = inputs["target"]
        outs = self._outputs(problem, t.device, out, with_loss=False)
        scale = grad_scale(t, inputs["grad"], problem.attrs["ignore_index"], problem.attrs["reduction"])
        self._chunks(inputs, problem, config, None, scale, *outs)
        result = tuple(x for x in outs if x is not None)
        return result if len(result) > 1 else result[0]


VARIANTS: tuple[Variant, ...] = (FusedLinearCrossEntropy(), FusedLinearCrossEntropyBackward())
