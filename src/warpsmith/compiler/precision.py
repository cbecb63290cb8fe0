"""Lower-precision storage between kernels: a rewrite that changes the program's numbers, declared.

A float32 value that one generated kernel writes and only other generated kernels read can be
stored in 16 bits (the program's own half dtype when its inputs are float16 or bfloat16, else
bfloat16): half the bytes on both sides of the edge, with the kernels still computing in float32.
This is not a rounding-order change the check's usual criterion absorbs (a few times the
reference's own error), so the compiler **declares** it:

- At compile time, the captured program is run in float64 on the problem's inputs as written, with
  every chosen value rounded to its storage dtype (:class:`Declaration`), and with every chosen
  value moved by a full rounding of its dtype (``±m u |v|``, ``m`` in [1/2, 3/2], random signs,
  fixed seed: :func:`_worst_rounding`). The rewrite is taken only when it is predicted cheaper
  (:func:`warpsmith.cost.program.program_ms`) and both the rounded and the moved runs stay within :data:`SHARE` of
  KernelBench's own tolerance for each output's dtype
  (:data:`warpsmith.core.error_contract.KERNELBENCH_TOLERANCE`) everywhere; otherwise its record says why.
  The moved run is what makes one draw of inputs enough: a value the problem's own inputs happen to
  make exact in 16 bits (a ``clamp`` saturated at ±1, a ``relu`` at 0 for every element drawn) is
  rounded for free on those inputs and not on the check's, which draws others.
- The check then receives the declaration (``check(..., declared=...)``): the candidate's error
  against the float64 oracle may reach the usual allowance computed with the declared deviation
  (the rounded run against the oracle, on the check's own inputs) in place of the reference's
  error where that is larger, and never more than KernelBench's tolerance against the reference,
  element by element. The declaration widens nothing past that cap.

The program as written (no rewrite) stays ``solve``'s last candidate, so a declaration the check
rejects costs its gain, never the solution.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..core.error_contract import within_tolerance
from .fuse import Partition
from .ir import Graph
from ..cost.program import program_ms

SHARE = 0.5  # of KernelBench's tolerance, the most a declared deviation may use on the problem's inputs
_LOW = (torch.float32, torch.float16, torch.bfloat16)
_F64 = torch.float64


def _to64(a: Any) -> Any:
    if isinstance(a, torch.dtype):
        return _F64 if a in _LOW else a
    if isinstance(a, torch.Tensor):
        return a.to(_F64) if a.is_floating_point() else a
    if isinstance(a, (list, tuple)):
        return type(a)(_to64(x) for x in a)
    if isinstance(a, dict):
        return {k: _to64(v) for k, v in a.items()}
    return a


@dataclass
class Declaration:
    """Values of the captured program stored in a lower precision (``points``: node name -> dtype):
    :meth:`run` is the program in float64 with each of them rounded to its dtype, the reference
    of the deviation the compiler declares (module docstring)."""

    program: Any  # torch.export.ExportedProgram
    points: dict[str, torch.dtype] = field(default_factory=dict)
    # values computed by an approximate function (node name -> rule of :data:`APPROX`): moved by its bound
    approx: dict[str, str] = field(default_factory=dict)

    def run(self, args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        """The outputs (float64) on ``args`` (the problem's inputs, any float dtype); each approximate
        value moved by its declared bound (random signs, fixed seed: :func:`_approximated`)."""
        return _evaluate(self.program, list(args), self.points, approx=self.approx,
                         approx_gen=torch.Generator().manual_seed(1))

    def run_moved(self, args: Sequence[Any], seed: int = 0) -> tuple[torch.Tensor, ...]:
        """The outputs (float64) on ``args`` with each stored value moved by a full rounding of its
        dtype instead of rounded (:func:`_worst_rounding`): the deviation whatever the values are."""
        return _evaluate(self.program, list(args), self.points, moved=torch.Generator().manual_seed(seed),
                         approx=self.approx, approx_gen=torch.Generator().manual_seed(seed + 2))

    @property
    def summary(self) -> str:
        kinds = sorted({str(d).replace("torch.", "") for d in self.points.values()})
        out = []
        if self.points:
            out.append(f"{len(self.points)} float32 value(s) stored between kernels in {'/'.join(kinds)} "
                       f"({', '.join(sorted(self.points))})")
        if self.approx:
            out.append(f"{len(self.approx)} value(s) computed by approximate functions "
                       f"({', '.join(f'{k}: {v}' for k, v in sorted(self.approx.items()))})")
        return "; ".join(out) + "; capped at KernelBench's tolerance"

    def to_json(self) -> dict[str, Any]:
        doc = {"kind": "storage", "points": {k: str(v).replace("torch.", "") for k, v in self.points.items()},
               "summary": self.summary}
        if self.approx:
            doc["approx"] = dict(self.approx)
        return doc


def _worst_rounding(v: torch.Tensor, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """``v`` (float64) with every element moved by ``±m u |v|``: ``u`` the unit roundoff of ``dtype``,
    ``m`` uniform in [1/2, 3/2], the sign random (``gen``). A rounding's size at every element, even
    where rounding to ``dtype`` happens to be exact; zeros stay zero."""
    u = torch.finfo(dtype).eps / 2
    m = torch.rand(v.shape, generator=gen, dtype=_F64) + 0.5
    sign = torch.randint(0, 2, v.shape, generator=gen, dtype=torch.int64).to(_F64) * 2 - 1
    return v + sign * m * u * v.abs()


def _evaluate(ep: Any, args: list[Any], points: dict[str, torch.dtype],
              moved: torch.Generator | None = None, approx: dict[str, str] | None = None,
              approx_gen: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
    """``ep``'s graph run node by node in float64 (casts to float32/16 kept in float64, the
    metadata assertions skipped), the values named in ``points`` rounded to their dtype (with
    ``moved``, moved by a full rounding instead: :func:`_worst_rounding`)."""
    from torch.export.graph_signature import InputKind

    state = ep.state_dict
    consts = getattr(ep, "constants", {}) or {}
    users = iter(args)
    env: dict[str, Any] = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            env[spec.arg.name] = _to64(next(users))
        elif spec.target in state:
            env[spec.arg.name] = _to64(state[spec.target].detach())
        else:
            env[spec.arg.name] = _to64(consts[spec.target])

    def val(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        if isinstance(a, dict):
            return {k: val(v) for k, v in a.items()}
        return a

    out: tuple[torch.Tensor, ...] = ()
    with torch.no_grad():
        for n in ep.graph.nodes:
            if n.op == "call_function":
                if "_assert" in str(n.target):
                    continue
                v = n.target(*_to64(val(n.args)), **_to64(val(n.kwargs)))
                if approx and n.name in approx and isinstance(v, torch.Tensor) and v.is_floating_point():
                    v = _approximated(v, approx[n.name], _to64(val(n.args)), approx_gen)
                if n.name in points and isinstance(v, torch.Tensor) and v.is_floating_point():
                    v = _worst_rounding(v, points[n.name], moved) if moved is not None \
                        else v.to(points[n.name]).to(_F64)
                env[n.name] = v
            elif n.op == "output":
                res = val(n.args[0])
                out = tuple(res) if isinstance(res, (list, tuple)) else (res,)
    return out


def storage_dtype(g: Graph) -> torch.dtype:
    """The 16-bit type a float32 intermediate is stored in: the inputs' half dtype, else bfloat16."""
    halves = {n.dtype for n in g.inputs if n.dtype in (torch.float16, torch.bfloat16)}
    return halves.pop() if len(halves) == 1 else torch.bfloat16


