"""The memory-bound benchmark's cases and op definitions: the suite of shapes, and per op how to
make inputs and call warpsmith, eager PyTorch and Liger-Kernel (used by memory_bound.py)."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

OPS = ("rms_norm", "layer_norm", "softmax", "log_softmax", "swiglu", "geglu", "rope", "cross_entropy",
       "fused_linear_cross_entropy")
FLCE_TARGET_VOCAB = 128256
ELEMENTS = 1 << 26  # elements of each case's main input (128 MiB in bf16)
COMPUTE_BOUND = ("fused_linear_cross_entropy",)
LLAMA = {"llama3-8b": (32, 8, 128), "llama3-70b": (64, 8, 128)}  # q heads, kv heads, head dim


# ----------------------------------------------------------------------------------- the suite
@dataclass(frozen=True)
class Case:
    op: str
    name: str
    dims: tuple[tuple[str, int], ...]
    tier: int  # 1: one realistic shape per op (runs first), 2: the rest at rows >= 4k, 3: extremes

    @property
    def d(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def N(self) -> int:
        """Row length: N, the vocabulary, or the head dimension for RoPE."""
        d = self.d
        return d.get("N", d.get("V", d.get("D", 0)))

    @property
    def rows(self) -> int:
        d = self.d
        return d["B"] * d["S"] if self.op == "rope" else d["M"]

    @property
    def bw_judged(self) -> bool:
        """Counted by the copy-bandwidth target ("rows >= 4k"): row length >= 4k, RoPE at >= 4k tokens."""
        if self.op in COMPUTE_BOUND:
            return False
        return self.rows >= 4096 if self.op == "rope" else self.N >= 4096

    def describe(self) -> str:
        model = self.name.split()[0] + " " if self.op == "rope" else ""
        return f"{self.op} {model}" + " ".join(f"{k}={v}" for k, v in self.dims)


def _rows_for(n: int, elements: int) -> int:
    """Rows (a power of two) so that rows * n >= elements."""
    return 1 << max(0, math.ceil(math.log2(max(1, elements / n))))


def suite(ops: tuple[str, ...] = OPS, tiny: bool = False, elements: int = ELEMENTS) -> list[Case]:
    """The cases of ``ops`` in table order (op, then size)."""
    cases: list[Case] = []

    def add(op: str, name: str, tier: int, **dims: int) -> None:
        if op in ops:
            cases.append(Case(op, name, tuple(dims.items()), tier))

    if tiny:  # a few rows, short rows and one longer than a small block: the interpreter is slow
        for op in ("rms_norm", "layer_norm", "softmax", "log_softmax", "swiglu", "geglu"):
            add(op, "tiny-37", 1, M=3, N=37)
            add(op, "tiny-300", 1, M=2, N=300)
        add("rope", "tiny-d16", 1, B=1, Hq=4, Hk=2, S=5, D=16, R2=8)
        add("rope", "tiny-d8", 1, B=2, Hq=2, Hk=1, S=3, D=8, R2=4)
        add("cross_entropy", "tiny-37", 1, M=3, V=37)
        add("cross_entropy", "tiny-300", 1, M=2, V=300)
        add("fused_linear_cross_entropy", "tiny-37", 1, M=3, H=16, V=37)
        add("fused_linear_cross_entropy", "tiny-100", 1, M=5, H=32, V=100)
        return cases
    norm_tier = {1024: 3, 4096: 1, 8192: 2, 16384: 2, 65536: 3}
    for op in ("rms_norm", "layer_norm"):  # hidden sizes; 1k and 64k are the extremes
        for n, tier in norm_tier.items():
            add(op, f"N={n}", tier, M=_rows_for(n, elements), N=n)
    sm_tier = {1024: 3, 4096: 2, 16384: 1, 65536: 2, 262144: 3}
    for op in ("softmax", "log_softmax"):
        for n, tier in sm_tier.items():
            add(op, f"N={n}", tier, M=_rows_for(n, elements), N=n)
    for op in ("swiglu", "geglu"):  # MLP intermediate sizes: Llama-3-8B 14336, 70B 28672
        for n, tier in {4096: 3, 14336: 1, 28672: 2}.items():
            add(op, f"N={n}", tier, M=_rows_for(n, elements), N=n)
    for model, b, s, tier in (("llama3-8b", 1, 1024, 3), ("llama3-8b", 4, 4096, 1), ("llama3-70b", 1, 8192, 2)):
        hq, hk, dh = LLAMA[model]
        add("rope", f"{model} B={b} S={s}", tier, B=b, Hq=hq, Hk=hk, S=s, D=dh, R2=dh // 2)
    for v, tier in {32000: 2, 128256: 1, 256000: 2}.items():  # Llama-2, Llama-3, Gemma vocabularies
        add("cross_entropy", f"V={v}", tier, M=_rows_for(v, elements), V=v)
    for v, tier in {32000: 3, FLCE_TARGET_VOCAB: 1}.items():  # 8192 tokens, hidden 4096 (Llama-2-7B, Llama-3-8B)
        add("fused_linear_cross_entropy", f"V={v}", tier, M=8192, H=4096, V=v)
    return cases


# ----------------------------------------------------------------------------------- the ops
@dataclass(frozen=True)
class OpDef:
    """How one op is benchmarked: inputs, the three implementations, estimated bytes."""

    make: Callable[[dict, torch.dtype, Callable], dict]  # dims, dtype, randn -> inputs
    diff: tuple[str, ...]  # inputs the gradients are taken for
    eager: Callable[[dict], Any]
    warpsmith: Callable[[Any, dict], Any]  # (warpsmith.ops, inputs)
    liger: Callable[[Any, dict], Any] | None  # (liger functional module, inputs)
    est_bytes: Callable[[dict, int], tuple[float, float]]  # (dims, element size) -> (fwd, bwd)
    attrs: dict = field(default_factory=dict)  # spec attributes of the benchmarked call

    def flops(self, d: dict) -> tuple[float, float] | None:
        return None


def _norm_inputs(bias: bool):
    def make(d, dt, randn):
        x = randn((d["M"], d["N"]), dt)
        out = {"x": x, "weight": (1 + 0.1 * randn((d["N"],), torch.float32)).to(dt)}
        if bias:
            out["bias"] = (0.1 * randn((d["N"],), torch.float32)).to(dt)
        return out
    return make


def _rows(d, dt, randn):
    return {"x": randn((d["M"], d["N"]), dt)}


def _gated(d, dt, randn):
    return {"gate": randn((d["M"], d["N"]), dt), "up": randn((d["M"], d["N"]), dt)}


def _rope_inputs(d, dt, randn):
    B, S, D = d["B"], d["S"], d["D"]
    # Hugging Face's layout: q = q_proj(x).view(B, S, H, D).transpose(1, 2), a (B, H, S, D) view
    q = randn((B, S, d["Hq"], D), dt).transpose(1, 2)
    k = randn((B, S, d["Hk"], D), dt).transpose(1, 2)
    inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32, device=q.device) / D))
    ang = torch.arange(S, dtype=torch.float32, device=q.device)[:, None] * inv[None, :]  # (S, D/2)
    cos, sin = ang.cos(), ang.sin()
    return {"q": q, "k": k, "cos": cos.to(dt), "sin": sin.to(dt),  # warpsmith: the (P, R/2) table
            "cos_full": torch.cat((cos, cos), -1)[None].to(dt),    # eager and Liger: HF's (1, S, D)
            "sin_full": torch.cat((sin, sin), -1)[None].to(dt)}


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rope_eager(i):
    cos, sin = i["cos_full"].unsqueeze(1), i["sin_full"].unsqueeze(1)
    return i["q"] * cos + _rotate_half(i["q"]) * sin, i["k"] * cos + _rotate_half(i["k"]) * sin


def _ce_inputs(d, dt, randn):
    logits = randn((d["M"], d["V"]), dt)
    target = torch.randint(0, d["V"], (d["M"],), device=logits.device, generator=randn.gen)
    return {"logits": logits, "target": target}


def _flce_inputs(d, dt, randn):
    hidden = randn((d["M"], d["H"]), dt)
    weight = (randn((d["V"], d["H"]), torch.float32) / math.sqrt(d["H"])).to(dt)
    target = torch.randint(0, d["V"], (d["M"],), device=hidden.device, generator=randn.gen)
    return {"hidden": hidden, "weight": weight, "target": target}


class _FlceDef(OpDef):
    def flops(self, d):
        mhv = 2.0 * d["M"] * d["H"] * d["V"]
        return mhv, 2 * mhv  # logits; then d(hidden) and d(weight)


def _mn(d):
    return d["M"] * d["N"]


OPDEFS: dict[str, OpDef] = {
    "rms_norm": OpDef(
        _norm_inputs(False), ("x", "weight"),
        lambda i: F.rms_norm(i["x"], (i["x"].shape[-1],), i["weight"], 1e-6),
        lambda w, i: w.rms_norm(i["x"], i["weight"], eps=1e-6),
        lambda L, i: L.liger_rms_norm(i["x"], i["weight"], 1e-6, in_place=False),
        lambda d, e: (2 * _mn(d) * e + d["N"] * e + 4 * d["M"], 3 * _mn(d) * e + 2 * d["N"] * e + 4 * d["M"])),
    "layer_norm": OpDef(
        _norm_inputs(True), ("x", "weight", "bias"),
        lambda i: F.layer_norm(i["x"], (i["x"].shape[-1],), i["weight"], i["bias"], 1e-5),
        lambda w, i: w.layer_norm(i["x"], i["weight"], i["bias"], eps=1e-5),
        lambda L, i: L.liger_layer_norm(i["x"], i["weight"], i["bias"], 1e-5),
        lambda d, e: (2 * _mn(d) * e + 2 * d["N"] * e + 8 * d["M"], 3 * _mn(d) * e + 4 * d["N"] * e + 8 * d["M"])),
    "softmax": OpDef(
        _rows, ("x",), lambda i: torch.softmax(i["x"], -1), lambda w, i: w.softmax(i["x"]),
        lambda L, i: L.liger_softmax(i["x"]), lambda d, e: (2 * _mn(d) * e, 3 * _mn(d) * e)),
    "log_softmax": OpDef(
        _rows, ("x",), lambda i: torch.log_softmax(i["x"], -1), lambda w, i: w.log_softmax(i["x"]),
        None, lambda d, e: (2 * _mn(d) * e, 3 * _mn(d) * e)),
    "swiglu": OpDef(
        _gated, ("gate", "up"), lambda i: F.silu(i["gate"]) * i["up"], lambda w, i: w.swiglu(i["gate"], i["up"]),
        lambda L, i: L.liger_swiglu(i["gate"], i["up"]), lambda d, e: (3 * _mn(d) * e, 5 * _mn(d) * e)),
    "geglu": OpDef(  # the tanh approximation: Liger's only form (Gemma's gelu_pytorch_tanh)
        _gated, ("gate", "up"), lambda i: F.gelu(i["gate"], approximate="tanh") * i["up"],
        lambda w, i: w.geglu(i["gate"], i["up"], approximate="tanh"),
        lambda L, i: L.liger_geglu(i["gate"], i["up"]), lambda d, e: (3 * _mn(d) * e, 5 * _mn(d) * e),
        attrs={"approximate": "tanh"}),
    "rope": OpDef(
        _rope_inputs, ("q", "k"), _rope_eager,
        lambda w, i: w.rope(i["q"], i["k"], i["cos"], i["sin"]),
        lambda L, i: L.liger_rope(i["q"], i["k"], i["cos_full"], i["sin_full"]),
        lambda d, e: (2 * d["B"] * d["S"] * (d["Hq"] + d["Hk"]) * d["D"] * e + d["S"] * d["D"] * e,) * 2),
    "cross_entropy": OpDef(
        _ce_inputs, ("logits",), lambda i: F.cross_entropy(i["logits"], i["target"]),
        lambda w, i: w.cross_entropy(i["logits"], i["target"]),
        lambda L, i: L.liger_cross_entropy(i["logits"], i["target"]),
        lambda d, e: (d["M"] * d["V"] * e + 8 * d["M"], 2 * d["M"] * d["V"] * e + 12 * d["M"])),
    "fused_linear_cross_entropy": _FlceDef(
        _flce_inputs, ("hidden", "weight"), lambda i: F.cross_entropy(i["hidden"] @ i["weight"].T, i["target"]),
        lambda w, i: w.fused_linear_cross_entropy(i["hidden"], i["weight"], i["target"]),
        lambda L, i: L.liger_fused_linear_cross_entropy(i["hidden"], i["weight"], i["target"]),
        lambda d, e: ((d["M"] + d["V"]) * d["H"] * e + 8 * d["M"], 2 * (d["M"] + d["V"]) * d["H"] * e + 8 * d["M"])),
}


def import_warpsmith_ops() -> tuple[Any, dict[str, str | None]]:
    """(warpsmith.ops or None, op -> None if callable else why it is skipped)."""
    try:
        import warpsmith.ops as wops
    except Exception as exc:  # a broken package must not stop the baselines' report
        return None, {op: f"warpsmith.ops not importable: {type(exc).__name__}: {exc}"[:300] for op in OPS}
    missing = {op: None if callable(getattr(wops, op, None)) else
               f"warpsmith.ops.{op} not importable yet (warpsmith.ops has: {', '.join(getattr(wops, '__all__', []))})"
               for op in OPS}
    return wops, missing


def import_liger() -> tuple[Any, dict[str, Any]]:
    try:
        import liger_kernel.transformers.functional as lf
    except Exception as exc:
        return None, {"available": False, "version": None, "reason": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        from importlib.metadata import version
        ver = version("liger-kernel")
    except Exception:
        ver = getattr(sys.modules.get("liger_kernel"), "__version__", None)
    return lf, {"available": True, "version": ver, "reason": None}
