"""``warpsmith gpucheck``: compile every library kernel for a real GPU target, with no GPU.

Each op's variants are launched through their own launchers, at their default config and a
sample of their space, on a set of problems per op (aligned LLM-like shapes, odd shapes, long
rows, every dtype). Triton runs compile-only (``warpsmith.core._compile_only``): the kernels are
compiled for the target's architecture with exactly the specialization a GPU launch gives them,
and each config is launched twice, so launch-time checks that only a compiled kernel makes (e.g.
Triton's re-check of the globals a kernel read) run too. For each kernel it reports registers,
spills, shared memory and pipelining (``warpsmith.targets.compiler``) and checks them against the
target.

A config *fails* on: a compile error, a launch-time error, shared memory over the target's limit
per program, registers over the target's limit, a grid over the launch limits, or a spill in a
default config (a sampled config that spills is reported, and the search skips it). A problem
*fails* when no variant's default config is valid for it (a call would find no config to run): it
is reported as a failed ``default`` row with each variant's reason, nothing compiled. The exit
status is 1 when any config or problem fails.

This module is the compile-only process's entry point (``python -m warpsmith.gpucheck``); the
CLI spawns it with ``WARPSMITH_COMPILE_ONLY`` set, because Triton decides at import whether it
interprets. With ``--serve`` the same process is the search's compiler-facts worker
(:func:`serve`, for :class:`warpsmith.targets.compiler.CompilerFacts`): like the check, it rebuilds
problems and variants through the op registry, which the ``targets`` layer may not import.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from .targets.compiler import ConfigFacts

GRID_LIMITS = (2**31 - 1, 65535, 65535)

# The problems each op is compiled for: LLM-like aligned sizes, odd sizes no block divides, and
# the long rows where defaults are most likely to spill. Rows (M) are small where only the row
# length shapes the kernel: Triton specializes on divisibility by 16 and the launchers derive
# their constexprs from the row length, not from the row count.
_NORM = [({"M": 64, "N": 4096}, {}), ({"M": 7, "N": 16384}, {"residual": True}), ({"M": 5, "N": 65536}, {}),
         ({"M": 3, "N": 1000}, {"weight_dtype": "float32"})]
_ROWS = [({"M": 64, "N": 4096}, {}), ({"M": 4, "N": 32000}, {}), ({"M": 2, "N": 65536}, {}),
         ({"M": 2, "N": 262144}, {}), ({"M": 5, "N": 999}, {})]
_GATED = [({"M": 64, "H": 14336}, {}), ({"M": 5, "H": 1000}, {"packed": True})]
_ROPE = [({"B": 2, "S": 128, "Hq": 32, "Hk": 8, "R2": 64}, {}),
         ({"B": 1, "S": 37, "Hq": 5, "Hk": 1, "R2": 24, "E": 16, "P": 64},
          {"layout": "gptj", "positions": "given", "table_dtype": "float32"}),
         ({"B": 2, "S": 9, "Hq": 4, "Hk": 4, "R2": 32}, {"cos_sin": "per_token"})]
_XENT = [({"M": 16, "V": 32000}, {}), ({"M": 4, "V": 128256}, {"reduction": "none"}), ({"M": 7, "V": 1001}, {})]
_FUSED = [({"M": 64, "H": 512, "V": 4096}, {}), ({"M": 37, "H": 300, "V": 1001}, {"bias": True})]
# attention: aligned LLM heads (d 64/128), odd lengths and head dims (80, 96, 192 with Dv 128, 256),
# GQA, every mask path (causal, window, softcap, bias) and packed sequences
_ATTN = [({"Sq": 512, "Sk": 512, "B": 1, "H": 2, "G": 4, "D": 128}, {"causal": True}),
         ({"Sq": 256, "Sk": 256, "B": 2, "H": 2, "G": 1, "D": 64}, {}),
         ({"Sq": 77, "Sk": 300, "B": 1, "H": 2, "G": 3, "D": 80}, {"causal": True, "window_left": 64, "softcap": 30.0}),
         ({"Sq": 128, "Sk": 128, "B": 1, "H": 1, "G": 2, "D": 256}, {"causal": True}),
         ({"Sq": 100, "Sk": 100, "B": 1, "H": 2, "G": 1, "D": 192, "Dv": 128}, {}),
         ({"Sq": 1000, "Sk": 1000, "B": 4, "H": 1, "G": 4, "D": 96}, {"varlen": True, "causal": True}),
         ({"Sq": 128, "Sk": 160, "B": 1, "H": 2, "G": 2, "D": 64}, {"bias": True})]
_MERGE = [({"M": 4096, "N": 128}, {}), ({"M": 37, "N": 80}, {}), ({"M": 64, "N": 512}, {})]
_DECODE = [({"B": 8, "Hk": 8, "G": 4, "S": 4096, "D": 128}, {"cache": "paged", "page_size": 16}),  # Llama-3-8B
           ({"B": 4, "Hk": 8, "G": 8, "S": 2048, "D": 128},
            {"cache": "paged", "layout": "HND", "table": "csr", "page_size": 64}),
           ({"B": 2, "Hk": 4, "G": 1, "S": 1000, "D": 64}, {"cache": "contiguous"}),
           ({"B": 3, "Hk": 2, "G": 3, "S": 97, "D": 80}, {"cache": "paged", "page_size": 1, "softcap": 30.0}),
           ({"B": 8, "Hk": 8, "G": 4, "S": 4096, "D": 128, "T": 4}, {"cache": "paged", "page_size": 16})]  # spec. decode
_MLA = [({"B": 4, "H": 128, "S": 4096, "Dc": 512, "Dr": 64}, {"page_size": 64}),  # DeepSeek-V3, 128 heads
        ({"B": 16, "H": 16, "S": 1024, "Dc": 512, "Dr": 64}, {"page_size": 1, "table": "csr"}),
        ({"B": 8, "H": 16, "S": 2048, "Dc": 512, "Dr": 64, "T": 2}, {"page_size": 64})]
# weight-only int4 (group 128): Llama-2-7B (hidden 4096, MLP 11008) and Llama-3-8B (k/v 1024, MLP 14336)
# projections at decode (M = 1, 16) and prefill (64, 4096) sizes, both formats
_AWQ, _GPTQ, _GPTQ_ACT = {"format": "awq"}, {"format": "gptq"}, {"format": "gptq", "act_order": True}
_INT4 = [({"M": 1, "N": 4096, "K": 4096}, _AWQ), ({"M": 1, "N": 11008, "K": 4096}, _GPTQ_ACT),
         ({"M": 1, "N": 1024, "K": 4096}, _GPTQ), ({"M": 16, "N": 14336, "K": 4096}, _AWQ),
         ({"M": 16, "N": 4096, "K": 11008}, _GPTQ), ({"M": 64, "N": 4096, "K": 14336}, {**_AWQ, "bias": True}),
         ({"M": 64, "N": 11008, "K": 4096}, _GPTQ_ACT), ({"M": 4096, "N": 4096, "K": 4096}, _AWQ),
         ({"M": 4096, "N": 14336, "K": 4096}, _GPTQ), ({"M": 4096, "N": 4096, "K": 11008}, _GPTQ_ACT)]
# scaled GEMM: Llama-3-8B projections (K-major operands, the default layout nt), each format and scaling,
# mixed fp8 operands (the hybrid recipe's e5m2 gradient x e4m3) included
_SCALED = [({"M": 4096, "N": 4096, "K": 4096}, {"format": "e4m3", "scaling": "row"}),
           ({"M": 16, "N": 14336, "K": 4096}, {"format": "e4m3", "scaling": "block"}),
           ({"M": 1, "N": 4096, "K": 4096}, {"format": "e5m2", "scaling": "tensor"}),
           ({"M": 4096, "N": 4096, "K": 14336}, {"format": "e5m2", "format_b": "e4m3", "scaling": "row"}),
           ({"M": 64, "N": 4096, "K": 4096}, {"format": "e4m3", "format_b": "e5m2", "scaling": "block"}),
           ({"M": 128, "N": 4096, "K": 14336}, {"format": "int8", "scaling": "row"}),
           ({"M": 257, "N": 129, "K": 300}, {"format": "e4m3", "scaling": "block", "bias": True, "activation": "gelu"})]
# conv: ResNet-50 (3x3 stride 1 and 2, 1x1 bottleneck, the 7x7/2 stem), SD-UNet (3x3 at 320/640
# channels, the 2x upsampling as a transposed conv), ConvNeXt (7x7 depthwise), a strided depthwise with
# channel multiplier 2 (NCHW); channels-last
_P1, _P3 = {"pad_h": 1, "pad_end_h": 1, "pad_w": 1, "pad_end_w": 1}, {"pad_h": 3, "pad_end_h": 3, "pad_w": 3,
                                                                      "pad_end_w": 3}
_CONV = [({"N": 32, "C": 64, "K": 64, "H": 56, "W": 56, "KH": 3, "KW": 3}, {**_P1, "channels_last": True}),
         ({"N": 32, "C": 128, "K": 128, "H": 56, "W": 56, "KH": 3, "KW": 3},
          {**_P1, "stride_h": 2, "stride_w": 2, "channels_last": True}),
         ({"N": 32, "C": 256, "K": 1024, "H": 14, "W": 14, "KH": 1, "KW": 1}, {"channels_last": True}),
         ({"N": 32, "C": 3, "K": 64, "H": 224, "W": 224, "KH": 7, "KW": 7},
          {**_P3, "stride_h": 2, "stride_w": 2, "channels_last": True}),
         ({"N": 2, "C": 320, "K": 320, "H": 64, "W": 64, "KH": 3, "KW": 3},
          {**_P1, "channels_last": True, "bias": True, "residual": True, "activation": "silu"}),
         ({"N": 2, "C": 640, "K": 640, "H": 32, "W": 32, "KH": 3, "KW": 3}, {**_P1, "channels_last": True}),
         ({"N": 2, "C": 320, "K": 320, "H": 32, "W": 32, "KH": 2, "KW": 2},
          {"transposed": True, "stride_h": 2, "stride_w": 2, "channels_last": True}),
         ({"N": 32, "C": 96, "K": 96, "G": 96, "H": 56, "W": 56, "KH": 7, "KW": 7}, {**_P3, "channels_last": True}),
         # a depthwise conv with channel multiplier 2, stride 2, NCHW, the full epilogue (MobileNet-like)
         ({"N": 8, "C": 32, "K": 64, "G": 32, "H": 57, "W": 57, "KH": 3, "KW": 3},
          {**_P1, "stride_h": 2, "stride_w": 2, "bias": True, "residual": True, "activation": "silu"}),
         ({"N": 32, "C": 64, "K": 256, "H": 56, "W": 56, "KH": 1, "KW": 1},
          {"channels_last": True, "bias": True, "activation": "relu"}),
         ({"N": 3, "C": 17, "K": 29, "D": 5, "H": 9, "W": 7, "KD": 3, "KH": 3, "KW": 3},
          {**_P1, "pad_d": 1, "pad_end_d": 1, "channels_last": True})]
PROBLEMS: dict[str, list[tuple[dict[str, int], dict[str, Any]]]] = {
    "matmul": [({"M": 4096, "N": 4096, "K": 4096}, {}), ({"M": 16, "N": 14336, "K": 4096}, {}),
               ({"M": 1, "N": 4096, "K": 4096}, {}),  # M == 1: a constant to Triton
               ({"M": 1, "N": 4097, "K": 4099}, {}), ({"M": 257, "N": 129, "K": 300}, {"bias": True, "activation": "gelu"}),
               ({"M": 128, "N": 1024, "K": 512, "B": 3}, {"layout": "tn"})],
    "rms_norm": _NORM, "rms_norm_backward": _NORM, "layer_norm": _NORM, "layer_norm_backward": _NORM,
    "softmax": _ROWS, "log_softmax": _ROWS, "softmax_backward": _ROWS, "log_softmax_backward": _ROWS,
    "swiglu": _GATED, "swiglu_backward": _GATED, "geglu": _GATED + [({"M": 8, "H": 4096}, {"approximate": "tanh"})],
    "geglu_backward": _GATED + [({"M": 8, "H": 4096}, {"approximate": "tanh"})],
    "rope": _ROPE, "rope_backward": _ROPE,
    "cross_entropy": _XENT, "cross_entropy_backward": _XENT,
    "fused_linear_cross_entropy": _FUSED, "fused_linear_cross_entropy_backward": _FUSED,
    "attention": _ATTN, "attention_backward": _ATTN, "merge_attention_states": _MERGE,
    "attention_decode": _DECODE, "attention_decode_mla": _MLA,
    "int4_matmul": _INT4,
    "scaled_matmul": _SCALED,
    "conv": _CONV,
    # the weight gradient: ResNet-50 3x3 (stride 1 and 2) and 1x1, SD-UNet 3x3, a depthwise 7x7 (ConvNeXt)
    "conv_weight_grad": [(sh, {k: v for k, v in a.items() if k in ("channels_last",) or k.startswith(("stride", "pad", "dil"))})
                         for sh, a in (_CONV[0], _CONV[1], _CONV[2], _CONV[5], _CONV[7])],
}
# pooling (ops/pool): ResNet stem max pool (bf16 channels-last), a 1-D dilated ceil pool, a 3-D avg pool
_POOL_MAX = [({"N": 32, "C": 64, "D": 1, "H": 112, "W": 112},
              {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "padding_h": 1, "padding_w": 1,
               "channels_last": True, "return_indices": True}),
             ({"N": 4, "C": 7, "D": 1, "H": 1, "W": 301}, {"dims": 1, "kernel_w": 3, "dilation_w": 2, "ceil_mode": True})]
_POOL_AVG = [({"N": 8, "C": 64, "D": 1, "H": 56, "W": 56},
              {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "padding_h": 1, "padding_w": 1,
               "ceil_mode": True, "count_include_pad": False, "channels_last": True}),
             ({"N": 2, "C": 16, "D": 8, "H": 16, "W": 16}, {"dims": 3, "kernel_d": 2, "kernel_h": 2, "kernel_w": 2,
                                                          "divisor_override": 3})]
_POOL_ADAPTIVE = [({"N": 32, "C": 2048, "D": 1, "H": 7, "W": 7}, {"out_h": 1, "out_w": 1, "channels_last": True}),
                  ({"N": 2, "C": 64, "D": 1, "H": 37, "W": 50}, {"out_h": 5, "out_w": 7})]
# channel norms (ops/norm/channel/): ResNet/UNet activations, bf16 channels-last
_BN = [({"N": 32, "C": 256, "S": 56 * 56}, {"channels_last": True}), ({"N": 16, "C": 64, "S": 7}, {"training": False})]
_GN = [({"N": 4, "C": 320, "S": 64 * 64}, {"groups": 32, "channels_last": True}), ({"N": 3, "C": 6, "S": 33}, {"groups": 3})]
# quantization (ops/lowprec/quant/): DeepSeek-V3 activations (7168, 1x128 blocks), Llama rows, per tensor, odd sizes
_QUANT = [({"M": 64, "N": 7168}, {"format": "e4m3", "granularity": "block"}),
          ({"M": 16, "N": 4096}, {"format": "e4m3", "granularity": "row", "norm": True}),
          ({"M": 5, "N": 1000}, {"format": "int8"}),
          ({"M": 3, "N": 16384}, {"format": "e5m2", "granularity": "block", "norm": True}),
          ({"M": 4096, "N": 4096}, {"format": "e4m3", "granularity": "tensor"}),
          ({"M": 7, "N": 300}, {"format": "int8", "granularity": "tensor", "norm": True})]
_SR = [({"N": 2**20}, {"target": "bf16"}), ({"N": 1001}, {"target": "e4m3"})]
_QSTATIC = [({"M": 64, "N": 4096}, {"format": "e4m3"}), ({"M": 5, "N": 1000}, {"format": "int8"})]
_DEQUANT = [({"M": 64, "N": 7168}, {"format": "e4m3", "scaling": "block"}), ({"M": 16, "N": 4096}, {"format": "int8"}),
            ({"M": 5, "N": 1000}, {"format": "e5m2", "scaling": "tensor"})]
PROBLEMS.update({"quantize": _QUANT, "stochastic_round": _SR, "quantize_static": _QSTATIC, "dequantize": _DEQUANT})
PROBLEMS.update({"max_pool": _POOL_MAX, "max_pool_backward": [(sh, {k: v for k, v in a.items() if k != "return_indices"}) for sh, a in _POOL_MAX], "avg_pool": _POOL_AVG,
                 "avg_pool_backward": _POOL_AVG, "adaptive_avg_pool": _POOL_ADAPTIVE,
                 "adaptive_avg_pool_backward": _POOL_ADAPTIVE, "batch_norm": _BN, "batch_norm_backward": _BN,
                 "group_norm": _GN, "group_norm_backward": _GN})
# gathers and scatters (ops/gather/): Llama-3 embedding rows (vocab 128256, d 4096) and its backward, a
# cross-entropy style gather along the last dim, odd sizes no block divides
_GATHER = [({"A": 1, "J": 4096, "B": 4096, "V": 128256}, {"index": "rows"}),
           ({"A": 4096, "J": 1, "B": 1, "V": 32000}, {"index": "elements"}),
           ({"A": 7, "J": 37, "B": 301, "V": 53}, {"index": "elements"})]
_SCATTER = [({"A": 1, "J": 4096, "B": 4096, "V": 32000}, {"index": "rows"}),
            ({"A": 7, "J": 37, "B": 301, "V": 53}, {"index": "elements"})]
PROBLEMS.update({"gather": _GATHER, "scatter_add": _SCATTER, "scatter": _SCATTER})


@dataclass
class Row:
    """One (op, problem, variant, config) compiled and checked."""

    op: str
    problem: str
    variant: str
    kind: str  # "default", "sample", or "static" (a finding of the source scan)
    config: dict[str, Any]
    kernels: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors


def unstable_globals(modules: Iterable[Any]) -> list[str]:
    """Module globals that ``@triton.jit`` functions read and that are not equal to themselves
    (a NaN ``tl.constexpr``): compiled Triton re-checks every global a kernel read at each launch,
    ``new != old`` fails for them, and every launch raises "Global variable ... has changed". The
    interpreter never checks, so only this scan (and a compiled launch) sees it."""
    import ast
    import inspect

    found = []
    for mod in modules:
        for fname, obj in sorted(vars(mod).items()):
            fn = getattr(obj, "fn", None)
            if fn is None or not callable(fn) or getattr(fn, "__module__", None) != mod.__name__:
                continue
            names = {n.id for n in ast.walk(ast.parse(inspect.cleandoc("\n" + inspect.getsource(fn))))
                     if isinstance(n, ast.Name)}
            for name in sorted(names & set(fn.__globals__)):
                value = fn.__globals__[name]
                try:
                    unequal = bool(value != value)
                except Exception:  # a value that cannot be compared cannot be re-checked either
                    unequal = True
                if unequal:
                    found.append(f"{mod.__name__}.{fname} reads global {name} = {value!r}, which is not equal "
                                 "to itself: compiled Triton rejects every launch after the first compile")
    return found


def _resource_problems(facts: Sequence[Any], target: Any, kind: str,
                       config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    errors, warns = [], []
    for k in facts:
        if k.smem_bytes > target.smem_per_block:
            errors.append(f"{k.name}: shared memory {k.smem_bytes} B > {target.smem_per_block} B per program")
        limit = target.max_regs_per_thread(k.num_warps)
        if k.regs > limit:
            errors.append(f"{k.name}: {k.regs} registers per thread > {limit} at {k.num_warps} warps")
        if k.spills:
            msg = f"{k.name}: spills {k.spill_bytes} B per thread ({k.regs} registers, {k.num_warps} warps)"
            (errors if kind == "default" else warns).append(msg)
        if k.grid is not None and any(g > lim for g, lim in zip(k.grid, GRID_LIMITS)):
            errors.append(f"{k.name}: grid {k.grid} over the launch limits {GRID_LIMITS}")
        if k.stages_dead and "num_stages" in config:
            warns.append(f"{k.name}: num_stages={k.num_stages} has no effect (no load in its loop could be pipelined)")
    return errors, warns


def check_config(spec: Any, variant: Any, problem: Any, config: Mapping[str, Any], inputs: Mapping[str, Any],
                 target: Any, kind: str) -> Row:
    """Compile one config (launched twice) and check what the compiler made of it."""
    from .targets.compiler import launch_facts

    row = Row(spec.name, problem.describe(), variant.name, kind, dict(config))
    t0 = time.perf_counter()
    attempt = "first"
    try:
        facts = launch_facts(variant, problem, config, inputs).kernels
        attempt = "second"  # launch-time checks of a compiled kernel run on every launch
        launch_facts(variant, problem, config, inputs)
    except Exception as exc:  # compile errors and launch-time failures are the report
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        row.errors.append(f"{type(exc).__name__} on the {attempt} launch: {(lines[-1] if lines else '')[:300]}")
    else:
        row.kernels = [k.to_json() for k in facts]
        row.errors, row.warnings = _resource_problems(facts, target, kind, config)
    row.seconds = time.perf_counter() - t0
    return row


def default_rejected(op: str, problem: Any, variants: Mapping[str, Any], target: Any) -> Row | None:
    """A failed row when no variant's default config is valid for ``problem`` on ``target`` (dispatch
    would have nothing to run), naming each variant's default and why it is rejected; else None."""
    why = {}
    for name, v in variants.items():
        c = v.default_config(problem, target)
        reason = v.rejection(problem, c, target)
        if reason is None:
            return None
        why[name] = (c, reason)
    first = next(iter(why.values()), ({}, ""))[0]
    return Row(op, problem.describe(), "/".join(why) or "-", "default", dict(first),
               errors=[f"no valid default config: {n} default {json.dumps(c, sort_keys=True, default=str)} "
                       f"is rejected: {r}" for n, (c, r) in why.items()] or ["no variant serves this op"])