def _captured(ep: Any) -> dict[str, tuple[int, ...]]:
    """The float32 values of the captured program: node name -> shape."""
    out = {}
    for n in ep.graph.nodes:
        v = n.meta.get("val") if n.op == "call_function" else None
        if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
            out[n.name] = tuple(v.shape)
    return out


def sites(g: Graph, part: Partition, captured: dict[str, tuple[int, ...]]) -> list[Any]:
    """The float32 values a generated kernel writes and only other generated kernels read (never a
    result of the program) that are the captured program's own values (``captured``: same name,
    float32 and shape; a value a rewrite made anew has no counterpart there to round)."""
    grouped, users, results = part.group_of(), g.users(), {n.name for n in g.results()}
    out = []
    for n in g.nodes:
        if n.name not in grouped or n.dtype != torch.float32 or n.name in results \
                or captured.get(n.name) != tuple(n.shape or ()):
            continue
        us = users[n.name]
        if us and all(u.name in grouped and grouped[u.name] != grouped[n.name] for u in us):
            out.append(n)
    return out


def lower_storage(g: Graph, part: Partition, ep: Any, inputs: Sequence[Any], target: Any,
                  base: Declaration | None = None) -> tuple[list[dict[str, Any]], Declaration | None]:
    """Store the :func:`sites` of ``part`` in 16 bits (``g`` changed in place) when predicted cheaper
    and within the tolerance share on ``inputs`` (module docstring); the record (one, or none when
    there is no site) and the declaration (None when not taken). ``base``: a deviation already
    declared (:func:`approximate`), applied in the admission runs too and part of the declaration
    returned."""
    found = sites(g, part, _captured(ep))
    if not found:
        return [], base
    dt = storage_dtype(g)
    before = program_ms(g, part, target)
    old = {n.name: n.dtype for n in found}
    for n in found:
        n.dtype = dt
    after = program_ms(g, part, target)
    decl = Declaration(ep, {n.name: dt for n in found}, dict(base.approx) if base is not None else {})
    rec: dict[str, Any] = {"rewrite": "storage", "at": ", ".join(n.name for n in found),
                           "shapes": [list(n.shape) for n in found], "dtype": str(dt).replace("torch.", ""),
                           "before_ms": before, "after_ms": after, "taken": after < before}
    if rec["taken"]:
        try:
            exact, rounded, moved = _evaluate(ep, list(inputs), {}), decl.run(inputs), decl.run_moved(inputs)
        except Exception as e:  # noqa: BLE001 - an op the float64 run cannot take: no declaration
            rec["taken"], rec["why_not"] = False, f"the float64 run of the program failed ({type(e).__name__}: {e})"
            exact = rounded = moved = None
        worst = 0.0
        for y, yd, ym, x in zip(exact or (), rounded or (), moved or (), _outputs_dtypes(g)):
            for other in (yd, ym):
                _, ratio = within_tolerance(other, y, x, SHARE) if x is not None else (True, 0.0)
                worst = max(worst, ratio)
        if exact is not None:
            rec["deviation_share"] = worst * SHARE  # of KernelBench's tolerance, on the problem's inputs
        if worst > 1.0:
            rec["taken"] = False
            rec["why_not"] = (f"rounded (or moved by a rounding), the program departs from the exact one by {worst * SHARE:.3g}x "
                              f"KernelBench's tolerance on the problem's inputs (at most {SHARE:g}x allowed)")
    if not rec["taken"]:
        for n in found:
            n.dtype = old[n.name]
        return [rec], base
    return [rec], decl


