"""Program pricing: the predicted time of a compiled program (generated kernels, library calls,
ATen fallbacks) on a target, and the launch configs of its generated kernels.

This is the compiler's one cost model (the partition search, the rewrites, the storage precision,
the fold of values out of the call and the solve report all price with it), built on the package's
own models:

- a **library node** is priced by its family's model at the config its emitted launcher runs
  (:data:`LIBRARY_CONFIGS`, the tiles ``compiler/library.py`` launches with, or a config given by the
  caller, e.g. a tuning DB record): a GEMM (``matmul``, an implicit-GEMM ``conv``) by the tile model
  (:mod:`.gemm_model`), the row and attention ops by the memory model (:mod:`.memory_model`) with
  their math;
- a **generated kernel** (a fused group: pointwise or rows) is priced by the memory model at one
  :class:`KernelConfig` (block, rows per program, ``BLOCK_N``, warps, stages): its bytes (a looped
  row re-read in every pass that needs it), its programs and waves, the bytes each program keeps in
  flight, its dependent steps, its estimated registers (values live per thread) for occupancy, a
  spill's local-memory traffic, and its math (transcendentals weigh more than adds) against the
  target's fp32 peak. The compiler's facts (:class:`~warpsmith.targets.ConfigFacts`: registers,
  spills, shared memory, pipelined loads), where a caller has them, replace the estimates;
- any other node alone (an ATen fallback, an unfused op) as a streaming kernel over its bytes.

Each generated kernel has a small config space (:func:`kernel_space`), checked against the
target (:func:`kernel_rejection`: registers per thread, shared memory, the block caps the launch
contract needs), walked exhaustively (:func:`tune_kernel`); :func:`program_ms` prices a program
with each kernel at its best valid config (``tuned=True``) or at its default
(:func:`default_config`, what the compiler emitted before configs were searched).

Nothing here is measured: every figure is *predicted* for the named target, a ranking model whose
constants are uncalibrated until GPU measurements exist.

This module sits below the compiler (layer ``cost``): it reads the compiler's IR by its fields
(``Node.kind/op/shape/dtype/args/attrs/operands()``, ``Group.kind/domain/red/nodes``, a graph's
``users()/outputs/nodes``), never importing it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping

import torch

from ..core.opspec import Problem
from ..targets import ConfigFacts, Target
from . import gemm_model, memory_model
from .roofline import math_kind

# ---- the generated kernels' launch constants (codegen emits, contracts prove, this prices) -------
BLOCK = 1024  # elements per program of a pointwise kernel, by default
WHOLE_MAX = 4096  # rows up to this length are held whole in registers
CHUNK = 1024  # the chunk a longer row is walked in, by default
TILE = 2048  # elements of a row kernel's default tile: rows of a short row share a program
MAX_TILE = 16384  # elements of one program's block in any searched config
INT32_MAX = 2**31 - 1

# math weight of one element of a pointwise op (fp32 operations; transcendentals run on the SFU)
_HEAVY = {"exp": 8, "exp2": 4, "expm1": 10, "log": 8, "log2": 4, "log1p": 10, "tanh": 12, "sigmoid": 12,
          "erf": 16, "erfc": 16, "sin": 10, "cos": 10, "tan": 16, "atan": 16, "asin": 16, "acos": 16,
          "sinh": 16, "cosh": 16, "asinh": 16, "acosh": 16, "atanh": 16, "pow": 16, "sqrt": 4, "rsqrt": 4,
          "reciprocal": 4, "div": 4, "fmod": 8, "remainder": 8, "gelu": 20, "silu": 12, "softplus": 16,
          "mish": 30, "elu": 10, "selu": 10, "celu": 10, "hardswish": 4, "atan2": 20}
REDUCE_NS = 120.0  # one cross-warp combine of a reduction (shared memory and a barrier), per step
LIVE_BASE_REGS = 24  # registers a generated kernel holds besides its values (pointers, sizes, loop state)


def _bytes(n: Any) -> int:
    if getattr(n, "shape", None) is None or getattr(n, "dtype", None) is None:
        return 0
    return math.prod(n.shape) * n.dtype.itemsize


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def _generator(n: Any) -> bool:
    return getattr(n, "kind", None) == "pointwise" and getattr(n, "op", None) in ("full", "iota")


# ---- the config of a generated kernel ----------------------------------------------------------------
@dataclass(frozen=True)
class KernelConfig:
    """The launch config of one generated kernel: ``BLOCK`` (pointwise), or ``ROWS``/``BLOCK_N``
    (rows), warps, and ``num_stages`` (a looped row kernel's software pipelining; 1 elsewhere)."""

    kind: str
    block: int = 0
    rows: int = 0
    block_n: int = 0
    num_warps: int = 4
    num_stages: int = 1

    def meta(self, looped: bool = False) -> str:
        """The launch's keyword arguments, as emitted."""
        if self.kind == "pointwise":
            return f"BLOCK={self.block}, num_warps={self.num_warps}"
        stages = f", num_stages={self.num_stages}" if looped else ""
        return f"ROWS={self.rows}, BLOCK_N={self.block_n}, num_warps={self.num_warps}{stages}"

    def to_json(self) -> dict[str, int]:
        keys = ("block", "num_warps") if self.kind == "pointwise" else ("rows", "block_n", "num_warps", "num_stages")
        d = asdict(self)
        return {{"block": "BLOCK", "rows": "ROWS", "block_n": "BLOCK_N"}.get(k, k): d[k] for k in keys}


def _row_sizes(g: Any) -> tuple[int, int]:
    m = math.prod(s for d, s in enumerate(g.domain) if d not in g.red)
    return m, math.prod(g.domain[d] for d in g.red)


def looped(g: Any) -> bool:
    """Whether a row kernel walks its rows in chunks (longer than :data:`WHOLE_MAX`)."""
    return g.kind == "rows" and _row_sizes(g)[1] > WHOLE_MAX


def default_config(g: Any) -> KernelConfig:
    """The config the compiler emitted before configs were searched: ``BLOCK`` 1024 (Triton's default
    4 warps); rows of a tile of about :data:`TILE` elements with warps by the tile's size."""
    if g.kind != "rows":
        return KernelConfig("pointwise", block=BLOCK, num_warps=4)
    m, n = _row_sizes(g)
    block = CHUNK if looped(g) else max(2, _pow2(n))
    rows = max(1, min(_pow2(m), TILE // block))
    tile = rows * block
    warps = 1 if tile <= 128 else 2 if tile <= 512 else 4 if tile <= 2048 else 8
    return KernelConfig("rows", rows=rows, block_n=block, num_warps=warps, num_stages=1)


def kernel_space(g: Any) -> list[KernelConfig]:
    """The configs searched for a group (the default first): pointwise ``BLOCK`` 128..8192 by warps
    1..8; rows, ``ROWS`` (powers of two up to the rows there are) by ``BLOCK_N`` (a whole row: the
    row's length rounded up; looped: 256..4096) by warps 1..16, and ``num_stages`` 1..3 when looped.
    Unfit points (a tile of fewer elements than threads, or over :data:`MAX_TILE`) are left out;
    :func:`kernel_rejection` judges the rest against a target."""
    out = [default_config(g)]
    if g.kind != "rows":
        for block in (128, 256, 512, 1024, 2048, 4096, 8192):
            for warps in (1, 2, 4, 8):
                if 32 * warps <= block:
                    out.append(KernelConfig("pointwise", block=block, num_warps=warps))
    else:
        m, n = _row_sizes(g)
        loop = looped(g)
        blocks = (256, 512, 1024, 2048, 4096) if loop else (max(2, _pow2(n)),)
        for block_n in blocks:
            rows = 1
            while rows <= _pow2(m) and rows * block_n <= MAX_TILE:
                for warps in (1, 2, 4, 8, 16):
                    if 32 * warps > rows * block_n:
                        continue
                    for stages in ((1, 2, 3) if loop else (1,)):
                        out.append(KernelConfig("rows", rows=rows, block_n=block_n, num_warps=warps,
                                                num_stages=stages))
                rows *= 2
    seen: set[KernelConfig] = set()
    return [c for c in out if not (c in seen or seen.add(c))]


# ---- what one config of a generated kernel does ----------------------------------------------------
@dataclass(frozen=True)
class KernelShape:
    """What the group does, independent of its config (computed once per group)."""

    kind: str
    elements: int  # the domain's elements
    rows: int  # M (rows kernels), else 0
    row_len: int  # N (rows kernels), else 0
    looped: bool
    passes: int  # the passes over a looped row
    full_read_bytes: float  # per domain element: operands read at every element
    row_read_bytes: float  # operands smaller than the domain (row values, broadcasts): read once, total
    write_bytes: float  # total bytes written
    live_full: int  # full-shaped values alive per element (the register estimate)
    reductions: int
    math_per_element: float  # fp32 operations per domain element (transcendentals weighted)


def _passes(g: Any) -> tuple[int, dict[str, int]]:
    """Passes a looped row kernel makes over its rows (codegen's plan: a reduction over values that
    use another reduction's result runs one pass later); (the last reduction's pass, the latest pass
    each full value needs)."""
    dom = tuple(g.domain)
    inside = {n.name for n in g.nodes}
    need: dict[str, int] = {}
    ready: dict[str, int] = {}
    last = 1
    for n in g.nodes:
        ins = [a for a in n.operands() if a.name in inside and not _generator(a)]
        if n.kind == "reduction":
            p = need.get(n.args[0].name, 0) + 1
            ready[n.name] = p
            last = max(last, p)
        elif tuple(n.shape or ()) == dom:
            need[n.name] = max([ready.get(a.name, 0) if tuple(a.shape or ()) != dom else need.get(a.name, 0)
                                for a in ins] + [0])
        else:
            ready[n.name] = max([ready.get(a.name, 0) for a in ins] + [0])
    return last, need


def kernel_shape(graph: Any, g: Any, users: Mapping[str, list[Any]] | None = None) -> KernelShape:
    """What group ``g`` of ``graph`` reads, writes and computes (see :class:`KernelShape`)."""
    users = users if users is not None else graph.users()
    inside = {n.name for n in g.nodes}
    dom = tuple(g.domain)
    elements = max(1, math.prod(dom))
    reads = {a.name: a for n in g.nodes for a in n.operands() if a.name not in inside and not _generator(a)}
    outputs = set(getattr(o, "name", o) for o in graph.outputs)
    copies = getattr(g, "copies", ())  # recomputed here from another kernel's inputs, never written by this one
    outs = [n for n in g.nodes if n.name not in copies and
            (n.name in outputs or any(u.name not in inside for u in users.get(n.name, [])))]
    write = float(sum(_bytes(n) for n in outs))
    full_read, row_read = 0.0, 0.0  # per domain element: operands as large as the domain; the rest, in total
    for a in reads.values():
        if a.shape is not None and math.prod(a.shape) >= elements:
            full_read += _bytes(a) / elements
        else:  # row-shaped or broadcast: read once, then from cache
            row_read += _bytes(a)
    if g.kind == "rows":
        m, n = _row_sizes(g)
        loop = n > WHOLE_MAX
        last, need = _passes(g)
        passes = max([last] + [need.get(o.name, 0) + 1 for o in outs if tuple(o.shape or ()) == dom])
    else:
        m = n = 0
        loop, passes = False, 1
    full_nodes = [x for x in g.nodes if tuple(x.shape or ()) == dom and not _generator(x)]
    reductions = sum(1 for x in g.nodes if x.kind == "reduction")
    scans = sum(1 for x in g.nodes if x.kind == "scan")
    math_el = 0.0
    for x in g.nodes:
        if _generator(x):
            continue
        w = _HEAVY.get(x.op, 1)
        share = 1.0 if tuple(x.shape or ()) == dom else (math.prod(x.shape or (1,)) / elements)
        math_el += w * share
    # values alive at once per element: a few of the full values (the compiler reuses registers along a
    # chain), each reduction's accumulator and each scan's, and the operands loaded
    full_reads = sum(1 for a in reads.values() if a.shape is not None and math.prod(a.shape) >= elements)
    live = max(1, min(len(full_nodes), 4)) + reductions + 2 * scans + full_reads
    return KernelShape(g.kind, elements, m, n, loop, passes if loop else 1, full_read, row_read, write, live,
                       reductions, math_el)


def _index_regs(g: Any) -> int:
    """Index registers per element: a pointwise kernel's flat int64 offset, its mask and its dims'
    indices (a broadcast one folds away: one register a dim); a row kernel's column and its reduced
    dims' indices (the row's own indices are per row, not per element)."""
    return 3 + len(g.domain) if g.kind != "rows" else 1 + len(g.red)


def kernel_work(g: Any, ks: KernelShape, c: KernelConfig, target: Target,
                facts: ConfigFacts | None = None) -> tuple[memory_model.MemoryWork, int, int]:
    """The memory model's view of group ``g`` at config ``c``: (work, registers per thread the values
    need, registers the target allows a thread at ``c.num_warps``)."""
    threads = c.num_warps * target.warp_size
    if ks.kind != "rows":
        tile = c.block
        programs = _cdiv(ks.elements, c.block)
        steps = 1.0
        moved = ks.full_read_bytes * ks.elements + ks.row_read_bytes + ks.write_bytes
        block_bytes = tile * (ks.full_read_bytes + ks.write_bytes / ks.elements)
        reduce_ns = 0.0
    else:
        tile = c.rows * c.block_n
        programs = _cdiv(ks.rows, c.rows)
        chunks = _cdiv(ks.row_len, c.block_n) if ks.looped else 1
        steps = float(ks.passes * chunks)
        reads = ks.full_read_bytes * ks.elements * (ks.passes if ks.looped else 1)
        moved = reads + ks.row_read_bytes + ks.write_bytes
        # padding: a whole row's BLOCK_N lanes past N, masked, still cost issue slots, not bytes
        block_bytes = tile * (ks.full_read_bytes + ks.write_bytes / ks.elements)
        reduce_ns = ks.reductions * ks.passes * (REDUCE_NS if c.num_warps > 1 else REDUCE_NS / 3)
    per_thread = max(1.0, tile / threads)
    regs = int(LIVE_BASE_REGS + per_thread * (_index_regs(g) + ks.live_full))
    allowed = target.max_regs_per_thread(c.num_warps)
    smem = 0
    if ks.kind == "rows":
        smem = 4 * c.rows * c.num_warps * max(1, ks.reductions)  # the cross-warp combine's scratch
        if ks.looped and c.num_stages > 1:
            smem += int((c.num_stages - 1) * tile * max(ks.full_read_bytes, 1.0))  # pipelined copies in flight
    spill = max(0, regs - allowed)
    if facts is not None:
        regs, smem, spill = facts.main.regs, facts.main.smem_bytes, facts.spill_bytes // 4
    # each spilled register is stored and loaded once per element it holds: local memory traffic
    moved += 2 * spill * 4 * threads * programs * max(1.0, steps)
    stages = 1.0
    if ks.looped and c.num_stages > 1:
        if facts is not None and facts.main.loop_loads:
            frac = facts.main.pipelined_loads / facts.main.loop_loads
        else:
            frac = 0.5  # without the compiler's word: strides not known to be 16-element multiples half the time
        stages = 1.0 + (min(c.num_stages, max(1.0, steps)) - 1.0) * frac
    flops = ks.math_per_element * ks.elements * (ks.passes if ks.looped else 1)
    # masked lanes of a whole row padded to BLOCK_N issue too
    if ks.kind == "rows" and not ks.looped:
        flops *= c.block_n / max(1, ks.row_len)
    w = memory_model.MemoryWork(bytes_moved=moved, programs=max(1, programs), num_warps=c.num_warps,
                                block_bytes=max(1.0, block_bytes * stages), steps=steps / stages + reduce_ns / 700.0,
                                regs_per_thread=min(regs, allowed), smem_bytes=smem, flops=flops, math_kind="fp32")
    return w, regs, allowed


def kernel_rejection(g: Any, ks: KernelShape, c: KernelConfig, target: Target,
                     facts: ConfigFacts | None = None) -> str | None:
    """Why config ``c`` of group ``g`` may not run (or should not be chosen) on ``target``, or None:
    registers over the per-thread limit (a spill), shared memory over the per-program limit, a
    whole row longer than ``BLOCK_N`` (the launch contract's domain), more threads than elements, a
    grid past the launch limit, or the compiler's word in ``facts``."""
    threads = c.num_warps * target.warp_size
    if c.kind != ks.kind:
        return f"a {c.kind} config for a {ks.kind} kernel"
    tile = c.block if c.kind == "pointwise" else c.rows * c.block_n
    if tile & (tile - 1) or tile < 1:
        return f"block of {tile} elements is not a power of two"
    if c.kind == "pointwise":
        if threads > c.block:
            return f"{threads} threads for {c.block} elements"
        if _cdiv(ks.elements, c.block) > INT32_MAX:
            return "grid over the launch limit"
    else:
        if not ks.looped and c.block_n < ks.row_len:
            return f"BLOCK_N {c.block_n} shorter than the row ({ks.row_len}) of a whole-row kernel"
        if ks.looped and ks.row_len + c.block_n > INT32_MAX:
            return "column offsets past int32"
        if c.rows > max(1, _pow2(ks.rows)):
            return f"ROWS {c.rows} past the {ks.rows} rows there are"
    if facts is not None:
        why = facts.rejection(c.to_json())
        if why:
            return why
    w, regs, allowed = kernel_work(g, ks, c, target, facts)
    if facts is None and regs > allowed:
        return f"about {regs} registers a thread, {allowed} allowed at {c.num_warps} warps: it would spill"
    if w.smem_bytes > target.smem_per_block:
        return f"{w.smem_bytes} B shared memory, {target.smem_per_block} allowed"
    return None


def config_ms(graph: Any, g: Any, c: KernelConfig, target: Target, users: Mapping[str, list[Any]] | None = None,
              facts: ConfigFacts | None = None, shape: KernelShape | None = None) -> float:
    """Predicted milliseconds of group ``g`` of ``graph`` at config ``c`` (a spill priced as its
    local-memory traffic, not refused: validity is :func:`kernel_rejection`'s)."""
    ks = shape or kernel_shape(graph, g, users)
    w, _, _ = kernel_work(g, ks, c, target, facts)
    return memory_model.predict_ms(w, target)


@dataclass
class KernelChoice:
    """The config search's answer for one generated kernel."""

    config: KernelConfig
    predicted_ms: float
    default: KernelConfig
    default_ms: float
    searched: int  # configs priced
    rejected: int  # of those, refused by validity
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.to_json(), "predicted_ms": self.predicted_ms,
                "default_config": self.default.to_json(), "default_ms": self.default_ms,
                "configs_searched": self.searched, "configs_rejected": self.rejected, "target": self.target}


FactsProvider = Callable[[Any, KernelConfig], "ConfigFacts | None"]


def tune_kernel(graph: Any, g: Any, target: Target, users: Mapping[str, list[Any]] | None = None,
                facts: FactsProvider | None = None) -> KernelChoice:
    """The best valid config of group ``g`` by :func:`config_ms` (an exhaustive walk of
    :func:`kernel_space`); ``facts(g, config)``, when given, supplies the compiler's facts per config
    (None where it has none). Predictions within :data:`TIE_REL` of the best tie (:func:`_pick`): the
    default is kept when it is one of them, and also when it is refused but nothing else is valid
    (what the compiler always emitted)."""
    ks = kernel_shape(graph, g, users)
    key = (ks, len(g.domain), target.name, target.hbm_tbps, target.sms, target.launch_us)
    if facts is None and key in _TUNED:  # the walk depends on the group only through ks and its rank
        return _TUNED[key]
    space = kernel_space(g)
    default = space[0]
    d_ms = config_ms(graph, g, default, target, users, None, ks)
    valid, rejected = [], 0
    for c in space:
        f = facts(g, c) if facts is not None else None
        if kernel_rejection(g, ks, c, target, f):
            rejected += 1
            continue
        valid.append((config_ms(graph, g, c, target, users, f, ks), c))
    best, best_ms = _pick(valid, default, ks) if valid else (default, d_ms)
    choice = KernelChoice(best, best_ms, default, d_ms, len(space), rejected, target.name)
    if facts is None:
        if len(_TUNED) > 4096:
            _TUNED.clear()
        _TUNED[key] = choice
    return choice


_TUNED: dict[tuple, KernelChoice] = {}

TIE_REL = 0.01  # configs predicted within 1% of the best are a tie (below what this uncalibrated model resolves)


def _programs(ks: KernelShape, c: KernelConfig) -> int:
    return _cdiv(ks.rows, c.rows) if c.kind == "rows" else _cdiv(ks.elements, c.block)


def _pick(valid: list[tuple[float, KernelConfig]], default: KernelConfig, ks: KernelShape) -> tuple[KernelConfig, float]:
    """The chosen config among ``(predicted ms, config)``: of those within :data:`TIE_REL` of the best,
    the default if it is one (what the compiler always emitted), else the one launching the fewest
    programs (at a predicted tie, fewer and fuller programs: less scheduling on a GPU, and far less
    time under Triton's CPU interpreter, which runs programs one after another), then the faster."""
    best_ms = min(t for t, _ in valid)
    ties = [(t, c) for t, c in valid if t <= best_ms * (1.0 + TIE_REL)]
    for t, c in ties:
        if c == default:
            return c, t
    t, c = min(ties, key=lambda tc: (_programs(ks, tc[1]), tc[0]))
    return c, t


# ---- library nodes ------------------------------------------------------------------------------
# the configs compiler/library.py's launchers run each op with (on a GPU; Triton's defaults where the
# launcher passes none: 4 warps, 3 stages)
LIBRARY_CONFIGS: dict[str, dict[str, Any]] = {
    "matmul": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3},
    "conv": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 3},
    "rows": {"num_warps": 4, "BLOCK_N": 1024, "WHOLE_MAX": 8192},
}


