"""Fused linear cross-entropy: ``cross_entropy(hidden @ weight.T + bias, target)`` without the (M, V) logits.

Two phases, each over one reused private buffer (never the (M, V) logits, never a (V, H) fp32 sum):

Phase 1, over row chunks of CHUNK rows, into a (CHUNK, V) buffer:

1. ``z = h_c @ W^T + b`` by warpsmith's GEMM (``runtime.dispatch`` on a ``matmul`` problem: the best
   verified matmul record for that shape, else its heuristic default; fp32 accumulation, result in the
   input dtype); with the weight's gradient, as one GEMM per VCHUNK columns, the very GEMMs phase 2
   runs again, so that both phases' logits are bit-identical (``_logits_block``);
2. the cross-entropy kernel (``xent_fwd_kernel``) writes the chunk's row losses, the rows' statistics
   (row max m and log of the shifted sum ls, (M, 2) fp32; only when the weight's gradient is wanted)
   and, when gradients are wanted, overwrites ``z`` in place with ``dz = s (softmax - smoothed one-hot)``:
   the buffer is private, so writing in place is always safe. ``s`` is 1/count for a mean (computed
   before the first chunk by a one-program kernel), the per-row upstream gradient for the backward of
   ``reduction="none"``, as torch scales its logits' gradient before the GEMMs: the rounding of dz and
   of the GEMM results to the input dtype then happens at the gradients' own magnitude;
3. ``grad_hidden[c] = dz @ W`` (written by the GEMM into its rows).

Phase 2 (only for grads="all"), over vocabulary chunks of VCHUNK rows of W, into an (M, VCHUNK) buffer:

1. ``z[:, v] = h @ W[v]^T + b[v]`` for all M rows (phase 1's GEMMs of these columns, row chunk by row chunk);
2. ``xent_bwd_kernel`` turns it in place into ``dz[:, v]`` from phase 1's statistics, with the same
   scale (the kernel takes the slice's first class: targets and the smoothing term eps / V are placed
   by the global class index);
3. ``grad_weight[v] = dz[:, v]^T @ h``, written by one GEMM (fp32 accumulation over all M rows, one
   rounding to the input dtype), and ``grad_bias[v] = sum over rows of dz[:, v]`` (torch.sum, fp32,
   one rounding).

This costs one more GEMM (2 M V H flops) than accumulating the weight's gradient across row chunks,
but no (V, H) fp32 accumulator (as large as the bf16 logits at a 128k vocabulary) and none of its
2 V H 4 bytes of traffic per row chunk. Memory: each buffer is at most ``buffer_limit_bytes`` (one rule:
1/8 of the unfused logits, or a floor), the (CHUNK, V) one is dropped before the (M, VCHUNK) one is
allocated, and the statistics take 8 M bytes.

Launches: with the weight's gradient each phase makes one GEMM per (row chunk, vocabulary chunk) pair,
so a call launches about 2 (M / CHUNK) (V / VCHUNK) kernels (``launch_count``, which the cost model
charges). The validity predicate allows at most MAX_CHUNKS row chunks and MAX_CHUNKS vocabulary chunks,
so one call launches at most MAX_LAUNCHES kernels (2,243) whatever the shape; the space's smallest
CHUNK and VCHUNK are the smallest that rule allows (``min_chunk``).

warpsmith's GEMM (not torch.matmul) is used so that the whole op runs on the kernels warpsmith
verifies and tunes, on any Triton target; the error contract composes the GEMM's contract
(ops/matmul/spec.py). GEMM configs that are not deterministic (atomic split-K) are never used here, so
the fused op stays deterministic. fp32 GEMMs are always IEEE (no tf32), as the contract assumes.

``fused_linear_cross_entropy`` computes the gradients in the forward, for a unit upstream gradient,
in the input dtype (autograd's backward scales them by the upstream gradient);
``fused_linear_cross_entropy_backward`` recomputes both phases with a given upstream gradient (needed
for ``reduction="none"``, whose per-row gradient must scale the rows of dz before the GEMMs, in both
phases, and used for float16, whose loss scaling must reach the logits' gradient before it is rounded).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...cost.memory_model import MemoryWork
from ...space import Enum, Pow2, Space
from ...core.opspec import Problem
from ...targets import Target
from ..shared import kernel as common
from ...core.variant import Config, Variant, scratch
from . import kernel as K
from .limits import MAX_BLOCK_V
from .variant import WARPS, block_invalid, default_warps, emulate, grad_scale, np2, reduce_rows

CHUNK_FLOOR_BYTES = 32 * 2**20  # a chunk buffer may always take this much memory
LOGITS_FRACTION = 8  # a chunk buffer may take 1/LOGITS_FRACTION of the unfused path's logits
MAX_CHUNKS = 32  # row chunks per call, and vocabulary chunks per call (their product sets the GEMM launches)
# launch_count at MAX_CHUNKS row and vocabulary chunks, every option on (mean, bias, all gradients)
MAX_LAUNCHES = 2 * MAX_CHUNKS * MAX_CHUNKS + 6 * MAX_CHUNKS + 3
_MATH = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def buffer_limit_bytes(p: Problem) -> int:
    """The one memory rule of both chunk buffers, the (CHUNK, V) logits chunk of phase 1 and the
    (M, VCHUNK) vocabulary chunk of phase 2: each at most 1/LOGITS_FRACTION of the unfused logits
    (M V in the input dtype), or CHUNK_FLOOR_BYTES. They are never live together, so the op's extra
    peak is one of them plus 8 M bytes of statistics: <= 1/8 of the unfused path's logits (above
    the floor)."""
    M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
    return max(M * V * e // LOGITS_FRACTION, CHUNK_FLOOR_BYTES)


def min_chunk(total: int, floor: int) -> int:
    """The smallest chunk (a power of two, at least ``floor``) that splits ``total`` into at most
    MAX_CHUNKS chunks: the launch rule, for the space's lower bounds and the defaults."""
    return max(floor, np2(-(-total // MAX_CHUNKS)))


def _matmul_problem(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> Problem:
    from ..matmul.spec import MATMUL

    layout = ("t" if a.stride(-1) != 1 else "n") + ("t" if b.stride(-1) != 1 else "n")
    return MATMUL.problem({"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}, a.dtype,
                          {"bias": bias is not None, "layout": layout})


def gemm_choice(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> tuple[Variant, Config]:
    """The GEMM (variant, config) dispatch picks for ``a @ b (+ bias)``: deterministic configs only."""
    from ...core.registry import variants_of
    from ...dispatch import select
    from ...targets import current_device
    from ..matmul.variant import VARIANTS as MATMUL_VARIANTS

    p = _matmul_problem(a, b, bias)
    choice = select(p, MATMUL_VARIANTS)
    v, cfg = choice.variant, choice.config
    if not v.is_deterministic(cfg):
        v = variants_of("matmul", MATMUL_VARIANTS)["tiled"]
        cfg = v.default_config(p, current_device().target)
    return v, cfg


def gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
         choice: tuple[Variant, Config] | None = None) -> torch.Tensor:
    """``out = a @ b (+ bias)`` by warpsmith's dispatched GEMM (deterministic configs only, IEEE fp32), or
    by the given (variant, config) ``choice``."""
    v, cfg = choice if choice is not None else gemm_choice(a, b, bias)
    inputs = {"a": a, "b": b} if bias is None else {"a": a, "b": b, "bias": bias}
    return v.launch(inputs, _matmul_problem(a, b, bias), cfg, out=out)


@dataclass(frozen=True, kw_only=True)
class ChunkedKnobs(Knobs):
    CHUNK: int
    VCHUNK: int
    BLOCK_V: int
    ROWS: int
    num_warps: int


class _Fused(Variant):
    cost_model = "memory"
    kernel_modules = (K, common)
    name = "chunked"
    knobs = ChunkedKnobs
    backward = False

    # ---- space, validity, heuristic --------------------------------------------------------
    def space(self, problem: Problem, target: Target) -> Space:
        M, V = problem.shape["M"], problem.shape["V"]
        d = self.default_config(problem, target)
        vchunk = (Pow2(min_chunk(V, min(64, np2(V))), np2(V), d["VCHUNK"]) if problem.attrs["grads"] == "all"
                  else Enum((d["VCHUNK"],), d["VCHUNK"]))  # unused without the weight's gradient
        return Space({"CHUNK": Pow2(min_chunk(M, 8), max(8, np2(M)), d["CHUNK"]), "VCHUNK": vchunk,
                      "BLOCK_V": Pow2(min(64, np2(V)), min(np2(V), MAX_BLOCK_V), d["BLOCK_V"]),
                      "ROWS": Pow2(1, 16, d["ROWS"]), "num_warps": Enum(WARPS, d["num_warps"])})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        limit = buffer_limit_bytes(p)
        rows = min(c["CHUNK"], M)
        if rows * V * e > limit:
            return (f"a chunk of {rows} rows of logits takes {rows * V * e} B > {limit} B "
                    f"(1/{LOGITS_FRACTION} of the logits, or the chunk floor)")
        cols = min(c["VCHUNK"], V)
        if p.attrs["grads"] == "all" and M * cols * e > limit:
            return (f"a vocabulary chunk of {cols} columns over {M} rows takes {M * cols * e} B > {limit} B "
                    f"(1/{LOGITS_FRACTION} of the logits, or the chunk floor)")
        n, nv = self.chunks(p, c)
        if max(n, nv) > MAX_CHUNKS:
            return (f"{n} row chunks and {nv} vocabulary chunks: {self.launch_count(p, c)} kernel launches per "
                    f"call (at most {MAX_CHUNKS} chunks of each, at most {MAX_LAUNCHES} launches)")
        return block_invalid(c["ROWS"], c["BLOCK_V"], c["num_warps"])

    def chunks(self, p: Problem, c: Mapping[str, Any]) -> tuple[int, int]:
        """(row chunks, vocabulary chunks) of one call; one vocabulary chunk without the weight's gradient."""
        M, V = p.shape["M"], p.shape["V"]
        return -(-M // min(c["CHUNK"], M)), (-(-V // min(c["VCHUNK"], V)) if p.attrs["grads"] == "all" else 1)

    def launch_count(self, p: Problem, c: Mapping[str, Any]) -> int:
        """Kernel launches of one call, as the launcher makes them (each GEMM counted as one launch: a
        split-K GEMM from the tuning DB adds its reduction; a non-contiguous ``out=`` weight gradient adds
        one copy)."""
        n, nv = self.chunks(p, c)
        hid = self.backward or p.attrs["grads"] != "none"
        mean = p.attrs["reduction"] == "mean"
        count = n * (nv + 1 + hid)  # per row chunk: the logits GEMM(s), cross-entropy, the grad_hidden GEMM
        if p.attrs["grads"] == "all":  # per vocabulary chunk: logits GEMMs, dz, the grad_weight GEMM, grad_bias
            count += nv * (n + 2 + 2 * bool(p.attrs["bias"]))  # (grad_bias: a torch sum and its cast)
        if self.backward:
            return count + int(mean)  # the mean's 1 / count
        # a mean's gradient: the unit upstream gradient and 1 / count; a reduced loss: the reduction
        return count + 2 * int(mean and hid) + int(p.attrs["reduction"] != "none")

    def default_config(self, p: Problem, target: Target) -> Config:
        M, V, e = p.shape["M"], p.shape["V"], p.dtype.itemsize
        limit = buffer_limit_bytes(p)
        chunk = min_chunk(M, 8)
        while chunk < np2(M) and 2 * chunk * V * e <= limit:
            chunk *= 2
        vchunk = min_chunk(V, min(64, np2(V)))
        while vchunk < np2(V) and M * 2 * vchunk * e <= limit:
            vchunk *= 2
        bv = np2(V) if np2(V) <= 4096 else 4096
        rows = max(1, min(16, chunk, 4096 // bv))
        return {"CHUNK": chunk, "VCHUNK": vchunk, "BLOCK_V": bv, "ROWS": rows,
                "num_warps": default_warps(rows, bv)}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["CHUNK"], "V": config["BLOCK_V"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        """The cross-entropy kernels' contracts; the GEMMs are matmul's, proved with matmul's records."""
        from .contract import for_config

        return for_config(self, problem, config)

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        M, H, V, e = p.shape["M"], p.shape["H"], p.shape["V"], p.dtype.itemsize
        C = min(c["CHUNK"], M)
        n, nv = self.chunks(p, c)  # with the weight's gradient the logits GEMMs go by (rows, classes) blocks
        grads = p.attrs["grads"]
        hid, wgt = grads in ("all", "hidden"), grads == "all"
        bias = bool(p.attrs["bias"])
        single = c["BLOCK_V"] >= V
        VC = min(c["VCHUNK"], V)
        vt = nv * (-(-VC // 128)) if wgt else -(-V // 128)  # column tiles of one row chunk's logits
        # phase 1, per row chunk: logits GEMM(s), cross-entropy (dz in place, statistics), grad_hidden GEMM
        moved = n * V * H * e * (1 + hid)  # the weight, once per chunk and GEMM
        moved += nv * M * H * e + M * V * e  # hidden read by the logits GEMMs; the logits written
        moved += M * V * e * (1 + (1 + (0 if single else 1)) * hid + hid)  # CE read/write, GEMM reads dz
        moved += (M * H * e if hid else 0) + (8 * M if wgt else 0)  # grad_hidden rows; the statistics
        tiles = n * (-(-C // 128)) * (vt + hid * (-(-H // 128)))
        programs = n * -(-C // c["ROWS"])
        flops = 2.0 * M * V * H * (1 + hid)
        bwd_steps = 0
        if wgt:  # phase 2, per vocabulary chunk: logits GEMMs, dz in place, grad_weight GEMM, grad_bias sum
            moved += nv * M * H * e * 2 + n * V * H * e + V * H * e  # hidden by both GEMMs; weight; grad_weight
            moved += M * V * e * (1 + 2 + 1 + bias)  # logits written, read and dz written, read by the GEMM (+ sum)
            moved += nv * 8 * M + (V * e if bias else 0)  # the statistics per chunk; grad_bias
            tiles += n * (-(-C // 128)) * vt + nv * (-(-VC // 128)) * (-(-H // 128))
            programs += nv * -(-M // c["ROWS"])
            flops += 2.0 * M * V * H * 2
            bwd_steps = -(-VC // c["BLOCK_V"])
        return MemoryWork(bytes_moved=float(moved), programs=programs + tiles, num_warps=c["num_warps"],
                          block_bytes=c["ROWS"] * c["BLOCK_V"] * e,
                          steps=max(-(-V // c["BLOCK_V"]) * (1 if single else 2), bwd_steps),
                          regs_per_thread=2 * c["ROWS"] * c["BLOCK_V"] // (32 * c["num_warps"]) + 24,
                          launches=self.launch_count(p, c), flops=flops, math_kind=_MATH[p.dtype])

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

    def _ce(self, z, t, rows_out, stats, s, kind, stride_s, p, c, write_loss: bool, write_grad: bool) -> None:
        eps = float(p.attrs["label_smoothing"])
        K.xent_fwd_kernel[(triton.cdiv(z.shape[0], c["ROWS"]),)](
            z, t, rows_out, z if stats is None else stats, z, s, z.shape[0], z.shape[1],
            int(p.attrs["ignore_index"]), eps,
            z.stride(0), z.stride(1), t.stride(0), rows_out.stride(0), z.stride(0), z.stride(1), stride_s,
            ROWS=c["ROWS"], BLOCK_V=c["BLOCK_V"], SINGLE=c["BLOCK_V"] >= z.shape[1], SMOOTH=eps > 0,
            WRITE_LOSS=write_loss, WRITE_STATS=stats is not None, WRITE_GRAD=write_grad, SCALE=kind,
            EMULATE=emulate(z.dtype), num_warps=c["num_warps"])

    def _dz_columns(self, z, col0, t, stats, s, kind, stride_s, p, c) -> None:
        """dz in place over the column slice z = logits[:, col0 : col0 + z.shape[1]] of all M rows."""
        eps = float(p.attrs["label_smoothing"])
        K.xent_bwd_kernel[(triton.cdiv(z.shape[0], c["ROWS"]),)](
            z, t, stats, s, z, z.shape[0], z.shape[1], col0, p.shape["V"], int(p.attrs["ignore_index"]), eps,
            z.stride(0), z.stride(1), t.stride(0), stride_s, z.stride(0), z.stride(1),
            ROWS=c["ROWS"], BLOCK_V=c["BLOCK_V"], SMOOTH=eps > 0, SCALE=kind, EMULATE=emulate(z.dtype),
            num_warps=c["num_warps"])

    @staticmethod
    def _logits_block(h, w, bv, c0, c1, v0, v1, out) -> None:
        """``out = h[c0:c1] @ w[v0:v1]^T + bv``: with the weight's gradient, both phases compute the
        logits as these (row chunk, vocabulary chunk) GEMMs, the same problem and operands each time, so
        dispatch picks the same config and every logit is the same sum in the same order, bit for bit:
        phase 2's dz then matches phase 1's statistics exactly. (One GEMM per phase over differently
        shaped blocks would round some logits differently, and a logit off by u |z| against statistics
        from the other rounding moves p by a relative u |z|: large for large logits.)"""
        gemm(h[c0:c1], w[v0:v1].t(), bv, out)

    def _chunks(self, inputs, p: Problem, c: Mapping[str, Any], rows_out: torch.Tensor | None, scale: tuple,
                gh: torch.Tensor | None, gw: torch.Tensor | None, gb: torch.Tensor | None) -> None:
        """Phase 1, the row chunks: logits, cross-entropy (row losses into ``rows_out`` unless None; with
        gh, the logits' gradient in place, scaled per ``scale`` = (tensor, SCALE kind, stride), and with gw
        the rows' statistics), the grad_hidden GEMM into gh (rows). Phase 2 (with gw), the vocabulary
        chunks: logits again for all rows, dz in place from the statistics, gw and gb written per chunk."""
        h, w, t, b = self._operands(inputs, p)
        M, H, V = p.shape["M"], p.shape["H"], p.shape["V"]
        dev, f32 = h.device, torch.float32
        C = min(c["CHUNK"], M)
        s, kind, stride_s = scale
        stats = scratch((M, 2), f32, dev) if gw is not None else None
        VC = min(c["VCHUNK"], V)
        vchunks = [(v0, min(v0 + VC, V), b[v0:v0 + VC] if b is not None else None) for v0 in range(0, V, VC)]
        logits = scratch((C, V), p.dtype, dev)
        for c0 in range(0, M, C):
            c1 = min(c0 + C, M)
            z = logits[: c1 - c0]
            if gw is None:
                gemm(h[c0:c1], w.t(), b, z)
            else:  # the same GEMMs, tile for tile, as phase 2: bit-identical logits (see _logits_block)
                for v0, v1, bv in vchunks:
                    self._logits_block(h, w, bv, c0, c1, v0, v1, z[:, v0:v1])
            self._ce(z, t[c0:c1], rows_out[c0:c1] if rows_out is not None else z,
                     stats[c0:c1] if stats is not None else None, s[c0:c1] if kind == 2 else s,
                     kind, stride_s, p, c, rows_out is not None, gh is not None)
            if gh is not None:
                gemm(z, w, None, gh[c0:c1])
        del logits, z  # the phase-1 buffer is dropped before phase 2 allocates its own
        if gw is None:
            return
        flat = scratch((M * VC,), p.dtype, dev)
        gw_out = gw if gw.is_contiguous() else scratch((V, H), p.dtype, dev)
        for v0, v1, bv in vchunks:
            z = flat[: M * (v1 - v0)].view(M, v1 - v0)
            for c0 in range(0, M, C):
                self._logits_block(h, w, bv, c0, min(c0 + C, M), v0, v1, z[c0:c0 + C])
            self._dz_columns(z, v0, t, stats, s, kind, stride_s, p, c)
            gemm(z.t(), h, None, gw_out[v0:v1])
            if gb is not None:
                gb[v0:v1].copy_(z.sum(0, dtype=f32))
        if gw_out is not gw:
            gw.copy_(gw_out)

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
