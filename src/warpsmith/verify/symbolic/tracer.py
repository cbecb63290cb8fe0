"""Tracing a ``@triton.jit`` kernel symbolically.

The kernel's Python source is parsed and every ``for ... in range(...)`` loop is rewritten so
that its body runs twice with one *symbolic* iteration ``t`` (``0 <= t < trip count``):

- pass 1 runs the body with fresh placeholders for the loop-carried variables, to learn how
  each one changes per iteration; an integer or pointer value whose change ``delta`` does not
  depend on itself or on ``t`` is affine: at iteration ``t`` it is ``initial + t * delta``;
- pass 2 runs the body with those closed forms and records every load and store, each under
  the loop's range constraint. Any other loop-carried integer is *havocked* (an unconstrained
  value), which is sound; obligations that then fail are reported ``unknown``, not ``failed``.

The trip count is Python's ``range`` for a step of either sign (a runtime step whose sign the
contract does not fix is modelled both ways; a step that may be zero fails ``loop_step``).
``break``, ``continue``, ``return`` inside a loop, ``for ... else`` and ``while`` are refused
(the trace is ``unknown``), since running the body once per pass would skip what follows them.
An early exit among a function's own statements (``if COND: return``) makes every later access
and int32 result conditional on ``not COND``.

So a proof covers every trip count, not a few unrolled iterations. Nested ``@triton.jit``
functions are traced the same way (inlined). Constexpr arguments are concrete; program ids,
sizes and strides are z3 integers.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from dataclasses import dataclass, field
from typing import Any, Mapping

import z3

from .budget import budgeted
from .lang import OPAQUE_PREFIX, BlockPtr, SymbolicError, as_sym, fake_triton, make_tl
from .values import DATA, SymTensor, lane

UNDEF = object()
_ids = itertools.count()


@dataclass
class Access:
    kind: str  # load | store | atomic
    base: str
    offset: Any  # z3 Int over lane(0..n-1), program ids, loop iterations, sizes
    mask: Any  # z3 Bool (True when unmasked)
    shape: tuple[int, ...]
    conds: list[Any]  # path conditions: loop ranges
    loops: list[Any]  # (iteration variable, trip count) of the loops in scope, outermost first
    havoc: bool  # depends on a havocked value
    where: str  # kernel function and line
    file: str = "?"  # the kernel's source file (``where``'s line is a line of it)
    loop_lines: list = field(default_factory=list)  # source line of each loop in ``loops``
    data: bool = False  # the address or mask depends on loaded values of no declared range
    opaque: bool = False  # the address, mask or loop range uses an operator z3 sees as uninterpreted (lang.opaque)


@dataclass
class Int32Op:
    expr: Any
    shape: tuple[int, ...]
    conds: list[Any]
    loops: list[Any]
    where: str
    mask: Any = z3.BoolVal(True)  # every lane computes, masked or not; only early exits (path) apply
    file: str = "?"
    loop_lines: list = field(default_factory=list)
    data: bool = False  # computed from loaded values of no declared range (maybe float data, not an index)
    opaque: bool = False  # uses an operator z3 sees as uninterpreted (lang.opaque)


@dataclass
class Trace:
    kernel: str
    accesses: list[Access] = field(default_factory=list)
    int32_ops: list[Int32Op] = field(default_factory=list)
    pids: dict[int, Any] = field(default_factory=dict)
    havocs: list[str] = field(default_factory=list)
    loop_facts: list[Any] = field(default_factory=list)  # e.g. positive steps, assumed and checked


class _LoopRewriter(ast.NodeTransformer):
    """Rewrites ``for x in range(...)`` / ``tl.range(...)`` loops into two-pass symbolic loops."""

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)
        it = node.iter
        is_range = isinstance(it, ast.Call) and (
            (isinstance(it.func, ast.Name) and it.func.id == "range")
            or (isinstance(it.func, ast.Attribute) and it.func.attr == "range"))
        if not is_range:
            return node
        for st in node.body:
            for sub in ast.walk(st):
                if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                    kind = type(sub).__name__.lower()
                    raise SymbolicError(f"`{kind}` inside a for loop is not modelled (line {sub.lineno})")
        if node.orelse:
            raise SymbolicError(f"for ... else is not modelled (line {node.lineno})")
        n = next(_ids)
        lv, pv = f"__ws_L{n}", f"__ws_p{n}"
        assigned = sorted({t.id for st in node.body for t in ast.walk(st)
                           if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store) and not t.id.startswith("__ws")}
                          - ({node.target.id} if isinstance(node.target, ast.Name) else set()))
        snap = "{" + ", ".join(f"{v!r}: locals().get({v!r}, __ws__.UNDEF)" for v in assigned) + "}"
        args = ", ".join(ast.unparse(a) for a in it.args)
        pre = ast.parse(f"{lv} = __ws__.loop(({args},), {snap}, {node.lineno})").body
        head = ast.parse(f"{ast.unparse(node.target)} = {lv}.index\n" +
                         "".join(f"{v} = {lv}.enter({v!r})\n" for v in assigned)).body
        tail = ast.parse(f"{lv}.exit({snap})").body
        after = ast.parse("".join(f"{v} = {lv}.after({v!r})\n" for v in assigned) or "pass").body
        loop = ast.For(target=ast.Name(pv, ast.Store()), iter=ast.parse(f"{lv}.passes()").body[0].value,
                       body=head + node.body + tail, orelse=[])
        return pre + [loop] + after

    def visit_While(self, node: ast.While) -> Any:
        raise SymbolicError(f"while loops are not modelled (line {node.lineno})")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        """``if COND: return`` among a function's own statements is an early exit: what follows runs
        under ``not COND`` (a path condition), for a runtime condition as for a constexpr one."""
        self.generic_visit(node)
        for st in node.body:
            if (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Return)
                    and st.body[0].value is None):
                st.test = ast.Call(func=ast.Attribute(ast.Name("__ws__", ast.Load()), "early_exit", ast.Load()),
                                   args=[st.test, ast.Constant(st.lineno)], keywords=[])
        return node


class Loop:
    def __init__(self, tracer: "Tracer", args: tuple, carried: Mapping[str, Any], line: int) -> None:
        self.tracer, self.carried, self.line = tracer, dict(carried), line
        lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        lo, hi, step = (_int_expr(v) for v in (lo, hi, step))
        self.t = z3.Int(f"t{next(_ids)}")
        tracer.loop_vars.add(str(self.t))
        step_s = z3.simplify(step)
        if z3.is_int_value(step_s) and step_s.as_long() == 0:
            raise SymbolicError(f"range() with step 0 (line {line})")
        if not z3.is_int_value(step_s):
            tracer.trace.loop_facts.append((step != 0, f"loop step nonzero (line {line})"))
            if tracer.implied(step > 0):  # e.g. a grid-stride step: the simpler positive-step form
                step_s = z3.IntVal(1)  # only its sign matters below
        # Python's range for either sign of the step: trip = ceil((hi - lo) / step) when positive, else 0
        up = z3.If(hi > lo, (hi - lo + step - 1) / step, 0)
        down = z3.If(lo > hi, (lo - hi - step - 1) / (-step), 0)
        if z3.is_int_value(step_s):
            self.trip = up if step_s.as_long() > 0 else down
        else:
            self.trip = z3.If(step > 0, up, z3.If(step < 0, down, 0))
        idx = lo + self.t * step
        self.index = SymTensor(idx)
        # t < trip already implies the index lies between lo and hi; stating it helps the solver
        within = z3.If(step > 0, z3.And(idx >= lo, idx < hi), z3.And(idx <= lo, idx > hi))
        if z3.is_int_value(step_s):
            within = z3.And(idx >= lo, idx < hi) if step_s.as_long() > 0 else z3.And(idx <= lo, idx > hi)
        self.range_cond = z3.And(self.t >= 0, self.t < self.trip, within)
        self.opaque = _opaque(self.range_cond)  # a bound through an opaque operator (lang.opaque)
        self.phase = 0
        self.placeholders: dict[str, Any] = {}
        self.closed: dict[str, Any] = {}
        self.ends: dict[str, Any] = {}  # values at the end of the pass-1 body
        self.deltas: dict[str, tuple[SymTensor, Any]] = {}  # affine carried values: (initial, per-iteration delta)

    def passes(self):
        self.tracer.loops.append(self)
        try:
            for self.phase in (1, 2):
                yield self.phase
                if self.phase == 1:
                    self._solve()
        finally:
            self.tracer.loops.pop()

    def _placeholder(self, name: str, v: Any) -> Any:
        if isinstance(v, BlockPtr):  # a block pointer's offsets are loop-carried integers
            return v.with_offsets([self._placeholder(f"{name}.offset{d}", as_sym(o)) for d, o in enumerate(v.offsets)])
        if v is UNDEF or v is DATA or not isinstance(as_sym(v), SymTensor):
            return v
        v = as_sym(v)
        sorts = [z3.IntSort()] * len(v.shape)
        f = z3.Function(f"carry_{name}_{next(_ids)}", *sorts, z3.IntSort())
        expr = f(*[lane(d) for d in range(len(v.shape))]) if v.shape else z3.Int(f"carry_{name}_{next(_ids)}")
        self.placeholders[name] = expr
        return SymTensor(expr, v.shape, v.base, v.int64, v.elem, v.data)

    def enter(self, name: str) -> Any:
        v = self.carried[name]
        if self.phase == 1:
            return self._placeholder(name, v)
        return self.closed.get(name, v)

    def exit(self, values: Mapping[str, Any]) -> None:
        if self.phase == 1:
            self.ends = dict(values)

    def _solve_block_ptr(self, name: str, v0: BlockPtr, end: Any) -> None:
        if not (isinstance(end, BlockPtr) and end.base is v0.base and end.shape is v0.shape
                and end.strides is v0.strides and end.block == v0.block):
            raise SymbolicError(f"block pointer {name} re-made inside a loop (line {self.line}) is not modelled")
        closed, deltas = [], []
        for d, (o0, o1) in enumerate(zip(v0.offsets, end.offsets)):
            ph, o0, o1 = self.placeholders.get(f"{name}.offset{d}"), as_sym(o0), as_sym(o1)
            delta = z3.simplify(o1.expr - ph) if ph is not None else None
            if delta is None or _mentions(delta, ph) or _mentions(delta, self.t):
                raise SymbolicError(f"block pointer {name} advanced by a non-affine amount (loop at line {self.line})")
            closed.append(SymTensor(o0.expr + self.t * delta))
            deltas.append(delta)
        self.closed[name] = v0.with_offsets(closed)
        self.deltas[name] = (v0, deltas)

    def _solve(self) -> None:
        for name, v0 in self.carried.items():
            end = self.ends.get(name, UNDEF)
            if isinstance(v0, BlockPtr):
                self._solve_block_ptr(name, v0, end)
                continue
            if isinstance(end, BlockPtr):  # made inside the body: not carried
                self.closed[name] = v0
                continue
            if v0 is UNDEF or v0 is DATA or end is DATA or end is UNDEF:
                self.closed[name] = DATA if (v0 is DATA or end is DATA) else v0
                continue
            v0, end = as_sym(v0), as_sym(end)
            ph = self.placeholders.get(name)
            if ph is None or not isinstance(end, SymTensor) or z3.is_bool(end.expr):
                self.closed[name] = self._havoc(name, v0)
                continue
            delta = z3.simplify(end.expr - ph)
            if _mentions(delta, ph) or _mentions(delta, self.t):
                self.closed[name] = self._havoc(name, v0)
                continue
            self.deltas[name] = (v0, delta)
            self.closed[name] = SymTensor(v0.expr + self.t * delta, _bshape(v0, end), v0.base or end.base,
                                          v0.int64 or end.int64, v0.elem, v0.data or end.data)

    def _havoc(self, name: str, v0: SymTensor) -> SymTensor:
        self.tracer.trace.havocs.append(f"{name} (loop at line {self.line})")
        sorts = [z3.IntSort()] * len(v0.shape)
        f = z3.Function(f"havoc_{name}_{next(_ids)}", *sorts, z3.IntSort())
        expr = f(*[lane(d) for d in range(len(v0.shape))]) if v0.shape else z3.Int(f"havoc_{name}_{next(_ids)}")
        return SymTensor(expr, v0.shape, v0.base, v0.int64, v0.elem, v0.data)

    def after(self, name: str) -> Any:
        v0 = self.carried[name]
        if isinstance(v0, BlockPtr):
            v0, deltas = self.deltas[name]
            return v0.with_offsets([SymTensor(as_sym(o).expr + self.trip * d) for o, d in zip(v0.offsets, deltas)])
        if isinstance(self.ends.get(name), BlockPtr):
            return UNDEF  # a block pointer made in the body: its last value is not tracked
        if name in self.deltas:
            v0, delta = self.deltas[name]
            return SymTensor(v0.expr + self.trip * delta, v0.shape, v0.base, v0.int64, v0.elem, v0.data)
        closed = self.closed.get(name, UNDEF)
        if closed is DATA or v0 is DATA:
            return DATA
        if v0 is UNDEF:  # body-local: after the loop it holds the last iteration's value (unknown here)
            end = self.ends.get(name, UNDEF)
            return DATA if end is DATA or end is UNDEF else self._havoc(name, as_sym(end))
        return closed


def _bshape(a: SymTensor, b: SymTensor) -> tuple[int, ...]:
    return a.shape if len(a.shape) >= len(b.shape) else b.shape


def _mentions(expr: Any, sub: Any) -> bool:
    seen, todo = set(), [expr]
    while todo:
        e = todo.pop()
        if e.eq(sub) or (z3.is_app(sub) and z3.is_app(e) and e.decl().eq(sub.decl()) and sub.num_args() > 0):
            return True
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        todo.extend(e.children())
    return False


def _int_expr(v: Any) -> Any:
    s = as_sym(v)
    if s is DATA or not isinstance(s, SymTensor) or s.shape:
        raise SymbolicError(f"loop bound {v!r} is not a scalar integer")
    return s.expr


class Tracer:
    """Runs one kernel symbolically; ``trace`` collects its accesses."""

    def __init__(self, kernel_name: str, grid: tuple[Any, ...], value_ranges: Mapping[str, tuple] | None = None,
                 assume: list[Any] = (), concrete: bool = False) -> None:
        self.trace = Trace(kernel_name)
        # concrete mode (concrete.py): sizes are numbers, program ids are ``concrete_pids`` (set per program)
        # and the kernel runs as plain Python, every loop iteration traced: no loop rewriting, no havoc
        self.concrete, self.concrete_pids = concrete, ()
        self.assume = list(assume)
        self.value_ranges = dict(value_ranges or {})
        self.grid_exprs = grid
        self.loops: list[Loop] = []
        self.path: list[Any] = []  # conditions under which the code now traced runs (early exits not taken)
        self.tl = make_tl(self)
        self.triton = fake_triton(self.tl)
        self._compiled: dict[int, Any] = {}
        self.UNDEF = UNDEF
        self.loop_vars: set[str] = set()  # loop iteration variables (each >= 0 wherever it occurs)
        self._floors = _symbol_floors(self.assume)
        self._lb_memo: dict[int, tuple[Any, int | None]] = {}

    # -- called by the rewritten code ------------------------------------------------------------
    def loop(self, args: tuple, carried: Mapping[str, Any], line: int) -> Loop:
        return Loop(self, args, carried, line)

    def implied(self, fact: Any) -> bool:
        """Whether the contract's assumptions imply ``fact`` (a quick solve; False when unsure)."""
        s = budgeted(z3.Solver(), 500)
        s.add(*self.assume, z3.Not(fact))
        return s.check() == z3.unsat

    def early_exit(self, cond: Any, line: int) -> bool:
        """``if cond: return``: True exits (a condition known here); otherwise the rest of the function
        runs under ``not cond``, which every later access and int32 result carries."""
        c = as_sym(cond)
        if c is DATA:
            raise SymbolicError(f"an early return on a data value (line {line})")
        if not isinstance(c, SymTensor) or c.shape:
            raise SymbolicError(f"an early return on a block value (line {line})")
        e = z3.simplify(c.expr if z3.is_bool(c.expr) else c.expr != 0)
        if z3.is_true(e) or z3.is_false(e):
            return z3.is_true(e)
        self.path.append(z3.Not(e))
        return False

    def lower_bound(self, e: Any) -> int | None:
        """A constant lower bound of ``e`` wherever the traced value is used, or None; read off the
        syntax alone. Atoms: program ids, lanes and loop iterations are >= 0 (every obligation,
        bounded check and witness takes them in their ranges), a contract symbol is >= the constant
        an assumption ``x >= k`` gives it (sizes: 1); sums, products of non-negative factors, floor
        quotients and remainders by divisors >= 1 and conditionals combine these."""
        key = e.get_id()
        hit = self._lb_memo.get(key)
        if hit is not None:
            return hit[1]
        out = self._lower_bound(e)
        self._lb_memo[key] = (e, out)  # the term is kept alive: its id is not reused while cached
        return out

    def _lower_bound(self, e: Any) -> int | None:
        if z3.is_int_value(e):
            return e.as_long()
        if not z3.is_app(e) or z3.is_bool(e):
            return None
        kind, ch = e.decl().kind(), e.children()
        if kind == z3.Z3_OP_UNINTERPRETED:
            if ch:
                return None
            name = e.decl().name()
            if name in self.loop_vars or (name.startswith(("pid", "lane")) and name[3 if name[0] == "p" else 4:].isdigit()):
                return 0
            return self._floors.get(name)
        if kind == z3.Z3_OP_ITE:
            a, b = self.lower_bound(ch[1]), self.lower_bound(ch[2])
            return None if a is None or b is None else min(a, b)
        if kind == z3.Z3_OP_ADD:
            bs = [self.lower_bound(c) for c in ch]
            return None if None in bs else sum(bs)
        if kind == z3.Z3_OP_SUB and len(ch) == 2 and z3.is_int_value(ch[1]):
            a = self.lower_bound(ch[0])
            return None if a is None else a - ch[1].as_long()
        if kind == z3.Z3_OP_MUL:
            bs = [self.lower_bound(c) for c in ch]
            if None in bs or min(bs) < 0:
                return None
            out = 1
            for b in bs:
                out *= b
            return out
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            a, d = self.lower_bound(ch[0]), self.lower_bound(ch[1])
            if a is None or d is None or a < 0 or d < 1:
                return None
            if kind == z3.Z3_OP_MOD:
                return 0
            return a // ch[1].as_long() if z3.is_int_value(ch[1]) else 0
        return None

    def range_not_rewritten(self, *a, **k):
        if self.concrete:  # a concrete trace runs the loop: its bounds are numbers here
            return range(*(int(x) for x in a))
        raise SymbolicError("tl.range used outside a for statement")

    # -- called by the symbolic tl ----------------------------------------------------------------
    def pid(self, axis: int) -> Any:
        if self.concrete:
            return z3.IntVal(self.concrete_pids[axis] if axis < len(self.concrete_pids) else 0)
        if axis not in self.trace.pids:
            self.trace.pids[axis] = z3.Int(f"pid{axis}")
        return self.trace.pids[axis]

    def grid(self, axis: int) -> Any:
        return _int_expr(self.grid_exprs[axis]) if axis < len(self.grid_exprs) else z3.IntVal(1)

    def int32_result(self, value: SymTensor) -> None:
        """Record an int32 add/sub/mul result (it must not wrap) when every enclosing loop is in pass 2."""
        if all(lp.phase == 2 for lp in self.loops) and not z3.is_int_value(z3.simplify(value.expr)):
            frame = _kernel_frame()
            where = _where(frame)
            self.trace.int32_ops.append(Int32Op(value.expr, value.shape, [lp.range_cond for lp in self.loops],
                                                [(lp.t, lp.trip) for lp in self.loops], where,
                                                z3.And(*self.path) if self.path else z3.BoolVal(True),
                                                file=_file(frame), loop_lines=[lp.line for lp in self.loops],
                                                data=value.data, opaque=any(lp.opaque for lp in self.loops)
                                                or any(_opaque(e) for e in (value.expr, *self.path))))

    def access(self, kind: str, ptr: Any, mask: Any) -> Any:
        ptr = as_sym(ptr)
        if not isinstance(ptr, SymTensor) or not ptr.is_ptr:
            raise SymbolicError(f"{kind} through a value that is not a pointer: {ptr!r}")
        m = as_sym(mask) if mask is not None else None
        if m is DATA:
            raise SymbolicError(f"{kind} with a data-dependent mask")
        shape = ptr.shape if m is None else _bshape(ptr, m)
        from .lang import _shift

        ptr = _shift(ptr, len(shape))
        m_expr = z3.BoolVal(True) if m is None else _shift(m, len(shape)).expr
        if self.path:
            m_expr = z3.And(*self.path, m_expr)
        frame = _kernel_frame()
        where = _where(frame)
        if all(lp.phase == 2 for lp in self.loops):
            names = _names(ptr.expr) | _names(m_expr)
            havoc = any(s.startswith("havoc_") for s in names)
            self.trace.accesses.append(Access(kind, ptr.base, ptr.expr, m_expr, shape,
                                              [lp.range_cond for lp in self.loops], [(lp.t, lp.trip) for lp in self.loops],
                                              havoc, where, _file(frame), [lp.line for lp in self.loops],
                                              ptr.data or (m is not None and m.data),
                                              any(n.startswith(OPAQUE_PREFIX) for n in names)
                                              or any(lp.opaque for lp in self.loops)))  # a loop bound through `&`
        if kind == "load" and ptr.base in self.value_ranges:  # a gather table: values obey a declared precondition
            f = z3.Function(f"value_{ptr.base}", z3.IntSort(), z3.IntSort())
            return SymTensor(f(ptr.expr), shape)
        if kind == "load":  # no declared range: any value (one fresh function per load: stores may change it)
            f = z3.Function(f"gathered_{ptr.base}_{next(_ids)}", z3.IntSort(), z3.IntSort())
            return SymTensor(f(ptr.expr), shape, data=True)
        return DATA

    # -- compiling jit functions -------------------------------------------------------------------
    def compile(self, jit_fn: Any) -> Any:
        key = id(jit_fn)
        if key in self._compiled:
            return self._compiled[key]
        fn = getattr(jit_fn, "fn", jit_fn)
        lines, first = inspect.getsourcelines(fn)
        src = textwrap.dedent("".join(lines))
        tree = ast.parse(src)
        ast.increment_lineno(tree, first - 1)  # frames report the kernel file's own line numbers
        fdef = tree.body[0]
        fdef.decorator_list = []
        if not self.concrete:  # a concrete trace runs loops and early exits as the Python they are
            tree = _LoopRewriter().visit(tree)
        tree = ast.fix_missing_locations(tree)
        ns = dict(fn.__globals__)
        for k, v in list(ns.items()):
            if type(v).__name__ in ("JITFunction", "InterpretedFunction") or hasattr(v, "fn") and hasattr(v, "arg_names"):
                ns[k] = _Lazy(self, v)
        ns.update(tl=self.tl, triton=self.triton, __ws__=self)
        code = compile(tree, filename=inspect.getsourcefile(fn) or f"<traced {fn.__name__}>", mode="exec")
        exec(code, ns)
        inner = ns[fn.__name__]

        def scoped(*args, **kwargs):  # an early exit's path condition ends with its function
            depth = len(self.path)
            try:
                return inner(*args, **kwargs)
            finally:
                del self.path[depth:]

        self._compiled[key] = scoped
        return scoped


