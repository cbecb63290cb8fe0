"""Channel normalization variants (batch_norm, group_norm and their backwards): ``planar``.

``planar``: a per-plane reduction kernel (grid (C, N); fp32 two-pass mean and M2, or the backward's
sums of dy xhat and dy), a merge of planes into groups on the host in a fixed order (Chan's exact
identity for M2; (N, C)-sized tensors, torch reductions: deterministic), then an elementwise kernel
(grid (cdiv(S, BLOCK), C, N)). No atomics. Knobs: ``BLOCK_S`` (chunk of the plane loops),
``BLOCK`` (positions per program of the elementwise kernel), ``num_warps``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ....core._triton import triton
from ....core.config import Knobs
from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....core.variant import Config, Variant, scratch
from ....space import Enum, Pow2, Space
from ....targets import Target
from ...shared import kernel as common
from ...shared.launch import emulated
from . import kernel as K
from .spec import CHANNEL_SPECS, group_len, groups_of

OPS = tuple(s.name for s in CHANNEL_SPECS)
WARPS = (1, 2, 4, 8)
_SPECS = {s.name: s for s in CHANNEL_SPECS}


@dataclass(frozen=True, kw_only=True)
class PlanarKnobs(Knobs):
    BLOCK_S: int
    BLOCK: int
    num_warps: int


def _check(name: str, t: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise InvalidInputError(name, "a torch.Tensor", type(t).__name__ if t is not None else None)
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
        raise InvalidInputError(f"{name}", f"{tuple(shape)} {dtype}", f"{tuple(t.shape)} {t.dtype}")
    return t


def like(x: torch.Tensor) -> torch.Tensor:
    """An output laid out as x (channels-last stays so) when x is dense, else contiguous."""
    if x.shape[1] > 1 and x.stride(1) == 1 and x.dim() == 3 and x.shape[2] > 1:  # channels-last (N, C, S)
        return torch.empty((x.shape[0], x.shape[2], x.shape[1]), dtype=x.dtype, device=x.device).transpose(1, 2)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


class Planar(Variant):
    name = "planar"
    knobs = PlanarKnobs
    cost_model = "memory"
    kernel_modules = (K, common)
    ops = OPS

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.backward = op.endswith("_backward")
        self.spec = _SPECS[op]

    def space(self, problem: Problem, target: Target) -> Space:
        d = self.default_config(problem, target)
        return Space({"BLOCK_S": Pow2(32, 4096, d["BLOCK_S"]), "BLOCK": Pow2(32, 4096, d["BLOCK"]),
                      "num_warps": Enum(WARPS, d["num_warps"])})

    def default_config(self, problem: Problem, target: Target) -> Config:
        b = max(32, min(1024, triton.next_power_of_2(problem.shape["S"])))
        return {"BLOCK_S": b, "BLOCK": b, "num_warps": max(1, min(4, b // 128))}

    def invalid(self, p: Problem, c: Mapping[str, Any], target: Target) -> str | None:
        G = groups_of(p)
        if p.shape["C"] % G:
            return f"C={p.shape['C']} is not a multiple of groups={G}"
        if p.op.startswith("batch") and p.attrs["training"] and p.shape["N"] * p.shape["S"] == 1:
            return "training batch norm needs more than one value per channel (as torch)"
        if p.shape["C"] > 65535 or p.shape["N"] > 65535:
            return "N and C must be at most 65535 (grid axes)"
        if p.shape["S"] + c["BLOCK"] + c["BLOCK_S"] >= 2**31:
            return "S too large for int32 positions"
        if min(c["BLOCK"], c["BLOCK_S"]) < 32 * c["num_warps"]:
            return f"blocks of {min(c['BLOCK'], c['BLOCK_S'])} leave warps of {c['num_warps']} idle"
        return None

    def axis_blocks(self, config: Mapping[str, Any]) -> dict[str, int]:
        return {"S": config["BLOCK"]}

    def work(self, p: Problem, c: Mapping[str, Any], target: Target) -> Any:
        from ....cost.memory_model import MemoryWork

        N, C, S, e = p.shape["N"], p.shape["C"], p.shape["S"], p.dtype.itemsize
        stats = self.spec.uses_batch_stats(p.attrs)
        streams = (5 if stats else 3) if self.backward else (4 if stats else 2)
        return MemoryWork(bytes_moved=float(streams * N * C * S * e),
                          programs=N * C * (1 + triton.cdiv(S, c["BLOCK"])), num_warps=c["num_warps"],
                          block_bytes=float(c["BLOCK"] * e), steps=float(2 * triton.cdiv(S, c["BLOCK_S"])),
                          regs_per_thread=40 + 8 * -(-max(c["BLOCK"], c["BLOCK_S"]) // (32 * c["num_warps"])),
                          launches=2)

    def contracts(self, problem: Problem, config: Mapping[str, Any]) -> list[Any]:
        from .contract import for_config

        return for_config(self, problem, config)

    # ---- launch -------------------------------------------------------------------------------
    def _plane_stats(self, p: Problem, inputs, x: torch.Tensor, c: PlanarKnobs, eps: float):
        """(mean, rstd) per plane (N, C) fp32 contiguous, and the group (mean, var) when batch stats."""
        N, C, S = p.shape["N"], p.shape["C"], p.shape["S"]
        if "mean" in inputs or not self.spec.uses_batch_stats(p.attrs):
            if self.spec.uses_batch_stats(p.attrs):
                mean, var = inputs["mean"].float(), inputs["var"].float()
            else:
                mean = _check("running_mean", inputs.get("running_mean"), (C,), inputs["running_mean"].dtype).float()
                var = _check("running_var", inputs.get("running_var"), (C,), inputs["running_var"].dtype).float()
        else:
            pm, pm2 = scratch((N, C), torch.float32, x.device), scratch((N, C), torch.float32, x.device)
            K.plane_stats_kernel[(C, N)](x, pm, pm2, C, S, *x.stride(), BLOCK=c.BLOCK_S, num_warps=c.num_warps)
            if p.op.startswith("batch"):
                mean = pm.sum(0) / N
                m2 = pm2.sum(0) + S * (pm - mean).square().sum(0)
            else:
                G = groups_of(p)
                gm, gm2 = pm.view(N, G, C // G), pm2.view(N, G, C // G)
                mean = gm.sum(-1) / (C // G)
                m2 = gm2.sum(-1) + S * (gm - mean[..., None]).square().sum(-1)
            var = m2 / group_len(p)
        rstd = torch.rsqrt(var + eps)
        if p.op.startswith("batch"):
            return mean.expand(N, C).contiguous(), rstd.expand(N, C).contiguous(), mean, var
        G = groups_of(p)
        rep = C // G
        return (mean.repeat_interleave(rep, 1).contiguous(), rstd.repeat_interleave(rep, 1).contiguous(), mean, var)

    def launch(self, inputs: Mapping[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
               out: Any = None, target: Target | None = None) -> Any:
        p, c = problem, self.typed(config)
        why = self.invalid(p, c, target) if target is not None else None
        if why or p.shape["C"] % groups_of(p):
            raise InvalidInputError(f"problem {p.describe()}", "a valid channel normalization", why or "C % groups")
        N, C, S = p.shape["N"], p.shape["C"], p.shape["S"]
        x = _check("x", inputs.get("x"), (N, C, S), p.dtype)
        a = p.attrs
        w = _check("weight", inputs.get("weight"), (C,), inputs["weight"].dtype) if a["weight"] else None
        eps = float(a["eps"])
        mean_p, rstd_p, mean_g, var_g = self._plane_stats(p, inputs, x, c, eps)
        grid = (triton.cdiv(S, c.BLOCK), C, N)
        em = emulated(p.dtype)
        if not self.backward:
            b = _check("bias", inputs.get("bias"), (C,), inputs["bias"].dtype) if a["bias"] else None
            scale = rstd_p * w.float()[None, :] if w is not None else rstd_p
            outs = list(out) if isinstance(out, (tuple, list)) else ([out] if out is not None else [])
            y = outs[0] if outs else like(x)
            _check("y", y, (N, C, S), p.dtype)
            K.channel_apply_kernel[grid](x, y, mean_p, scale.contiguous(), b if b is not None else scale, C, S,
                                         *x.stride(), *y.stride(), BLOCK=c.BLOCK, HAS_SHIFT=b is not None, EMULATE=em,
                                         num_warps=c.num_warps)
            if not self.spec.uses_batch_stats(a):
                return (y,)
            if len(outs) == 3:
                outs[1].copy_(mean_g)
                outs[2].copy_(var_g)
                return tuple(outs)
            return y, mean_g.contiguous(), var_g.contiguous()
        dy = _check("dy", inputs.get("dy"), (N, C, S), p.dtype)
        A, B = scratch((N, C), torch.float32, x.device), scratch((N, C), torch.float32, x.device)
        K.plane_grad_sums_kernel[(C, N)](dy, x, mean_p, rstd_p, A, B, C, S, *dy.stride(), *x.stride(),
                                         BLOCK=c.BLOCK_S, num_warps=c.num_warps)
        wf = w.float() if w is not None else torch.ones(C, device=x.device)
        if self.spec.uses_batch_stats(a):
            wa, wb = A * wf[None, :], B * wf[None, :]
            if p.op.startswith("batch"):
                k1 = (wb.sum(0) / group_len(p)).expand(N, C).contiguous()
                k2 = (wa.sum(0) / group_len(p)).expand(N, C).contiguous()
            else:
                G = groups_of(p)
                k1 = (wb.view(N, G, -1).sum(-1) / group_len(p)).repeat_interleave(C // G, 1).contiguous()
                k2 = (wa.view(N, G, -1).sum(-1) / group_len(p)).repeat_interleave(C // G, 1).contiguous()
        else:
            k1 = k2 = torch.zeros((N, C), dtype=torch.float32, device=x.device)
        outs = list(out) if isinstance(out, (tuple, list)) else ([out] if out is not None else [])
        dx = outs[0] if outs else like(x)
        _check("dx", dx, (N, C, S), p.dtype)
        K.channel_grad_apply_kernel[grid](dy, x, dx, mean_p, rstd_p, w if w is not None else mean_p, k1, k2, C, S,
                                          *dy.stride(), *x.stride(), *dx.stride(), BLOCK=c.BLOCK, HAS_W=w is not None,
                                          EMULATE=em, num_warps=c.num_warps)
        res = [dx]
        pdt = w.dtype if w is not None else torch.float32
        if a["weight"]:
            res.append(A.sum(0).to(pdt))
        if a["bias"]:
            res.append(B.sum(0).to(pdt))
        for i in range(1, len(res)):
            if len(outs) > i:
                outs[i].copy_(res[i])
                res[i] = outs[i]
        return tuple(res)


VARIANTS: tuple[Variant, ...] = tuple(Planar(op) for op in OPS)
