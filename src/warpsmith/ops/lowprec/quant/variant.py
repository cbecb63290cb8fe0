"""Variants of the quantization ops (spec.py): launchers, spaces, validity, heuristic defaults.

- ``quantize`` / ``rows``: one program per row of x, in chunks of BLOCK columns (knobs ``BLOCK``,
  ``num_warps``): the norm's sum of squares (``norm``), then per row an amax pass and a quantization pass
  (``row``), or one pass quantizing BLOCK // 128 groups a chunk (``block``: BLOCK a multiple of 128).
  ``tensor``: three launches, each row's amax into an (M,) workspace (after the norm), one program
  reducing it to the scale, then the rows quantized with that scale (the norm recomputed): x is read
  twice (four times with the norm).
  Default: today's launch, BLOCK = min(4096, next power of two >= N) per row, 128 per block; 4 warps.
- ``stochastic_round`` / ``elementwise``: one program per BLOCK elements (knobs ``BLOCK``, ``num_warps``).
  The draw of element i is Philox(seed, i), so every BLOCK gives the same bits. Default: 1024 elements and
  4 warps on a GPU (today's launch); under the interpreter, whose cost is per program, the largest block
  whose register estimate fits at 8 warps (8192 elements; the results are the same).

The launchers' preconditions are stated once, here (:func:`columns_fit`, :func:`elements_fit`): the
launchers refuse what they exclude, and the launch contracts (contract.py) take them as their domain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core._triton import INTERPRET, triton
from ....core.config import Knobs
from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....core.variant import Config, Variant, next_pow2, scratch
from ....cost.memory_model import MemoryWork
from ....space import Enum, Pow2, Space
from ....targets import Target
from ...shared import kernel as common
from ...shared.launch import allocate, emulated
from . import kernel as K
from .limits import AMAX_BLOCK, INDEX_LIMIT, columns_fit, elements_fit
from .reference import BLOCK as GROUP, QMAX
from .spec import DEQUANTIZE, QUANTIZE, QUANTIZE_STATIC, STOCHASTIC_ROUND, scale_columns, scale_shape

WARPS = (1, 2, 4, 8, 16)
ROW_CHUNK_MAX = 4096  # today's per-row chunk cap (the default)
REG_OVERHEAD = 40  # addresses, masks, loop state (an estimate; gpucheck reports ptxas's counts)


def chunk_rejection(granularity: str, block: int) -> str | None:
    """Block granularity quantizes whole 1x128 groups a chunk: BLOCK a multiple of 128."""
    if granularity == "block" and (block < GROUP or block % GROUP):
        return f"block granularity needs BLOCK a multiple of {GROUP} (whole 1x{GROUP} groups a chunk), got {block}"
    return None


@dataclass(frozen=True, kw_only=True)
class QuantKnobs(Knobs):
    BLOCK: int
    num_warps: int


def _per_thread(block: int, warps: int, warp_size: int = 32) -> int:
    return -(-block // (warps * warp_size))


class QuantizeRows(Variant):
    op = "quantize"
    name = "rows"
    knobs = QuantKnobs
    kernel_modules = (K, common)
    cost_model = "memory"

    @staticmethod
    def granularity(p: Problem) -> str:
        return p.attrs.get("granularity", "row")  # quantize_static and dequantize: per-element chunks

    def default_block(self, p: Problem) -> int:
        return GROUP if self.granularity(p) == "block" else min(ROW_CHUNK_MAX, next_pow2(p.shape["N"]))

    def space(self, p: Problem, target: Target) -> Space:
        d = self.default_block(p)
        if self.granularity(p) == "block":
            block = Pow2(GROUP, max(GROUP, min(ROW_CHUNK_MAX, next_pow2(p.shape["N"]))), d)
        else:
            block = Pow2(min(32, d), max(d, min(2 * ROW_CHUNK_MAX, next_pow2(p.shape["N"]))), d)
        return Space({"BLOCK": block, "num_warps": Enum(WARPS, 4)})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        cfg = self.typed(c)
        why = chunk_rejection(self.granularity(p), cfg.BLOCK)
        if why:
            return why
        if cfg.num_warps * target.warp_size > 1024:
            return f"{cfg.num_warps} warps of {target.warp_size} threads > 1024 threads per program"
        if not columns_fit(p.shape["N"], cfg.BLOCK):
            return f"N + BLOCK must be at most 2^31 (int32 column indices), got N={p.shape['N']}, BLOCK={cfg.BLOCK}"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        return {"BLOCK": self.default_block(p), "num_warps": 4}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": 1, "N": config["BLOCK"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(problem, config)

    def passes(self, p: Problem) -> int:
        """Reads of each row: the norm's sum of squares, the row's amax (``row``, ``tensor``), the
        quantization (and ``tensor``'s second norm)."""
        norm, gran = int(bool(p.attrs["norm"])), p.attrs["granularity"]
        return 2 + 2 * norm if gran == "tensor" else 1 + norm + int(gran == "row")

    def moved(self, p: Problem) -> int:
        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        norm, gran = bool(p.attrs["norm"]), p.attrs["granularity"]
        scales = 4 * (2 * M + 1 if gran == "tensor" else M * scale_columns(gran, N))  # tensor: the workspace twice
        return M * N * e * self.passes(p) + (N * e if norm else 0) * (2 if gran == "tensor" else 1) + M * N + scales

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        cfg = self.typed(c)
        N, M, e = p.shape["N"], p.shape["M"], p.dtype.itemsize
        reads = self.passes(p)
        norm = bool(p.attrs.get("norm"))
        moved = self.moved(p)
        live = 3 + int(norm)  # y, |y| or the quantized value, a temporary (+ the weight)
        tensor = p.attrs.get("granularity") == "tensor"
        return MemoryWork(bytes_moved=float(moved), programs=M * (2 if tensor else 1) + int(tensor),
                          num_warps=cfg.num_warps, block_bytes=float(cfg.BLOCK * e),
                          steps=float(triton.cdiv(N, cfg.BLOCK) * reads),
                          regs_per_thread=live * _per_thread(cfg.BLOCK, cfg.num_warps, target.warp_size) + REG_OVERHEAD,
                          launches=3 if tensor else 1)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any], out: Any = None):
        p, cfg = problem, self.typed(config)
        M, N = p.shape["M"], p.shape["N"]
        x = inputs["x"]
        if tuple(x.shape) != (M, N) or x.dtype != p.dtype or (N > 1 and x.stride(1) != 1):
            raise InvalidInputError("x", f"({M}, {N}) {p.dtype} with unit column stride",
                                    f"{tuple(x.shape)} {x.dtype} strides {x.stride()}")
        w = inputs.get("weight")
        if p.attrs["norm"]:
            if w is None or tuple(w.shape) != (N,) or w.device != x.device or (N > 1 and w.stride(0) != 1):
                raise InvalidInputError("weight", f"a contiguous ({N},) tensor on {x.device} (norm=True)",
                                        None if w is None else f"{tuple(w.shape)} on {w.device}")
        if not columns_fit(N, cfg.BLOCK):
            raise InvalidInputError("N", f"at most 2^31 - BLOCK = {INDEX_LIMIT - cfg.BLOCK} columns (int32 indices)", N)
        why = chunk_rejection(p.attrs["granularity"], cfg.BLOCK)
        if why:
            raise InvalidInputError("BLOCK of quantize/rows", f"a multiple of {GROUP}", why)
        q, s = allocate(out, QUANTIZE.outputs(p), x.device, unit_cols=True)
        fmt, gran = p.attrs["format"], p.attrs["granularity"]
        args = (x, w if w is not None else x, q if q.dtype == torch.int8 else q.view(torch.uint8))
        meta = dict(BLOCK=cfg.BLOCK, NORM=bool(p.attrs["norm"]), FMT=fmt, EMULATE=INTERPRET, num_warps=cfg.num_warps)
        if gran == "tensor":
            amax = scratch((M,), torch.float32, x.device)
            K.quant_rows_kernel[(M,)](*args, amax, s, N, x.stride(0), q.stride(0), 1, float(p.attrs["eps"]),
                                      QMAX[fmt], GROUP=0, STATIC=False, AMAX_ONLY=True, **meta)
            K.amax_scale_kernel[(1,)](amax, s, M, QMAX[fmt], BLOCK=AMAX_BLOCK, num_warps=4)
            K.quant_rows_kernel[(M,)](*args, s, s, N, x.stride(0), q.stride(0), 0, float(p.attrs["eps"]),
                                      QMAX[fmt], GROUP=0, STATIC=True, **meta)
            return q, s
        K.quant_rows_kernel[(M,)](
            *args, s, s, N, x.stride(0), q.stride(0), s.stride(0), float(p.attrs["eps"]), QMAX[fmt],
            GROUP=0 if gran == "row" else GROUP, STATIC=False, **meta)
        return q, s


