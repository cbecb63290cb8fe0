"""Launch contracts: what a Triton kernel may assume, declared next to the kernel.

A kernel file for ``warpsmith prove`` is a Python file that defines ``@triton.jit`` kernels and
a module-level ``CONTRACTS`` list (or one ``CONTRACT``) of :class:`LaunchContract`::

    from warpsmith.verify.symbolic import LaunchContract, Tensor, sizes, cdiv

    M, N = sizes("M N")
    CONTRACT = LaunchContract(
        kernel=copy_kernel,                          # the @triton.jit function
        args={"x_ptr": Tensor((M, N), (N, 1)),        # pointer args: shape and strides
              "y_ptr": Tensor((M, N), (N, 1), output=True),
              "M": M, "N": N},                        # scalar args: expressions of the sizes
        constexprs=[{"BLOCK": 64}, {"BLOCK": 128}],   # one proof per combination
        grid=lambda c: (cdiv(M, c["BLOCK"]),),         # grid as a function of the constexprs
        domain=[M <= 2**20, N <= 2**20],              # sizes are >= 1 always; add upper bounds here
        bounded_shapes=[{"M": 1, "N": 7}, {"M": 37, "N": 130}],  # checked when a proof is not reached
    )

Optional: ``Tensor(..., values=(lo, hi))`` declares that every element of an integer tensor
lies in ``[lo, hi)`` (a gather or block table: addresses computed from it are proved under
that precondition), and ``monotone=True`` that its values do not decrease with the offset (the
offsets of packed sequences, ``cu_seqlens``: programs of different sequences then write disjoint
rows); ``may_be_zero=[stride_x]`` lets those size symbols be 0 (every other symbol is at least 1): the
stride of a dimension an operand is broadcast along;
``split=Split(tensor="a_ptr", dim=1, axis=1)`` declares a split reduction
(grid axis ``axis`` enumerates slices of ``tensor``'s dimension ``dim``), for the
split-coverage obligation; ``guards`` names constexpr knobs that are specializations, with the
domain constraint each needs, as a constraint or a function of the constexprs
(``guards={"EVEN_K": lambda c: K % c["BLOCK_K"] == 0}``): those combinations are proved under
that extra assumption, which is how a guard is shown to suffice.

**Writer witnesses** (``witnesses={"y_ptr": ...}``) let ``race_free`` and ``coverage`` of an
output be *proved* where z3 cannot invert the kernel's index arithmetic (a grouped tile order,
``row * N + col``, a grid-stride loop). A :class:`Witness` states who writes each element, in
both directions, as z3 expressions (``/`` and ``%`` are z3's, floor division for a positive
divisor; write them with the sizes and the constexprs)::

    def rows_witness(c):                           # one program per ROWS rows, lanes (row, col)
        R = c["ROWS"]
        return Witness(
            # element (m, n) -> the store instance that writes it
            writer=lambda m, n: Writer(pid=(m / R,), lanes=(m % R, n)),
            # store instance -> the element it writes (store: which store statement of the tensor,
            # in trace order; pid: one per grid axis; iters: the iteration count 0, 1, ... of each
            # loop around that store, outermost first; lanes: one per dimension of its block)
            element=lambda store, pid, iters, lanes: (pid[0] * R + lanes[0], lanes[1]))

    LaunchContract(..., witnesses={"y_ptr": rows_witness})   # a Witness, or a function of the constexprs

``Writer(pid, lanes=(), iters=(), store=0)``: ``store`` may be an expression of the index (the
statistics of a row stored by two statements, ``store=col``). Nothing is trusted: with ``e`` an
arbitrary in-range index and ``x`` an arbitrary executing (masked-in) store instance, the prover
shows, each as one quantifier-free solve over the whole domain,

- coverage: ``writer(e)`` is an instance that executes (program in the grid, iteration in its
  loop's range, lane in its block, mask and early exits true) and its address is ``e``'s;
- race freedom: ``element(x)`` is in range and is the element ``x``'s address holds, and
  ``writer(element(x)) == x`` (same statement, program, iterations and lanes); with the output's
  layout injective (strides that nest: each exceeds the span of the dimensions inside it, which
  is proved too) no two distinct instances then store to one address.

A witness that does not hold proves nothing: the obligation falls back to the check without a
witness (bounded, or failed with a counterexample when the kernel is wrong), and its detail says
which part of the witness was refuted. A witness is for outputs written by plain stores, one
writer per element; an output with atomic writes (split-K, atomic reductions) is not one-writer
and keeps the check without a witness.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import z3


def sizes(names: str) -> list[z3.ArithRef]:
    """z3 integer symbols for sizes, e.g. ``M, N, K = sizes("M N K")``."""
    return [z3.Int(n) for n in names.split()]


def cdiv(a: Any, b: Any) -> Any:
    return (a + b - 1) / b if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef) else -(-a // b)


@dataclass(frozen=True)
class Tensor:
    shape: tuple[Any, ...]
    strides: tuple[Any, ...]
    output: bool = False
    values: tuple[Any, Any] | None = None
    monotone: bool = False  # with values: non-decreasing along its (1-D) offsets, e.g. cu_seqlens

    def span(self) -> Any:
        """Largest element offset inside the tensor (strides are non-negative in every contract)."""
        return sum(((s - 1) * st for s, st in zip(self.shape, self.strides)), z3.IntVal(0))


@dataclass(frozen=True)
class Split:
    tensor: str
    dim: int
    axis: int


@dataclass(frozen=True)
class Writer:
    """The store instance that writes one element: program ids (one per grid axis), the iteration
    count of each loop around the store (outermost first), lanes (one per block dimension), and
    which store statement of the tensor (trace order; an int or an expression)."""

    pid: tuple[Any, ...]
    lanes: tuple[Any, ...] = ()
    iters: tuple[Any, ...] = ()
    store: Any = 0


@dataclass(frozen=True)
class Witness:
    """Who writes each element of one output: ``writer(*index) -> Writer`` and its left inverse
    ``element(store, pid, iters, lanes) -> index`` (see the module docstring)."""

    writer: Callable[..., Writer]
    element: Callable[..., tuple]


@dataclass
class LaunchContract:
    kernel: Any
    args: Mapping[str, Any]
    grid: Callable[[Mapping[str, Any]], tuple] | tuple
    constexprs: Sequence[Mapping[str, Any]] = ({},)
    domain: Sequence[Any] = ()
    bounded_shapes: Sequence[Mapping[str, int]] = ()
    split: Split | None = None
    guards: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    witnesses: Mapping[str, Any] = field(default_factory=dict)  # output name -> Witness or f(constexprs)
    may_be_zero: Sequence[Any] = ()  # size symbols whose range starts at 0, not 1 (a broadcast's stride)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = getattr(getattr(self.kernel, "fn", self.kernel), "__name__", "kernel")
        if isinstance(self.constexprs, Mapping):
            self.constexprs = [self.constexprs]

    def tensors(self) -> dict[str, Tensor]:
        return {k: v for k, v in self.args.items() if isinstance(v, Tensor)}

    def size_symbols(self) -> list[Any]:
        syms: dict[str, Any] = {}
        exprs = [e for t in self.tensors().values() for e in (*t.shape, *t.strides)]
        exprs += [v for v in self.args.values() if isinstance(v, z3.ExprRef)] + list(self.domain)
        for e in exprs:
            if isinstance(e, z3.ExprRef):
                for s in _symbols(e):
                    syms[str(s)] = s
        return [syms[k] for k in sorted(syms)]

    def grid_for(self, consts: Mapping[str, Any]) -> tuple:
        return tuple(self.grid(consts) if callable(self.grid) else self.grid)

    def witness_for(self, base: str, consts: Mapping[str, Any]) -> Witness | None:
        w = self.witnesses.get(base)
        if w is None or isinstance(w, Witness):
            return w
        return w(consts)

    def assumptions(self, consts: Mapping[str, Any]) -> list[Any]:
        zero = {str(s) for s in self.may_be_zero}
        base = [s >= (0 if str(s) in zero else 1) for s in self.size_symbols()] + list(self.domain)
        for t in self.tensors().values():
            base += [st >= 0 for st in t.strides if isinstance(st, z3.ExprRef)]
        base += [cond(consts) if callable(cond) else cond for knob, cond in self.guards.items() if consts.get(knob)]
        return base


def _symbols(e: Any) -> list[Any]:
    out, seen, todo = [], set(), [e]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(x)
        todo.extend(x.children())
    return out