def _outputs_dtypes(g: Graph) -> list[torch.dtype | None]:
    return [n.dtype if n.dtype is not None and n.dtype.is_floating_point else None for n in g.outputs]


# ---- approximate functions in generated kernels -------------------------------------------------------
_U32 = 2.0 ** -24  # float32's unit roundoff: generated kernels compute in float32
# rule -> the declared bound on the relative deviation, in float32 unit roundoffs (``|x|``: the
# argument, for exp2's prescale): what the approximate form may add to the exact function's value
APPROX = {
    # exp(x) = exp2(x * log2(e)): the prescale's two roundings (the product and log2(e) in float32)
    # move the exponent by |x| log2(e) u each, exp2 by ln 2 of that; ex2.approx.f32: 2 ulp (4 u)
    "exp2": "(2 |x| + 4) u",
    # div.approx.f32: 2 ulp (4 u) for |y| in [2^-126, 2^126]; outside, the result may be 0: declared 0
    "fast_div": "4 u, |y| in [2^-126, 2^126]",
    # x / sqrt(y) -> x * rsqrt(y): rsqrt.approx.f32 2^-22.9 (2.2 u) and the product's rounding
    "rsqrt": "3 u",
    # a softmax computed online by the library's flash attention (compiler.lower_softmax_attention):
    # each probability exp2(s log2(e) - m): the prescaled score and the running max's subtraction move
    # the exponent by about (|s| + |m|) u twice; the rescaling and the final division a few u more
    "online_softmax": "(2 |s| + 2 max |s| + 8) u",
}