class QuantizeStaticRows(QuantizeRows):
    """quantize_static: the same kernel with the given scale (STATIC), one pass a row."""

    op = "quantize_static"

    def passes(self, p: Problem) -> int:
        return 1

    def moved(self, p: Problem) -> int:
        return int(QUANTIZE_STATIC.min_bytes(p))

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any], out: Any = None):
        p, cfg = problem, self.typed(config)
        M, N = p.shape["M"], p.shape["N"]
        x, scale = inputs["x"], inputs["scale"]
        if tuple(x.shape) != (M, N) or x.dtype != p.dtype or (N > 1 and x.stride(1) != 1):
            raise InvalidInputError("x", f"({M}, {N}) {p.dtype} with unit column stride",
                                    f"{tuple(x.shape)} {x.dtype} strides {x.stride()}")
        if tuple(scale.shape) != (1,) or scale.dtype != torch.float32 or scale.device != x.device:
            raise InvalidInputError("scale", f"a (1,) float32 tensor on {x.device}",
                                    f"{tuple(scale.shape)} {scale.dtype} on {scale.device}")
        if not columns_fit(N, cfg.BLOCK):
            raise InvalidInputError("N", f"at most 2^31 - BLOCK = {INDEX_LIMIT - cfg.BLOCK} columns (int32 indices)", N)
        (q,) = allocate(out, QUANTIZE_STATIC.outputs(p), x.device, unit_cols=True)
        fmt = p.attrs["format"]
        K.quant_rows_kernel[(M,)](
            x, x, q if q.dtype == torch.int8 else q.view(torch.uint8), scale, scale, N, x.stride(0), q.stride(0), 0,
            0.0, QMAX[fmt], GROUP=0, BLOCK=cfg.BLOCK, NORM=False, STATIC=True, FMT=fmt, EMULATE=INTERPRET,
            num_warps=cfg.num_warps)
        return q


