"""Attention variants: launchers, search spaces, validity, and the work the cost model ranks.

- ``attention/flash``: FlashAttention-2's forward (kernel.attention_fwd_kernel), one program per
  block of BLOCK_M queries of one head; knobs ``BLOCK_M``, ``BLOCK_N`` (keys per step),
  ``num_warps``, ``num_stages``.
- ``attention_backward/flash``: three launches, deterministic (no atomics): delta = rowsum(dO O),
  then dK/dV per block of BLOCK_N keys (looping over the G query heads and the visible query
  blocks of BLOCK_M), then dQ per block of BLOCK_M queries (looping over key blocks of BLOCK_N).

Head dims are padded to powers of two (``BLOCK_D``, ``BLOCK_DV``, at least 16, derived from D
and Dv, not knobs) and masked, so any D, Dv <= 256 runs (80, 96, 192 included).

Validity (one predicate per variant): shared memory of the pipelined K/V tiles against the
target, registers per thread (``work``'s estimate, checked by ``register_rejection``), and the
grid's limits (``H * G`` and ``B`` at most 65535: grid axes 1 and 2).

The cost model is the memory model (cost/memory_model.py) fed with the block-level work: bytes
(K and V re-read once per query block, Q once per key block in the backward), the FLOPs of every
visited block (padding and the masked part of diagonal blocks included; causal and window
blocks skipped), divided by a tile efficiency (bigger tiles and deeper pipelines reuse more), and
rounded up to whole waves of programs. It is a ranking model; its figures are *predicted*.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ...core._triton import triton
from ...core.config import Knobs
from ...core.errors import InvalidInputError
from ...core.opspec import Problem
from ...core.variant import Config, Variant, is_pow2, next_pow2, scratch
from ...cost.roofline import math_kind
from ...space import Enum, IntRange, Pow2, Space
from ...targets import Target
from ..shared import kernel as common
from ..shared.launch import allocate, emulated
from . import kernel as K
from .limits import INDEX_LIMIT, MAX_BLOCK, head_blocks, window_args
from .spec import ATTENTION, ATTENTION_BACKWARD, MERGE_ATTENTION_STATES, diagonal, softmax_scale

GRID_AXIS_LIMIT = 65535
WARPS = (2, 4, 8)
_REG_OVERHEAD = 48


@dataclass(frozen=True, kw_only=True)
class FlashKnobs(Knobs):
    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int


def _strides4(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, head, position) strides of q/k/v-like tensors: (B, H, S, D), or packed (T, H, D)."""
    if varlen:
        return 0, t.stride(1), t.stride(0)
    return t.stride(0), t.stride(1), t.stride(2)


def _lse_strides(t: torch.Tensor, varlen: bool) -> tuple[int, int]:
    return (0, t.stride(0)) if varlen else (t.stride(0), t.stride(1))


def max_seqlen(cu: torch.Tensor) -> int:
    """The longest sequence of a cu_seqlens tensor (one device-to-host read)."""
    return int((cu[1:] - cu[:-1]).max().item()) if cu.numel() > 1 else 0