class _Lazy:
    def __init__(self, tracer: Tracer, jit_fn: Any) -> None:
        self.tracer, self.jit_fn = tracer, jit_fn

    def __call__(self, *args, **kwargs):
        return self.tracer.compile(self.jit_fn)(*args, **kwargs)


_HERE = str(__import__("pathlib").Path(__file__).resolve().parent)


_OURS: dict[str, bool] = {}


def _ours(filename: str) -> bool:
    if filename not in _OURS:
        _OURS[filename] = str(__import__("pathlib").Path(filename).resolve().parent) == _HERE
    return _OURS[filename]


def _symbol_floors(facts: list[Any]) -> dict[str, int]:
    """Constant lower bounds of symbols stated by facts ``x >= k``, ``x > k``, ``k <= x`` or ``k < x``."""
    out: dict[str, int] = {}
    for f in facts:
        if not isinstance(f, z3.BoolRef) or not z3.is_app(f) or f.num_args() != 2:
            continue
        kind, (a, b) = f.decl().kind(), f.children()
        if kind in (z3.Z3_OP_LE, z3.Z3_OP_LT):  # k <= x is x >= k
            a, b, kind = b, a, z3.Z3_OP_GE if kind == z3.Z3_OP_LE else z3.Z3_OP_GT
        if kind not in (z3.Z3_OP_GE, z3.Z3_OP_GT) or not z3.is_int_value(b):
            continue
        if z3.is_const(a) and a.decl().kind() == z3.Z3_OP_UNINTERPRETED and a.is_int():
            k = b.as_long() + (1 if kind == z3.Z3_OP_GT else 0)
            out[str(a)] = max(k, out.get(str(a), k))
    return out


def _kernel_frame() -> Any:
    """The innermost frame of the traced kernel's own code (outside this package)."""
    frame = inspect.currentframe()
    while frame is not None and _ours(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _where(frame: Any) -> str:
    """``kernel:line`` with the line in the kernel's source file (named in ``Access.file``)."""
    if frame is None:
        return "?"
    return f"{frame.f_code.co_name}:{frame.f_lineno}"


def _file(frame: Any) -> str:
    return frame.f_code.co_filename if frame is not None else "?"


def _opaque(expr: Any) -> bool:
    return any(n.startswith(OPAQUE_PREFIX) for n in _names(expr))


def _names(expr: Any) -> set[str]:
    out, seen, todo = set(), set(), [expr]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_app(e):
            out.add(e.decl().name())
        todo.extend(e.children())
    return out