class DequantizeRows(QuantizeRows):
    """dequantize: one program per row in chunks of BLOCK columns (any BLOCK: the block scale is indexed
    per element, ``col // 128``); default today's, 128 per block, min(4096, next power of two >= N) else."""

    op = "dequantize"

    @staticmethod
    def granularity(p: Problem) -> str:
        return "row"  # any chunk: the kernel indexes the block scale per element

    def default_block(self, p: Problem) -> int:
        if p.attrs["scaling"] == "block" and p.shape["N"] > 1:
            return GROUP
        return min(ROW_CHUNK_MAX, next_pow2(p.shape["N"]))

    def passes(self, p: Problem) -> int:
        return 1

    def moved(self, p: Problem) -> int:
        return int(DEQUANTIZE.min_bytes(p))

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any], out: Any = None):
        p, cfg = problem, self.typed(config)
        M, N = p.shape["M"], p.shape["N"]
        q, scale = inputs["q"], inputs["scale"]
        want = scale_shape(p.attrs["scaling"], M, N)
        if tuple(q.shape) != (M, N) or (N > 1 and q.stride(1) != 1):
            raise InvalidInputError("q", f"({M}, {N}) with unit column stride", f"{tuple(q.shape)} strides {q.stride()}")
        if tuple(scale.shape) != want or scale.dtype != torch.float32 or scale.device != q.device:
            raise InvalidInputError("scale", f"a {want} float32 tensor on {q.device} ({p.attrs['scaling']} scaling)",
                                    f"{tuple(scale.shape)} {scale.dtype} on {scale.device}")
        if not columns_fit(N, cfg.BLOCK):
            raise InvalidInputError("N", f"at most 2^31 - BLOCK = {INDEX_LIMIT - cfg.BLOCK} columns (int32 indices)", N)
        (y,) = allocate(out, DEQUANTIZE.outputs(p), q.device, unit_cols=True)
        sc = p.attrs["scaling"]
        decode = p.attrs["format"] if INTERPRET and p.attrs["format"] != "int8" else ""
        K.dequant_rows_kernel[(M,)](
            q.view(torch.uint8) if decode else q, scale, y, N, q.stride(0), scale.stride(0) if scale.dim() == 2 else 0, y.stride(0),
            GROUP=GROUP if sc == "block" else 0, BLOCK=cfg.BLOCK, TENSOR=sc == "tensor", EMULATE=emulated(p.dtype),
            DECODE=decode, num_warps=cfg.num_warps)
        return y