def _configs(variant: Any, problem: Any, target: Any, sample: int, rng: random.Random) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    default = variant.default_config(problem, target)
    if variant.rejection(problem, default, target) is None:  # else another variant's default serves the problem,
        out.append(("default", default))  # or `default_rejected` reports the problem as failed
    space = variant.space(problem, target)
    seen = {space.key(default)}
    for _ in range(50 * sample):
        if len(out) >= sample + (1 if out and out[0][0] == "default" else 0):
            break
        c = space.sample(rng)
        if space.key(c) not in seen and variant.rejection(problem, c, target) is None:
            seen.add(space.key(c))
            out.append(("sample", c))
    return out


def library_problems(ops: Sequence[str], dtypes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The problems gpucheck compiles for ``ops`` (``PROBLEMS`` in every dtype of each op, or ``dtypes``)."""
    from .core.dtypes import dtype_name
    from .ops import get_op

    out = []
    for op in ops:
        for dt in get_op(op).dtypes:
            if not dtypes or dtype_name(dt) in dtypes:
                out += [{"op": op, "shape": shape, "dtype": dtype_name(dt), "attrs": attrs} for shape, attrs in PROBLEMS[op]]
    return out


def run(problems: Sequence[Mapping[str, Any]], target_name: str, sample: int, seed: int,
        progress: Any = None) -> list[Row]:
    """Compile every variant of each problem (``{"op", "shape", "dtype", "attrs"}``) at its default
    config and ``sample`` configs of its space; first, scan their kernel modules' globals."""
    import torch

    from .ops import get_op, variants
    from .targets import get_target

    target = get_target(target_name)
    rng = random.Random(seed)
    ops = sorted({p["op"] for p in problems})
    modules = {m for op in ops for v in variants(op).values() for m in v.kernel_modules}
    rows = [Row("*", "-", "-", "static", {}, errors=[msg]) for msg in unstable_globals(modules)]
    for req in problems:
        spec = get_op(req["op"])
        problem = spec.problem(req["shape"], req["dtype"], req.get("attrs") or {})
        inputs = spec.make_inputs(problem, torch.Generator().manual_seed(seed))
        none = default_rejected(spec.name, problem, variants(problem.op), target)
        if none is not None:
            rows.append(none)
            if progress:
                progress(none)
        for v in variants(problem.op).values():
            for kind, cfg in _configs(v, problem, target, sample, rng):
                row = check_config(spec, v, problem, cfg, inputs, target, kind)
                rows.append(row)
                if progress:
                    progress(row)
        del inputs
    return rows


def summary(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per entry kernel: configs compiled, worst registers, spills and shared memory, failures."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        for k in r.kernels:
            s = by.setdefault(k["name"], {"kernel": k["name"], "configs": 0, "max_regs": 0, "max_spill_bytes": 0,
                                          "max_smem_bytes": 0, "spilling_configs": 0, "failed": 0})
            s["configs"] += 1
            s["max_regs"] = max(s["max_regs"], k["regs"])
            s["max_spill_bytes"] = max(s["max_spill_bytes"], k["spill_bytes"])
            s["max_smem_bytes"] = max(s["max_smem_bytes"], k["smem_bytes"])
            s["spilling_configs"] += k["spill_bytes"] > 0
            s["failed"] += not r.ok
    return sorted(by.values(), key=lambda s: s["kernel"])


def _table(rows: Sequence[Row], per_kernel: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'kernel':42} {'configs':>7} {'regs':>5} {'spill B':>7} {'smem B':>7} {'spilling':>8} {'failed':>6}"]
    for s in per_kernel:
        lines.append(f"{s['kernel']:42} {s['configs']:7d} {s['max_regs']:5d} {s['max_spill_bytes']:7d} "
                     f"{s['max_smem_bytes']:7d} {s['spilling_configs']:8d} {s['failed']:6d}")
    bad = [r for r in rows if not r.ok]
    for r in bad:
        lines.append(f"FAIL {r.op}/{r.variant} [{r.kind}] {r.problem} {json.dumps(r.config, sort_keys=True)}")
        lines.extend(f"     {e}" for e in r.errors)
    lines.append(f"{len(rows)} configs, {len(per_kernel)} kernels, {len(bad)} failed, "
                 f"{sum(1 for r in rows if r.warnings)} with warnings")
    return "\n".join(lines)


def compiler_info() -> dict[str, Any]:
    import torch
    import triton

    from .core._triton import COMPILE_ONLY_ARCH

    return {"triton": triton.__version__, "torch": torch.__version__, "arch": COMPILE_ONLY_ARCH}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the compile-only process (``WARPSMITH_COMPILE_ONLY`` must be set)."""
    from .core._triton import COMPILE_ONLY_ARCH
    from .core.settings import settings

    p = argparse.ArgumentParser(prog="python -m warpsmith.gpucheck")
    p.add_argument("--ops", default="")
    p.add_argument("--sample", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtypes", default="")
    p.add_argument("--json", default="")
    p.add_argument("--problems", default="", help="a JSON file: a list of {op, shape, dtype, attrs} (instead of --ops)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--serve", action="store_true", help="be the search's compiler-facts worker (see serve)")
    a = p.parse_args(argv)
    if a.serve:
        return serve()
    if not COMPILE_ONLY_ARCH:
        print("gpucheck: WARPSMITH_COMPILE_ONLY is not set; run `warpsmith gpucheck`", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore", category=UserWarning, module="triton")
    if a.problems:
        problems = json.loads(Path(a.problems).read_text())
    else:
        problems = library_problems([o for o in a.ops.split(",") if o] or list(PROBLEMS),
                                    [d for d in a.dtypes.split(",") if d] or None)
    t0 = time.perf_counter()

    def progress(r: Row) -> None:
        if not a.quiet:
            mark = "ok  " if r.ok else "FAIL"
            print(f"{mark} {r.seconds:5.1f}s {r.op}/{r.variant} [{r.kind}] {r.problem}", flush=True)

    rows = run(problems, settings().target, a.sample, a.seed, progress)
    per_kernel = summary(rows)
    print(_table(rows, per_kernel))
    doc = {"target": settings().target, **compiler_info(), "seconds": round(time.perf_counter() - t0, 1),
           "sample": a.sample, "seed": a.seed, "ok": all(r.ok for r in rows), "kernels": per_kernel,
           "rows": [r.__dict__ for r in rows]}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(doc, indent=1, default=str))
    return 0 if doc["ok"] else 1


def compile_launches(req: Mapping[str, Any]) -> list[Any]:
    """In the compile-only process: launch (compile) one config of a
    :func:`warpsmith.targets.compiler.cache.request` and return its recorded launches."""
    import torch

    from .ops import get_op, get_variant
    from .targets import current_device
    from .targets.compiler import launched

    spec = get_op(req["op"])
    problem = spec.problem(req["shape"], req["dtype"], req["attrs"])
    variant = get_variant(req["op"], req["variant"])
    why = variant.rejection(problem, req["config"], current_device().target)
    if why:
        raise ValueError(f"invalid config: {why}")
    key = (problem.op, json.dumps(req["shape"], sort_keys=True), problem.dtype_name,
           json.dumps(req["attrs"], sort_keys=True, default=str))
    if _inputs.get("key") != key:  # a search asks for many configs of one problem: draw its inputs once
        _inputs.clear()
        _inputs.update(key=key, inputs=spec.make_inputs(problem, torch.Generator().manual_seed(0)))
    return launched(variant, problem, req["config"], _inputs["inputs"])


def compile_config(req: Mapping[str, Any]) -> ConfigFacts:
    """In the compile-only process: compile one config and read its kernels' facts."""
    from .targets.compiler import ConfigFacts, kernel_facts

    return ConfigFacts(tuple(kernel_facts(launch) for launch in compile_launches(req)))


def compile_sass(req: Mapping[str, Any]) -> dict[str, Any]:
    """In the compile-only process: as :func:`compile_config`, and each kernel's machine code counted
    (``{"facts": [...], "sass": [...]}``, for ``CompilerFacts.sass``)."""
    from .targets.compiler import ConfigFacts, kernel_facts, kernel_sass

    launches = compile_launches(req)
    sass = [kernel_sass(launch.kernel) for launch in launches]
    return {"facts": ConfigFacts(tuple(kernel_facts(launch) for launch in launches)).to_json(),
            "sass": [s.to_json() if s else None for s in sass]}


_inputs: dict[str, Any] = {}  # the worker's inputs of the last problem it compiled


def serve() -> int:
    """The compiler-facts worker loop (``python -m warpsmith.gpucheck --serve``): one JSON request per
    line in, one JSON answer per line out."""
    from .core._triton import COMPILE_ONLY_ARCH

    if not COMPILE_ONLY_ARCH:
        print("gpucheck --serve: WARPSMITH_COMPILE_ONLY is not set", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a compiler prints must not corrupt the answers
    for line in sys.stdin:
        try:
            req = json.loads(line)
            answer: dict[str, Any] = (compile_sass(req) if req.get("sass") else
                                      {"facts": compile_config(req).to_json()})
        except Exception as exc:  # a compile error is an answer, not the worker's end
            answer = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


def check_problems(problems: Sequence[Mapping[str, Any]], target: str, sample: int, json_out: Path,
                   timeout: float | None = None) -> int:
    """Compile-check ``problems`` (``{"op", "shape", "dtype", "attrs"}``) for ``target`` in the
    compile-only process, as a benchmark's ``--dry-run`` does for what its real run would launch;
    writes the report to ``json_out`` and returns the exit status (0: everything compiled cleanly)."""
    json_out.parent.mkdir(parents=True, exist_ok=True)
    req = json_out.with_suffix(".problems.json")
    req.write_text(json.dumps(list(problems), default=str))
    return spawn(target, ["--problems", str(req), "--sample", str(sample), "--json", str(json_out), "--quiet"],
                 timeout=timeout).returncode


def spawn(target: str, args: Iterable[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run the compile-only process for ``target`` (a target name) and wait for it."""
    from .targets.compiler import compile_only_env
    from .targets import get_target

    return subprocess.run([sys.executable, "-m", "warpsmith.gpucheck", *args],
                          env=compile_only_env(get_target(target)), timeout=timeout)


if __name__ == "__main__":
    sys.exit(main())
