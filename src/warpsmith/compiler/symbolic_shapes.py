"""Symbolic sizes: one compiled program for a range of shapes (``torch.compile(..., dynamic=True)``).

Dynamo gives a graph with symbolic sizes (``SymInt``: a sympy symbol such as ``s27`` and a *hint*,
the size of the call that compiled it) and a shape environment holding its *guards* (``s53 == 16``
where a size was specialized, ranges such as ``2 <= s27``, divisibility where a reshape needs it).
This module describes those sizes (:class:`SymDim`, :class:`SymbolicShapes`) and makes the rest of
the compiler serve them without knowing about them:

- **probe sizes.** While a symbolic graph is compiled (:meth:`SymbolicShapes.probing`), the IR reads
  every symbolic size at a *probe* value: a distinct large prime per symbol (about 10^6) instead of
  its hint. Every stage then takes the path that is correct for any size: rows this long are walked
  in chunks (looped row kernels, online softmax, looped norms), a size of one is never assumed, and
  every size the program text carries is a monomial ``c * P1^a * P2^b ...`` that names its symbols
  unambiguously (unique factorization), not a number that might coincide with a static size.
- **sizes as arguments.** The emitted text is then rewritten (:meth:`SymbolicShapes.finalize`):
  every probe-derived integer in the launchers and in ``run`` becomes a Python expression of the
  runtime sizes (``_S['s27'] * 16``), read at call time from the inputs (a ``SymInt`` argument, or
  the size of an input tensor's dim), so grids, allocations, strides and the kernels' size
  arguments follow the call. The generated ``@triton.jit`` text must hold no probe-derived literal
  (a size baked into a kernel): such a graph is refused, not compiled wrong. Library ops are called
  with the runtime tensors and take their sizes from them.
- **guards.** The report lists dynamo's guards on the graph's symbols (the shape environment's, and
  each symbol's range) and warpsmith's own: every tensor of the graph stays below 2^31 elements (the
  kernels' sizes are int32 arguments). The program checks its own guards at every call; a call that
  violates one runs the original ATen graph (never a wrong result), dynamo's guards make dynamo
  recompile (a size of 1, a specialized size changing).
- **verified at several sizes.** The backend verifies the program at the hint and at a smaller and a
  larger assignment of the symbols that satisfy every guard (:meth:`SymbolicShapes.sizes`).
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import torch

# distinct primes, one per symbol: the value every stage sees for a symbolic size
PROBES = (1000003, 1000033, 1000037, 1000039, 1000081, 1000099, 1000117, 1000121, 1000133, 1000151)
INT32 = 2 ** 31

_ACTIVE: contextvars.ContextVar["SymbolicShapes | None"] = contextvars.ContextVar("warpsmith_symbolic", default=None)


class ShapeGuardFailed(RuntimeError):
    """A call's sizes violate one of warpsmith's guards on a symbolic program (it runs as ATen)."""


@dataclass
class SymDim:
    """One symbolic size: its sympy symbol, the hint dynamo compiled it at, its probe value and
    where a call reads it from (``input 2`` a ``SymInt`` argument, ``input 4 dim 1`` a tensor's size)."""

    name: str
    symbol: Any
    hint: int
    probe: int
    source: tuple[int, int | None]
    lower: int = 2
    upper: int | None = None

    def describe(self) -> str:
        i, d = self.source
        where = f"input {i}" + (f" dim {d}" if d is not None else "")
        hi = "inf" if self.upper is None else str(self.upper)
        return f"{self.name} (hint {self.hint}, range [{self.lower}, {hi}], read from {where})"


@dataclass
class SymbolicShapes:
    """The symbolic sizes of one graph: its symbols, its inputs' shapes in them, the guards."""

    dims: dict[str, SymDim]
    inputs: list[Any]  # per input: a tuple of sympy exprs (tensor), a sympy expr (SymInt), or None
    guards: list[Any] = field(default_factory=list)  # dynamo's guard expressions on these symbols (sympy)
    numels: list[Any] = field(default_factory=list)  # the distinct element counts of the graph's tensors
    verified: list[dict[str, int]] = field(default_factory=list)
    table: dict[int, set] = field(default_factory=dict)  # probe value -> the graph's size expressions with it

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_graph(cls, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> "SymbolicShapes":
        """Raises ValueError (the reason the graph is not compiled) for what this does not serve:
        unbacked sizes (data-dependent), symbolic floats or booleans, a symbol no input provides."""
        shape_env, exprs = None, []
        for x in example_inputs:
            if isinstance(x, torch.SymInt):
                shape_env = shape_env or x.node.shape_env
                exprs.append(x.node.expr)
            elif isinstance(x, torch.Tensor):
                dims = tuple(_expr(s) for s in x.shape)
                for s in x.shape:
                    if isinstance(s, torch.SymInt):
                        shape_env = shape_env or s.node.shape_env
                exprs.append(dims)
            elif isinstance(x, (torch.SymFloat, torch.SymBool)):
                raise ValueError(f"a symbolic {type(x).__name__} input (only symbolic integer sizes are compiled)")
            else:
                exprs.append(None)
        dims: dict[str, SymDim] = {}
        hints = _hints(example_inputs)
        for i, e in enumerate(exprs):
            cands = [(e, None)] if e is not None and not isinstance(e, tuple) else \
                [(d, k) for k, d in enumerate(e or ())]
            for d, k in cands:
                if _is_symbol(d) and str(d) not in dims:
                    if str(d).startswith("u"):
                        raise ValueError(f"an unbacked (data-dependent) size {d}")
                    vr = shape_env.var_to_range.get(d) if shape_env is not None else None
                    lo = int(vr.lower) if vr is not None and _finite(vr.lower) else 2
                    hi = int(vr.upper) if vr is not None and _finite(vr.upper) else None
                    if len(dims) >= len(PROBES):
                        raise ValueError(f"more than {len(PROBES)} symbolic sizes")
                    dims[str(d)] = SymDim(str(d), d, hints[str(d)], PROBES[len(dims)], (i, k), lo, hi)
        out = cls(dims, exprs)
        known = {v.symbol for v in dims.values()}
        for fx in gm.graph.nodes:
            v = fx.meta.get("val")
            vals = v if isinstance(v, (list, tuple)) else [v]
            for t in vals:
                if isinstance(t, (torch.SymFloat, torch.SymBool)) and fx.op != "placeholder":
                    raise ValueError(f"a symbolic {type(t).__name__} value ({fx.name})")
                free = _free(t)
                if free - known:
                    raise ValueError(f"{fx.name} has sizes in {sorted(map(str, free - known))}, which no input "
                                     "provides (unbacked or derived only)")
                for e in _exprs(t):  # every size the graph names: known by its probe value
                    if e.free_symbols:
                        out.table.setdefault(out.probe_value(e), set()).add(e)
                if isinstance(t, torch.Tensor):
                    numel = _expr(t.numel())
                    if _free(t) and numel not in out.numels:
                        out.numels.append(numel)
        if shape_env is not None:
            for g in shape_env.guards:
                if getattr(g.expr, "free_symbols", set()) & known and g.expr not in out.guards:
                    out.guards.append(g.expr)
        return out

    # ---- while compiling -------------------------------------------------------------------------
    @contextlib.contextmanager
    def probing(self) -> Iterator["SymbolicShapes"]:
        """The IR reads every symbolic size at its probe value inside this block."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def probe_value(self, expr: Any) -> int:
        return int(expr.subs({d.symbol: d.probe for d in self.dims.values()}))

    def mark(self, g: Any, gm: torch.fx.GraphModule) -> None:
        """The IR nodes of ``gm``'s size arithmetic (``s0 * s1``, ``sym_size``) become kind ``sym``,
        emitted as Python on the runtime sizes (lowering leaves them alone)."""
        vals = {fx.name: fx.meta.get("val") for fx in gm.graph.nodes}
        for n in g.nodes:
            v = vals.get(n.name)
            if n.kind != "input" and isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool) and n.shape is None:
                n.kind, n.op = "sym", "size"
                n.attrs = {"py": self.py(_expr(v))}

    # ---- the program text ------------------------------------------------------------------------
    def py(self, expr: Any) -> str:
        """``expr`` (sympy, in the symbols) as Python reading the runtime sizes ``_S``."""
        text = str(expr)
        for name in sorted(self.dims, key=len, reverse=True):
            text = re.sub(rf"\b{name}\b", f"_S['{name}']", text)
        return f"({text})"

    def from_probe(self, v: int) -> str | None:
        """The Python expression of a probe-derived integer ``v`` (a monomial in the probes), or None."""
        c, terms = v, []
        for d in self.dims.values():
            e = 0
            while c and c % d.probe == 0:
                c //= d.probe
                e += 1
            if e:
                terms.append(f"_S['{d.name}']" + (f" ** {e}" if e > 1 else ""))
        if not terms:
            return None
        return "(" + " * ".join(([str(c)] if c != 1 else []) + terms) + ")"

    def finalize(self, prog: Any, arg_names: list[str]) -> str:
        """The emitted module's text with the probe sizes replaced by the runtime sizes (see the module
        docstring). Raises ValueError when a generated kernel's own text carries a symbolic size."""
        text = prog.text
        small = min(d.probe for d in self.dims.values())
        for k in prog.kernels:
            code = re.sub(r'"""(?:.|\n)*?"""', "", k.source)  # the docstring names the probe domain
            for lit in re.findall(r"(?<![\w.])\d+(?:\.\d*)?(?:e[+-]?\d+)?", code):
                v = float(lit)
                if v >= small // 4 and v != 2 ** 62:
                    raise ValueError(f"generated kernel {k.name} carries a symbolic size as the literal {lit} "
                                     "(e.g. a count in a var/std): not compiled for symbolic shapes")
        if prog.kernels:  # the prover's launch table describes static launches: not written here
            from .contracts import launch_table

            text = text.replace(launch_table(prog.kernels), "_WS_LAUNCHES = None  # symbolic shapes: no static launches\n")

        text = re.sub(r"Specialized to the input shapes [^\n]*\.\"\"\"",
                      lambda m: "Serves symbolic sizes " + ", ".join(self.dims) + " (read from the inputs at every call); "
                      "guards: " + "; ".join(self.guard_lines()) + '."""', text, count=1)

        def sub(m: re.Match) -> str:
            v = int(m.group(0))
            named = self.table.get(v, set())
            if len(named) == 1 and not _monomial(next(iter(named))):  # e.g. s27 // 2: not a monomial
                return self.py(next(iter(named)))
            e = self.from_probe(v)
            return e if e is not None else m.group(0)

        big = r"(?<![\w.'\"])\d{6,}(?![\w.])"
        for piece in [text[text.index("def run("):]] + [k.launcher for k in prog.kernels]:
            left = [x for x in re.findall(big, re.sub(big, sub, piece)) if int(x) >= small // 4 and int(x) != INT32]
            if left:
                raise ValueError(f"the program needs sizes it cannot express in the symbols: {left[:3]} "
                                 "(a size that is not a product of symbols and constants)")
        text = re.sub(big, sub, text)
        left = [x for x in re.findall(r"(?<![\w.])\d{6,}\.\d*", text) if self.from_probe(int(float(x))) is not None]
        if left:
            raise ValueError(f"the emitted program carries symbolic sizes as floats: {left[:3]}")
        for k in prog.kernels:  # launchers receive the sizes
            text = text.replace(f"def {k.launcher_name}(dev", f"def {k.launcher_name}(_S, dev")
            text = text.replace(f"= {k.launcher_name}(_dev", f"= {k.launcher_name}(_S, _dev")
        bind = []
        for d in self.dims.values():
            i, k = d.source
            bind.append(f"'{d.name}': int({arg_names[i]})" if k is None else f"'{d.name}': {arg_names[i]}.shape[{k}]")
        checks = " or ".join(f"{self.py(e)} >= {INT32}" for e in self.numels) or "False"
        head = f"def run({', '.join(arg_names)}):\n"
        prelude = (f"    _S = {{{', '.join(bind)}}}  # the symbolic sizes of this call\n"
                   f"    if {checks}:\n"
                   f"        raise ShapeGuardFailed(f'a tensor reaches 2^31 elements at sizes {{_S}}')\n")
        if head not in text:
            raise ValueError("no run() in the emitted program")
        text = text.replace(head, head + prelude, 1)
        guard_cls = ("\n\nclass ShapeGuardFailed(RuntimeError):\n"
                     '    """A call\'s sizes violate a guard of this symbolic program (the caller runs ATen)."""\n\n\n'
                     + _SIZE_FUNCTIONS)
        return text.replace(head, guard_cls + head, 1)

    # ---- guards and sizes ----------------------------------------------------------------------------
    def guard_lines(self) -> list[str]:
        out = [f"dynamo: {_pretty(e)}" for e in self.guards]
        out += [f"dynamo: {d.lower} <= {d.name}" + (f" <= {d.upper}" if d.upper is not None else "")
                for d in self.dims.values()]
        out += [f"warpsmith: {e} < 2^31 (int32 size arguments; else the call runs as ATen)" for e in self.numels]
        return out

    def holds(self, values: dict[str, int]) -> bool:
        subs = {self.dims[n].symbol: v for n, v in values.items()}
        for d in self.dims.values():
            v = values[d.name]
            if v < d.lower or d.upper is not None and v > d.upper:
                return False
        for e in self.guards:
            try:
                if not bool(e.subs(subs)):
                    return False
            except TypeError:
                return False
        return all(int(e.subs(subs)) < INT32 for e in self.numels)

    def sizes(self) -> list[dict[str, int]]:
        """The hint, then a smaller and a larger assignment of the symbols that satisfy every guard
        (two larger ones where nothing smaller does); each differs from the others."""
        hint = {n: d.hint for n, d in self.dims.items()}
        out = [hint]

        def search(cands: dict[str, list[int]]) -> dict[str, int] | None:
            trial = {n: next((v for v in cands[n] if self.holds({**hint, n: v})), hint[n]) for n in hint}
            if trial not in out and self.holds(trial):
                return trial
            for n in hint:  # one symbol at a time
                for v in cands[n]:
                    one = {**hint, n: v}
                    if one not in out and self.holds(one):
                        return one
            return None

        small = search({n: [h // 2, h - 1, h - 2, 2, 3] for n, h in hint.items()})
        large = search({n: [2 * h + 1, h + 3, 2 * h, 3 * h, h + 1] for n, h in hint.items()})
        for s in (small, large):
            if s is not None:
                out.append(s)
        if len(out) < 3:
            more = search({n: [3 * h + 1, 4 * h, h + 5, h + 2] for n, h in hint.items()})
            if more is not None:
                out.append(more)
        return out

    def concrete(self, values: dict[str, int]) -> list[Any]:
        """The inputs' concrete shapes (tensors) or values (SymInts) at ``values``."""
        subs = {self.dims[n].symbol: v for n, v in values.items()}
        out = []
        for e in self.inputs:
            if e is None:
                out.append(None)
            elif isinstance(e, tuple):
                out.append(tuple(int(x.subs(subs)) if hasattr(x, "subs") else int(x) for x in e))
            else:
                out.append(int(e.subs(subs)))
        return out


# the functions torch's size expressions print as (``FloorDiv(s0, 2)``), for the size arithmetic of ``run``
_SIZE_FUNCTIONS = """def FloorDiv(a, b):
    return a // b


def Mod(a, b):
    return a % b


def ModularIndexing(a, b, c):
    return (a // b) % c


CleanDiv = FloorDiv
PythonMod = Mod
Max, Min = max, min


"""


# ---- the hook the IR reads sizes through -----------------------------------------------------------
def size(s: Any) -> int:
    """A dim of a traced tensor as an int: the probe value of a symbolic one while a symbolic graph
    compiles; never a guard on it (``int(SymInt)`` would specialize it)."""
    if isinstance(s, torch.SymInt):
        active = _ACTIVE.get()
        if active is not None:
            return active.probe_value(s.node.expr)
    return int(s)


def is_probe(v: Any) -> bool:
    """Whether the int ``v`` (a count codegen would write as a literal) derives from a symbolic size."""
    active = _ACTIVE.get()
    if active is None or isinstance(v, bool) or not isinstance(v, int):
        return False
    return active.from_probe(v) is not None


def has_symbols(example_inputs: Sequence[Any]) -> bool:
    for x in example_inputs:
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
            return True
    return False


def _expr(s: Any) -> Any:
    import sympy

    if isinstance(s, torch.SymInt):
        return s.node.expr
    return sympy.Integer(int(s))


def _exprs(t: Any) -> list:
    if isinstance(t, torch.SymInt):
        return [t.node.expr]
    if isinstance(t, torch.Tensor):  # every product of consecutive dims (a kernel's M, N, strides, numel)
        import sympy

        dims = [_expr(d) for d in t.shape]
        return [sympy.expand(sympy.Mul(*dims[i:j])) for i in range(len(dims)) for j in range(i + 1, len(dims) + 1)]
    return []


def _monomial(e: Any) -> bool:
    import sympy

    return all(isinstance(f, (sympy.Symbol, sympy.Integer)) or isinstance(f, sympy.Pow) and f.base.is_Symbol
               for f in sympy.Mul.make_args(e))


def _is_symbol(e: Any) -> bool:
    import sympy

    return isinstance(e, sympy.Symbol)


def _free(t: Any) -> set:
    if isinstance(t, torch.SymInt):
        return set(t.node.expr.free_symbols)
    if isinstance(t, torch.Tensor):
        out: set = set()
        for s in list(t.shape) + [t.numel()]:
            if isinstance(s, torch.SymInt):
                out |= set(s.node.expr.free_symbols)
        return out
    return set()


def _finite(v: Any) -> bool:
    try:
        return abs(int(v)) < 2 ** 62
    except Exception:  # noqa: BLE001 - sympy's (and torch's int_oo) infinities refuse int() in several ways
        return False


def _hints(example_inputs: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in example_inputs:
        for s in ([x] if isinstance(x, torch.SymInt) else list(x.shape) if isinstance(x, torch.Tensor) else []):
            if isinstance(s, torch.SymInt) and _is_symbol(s.node.expr) and s.node.hint is not None:
                out.setdefault(str(s.node.expr), int(s.node.hint))
    return out


def _pretty(e: Any) -> str:
    return str(e).replace("Eq(", "==(").replace("Ne(", "!=(")