def _approximated(v: torch.Tensor, rule: str, args: Any, gen: torch.Generator | None) -> torch.Tensor:
    """``v`` (float64, the exact value) moved by the declared bound of ``rule`` (:data:`APPROX`), ``± m``
    times it, ``m`` uniform in [1/2, 3/2], random signs (``gen``)."""
    gen = gen or torch.Generator().manual_seed(1)
    if rule == "exp2" and isinstance(args[0], torch.Tensor):
        rel = ((2.0 * args[0].abs() + 4.0) * _U32).expand_as(v)
    elif rule == "online_softmax" and isinstance(args[0], torch.Tensor):
        x = args[0]
        fin = torch.isfinite(x)
        a = torch.where(fin, x.abs(), torch.zeros_like(x))
        rel = torch.where(fin, (2.0 * a + 2.0 * a.amax(-1, keepdim=True) + 8.0) * _U32, torch.zeros_like(x))
    elif rule == "rsqrt":
        rel = torch.full_like(v, 3.0 * _U32)
    else:
        rel = torch.full_like(v, 4.0 * _U32)
    m = torch.rand(v.shape, generator=gen, dtype=_F64) + 0.5
    sign = torch.randint(0, 2, v.shape, generator=gen, dtype=torch.int64).to(_F64) * 2 - 1
    out = v + sign * m * rel * v.abs()
    if rule == "fast_div" and isinstance(args[1], torch.Tensor):
        y = args[1].abs().expand_as(v) if args[1].dim() else args[1].abs()
        out = torch.where((y >= 2.0 ** -126) & (y <= 2.0 ** 126), out, torch.zeros_like(out))
    return out


_APPROX_OF = {"exp2": ("exp",), "fast_div": ("div",), "rsqrt": ("div",)}  # rule -> the captured op it moves


