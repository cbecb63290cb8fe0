"""Launch contracts: what a Triton kernel may assume, declared next to the kernel.

A kernel file for ``warpsmith prove`` is a Python file that defines ``@triton.jit`` kernels and
a module-level ``CONTRACTS`` list (or one ``CONTRACT``) of :class:`KernelContract`::

    from warpsmith.verify.symbolic import KernelContract, Tensor, sizes, cdiv

    M, N = sizes("M N")
    CONTRACT = KernelContract(
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
rows); ``split=Split(tensor="a_ptr", dim=1, axis=1)`` declares a split reduction
(grid axis ``axis`` enumerates slices of ``tensor``'s dimension ``dim``), for the
split-coverage obligation; ``guards`` names constexpr knobs that are specializations, with the
domain constraint each needs, as a constraint or a function of the constexprs
(``guards={"EVEN_K": lambda c: K % c["BLOCK_K"] == 0}``): those combinations are proved under
that extra assumption, which is how a guard is shown to suffice.
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


@dataclass
class KernelContract:
    kernel: Any
    args: Mapping[str, Any]
    grid: Callable[[Mapping[str, Any]], tuple] | tuple
    constexprs: Sequence[Mapping[str, Any]] = ({},)
    domain: Sequence[Any] = ()
    bounded_shapes: Sequence[Mapping[str, int]] = ()
    split: Split | None = None
    guards: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

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

    def assumptions(self, consts: Mapping[str, Any]) -> list[Any]:
        base = [s >= 1 for s in self.size_symbols()] + list(self.domain)
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