class StochasticRoundElementwise(Variant):
    op = "stochastic_round"
    name = "elementwise"
    knobs = QuantKnobs
    kernel_modules = (K, common)
    cost_model = "memory"
    INTERPRETER_DEFAULT = {"BLOCK": 8192, "num_warps": 8}
    GPU_DEFAULT = {"BLOCK": 1024, "num_warps": 4}

    def space(self, p: Problem, target: Target) -> Space:
        hi = max(128, min(65536, next_pow2(p.shape["N"])))
        return Space({"BLOCK": Pow2(128, hi, min(1024, hi)), "num_warps": Enum(WARPS, 4)})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        cfg = self.typed(c)
        if cfg.num_warps * target.warp_size > 1024:
            return f"{cfg.num_warps} warps of {target.warp_size} threads > 1024 threads per program"
        if not elements_fit(p.shape["N"]):
            return f"at most 2^32 elements (distinct Philox counters), got {p.shape['N']}"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        return dict(self.INTERPRETER_DEFAULT if INTERPRET else self.GPU_DEFAULT)

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"N": config["BLOCK"]}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(problem, config)

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> MemoryWork:
        cfg = self.typed(c)
        n = p.shape["N"]
        return MemoryWork(bytes_moved=float(STOCHASTIC_ROUND.min_bytes(p)), programs=triton.cdiv(n, cfg.BLOCK),
                          num_warps=cfg.num_warps, block_bytes=float(4 * cfg.BLOCK),
                          regs_per_thread=4 * _per_thread(cfg.BLOCK, cfg.num_warps, target.warp_size) + REG_OVERHEAD)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any], out: Any = None):
        p, cfg = problem, self.typed(config)
        n = p.shape["N"]
        x = inputs["x"]
        if x.dtype != torch.float32 or x.numel() != n or not x.is_contiguous():
            raise InvalidInputError("x", f"a contiguous float32 tensor of {n} elements",
                                    f"{x.dtype}, {x.numel()} elements, contiguous={x.is_contiguous()}")
        if not elements_fit(n):
            raise InvalidInputError("number of elements", "at most 2^32 (distinct Philox counters)", n)
        (y,) = allocate(out, STOCHASTIC_ROUND.outputs(p), x.device)
        bf16 = p.attrs["target"] == "bf16"
        K.stochastic_round_kernel[(triton.cdiv(n, cfg.BLOCK),)](
            x, y if bf16 else y.view(torch.uint8), n, int(p.attrs["seed"]),
            FMT="bf16" if bf16 else "e4m3", BLOCK=cfg.BLOCK, EMULATE=INTERPRET, num_warps=cfg.num_warps)
        return y


VARIANTS: tuple[Variant, ...] = (QuantizeRows(), StochasticRoundElementwise(), QuantizeStaticRows(), DequantizeRows())