class _Flash(Variant):
    name = "flash"
    knobs = FlashKnobs
    kernel_modules = (K, common)
    cost_model = "memory"
    backward = False

    # ---- space and validity --------------------------------------------------------------------
    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        return Space({
            "BLOCK_M": Pow2(16, MAX_BLOCK, d["BLOCK_M"]),
            "BLOCK_N": Pow2(16, MAX_BLOCK, d["BLOCK_N"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
            "num_stages": IntRange(1, 4, d["num_stages"]),
        })

    def smem_bytes(self, p: Problem, c: Mapping[str, Any]) -> int:
        bd, bdv = head_blocks(p)
        e = p.dtype.itemsize
        if self.backward:  # dK/dV kernel: k, v resident; q, dO tiles pipelined
            return (c["BLOCK_N"] * (bd + bdv) + c["num_stages"] * c["BLOCK_M"] * (bd + bdv)) * e
        return (c["BLOCK_M"] * bd + c["num_stages"] * c["BLOCK_N"] * (bd + bdv)) * e

    def regs_per_thread(self, p: Problem, c: Mapping[str, Any], target: Target) -> int:
        """Estimated 32-bit registers per thread of the heaviest kernel: the fp32 accumulators and
        score tiles, the operand tiles a thread holds (q in the forward and the dQ kernel; k and v in
        the dK/dV kernel) and the products' fragments unless Hopper's warpgroup MMA reads them from
        shared memory (4k warps, an M side of at least 64, not fp32). fp32 products run as FMAs with
        both operands in registers (x1.5 forward, x2 backward beyond 16x16 tiles), softcap keeps tanh (one more score
        tile). Fitted to ptxas's counts (sm_90, Triton 3.9) over the 300 configs of ``warpsmith
        gpucheck --ops attention,attention_backward``: 2 spilling samples accepted, no default."""
        bd, bdv = head_blocks(p)
        threads = c["num_warps"] * target.warp_size
        bm, bn, e = c["BLOCK_M"], c["BLOCK_N"], p.dtype.itemsize
        fp32 = p.dtype == torch.float32

        def wgmma(m_side: int) -> bool:
            return target.arch == "sm_90" and c["num_warps"] % 4 == 0 and m_side >= 64 and not fp32

        if not self.backward:  # the output accumulator, S and P, q; k and v fragments
            regs = bm * bdv + (8 if fp32 else 2) * bm * bn + bm * bd * e / 4
            if not wgmma(bm):
                regs += bn * (bd + bdv) * e / 4
            return int(regs / threads * (1.5 if fp32 else 1.0)) + _REG_OVERHEAD
        tiles = (4 + bool(p.attrs["softcap"]) + bool(p.attrs["bias"])) * bm * bn  # S, P, dP, dS (tanh, bias)
        h = min(e, 2) / 4  # operand tiles: fp32 ones counted like half ones, the x2 below covers FMA products
        dkdv = bn * (bd + bdv) + tiles + (0 if wgmma(bn) else (bn + bm) * (bd + bdv) * h)
        dq = bm * bd + tiles + bm * (bd + bdv) * h + (0 if wgmma(bm) else bn * (bd + bdv) * h)
        # fp32 FMA products double the tiles' registers, except for 16x16 tiles: one fragment per thread
        f32 = 2.0 if bm * bn > 256 else 1.0
        return int(max(dkdv, dq) / threads * (f32 if fp32 else 1.0)) + _REG_OVERHEAD + (bd + bdv) // 8

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        d = ATTENTION.dims(p)
        for knob in ("BLOCK_M", "BLOCK_N"):
            if not is_pow2(c[knob]) or not 16 <= c[knob] <= MAX_BLOCK:
                return f"{knob}={c[knob]} must be a power of two in [16, {MAX_BLOCK}]"
        if c["num_warps"] not in WARPS:
            return f"num_warps={c['num_warps']} not one of {WARPS}"
        if not 1 <= c["num_stages"] <= 4:
            return f"num_stages={c['num_stages']} not in [1, 4]"
        if p.attrs["bias"] and p.attrs["varlen"]:
            return "a score bias (attention mask) is supported for padded (B, H, S, D) inputs, not packed ones"
        if d["Hq"] > GRID_AXIS_LIMIT or d["B"] > GRID_AXIS_LIMIT:
            return f"H * G = {d['Hq']} query heads and B = {d['B']} must each be at most {GRID_AXIS_LIMIT} (grid axes)"
        smem = self.smem_bytes(p, c)
        if smem > target.smem_per_block:
            return f"shared memory {smem} B > {target.smem_per_block} B on {target.name}"
        bd, _ = head_blocks(p)
        if max(c["BLOCK_M"], c["BLOCK_N"]) * max(min(c["BLOCK_M"], c["BLOCK_N"]), bd) < 16 * 16 * c["num_warps"] // 2:
            return f"tiles of {c['BLOCK_M']}x{c['BLOCK_N']} (head dim {bd}) too small for {c['num_warps']} warps"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        """The first of a preference list (big tiles first, as FlashAttention-2's Triton kernels use
        them) that runs on the target with the register estimate; the query block is capped by the
        (average) sequence length."""
        d = ATTENTION.dims(p)
        seq = d["Sq"] if not p.attrs["varlen"] else max(1, d["Sq"] // d["B"])
        cap = max(16, next_pow2(seq))
        if self.backward and p.dtype == torch.float32:
            # Triton 3.6's ptxas spills the 8-warp 16x16 dK/dV kernel at head dims 192-256 with 80
            # registers (no cap: an allocation quirk); 4 warps hold it in 168 under 3.6 and 3.9
            prefs = [(16, 64, 8, 1), (16, 16, 4, 1), (16, 16, 8, 1)]
        elif p.dtype == torch.float32:
            # fp32 forward (FMA products, correctness only on GPUs): a 32x32 tile at 8 warps takes
            # 200+ registers at head dim 128 and spills with varlen's addressing under Triton 3.6;
            # 16x32 takes about 60
            prefs = [(16, 32, 8, 1), (16, 16, 8, 1), (16, 16, 4, 1), (16, 16, 2, 1)]
        elif self.backward:
            prefs = [(32, 64, 4, 2), (32, 32, 4, 2), (16, 32, 4, 1), (32, 16, 4, 1), (16, 16, 4, 1), (16, 32, 8, 1),
                     (16, 16, 8, 1), (16, 16, 2, 1)]
        else:
            prefs = [(128, 64, 8, 2), (64, 64, 4, 2), (64, 32, 8, 2), (64, 32, 4, 2), (32, 32, 8, 1), (32, 32, 4, 1),
                     (16, 32, 4, 1), (16, 16, 4, 1), (16, 32, 8, 1), (16, 16, 8, 1), (16, 16, 2, 1)]
        first = None
        for bm, bn, nw, st in prefs:
            c = {"BLOCK_M": min(bm, cap) if not self.backward else bm, "BLOCK_N": bn, "num_warps": nw, "num_stages": st}
            first = first or c
            if self.rejection(p, c, target) is None:
                return c
        return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 2, "num_stages": 1}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        # B, H and G are not cut into blocks: 1 keeps the verifier's odd shapes small (B = H = G = 2)
        return {"Sq": config["BLOCK_M"], "Sk": config["BLOCK_N"], "B": 1, "H": 1, "G": 1, "D": 16}

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)

    # ---- cost ----------------------------------------------------------------------------------
    def visited_blocks(self, p: Problem, c: Mapping[str, Any]) -> tuple[int, int]:
        """(query blocks, visited (query block, key block) pairs) per head and sequence (packed:
        per average sequence), from the forward's (and dQ kernel's) loop bounds; the dK/dV kernel
        visits the same pairs."""
        d = ATTENTION.dims(p)
        sq, sk = (d["Sq"], d["Sk"]) if not p.attrs["varlen"] else (max(1, d["Sq"] // d["B"]), max(1, d["Sk"] // d["B"]))
        w = window_args(p.attrs, sq, sk)
        off = diagonal(p.attrs, sq, sk)
        bm, bn = c["BLOCK_M"], c["BLOCK_N"]
        blocks, visited = triton.cdiv(sq, bm), 0
        for m0 in range(0, sq, bm):
            lo = (max(m0 + off - w["win_lo"], 0) // bn) * bn if w["HAS_LO"] else 0
            hi = min(m0 + bm + off + w["win_hi"], sk) if w["HAS_HI"] else sk
            visited += max(0, triton.cdiv(hi - lo, bn)) if hi > lo else 0
        return blocks, visited

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        d = ATTENTION.dims(p)
        bd, bdv = head_blocks(p)
        e = p.dtype.itemsize
        seqs = d["B"]
        blocks, visited = self.visited_blocks(p, c)
        bm, bn, nw = c["BLOCK_M"], c["BLOCK_N"], c["num_warps"]
        heads = d["Hq"]
        per_pair = (3 * bd + 2 * bdv) if self.backward else (bd + bdv)
        flops = 2.0 * bm * bn * per_pair * visited * heads * seqs
        # tile efficiency: larger tiles reuse operands from registers/shared memory; pipelining hides loads
        tile = min(1.0, (bm * bn / (128 * 64)) ** 0.25)
        pipe = {1: 0.6, 2: 0.85, 3: 0.95}.get(c["num_stages"], 1.0)
        warps_fit = 1.0 if 16 <= bm * bn / (32 * nw) <= 128 else 0.8
        programs = blocks * heads * seqs
        occupancy = max(1, min(target.smem_per_sm // max(1, self.smem_bytes(p, c)), target.max_warps_per_sm // nw, 4))
        slots = occupancy * target.sms
        waves = triton.cdiv(programs, slots)
        quant = waves * slots / max(1, programs)  # the last wave's idle slots
        eff_flops = flops * min(quant, 4.0) / (tile * pipe * warps_fit)
        kv_bytes = visited * heads * seqs * bn * (bd + bdv) * e  # K and V per visited block
        q_bytes = d["Hq"] * d["Sq"] * (bd + bdv) * e * (1 if p.attrs["varlen"] else seqs)
        if self.backward:
            kv_bytes *= 2  # the dK/dV kernel reads q and dO per visited block; the dQ kernel K and V
            q_bytes *= 3
        return MemoryWork(
            bytes_moved=float(kv_bytes + q_bytes), programs=programs * (3 if self.backward else 1), num_warps=nw,
            block_bytes=float(bn * (bd + bdv) * e), steps=float(max(1, visited // max(1, blocks))),
            regs_per_thread=self.regs_per_thread(p, c, target), smem_bytes=self.smem_bytes(p, c),
            launches=3 if self.backward else 1, flops=eff_flops, math_kind=math_kind(p.dtype))

    # ---- launch helpers ------------------------------------------------------------------------
    def _check(self, inputs: Mapping[str, torch.Tensor], p: Problem, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        sh = ATTENTION._shapes(p)
        sh["dout"] = sh["out"]
        ts = {}
        for n in names:
            t = inputs.get(n)
            if not isinstance(t, torch.Tensor):
                raise InvalidInputError(f"input {n} of {self.op}", "a torch.Tensor", type(t).__name__)
            want = sh[n]
            if tuple(t.shape) != tuple(want):
                raise InvalidInputError(f"shape of {n}", str(tuple(want)), str(tuple(t.shape)))
            dt = torch.float32 if n == "lse" else p.dtype
            if n == "bias" and t.is_floating_point():
                dt = t.dtype  # a mask in any float dtype (boolean masks arrive as 0 / -inf)
            if t.dtype != dt:
                raise InvalidInputError(f"dtype of {n}", str(dt), str(t.dtype))
            if n not in ("lse", "bias") and t.shape[-1] > 1 and t.stride(-1) != 1:
                raise InvalidInputError(f"last stride of {n}", "1 (head dim contiguous)", t.stride(-1))
            if n == "lse" and t.shape[-1] > 1 and t.stride(-1) != 1:
                raise InvalidInputError("last stride of lse", "1", t.stride(-1))
            ts[n] = t
        dev = ts[names[0]].device
        if p.attrs["varlen"]:
            for n in ("cu_seqlens_q", "cu_seqlens_k"):
                cu = inputs.get(n)
                if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or tuple(cu.shape) != (p.shape["B"] + 1,):
                    raise InvalidInputError(n, f"an int32 tensor of shape ({p.shape['B'] + 1},)",
                                            f"{tuple(cu.shape)} {cu.dtype}" if isinstance(cu, torch.Tensor) else cu)
                ts[n] = cu
        for n, t in ts.items():
            if t.device != dev:
                raise InvalidInputError(f"device of {n}", str(dev), str(t.device))
        return ts

    def _lengths(self, p: Problem, ts: Mapping[str, torch.Tensor]) -> tuple[int, int]:
        if p.attrs["varlen"]:
            return max_seqlen(ts["cu_seqlens_q"]), max_seqlen(ts["cu_seqlens_k"])
        return p.shape["Sq"], p.shape["Sk"]

    @staticmethod
    def _index_check(name: str, t: torch.Tensor, seq: int, varlen: bool) -> None:
        stride = t.stride(0) if varlen else t.stride(2)
        span = (seq + MAX_BLOCK) * stride + 256
        if span >= INDEX_LIMIT:
            raise InvalidInputError(f"size of {name}", "offsets within one sequence below 2^31 (the kernels index "
                                    "a sequence in 32 bits)", f"offsets up to {span}")

    def _bias_args(self, p: Problem, ts: Mapping[str, torch.Tensor], fallback: torch.Tensor) -> tuple[Any, dict]:
        if not p.attrs["bias"]:
            return fallback, dict(stride_bb=0, stride_bh=0, stride_bm=0, stride_bn=0)
        b = ts["bias"]
        span = (b.shape[2] + MAX_BLOCK) * b.stride(2) + (b.shape[3] + MAX_BLOCK) * b.stride(3)
        if span >= INDEX_LIMIT:
            raise InvalidInputError("size of bias", "offsets within one (batch, head) below 2^31", span)
        return b, dict(zip(("stride_bb", "stride_bh", "stride_bm", "stride_bn"), b.stride()))

    def _common(self, p: Problem, c: Mapping[str, Any], sq: int, sk: int) -> tuple[dict, dict]:
        bd, bdv = head_blocks(p)
        w = window_args(p.attrs, sq, sk)
        d = ATTENTION.dims(p)
        runtime = dict(D=d["D"], DV=d["Dv"], G=d["G"], sm_scale=softmax_scale(p.attrs, d["D"]),
                       softcap=float(p.attrs["softcap"] or 0.0) or 1.0, win_lo=w["win_lo"], win_hi=w["win_hi"],
                       align_br=w["align_br"])
        meta = dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], BLOCK_D=bd, BLOCK_DV=bdv, HAS_LO=w["HAS_LO"],
                    HAS_HI=w["HAS_HI"], SOFTCAP=bool(p.attrs["softcap"]), HAS_BIAS=bool(p.attrs["bias"]), VARLEN=bool(p.attrs["varlen"]),
                    IS_FP32=p.dtype == torch.float32, EMULATE=emulated(p.dtype), num_warps=c["num_warps"],
                    num_stages=c["num_stages"])
        return runtime, meta


class FlashForward(_Flash):
    op = "attention"

    def launch(self, inputs, problem, config, out=None):
        p, c = problem, config
        ts = self._check(inputs, p, ("q", "k", "v") + (("bias",) if p.attrs["bias"] else ()))
        q, k, v = ts["q"], ts["k"], ts["v"]
        varlen = bool(p.attrs["varlen"])
        o, lse = allocate(out, ATTENTION.outputs(p), q.device)
        if o.stride(-1) != 1 or (lse.shape[-1] > 1 and lse.stride(-1) != 1):
            raise InvalidInputError("out", "outputs with unit last stride", f"strides {o.stride()}, {lse.stride()}")
        sq, sk = self._lengths(p, ts)
        for name, t, s in (("q", q, sq), ("k", k, sk), ("v", v, sk), ("out", o, sq)):
            self._index_check(name, t, s, varlen)
        runtime, meta = self._common(p, c, sq, sk)
        cu_q = ts.get("cu_seqlens_q", lse)  # unused when not packed
        cu_k = ts.get("cu_seqlens_k", lse)
        bias, sb = self._bias_args(p, ts, lse)
        if sq == 0:
            return o, lse
        grid = (triton.cdiv(sq, c["BLOCK_M"]), ATTENTION.dims(p)["Hq"], p.shape["B"])
        K.attention_fwd_kernel[grid](
            q, k, v, o, lse, cu_q, cu_k, bias, sq, sk, **runtime, **sb,
            **dict(zip(("stride_qb", "stride_qh", "stride_qs"), _strides4(q, varlen))),
            **dict(zip(("stride_kb", "stride_kh", "stride_ks"), _strides4(k, varlen))),
            **dict(zip(("stride_vb", "stride_vh", "stride_vs"), _strides4(v, varlen))),
            **dict(zip(("stride_ob", "stride_oh", "stride_os"), _strides4(o, varlen))),
            **dict(zip(("stride_lb", "stride_lh"), _lse_strides(lse, varlen))),
            **meta)
        return o, lse


class FlashBackward(_Flash):
    op = "attention_backward"
    backward = True

    def launch(self, inputs, problem, config, out=None):
        p, c = problem, config
        ts = self._check(inputs, p, ("q", "k", "v", "out", "lse", "dout") + (("bias",) if p.attrs["bias"] else ()))
        q, k, v, o, lse, do = (ts[n] for n in ("q", "k", "v", "out", "lse", "dout"))
        varlen = bool(p.attrs["varlen"])
        dq, dk, dv = allocate(out, ATTENTION_BACKWARD.outputs(p), q.device)
        if any(t.stride(-1) != 1 for t in (dq, dk, dv) if t.shape[-1] > 1):
            raise InvalidInputError("out", "gradients with unit last stride", [t.stride() for t in (dq, dk, dv)])
        sq, sk = self._lengths(p, ts)
        for name, t, s in (("q", q, sq), ("k", k, sk), ("v", v, sk), ("out", o, sq), ("dout", do, sq),
                           ("dq", dq, sq), ("dk", dk, sk), ("dv", dv, sk)):
            self._index_check(name, t, s, varlen)
        runtime, meta = self._common(p, c, sq, sk)
        d = ATTENTION.dims(p)
        cu_q = ts.get("cu_seqlens_q", lse)
        cu_k = ts.get("cu_seqlens_k", lse)
        delta = scratch(tuple(lse.shape), torch.float32, q.device)
        bias, sb = self._bias_args(p, ts, lse)
        sq_ = dict(zip(("stride_qb", "stride_qh", "stride_qs"), _strides4(q, varlen)))
        sk_ = dict(zip(("stride_kb", "stride_kh", "stride_ks"), _strides4(k, varlen)))
        sv_ = dict(zip(("stride_vb", "stride_vh", "stride_vs"), _strides4(v, varlen)))
        sdo = dict(zip(("stride_dob", "stride_doh", "stride_dos"), _strides4(do, varlen)))
        sl = dict(zip(("stride_lb", "stride_lh"), _lse_strides(lse, varlen)))
        if delta.stride() != lse.stride():
            raise InvalidInputError("lse", "a contiguous tensor", lse.stride())
        B = p.shape["B"]
        bdv = meta["BLOCK_DV"]
        if sq > 0:
            K.attention_bwd_preprocess_kernel[(triton.cdiv(sq, c["BLOCK_M"]), d["Hq"], B)](
                o, do, delta, cu_q, sq, d["Dv"], **dict(zip(("stride_ob", "stride_oh", "stride_os"), _strides4(o, varlen))),
                **sdo, **sl, BLOCK_M=c["BLOCK_M"], BLOCK_DV=bdv, VARLEN=varlen, num_warps=c["num_warps"])
        if sk > 0:
            K.attention_bwd_dkdv_kernel[(triton.cdiv(sk, c["BLOCK_N"]), d["H"], B)](
                q, k, v, do, lse, delta, dk, dv, cu_q, cu_k, bias, sq, sk, **runtime, **sq_, **sk_, **sv_, **sdo, **sl,
                **sb,
                **dict(zip(("stride_dkb", "stride_dkh", "stride_dks"), _strides4(dk, varlen))),
                **dict(zip(("stride_dvb", "stride_dvh", "stride_dvs"), _strides4(dv, varlen))), **meta)
        if sq > 0:
            K.attention_bwd_dq_kernel[(triton.cdiv(sq, c["BLOCK_M"]), d["Hq"], B)](
                q, k, v, do, lse, delta, dq, cu_q, cu_k, bias, sq, sk, **runtime, **sq_, **sk_, **sv_, **sdo, **sl, **sb,
                **dict(zip(("stride_dqb", "stride_dqh", "stride_dqs"), _strides4(dq, varlen))), **meta)
        return dq, dk, dv


VARIANTS: tuple[Variant, ...] = (FlashForward(), FlashBackward())


@dataclass(frozen=True, kw_only=True)
class MergeKnobs(Knobs):
    BLOCK_M: int
    num_warps: int


class MergeRows(Variant):
    """``merge_attention_states/rows``: BLOCK_M rows of the whole head dim per program."""

    op = "merge_attention_states"
    name = "rows"
    knobs = MergeKnobs
    kernel_modules = (K, common)
    cost_model = "memory"

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        return Space({"BLOCK_M": Pow2(1, 64, d["BLOCK_M"]), "num_warps": Enum((1, 2, 4, 8), d["num_warps"])})

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        if not is_pow2(c["BLOCK_M"]) or c["BLOCK_M"] > 64:
            return f"BLOCK_M={c['BLOCK_M']} must be a power of two <= 64"
        if c["num_warps"] not in (1, 2, 4, 8):
            return f"num_warps={c['num_warps']} not one of (1, 2, 4, 8)"
        return None

    def default_config(self, p: Problem, target: Target) -> Config:
        bn = next_pow2(p.shape["N"])
        bm = max(1, min(16, 2048 // bn, next_pow2(p.shape["M"])))
        return {"BLOCK_M": bm, "num_warps": max(1, min(8, bm * bn // 256))}

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"M": config["BLOCK_M"]}

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ...cost.memory_model import MemoryWork

        M, N, e = p.shape["M"], p.shape["N"], p.dtype.itemsize
        bn = next_pow2(N)
        return MemoryWork(bytes_moved=float(M * (3 * N * e + 12)), programs=triton.cdiv(M, c["BLOCK_M"]),
                          num_warps=c["num_warps"], block_bytes=float(c["BLOCK_M"] * (2 * N * e + 8)),
                          regs_per_thread=3 * -(-c["BLOCK_M"] * bn // (32 * c["num_warps"])) + 24)

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import merge_for_config

        return merge_for_config(problem, config)

    def launch(self, inputs, problem, config, out=None):
        M, N = problem.shape["M"], problem.shape["N"]
        ts = []
        for n, shape, dt in (("out_a", (M, N), problem.dtype), ("lse_a", (M,), torch.float32),
                             ("out_b", (M, N), problem.dtype), ("lse_b", (M,), torch.float32)):
            t = inputs.get(n)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != dt:
                raise InvalidInputError(n, f"a {shape} {dt} tensor",
                                        f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else t)
            if t.shape[-1] > 1 and t.stride(-1) != 1:
                raise InvalidInputError(f"last stride of {n}", "1", t.stride(-1))
            if ts and t.device != ts[0].device:
                raise InvalidInputError(f"device of {n}", str(ts[0].device), str(t.device))
            ts.append(t)
        o, lse = allocate(out, MERGE_ATTENTION_STATES.outputs(problem), ts[0].device, unit_cols=True)
        K.merge_attention_states_kernel[(triton.cdiv(M, config["BLOCK_M"]),)](
            ts[0], ts[1], ts[2], ts[3], o, lse, M, N, ts[0].stride(0), ts[2].stride(0), o.stride(0),
            BLOCK_M=config["BLOCK_M"], BLOCK_N=max(16, next_pow2(N)), EMULATE=emulated(problem.dtype),
            num_warps=config["num_warps"])
        return o, lse


VARIANTS = VARIANTS + (MergeRows(),)