# How a problem is built: the op registry's validated ``OpSpec.problem``, which sits above this layer.
# The compiler installs it (compiler/search.py); without it a library GEMM is priced as a stream.
build_problem: Callable[[str, Mapping[str, int], Any, Mapping[str, Any]], Problem] | None = None


def _problem(op: str, shape: Mapping[str, int], dtype: Any, attrs: Mapping[str, Any]) -> Problem | None:
    if build_problem is None:
        return None
    try:
        return build_problem(op, shape, dtype, attrs)
    except Exception:  # a size the spec refuses (past an axis's max): no tile-model price
        return None


def library_problem(n: Any) -> Problem | None:
    """The GEMM problem a library ``matmul`` or (implicit-GEMM) ``conv`` node runs, or None."""
    dtype = n.dtype if isinstance(n.dtype, torch.dtype) else torch.float32
    a = n.args[0] if n.args else None
    if n.op == "matmul" and a is not None and getattr(a, "shape", None) and n.shape:
        b = n.args[1]
        k = a.shape[-1]
        nn_ = n.shape[-1]
        batched = len(a.shape) == 3 and getattr(b, "shape", None) is not None and len(b.shape) == 3
        bsz = n.shape[0] if batched else 1
        m = n.shape[-2] if batched else math.prod(n.shape[:-1])
        layout = _layout(n, a, b, m, nn_)
        bias = len(n.args) > 2 and n.args[2] is not None and hasattr(n.args[2], "shape")
        return _problem("matmul", {"M": max(1, m), "N": max(1, nn_), "K": max(1, k), "B": max(1, bsz)}, dtype,
                        {"layout": layout, "bias": bias})
    if n.op == "conv" and a is not None and getattr(a, "shape", None) and n.shape:
        w = n.args[1]
        groups = n.attrs.get("groups", 1)
        if getattr(w, "shape", None) is None:
            return None
        k = math.prod(w.shape[1:]) if not n.attrs.get("transposed") else (w.shape[0] // groups) * math.prod(w.shape[2:])
        m = n.shape[0] * math.prod(n.shape[2:])
        co = n.shape[1] // max(1, groups)
        return _problem("matmul", {"M": max(1, m), "N": max(1, co), "K": max(1, k), "B": max(1, groups)}, dtype,
                        {"layout": "nn", "bias": len(n.args) > 2 and hasattr(n.args[2], "shape")})
    return None


_TRANSPOSES = ("t", "numpy_T", "transpose", "mT", "permute", "swapaxes", "adjoint")


def _layout(n: Any, a: Any, b: Any, m: int, nn_: int) -> str:
    """The GEMM layout the tile model's pipelining rule reads: an operand is ``t`` (its K stride is 1)
    when read transposed (``linear``'s weight, a transposed view) or when it is a vector (M or N is 1:
    Triton specializes a stride of 1), else ``n``."""
    def transposed(x: Any) -> bool:
        return getattr(x, "kind", None) == "view" and getattr(x, "op", None) in _TRANSPOSES

    la = "t" if transposed(a) and m > 1 else "n"
    lb = "t" if n.attrs.get("form") == "linear" or transposed(b) or nn_ == 1 else "n"
    return la + lb


def _gemm_smem(p: Problem, c: Mapping[str, Any]) -> int:
    return (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * p.dtype.itemsize * max(1, c.get("num_stages", 1))


def library_ms(n: Any, target: Target, config: Mapping[str, Any] | None = None) -> float:
    """Predicted time of library node ``n`` at ``config`` (default: :data:`LIBRARY_CONFIGS`, what the
    emitted launcher runs): the GEMM tile model for ``matmul`` and implicit-GEMM ``conv``; else the
    memory model over its rows with its math (attention's two matmuls at the dtype's peak)."""
    p = library_problem(n)
    if p is not None and not (n.op == "conv" and n.attrs.get("groups", 1) > 1 and p.shape["N"] == 1):
        c = {**LIBRARY_CONFIGS[n.op], **(config or {})}  # a knob a config leaves out: the launcher's (conv: GROUP_M 1)
        t = gemm_model.predict_ms("tiled", p, c, target, _gemm_smem(p, c))
        if math.isfinite(t):
            return t
    return stream_ms(n, target, _library_flops(n))


def _library_flops(n: Any) -> tuple[float, str]:
    dtype = n.dtype if isinstance(n.dtype, torch.dtype) else torch.float32
    if n.op == "attention" and len(n.args) >= 3 and all(getattr(x, "shape", None) for x in n.args[:3]):
        q, k, v = n.args[:3]
        sq, d = q.shape[-2], q.shape[-1]
        sk, dv = k.shape[-2], v.shape[-1]
        heads = math.prod(q.shape[:-2])
        f = 2.0 * heads * sq * sk * (d + dv) * (0.5 if n.attrs.get("causal") else 1.0)
        return f, math_kind(dtype)
    if n.op == "conv":  # depthwise: direct math on the CUDA cores
        p = library_problem(n)
        if p is not None:
            return 2.0 * p.shape["M"] * p.shape["N"] * p.shape["K"] * p.shape["B"], "fp32"
    elems = math.prod(n.shape) if n.shape else 0
    return 5.0 * elems, "fp32"  # rows ops: a few operations per element (exp, max, sum)


def stream_ms(n: Any, target: Target, flops: tuple[float, str] = (0.0, "fp32")) -> float:
    """A node run alone as one streaming kernel: reads its operands once, writes its result, 1024
    elements a program at 4 warps (an ATen fallback, an unfused op, a row library op)."""
    moved = _bytes(n) + sum(_bytes(a) for a in {a.name: a for a in n.operands()}.values())
    elems = max(1, max([math.prod(n.shape) if n.shape else 1] +
                       [math.prod(a.shape) for a in n.operands() if getattr(a, "shape", None)]))
    programs = _cdiv(elems, 1024)
    w = memory_model.MemoryWork(bytes_moved=float(moved), programs=programs, num_warps=4,
                                block_bytes=max(1.0, moved / programs), flops=flops[0], math_kind=flops[1])
    return memory_model.predict_ms(w, target)


def node_ms(n: Any, target: Target, config: Mapping[str, Any] | None = None) -> float:
    """Predicted time of one node run alone: nothing for inputs, parameters and views; a library call
    by its family's model (:func:`library_ms`, at ``config`` or its launcher's); any other as a
    streaming kernel (:func:`stream_ms`)."""
    if n.kind in ("input", "param", "view", "sym"):
        return 0.0
    if n.kind == "library":
        return library_ms(n, target, config)
    return stream_ms(n, target)


def kernel_ms(graph: Any, g: Any, target: Target, users: Mapping[str, list[Any]] | None = None,
              tuned: bool = True) -> float:
    """Predicted time of generated kernel ``g``: at its best valid config (``tuned``) or its default."""
    if not tuned:
        return config_ms(graph, g, default_config(g), target, users)
    return tune_kernel(graph, g, target, users).predicted_ms


def program_ms(graph: Any, part: Any, target: Target, free: Iterable[str] = frozenset(), tuned: bool = True,
               library_configs: Mapping[str, Mapping[str, Any]] | None = None) -> float:
    """Predicted time of the whole program: ``part``'s generated kernels (each at its best valid config
    with ``tuned``, else at its default) plus every node no group holds, alone (:func:`node_ms`;
    library node ``name`` at ``library_configs[name]`` where given). The nodes named in ``free``
    (computed outside the call, compiler.hoist) cost nothing, nor does a group made of them alone."""
    free = set(free)
    users = graph.users()
    grouped = set(part.group_of()) | part.copied()
    t = sum(kernel_ms(graph, g, target, users, tuned) for g in part.groups
            if g.nodes and not all(n.name in free for n in g.nodes))
    configs = library_configs or {}
    return t + sum(node_ms(n, target, configs.get(n.name)) for n in graph.nodes
                   if n.name not in grouped and n.name not in free)
