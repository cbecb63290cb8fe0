"""The split-KV (flash-decoding) variant of ``attention_decode`` and ``attention_decode_mla``.

One launcher serves both ops and every cache form: it builds the static plan (plan.py; or
takes the plan tensors given among the inputs), launches ``decode_partial_kernel`` on the grid
(work items, Hk, cdiv(G, BLOCK_H)) and, unless the plan is ``direct`` (one item per sequence),
``decode_reduce_kernel`` on (B, Hq).

Knobs: ``BLOCK_N`` (tokens per step), ``NUM_SPLITS`` (items per sequence: more programs for
short batches, at the price of writing and merging fp32 partials), ``BLOCK_H`` (query rows per
program, 16 up to the T x G rows of a KV head padded (64 at most): all rows in one program share one
read of the KV; a smaller block re-reads it once per block, as MLA's 128 heads must), ``num_warps``,
``num_stages``. Validity: shared memory of the pipelined K/V tiles, the register estimate against
the target and, in fp32, the score tile per thread (below).

The default prefers one head block per KV head where G <= 64 (fp16/bf16; fp32 takes blocks of 16
rows) and shrinks the key tile, then the head block, then adds warps and drops a pipeline stage
until the config fits: every shape of the specs' domain whose minimal tiles fit the target has a
valid default (a head dim whose 16-token K/V tile alone exceeds the shared memory has none).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core._triton import triton
from ....core.config import Knobs
from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....core.variant import Config, Variant, is_pow2, next_pow2, scratch
from ....space import Enum, Pow2, Space
from ....targets import Target
from ...shared import kernel as common
from ...shared.launch import allocate, emulated
from . import kernel as K
from .limits import MIN_DOT, dot_pad
from .plan import DecodePlan, plan_static, seq_lens_from_csr
from .spec import max_blocks, softmax_scale

OPS = ("attention_decode", "attention_decode_mla")
WARPS = (1, 2, 4, 8)
STAGES = (1, 2, 3, 4)
SPLITS = (1, 2, 4, 8, 16, 32, 64)
PLAN_INPUTS = ("work_batch", "work_start", "work_end", "batch_indptr")
# fp32 q k^T and p V are FMA dots whose operand layouts grow with the score tile: compiled for sm_90 (Triton
# 3.9), every config measured with more than 2 scores a thread spilled (hundreds of bytes to 20 KB: 32 x 32 and
# 16 x 64 tiles over 8 warps, 16 x 32 over 4); of those with 2 or fewer, one (MLA's 16 x 16 over 8 warps) 48 B
FP32_SCORES_PER_THREAD = 2


@dataclass(frozen=True, kw_only=True)
class DecodeKnobs(Knobs):
    BLOCK_N: int
    NUM_SPLITS: int
    BLOCK_H: int
    num_warps: int
    num_stages: int = 2


class SplitKV(Variant):
    name = "split_kv"
    ops = OPS
    knobs = DecodeKnobs
    cost_model = "memory"
    kernel_modules = (K, common)

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.mla = op == "attention_decode_mla"

    # ---- sizes -------------------------------------------------------------------------------
    def dims(self, p: Problem) -> tuple[int, int, int, int, int]:
        """(Hk, G, Dqk, Dv, Dr)."""
        if self.mla:
            return 1, p.shape["H"], p.shape["Dc"], p.shape["Dc"], p.shape["Dr"]
        return p.shape["Hk"], p.shape["G"], p.shape["D"], p.shape["D"], 0

    def rows(self, p: Problem) -> int:
        """Query rows per KV head: T query tokens x G heads."""
        return p.shape.get("T", 1) * self.dims(p)[1]

    def head_blocks(self, p: Problem, c: Mapping[str, Any]) -> int:
        return triton.cdiv(self.rows(p), c["BLOCK_H"])

    # ---- space ---------------------------------------------------------------------------------
    def _bh_range(self, p: Problem) -> tuple[int, int]:
        """BLOCK_H from 16 to the KV head's T x G query rows padded (all of them in one program), 64 at most."""
        return MIN_DOT, min(64, dot_pad(self.rows(p)))

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        lo, hi = self._bh_range(problem)
        return Space({
            "BLOCK_N": Pow2(16, 128, d["BLOCK_N"]),
            "NUM_SPLITS": Enum(SPLITS, d["NUM_SPLITS"]),
            "BLOCK_H": Pow2(lo, hi, d["BLOCK_H"]),
            "num_warps": Enum(WARPS, d["num_warps"]),
            "num_stages": Enum(STAGES, d["num_stages"]),
        })

    def default_config(self, p: Problem, target: Target) -> Config:
        hk, g, dqk, dv, dr = self.dims(p)
        lo, hi = self._bh_range(p)
        rows = self.rows(p)
        fp32 = p.dtype == torch.float32
        # every query row of a KV head in one program where they fit (<= 64), else blocks of 32 (32 rows x 512
        # fp32 accumulators per program fit 8 warps' registers); fp32 (correctness only on GPUs): blocks of 16 rows
        bh = MIN_DOT if fp32 else (32 if rows > 64 else hi)
        # fp32: 32-key tiles over 8 warps (60 registers at D = 128, 174 for MLA's 576; sm_90, Triton 3.9)
        block_n = 32 if self.mla or fp32 else 64
        programs = p.shape["B"] * hk * triton.cdiv(rows, bh)
        want = max(1, -(-2 * target.sms // programs))  # about two programs per SM
        blocks = max(1, triton.cdiv(p.shape["S"], block_n))
        splits = 1
        while splits * 2 <= min(want, blocks, SPLITS[-1]):
            splits *= 2
        warps = 8 if self.mla or dv >= 256 or fp32 else 4
        c = {"BLOCK_N": block_n, "NUM_SPLITS": splits, "BLOCK_H": bh, "num_warps": warps, "num_stages": 2}
        if self.rejection(p, c, target) is None:
            return c
        # until the config fits the target: smaller key tiles; smaller head blocks where the rows need several
        # anyway; more warps; then head blocks below the KV head's rows (each block re-reads the KV: MLA's
        # 64 heads, or fp32 at large head dims); then one pipeline stage fewer
        keep = c["BLOCK_H"] if rows <= 64 else lo
        for knob, fits, step in (("BLOCK_N", lambda v: v > MIN_DOT, lambda v: v // 2),
                                 ("BLOCK_H", lambda v: v > keep, lambda v: v // 2),
                                 ("num_warps", lambda v: v < WARPS[-1], lambda v: v * 2),
                                 ("BLOCK_H", lambda v: v > lo, lambda v: v // 2),
                                 ("num_stages", lambda v: v > STAGES[0], lambda v: v - 1)):
            while fits(c[knob]):
                c[knob] = step(c[knob])
                if self.rejection(p, c, target) is None:
                    return c
        return c  # nothing fits (the head dim's smallest tiles exceed the target): the rejection says why

    def _smem(self, p: Problem, c: Mapping[str, Any]) -> int:
        hk, g, dqk, dv, dr = self.dims(p)
        e = p.dtype.itemsize
        kv = dot_pad(dqk) + (0 if self.mla else dot_pad(dv)) + (dot_pad(dr) if dr else 0)
        return c["num_stages"] * c["BLOCK_N"] * kv * e + c["BLOCK_H"] * (dot_pad(dqk) + (dot_pad(dr) if dr else 0)) * e

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        for k in ("BLOCK_N", "BLOCK_H"):
            if not is_pow2(c[k]) or c[k] < MIN_DOT:
                return f"{k}={c[k]} must be a power of two >= {MIN_DOT} (tl.dot)"
        if c["NUM_SPLITS"] not in SPLITS:
            return f"NUM_SPLITS={c['NUM_SPLITS']} not one of {SPLITS}"
        if c["num_warps"] not in WARPS or c.get("num_stages", 2) not in STAGES:
            return f"num_warps={c['num_warps']} / num_stages={c.get('num_stages')} not in {WARPS} / {STAGES}"
        g = self.rows(p)
        lo, hi = self._bh_range(p)
        if not lo <= c["BLOCK_H"] <= hi:
            return f"BLOCK_H={c['BLOCK_H']} outside [{lo}, {hi}] for {g} query rows (T x G) per KV head"
        smem = self._smem(p, self.typed(c))
        if smem > target.smem_per_block:
            return f"K/V tiles need {smem} B of shared memory > {target.smem_per_block} B on {target.name}"
        if p.dtype == torch.float32 and c["BLOCK_H"] * c["BLOCK_N"] > FP32_SCORES_PER_THREAD * 32 * c["num_warps"]:
            return (f"fp32 score tile BLOCK_H x BLOCK_N = {c['BLOCK_H']} x {c['BLOCK_N']} over {c['num_warps']} warps "
                    f"holds more than {FP32_SCORES_PER_THREAD} scores a thread (would spill)")
        return None

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        """S: a split's worth of blocks (the verifier's S + 1 leaves one token for a last item); query heads:
        half a head block (its + 1 still fits the config's BLOCK_H); one KV head per program; head dims: 8."""
        heads = max(1, config["BLOCK_H"] // 2)
        dims = {"H": heads, "Dc": 8, "Dr": 8} if self.mla else {"Hk": 1, "G": heads, "D": 8}
        return {"S": config["BLOCK_N"] * config["NUM_SPLITS"], **dims}

    # ---- cost ------------------------------------------------------------------------------------
    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ....cost.memory_model import MemoryWork

        c = self.typed(c)
        hk, g, dqk, dv, dr = self.dims(p)
        B, S, e = p.shape["B"], p.shape["S"], p.dtype.itemsize
        hb = self.head_blocks(p, c)
        kv_row = (dqk + dr) if self.mla else (dqk + dv)
        kv_bytes = B * hk * S * kv_row * e * hb  # every head block reads the KV of its KV head
        direct = c.NUM_SPLITS == 1
        items = B * c.NUM_SPLITS
        part = 0 if direct else 2 * items * self.rows(p) * hk * (dv + 1) * 4  # fp32 partials written, then read
        qo = B * p.shape.get("T", 1) * hk * g * ((dqk + dr + dv) * e + 4)  # q read, out and lse written
        programs = items * hk * hb
        steps = triton.cdiv(triton.cdiv(S, c.NUM_SPLITS), c.BLOCK_N)
        bd, bdv, bdr = dot_pad(dqk), dot_pad(dv), (dot_pad(dr) if dr else 0)
        tiles = (c.BLOCK_H * (bdv + c.BLOCK_N)  # fp32 accumulators and scores
                 + (c.BLOCK_N * (bd + bdr + (0 if self.mla else bdv)) + c.BLOCK_H * (bd + bdr)) * e // 4)  # K/V, q (4 B a reg)
        per_thread = -(-5 * tiles // (4 * 32 * c.num_warps))  # a quarter more for conversions and addresses
        return MemoryWork(
            bytes_moved=float(kv_bytes + part + qo), programs=programs, num_warps=c.num_warps,
            block_bytes=float(c.BLOCK_N * kv_row * e * max(1, c.num_stages - 1)), steps=float(steps),
            regs_per_thread=per_thread + 40, smem_bytes=self._smem(p, c), launches=1 if direct else 2,
            flops=self.flops(p), math_kind="fp32" if p.dtype == torch.float32 else "bf16")

    def flops(self, p: Problem) -> float:
        hk, g, dqk, dv, dr = self.dims(p)
        return 2.0 * p.shape["B"] * p.shape.get("T", 1) * hk * g * p.shape["S"] * (dqk + dr + dv)

    # ---- launch ----------------------------------------------------------------------------------
    def _tensor(self, inputs: Mapping[str, Any], name: str, shape: tuple[int, ...] | None, dtype: torch.dtype,
                device: torch.device | None) -> torch.Tensor:
        t = inputs.get(name)
        if not isinstance(t, torch.Tensor):
            raise InvalidInputError(f"input {name} of {self.op}", "a torch.Tensor", type(t).__name__)
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise InvalidInputError(f"shape of {name}", str(tuple(shape)), str(tuple(t.shape)))
        if t.dtype != dtype:
            raise InvalidInputError(f"dtype of {name}", str(dtype), str(t.dtype))
        if device is not None and t.device != device:
            raise InvalidInputError(f"device of {name}", str(device), str(t.device))
        return t

    def operands(self, inputs: Mapping[str, Any], p: Problem) -> dict[str, Any]:
        """Checked tensors and the kernel's cache strides (page, slot, head, dim)."""
        hk, g, dqk, dv, dr = self.dims(p)
        B, S, dt = p.shape["B"], p.shape["S"], p.dtype
        a = p.attrs
        i32 = torch.int32
        lead = (B, p.shape["T"]) if "T" in p.shape else (B,)
        if self.mla:
            q = self._tensor(inputs, "q_nope", lead + (g, dqk), dt, None)
            dev = q.device
            qpe = self._tensor(inputs, "q_pe", lead + (g, dr), dt, dev)
            ckv = self._tensor(inputs, "ckv_cache", None, dt, dev)
            kpe = self._tensor(inputs, "kpe_cache", None, dt, dev)
            P = a["page_size"]
            if ckv.dim() != 3 or ckv.shape[1:] != (P, dqk) or kpe.shape != (ckv.shape[0], P, dr):
                raise InvalidInputError("shapes of ckv_cache and kpe_cache", f"[num_blocks, {P}, {dqk}] and "
                                        f"[num_blocks, {P}, {dr}]", f"{tuple(ckv.shape)} and {tuple(kpe.shape)}")
            k = v = ckv
            ks = (ckv.stride(0), ckv.stride(1), 0, ckv.stride(2))
            vs = ks
        else:
            q = self._tensor(inputs, "q", lead + (hk * g, dqk), dt, None)
            dev = q.device
            qpe = kpe = None
            if a["cache"] == "contiguous":
                k = self._tensor(inputs, "k_cache", (B, hk, S, dqk), dt, dev)
                v = self._tensor(inputs, "v_cache", (B, hk, S, dv), dt, dev)
                ks = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))
                vs = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
            else:
                P = a["page_size"]
                k = self._tensor(inputs, "k_cache", None, dt, dev)
                v = self._tensor(inputs, "v_cache", None, dt, dev)
                want = (P, hk, dqk) if a["layout"] == "NHD" else (hk, P, dqk)
                if k.dim() != 4 or tuple(k.shape[1:]) != want or v.shape != k.shape:
                    raise InvalidInputError("shape of k_cache and v_cache", f"[num_blocks, {', '.join(map(str, want))}] "
                                            f"({a['layout']}), both alike", f"{tuple(k.shape)} and {tuple(v.shape)}")
                if a["layout"] == "NHD":
                    ks = (k.stride(0), k.stride(1), k.stride(2), k.stride(3))
                    vs = (v.stride(0), v.stride(1), v.stride(2), v.stride(3))
                else:
                    ks = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))
                    vs = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
        paged = self.mla or a["cache"] == "paged"
        out: dict[str, Any] = {"q": q, "qpe": qpe, "k": k, "v": v, "kpe": kpe, "ks": ks, "vs": vs, "device": dev}
        if not paged:
            out["table"], out["indptr"], out["TABLE"] = None, None, "none"
            out["seq_lens"] = self._tensor(inputs, "seq_lens", (B,), i32, dev)
        elif a["table"] == "block_table":
            out["table"] = self._tensor(inputs, "block_table", (B, max_blocks(p)), i32, dev)
            out["indptr"], out["TABLE"] = None, "block_table"
            out["seq_lens"] = self._tensor(inputs, "seq_lens", (B,), i32, dev)
        else:
            out["indptr"] = self._tensor(inputs, "kv_indptr", (B + 1,), i32, dev)
            out["table"] = self._tensor(inputs, "kv_indices", None, i32, dev)
            if out["table"].dim() != 1 or out["table"].numel() < 1:
                raise InvalidInputError("shape of kv_indices", "(nnz pages,), nnz >= 1", tuple(out["table"].shape))
            last = self._tensor(inputs, "kv_last_page_len", (B,), i32, dev)
            out["seq_lens"] = seq_lens_from_csr(out["indptr"], last, a["page_size"])
            out["TABLE"] = "csr"
        return out

    def plan(self, inputs: Mapping[str, Any], seq_lens: torch.Tensor, c: DecodeKnobs) -> DecodePlan:
        """The plan given among the inputs (all four tensors), else the static plan for ``c``."""
        given = [k for k in PLAN_INPUTS if inputs.get(k) is not None]
        if given and len(given) != len(PLAN_INPUTS):
            raise InvalidInputError("plan tensors", "all of " + ", ".join(PLAN_INPUTS), ", ".join(given))
        if given:  # (W,) items and (B + 1,) offsets, int32, on the cache's device: the grid comes from W
            wb = self._tensor(inputs, "work_batch", None, torch.int32, seq_lens.device)
            if wb.dim() != 1 or wb.numel() < 1:
                raise InvalidInputError("shape of work_batch", "(W,) plan items, W >= 1", tuple(wb.shape))
            W = (wb.numel(),)
            return DecodePlan(wb, self._tensor(inputs, "work_start", W, torch.int32, seq_lens.device),
                              self._tensor(inputs, "work_end", W, torch.int32, seq_lens.device),
                              self._tensor(inputs, "batch_indptr", (seq_lens.numel() + 1,), torch.int32,
                                           seq_lens.device), direct=False)
        return plan_static(seq_lens, c.NUM_SPLITS, c.BLOCK_N)

    def launch(self, inputs, problem, config, out=None):
        c = self.typed(config)
        p = problem
        hk, g, dqk, dv, dr = self.dims(p)
        B = p.shape["B"]
        ops = self.operands(inputs, p)
        dev = ops["device"]
        o, lse = allocate(out, self_outputs(p, hk * g, dv), dev)
        if not (o.is_contiguous() and lse.is_contiguous()):
            raise InvalidInputError("out", "contiguous output tensors", f"strides {o.stride()} and {lse.stride()}")
        T = p.shape.get("T", 1)
        o4, lse3 = o.view(B, T, hk * g, dv), lse.view(B, T, hk * g)  # one query token: T = 1
        q = ops["q"] if ops["q"].dim() == 4 else ops["q"].unsqueeze(1)
        qpe = ops["qpe"] if ops["qpe"] is None or ops["qpe"].dim() == 4 else ops["qpe"].unsqueeze(1)
        pl = self.plan(inputs, ops["seq_lens"], c)
        W = pl.items
        emulate = emulated(p.dtype)
        if pl.direct:
            o_part, lse_part = o4, lse3
        else:
            o_part = scratch((W, T, hk * g, dv), torch.float32, dev)
            lse_part = scratch((W, T, hk * g), torch.float32, dev)
        kpe, table = ops["kpe"], ops["table"]
        dummy = q  # pointer arguments a TABLE / HAS_PE / MULTI form never reads
        qpe_s = qpe.stride() if qpe is not None else (0, 0, 0, 0)
        kpe_s = kpe.stride() if kpe is not None else (0, 0, 0)
        tb_s = (table.stride(0), table.stride(1)) if table is not None and table.dim() == 2 else \
            (0, table.stride(0)) if table is not None else (0, 0)
        softcap = float(p.attrs["softcap"])
        grid = (W, hk, triton.cdiv(T * g, c.BLOCK_H))
        K.decode_partial_kernel[grid](
            q, ops["k"], ops["v"], qpe if qpe is not None else dummy, kpe if kpe is not None else dummy,
            table if table is not None else dummy, ops["indptr"] if ops["indptr"] is not None else dummy,
            ops["seq_lens"], pl.work_batch, pl.work_start, pl.work_end, o_part, lse_part,
            g, T, dqk, dv, dr, softmax_scale(p, dqk + dr), softcap if softcap else 1.0,
            *q.stride(), *ops["ks"], *ops["vs"], *qpe_s, *kpe_s, *tb_s,
            *o_part.stride(), *lse_part.stride(),
            PAGE=p.attrs["page_size"] if ops["TABLE"] != "none" else 1, TABLE=ops["TABLE"],
            BLOCK_N=c.BLOCK_N, BLOCK_H=c.BLOCK_H, BLOCK_D=dot_pad(dqk), BLOCK_DV=dot_pad(dv),
            BLOCK_DPE=dot_pad(dr) if dr else MIN_DOT, HAS_PE=bool(dr), SAME_KV=self.mla, SOFTCAP=bool(softcap),
            DIRECT=pl.direct, MULTI=T > 1, IS_FP32=p.dtype == torch.float32, EMULATE=emulate,
            num_warps=c.num_warps, num_stages=c.num_stages)
        if not pl.direct:  # the merge sees the T x Hq rows of a sequence as heads
            self._reduce(o_part.view(W, T * hk * g, dv), lse_part.view(W, T * hk * g), pl,
                         o4.view(B, T * hk * g, dv), lse3.view(B, T * hk * g), B, T * hk * g, dv, emulate)
        return o, lse

    def _reduce(self, o_part, lse_part, pl: DecodePlan, o, lse, B: int, hq: int, dv: int, emulate: bool) -> None:
        K.decode_reduce_kernel[(B, hq)](
            o_part, lse_part, pl.batch_indptr, o, lse, dv, *o_part.stride(), *lse_part.stride(),
            *o.stride(), *lse.stride(), BLOCK_DV=next_pow2(dv), EMULATE=emulate, num_warps=4 if dv >= 256 else 1,
            num_stages=1)

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)


def self_outputs(p: Problem, hq: int, dv: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
    lead = (p.shape["B"], p.shape["T"]) if "T" in p.shape else (p.shape["B"],)
    return [(lead + (hq, dv), p.dtype), (lead + (hq,), torch.float32)]


DECODE_VARIANTS: tuple[Variant, ...] = (SplitKV("attention_decode"), SplitKV("attention_decode_mla"))

__all__ = ["SplitKV", "DecodeKnobs", "DECODE_VARIANTS"]