def _captured_any(ep: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """The floating-point values of the captured program: node name -> (shape, ATen op name)."""
    out = {}
    for n in ep.graph.nodes:
        v = n.meta.get("val") if n.op == "call_function" else None
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            op = getattr(getattr(n.target, "_overloadpacket", None), "__name__", str(n.target))
            out[n.name] = (tuple(v.shape), op)
    return out


def approx_sites(g: Graph, part: Partition, captured: dict[str, tuple[tuple[int, ...], str]],
                 ) -> list[tuple[Any, str, Any]]:
    """``(node, rule, sqrt node or None)`` for each value a generated kernel computes that an
    approximate form can compute (:data:`APPROX`), and that is the captured program's own value
    (same name and shape: the float64 run moves it there)."""
    grouped, users, results = part.group_of(), g.users(), {n.name for n in g.results()}
    out = []

    def ours(n: Any, rule: str) -> bool:
        """A generated kernel's value, the captured program's own (same name, shape and op: the float64
        run moves it there; a value a rewrite made anew under an old name is not)."""
        got = captured.get(n.name)
        return n.name in grouped and n.dtype is not None and n.dtype.is_floating_point and got is not None \
            and got[0] == tuple(n.shape or ()) and got[1] in _APPROX_OF[rule]

    for n in g.nodes:
        if n.kind != "pointwise" or n.attrs.get("approx"):
            continue
        a = n.args
        if n.op == "exp" and len(a) == 1 and ours(n, "exp2"):
            out.append((n, "exp2", None))
        elif n.op == "div" and len(a) == 2 and ours(n, "fast_div"):
            s = a[1]
            if getattr(s, "kind", None) == "pointwise" and s.op == "sqrt" and len(s.args) == 1 and s.name in grouped \
                    and grouped[s.name] == grouped[n.name] and len(users[s.name]) == 1 and s.name not in results:
                out.append((n, "rsqrt", s))
            elif all(getattr(x, "dtype", None) is not None and x.dtype.is_floating_point for x in a):
                out.append((n, "fast_div", None))
    return out


def _apply_approx(n: Any, rule: str, s: Any) -> Any:
    """Mark or rewrite ``n`` for ``rule`` (the sqrt node ``s`` of ``rsqrt`` becomes an rsqrt, and ``n``
    the product); returns how to undo it."""
    saved = [(x, x.op, dict(x.attrs), list(x.args), x.target, list(x.aten_args or [])) for x in (n, s) if x is not None]
    if rule == "rsqrt":
        s.op, s.target = "rsqrt", torch.ops.aten.rsqrt.default
        n.op, n.target, n.attrs = "mul", torch.ops.aten.mul.Tensor, {}
        n.aten_args = list(n.args)
    else:
        n.attrs = dict(n.attrs, approx=rule)
    return saved


def _undo_approx(saved: Any) -> None:
    for x, op, attrs, args, tgt, aten in saved:
        x.op, x.attrs, x.args, x.target, x.aten_args = op, attrs, args, tgt, aten


def approximate(g: Graph, part: Partition, ep: Any, inputs: Sequence[Any], target: Any,
                declared: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], Declaration | None]:
    """Compute the :func:`approx_sites` of ``part`` by approximate functions (``g`` changed in place:
    codegen writes ``exp`` as ``exp2`` with a prescale, a division as ``div.approx``, ``x / sqrt(y)``
    as ``x * rsqrt(y)``) when the program with each of them moved by its declared bound stays within
    :data:`SHARE` of KernelBench's tolerance on ``inputs`` (two draws of the signs); one record per
    rule found and the declaration (None when none is taken). The cost model sees bytes, not
    instructions: the prediction is equal, and the rewrite is taken for the work it removes."""
    found = approx_sites(g, part, _captured_any(ep))
    base = dict(declared or {})  # rewrites already made that declare (node name -> rule of APPROX)
    if not found:
        return [], (Declaration(ep, {}, base) if base else None)
    ms = program_ms(g, part, target)
    by_rule: dict[str, list[tuple[Any, Any]]] = {}
    for n, rule, s in found:
        by_rule.setdefault(rule, []).append((n, s))
    try:
        exact = _evaluate(ep, list(inputs), {})
    except Exception as e:  # noqa: BLE001 - an op the float64 run cannot take: no declaration
        return [{"rewrite": "approximate", "rule": r, "at": ", ".join(n.name for n, _ in sites_),
                 "shapes": [list(n.shape) for n, _ in sites_], "before_ms": ms, "after_ms": ms, "taken": False,
                 "why_not": f"the float64 run of the program failed ({type(e).__name__}: {e})"}
                for r, sites_ in by_rule.items()], (Declaration(ep, {}, base) if base else None)
    records, taken = [], base
    for rule, sites_ in by_rule.items():
        trial = dict(taken, **{n.name: rule for n, _ in sites_})
        decl = Declaration(ep, {}, trial)
        worst = 0.0
        for run in (decl.run(inputs), decl.run_moved(inputs)):
            for y, yd, x in zip(exact, run, _outputs_dtypes(g)):
                if x is not None:
                    worst = max(worst, within_tolerance(yd, y, x, SHARE)[1])
        rec: dict[str, Any] = {"rewrite": "approximate", "rule": rule, "at": ", ".join(n.name for n, _ in sites_),
                               "shapes": [list(n.shape) for n, _ in sites_], "before_ms": ms, "after_ms": ms,
                               "bound": APPROX[rule], "deviation_share": worst * SHARE,
                               "removes": "instructions (the roofline sees bytes: equal prediction)",
                               "taken": worst <= 1.0}
        if rec["taken"]:
            taken = trial
            for n, s in sites_:
                _apply_approx(n, rule, s)
        else:
            rec["why_not"] = (f"moved by its declared bound, the program departs from the exact one by "
                              f"{worst * SHARE:.3g}x KernelBench's tolerance on the problem's inputs "
                              f"(at most {SHARE:g}x allowed)")
        records.append(rec)
    return records, (Declaration(ep, {}, taken) if taken else None)
