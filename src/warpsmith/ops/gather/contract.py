"""Launch contracts of the gather/scatter kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Both kernels see a 3-D ``(A, J, B)`` index tensor with *any* non-negative strides (0 where it is
broadcast: a row gather's index has strides ``(0, s, 0)``), whose values are declared to lie in
``[0, V)`` (``Tensor(values=(0, V))``): the precondition the launchers check on the host before every
launch (:func:`.variant.check_index`). Under it every load and store is proved in bounds for all
sizes in the domain, a table read through an index included.

- ``gather_kernel``: the table ``src`` is ``(A, V, B)`` with any non-negative strides; the output is
  ``(A, J, B)`` row-major, as the launcher allocates it. A writer witness proves ``race_free`` and
  ``coverage``: element ``(a, j, b)`` is lane ``(j % BLOCK_J, b % BLOCK_B)`` of program
  ``(a n_j + j // BLOCK_J) n_b + b // BLOCK_B``.
- ``scatter_kernel``: ``src`` is ``(A, J, B)`` (any strides), the accumulator ``(A, V, B)`` row-major
  fp32 (the launcher's). Its writes are atomics (``atomic_add``, or ``atomic_xchg`` for assignment),
  declared so: ``race_free`` exempts them, and the accumulator is not an *output* in the contract's
  sense (only the indexed rows are written, so there is no coverage claim).

Domain: ``J, B, V <= 2^31 - 1024`` and ``A * cdiv(J, BLOCK_J) * cdiv(B, BLOCK_B) < 2^31`` (the grid's
axis 0; the launcher refuses more). The kernels compute block indices in int32 and offsets in int64.
"""
from __future__ import annotations

from typing import Any, Mapping

from ...verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes
from . import kernel as K_
from .limits import GRID_LIMIT, SIZE_LIMIT

A, J, B, V = sizes("A J B V")
ssa, ssv, ssb, sia, sij, sib = sizes("stride_sa stride_sv stride_sb stride_ia stride_ij stride_ib")
soa, som, sob = sizes("stride_oa stride_om stride_ob")
SKIP = -1


def _grid(c: Mapping[str, Any]) -> tuple:
    return (A * cdiv(J, c["BLOCK_J"]) * cdiv(B, c["BLOCK_B"]),)


def _domain(c: Mapping[str, Any], rows: Any) -> list[Any]:
    """``rows``: the output's middle extent (J for a gather, V for a scatter); its strides nest, as a
    row-major allocation's do."""
    return [som >= B * sob, soa >= rows * som, J <= SIZE_LIMIT, B <= SIZE_LIMIT, V <= SIZE_LIMIT, A <= GRID_LIMIT,
            A * cdiv(J, c["BLOCK_J"]) * cdiv(B, c["BLOCK_B"]) <= GRID_LIMIT]


def _bounded() -> list[dict[str, int]]:
    out = []
    for a, j, b, v in ((1, 1, 1, 1), (2, 5, 3, 7), (3, 37, 1, 4), (1, 9, 130, 11)):
        out.append({"A": a, "J": j, "B": b, "V": v, "stride_sa": v * b, "stride_sv": b, "stride_sb": 1,
                    "stride_ia": 0, "stride_ij": 1, "stride_ib": 0,
                    "stride_ob": 1, "stride_om": b, "stride_oa": b * max(j, v)})
    return out


def _index() -> Tensor:
    return Tensor((A, J, B), (sia, sij, sib), values=(0, V))


def _witness(c: Mapping[str, Any]) -> Witness:
    bj, bb = c["BLOCK_J"], c["BLOCK_B"]
    nj, nb = cdiv(J, bj), cdiv(B, bb)
    return Witness(
        writer=lambda a, j, b: Writer(pid=((a * nj + j / bj) * nb + b / bb,), lanes=(j % bj, b % bb)),
        element=lambda store, pid, iters, lanes: (pid[0] / nb / nj, (pid[0] / nb) % nj * bj + lanes[0],
                                                  pid[0] % nb * bb + lanes[1]))


def gather(constexprs: list[dict]) -> LaunchContract:
    """``gather_kernel``; pass constexprs sharing nothing in particular (one proof each)."""
    return LaunchContract(
        kernel=K_.gather_kernel, name="gather_kernel",
        args={"src_ptr": Tensor((A, V, B), (ssa, ssv, ssb)), "idx_ptr": _index(),
              "out_ptr": Tensor((A, J, B), (soa, som, sob), output=True), "A": A, "J": J, "B": B, "V": V,
              "stride_sa": ssa, "stride_sv": ssv, "stride_sb": ssb, "stride_ia": sia, "stride_ij": sij,
              "stride_ib": sib, "stride_oa": soa, "stride_oj": som, "stride_ob": sob},
        constexprs=constexprs, grid=_grid, domain=_domain(constexprs[0], J), bounded_shapes=_bounded(),
        may_be_zero=[sia, sij, sib, ssa, ssv, ssb], witnesses={"out_ptr": _witness})


def scatter(constexprs: list[dict]) -> LaunchContract:
    """``scatter_kernel``; pass constexprs sharing ``HAS_SRC``."""
    has_src = constexprs[0]["HAS_SRC"]
    src = Tensor((A, J, B), (ssa, ssv, ssb)) if has_src else Tensor((1,), (1,))
    return LaunchContract(
        kernel=K_.scatter_kernel, name=f"scatter_kernel[{'src' if has_src else 'value'}]",
        args={"src_ptr": src, "idx_ptr": _index(), "out_ptr": Tensor((A, V, B), (soa, som, sob)),
              "A": A, "J": J, "B": B, "V": V, "skip": SKIP, "value": 0,
              "stride_sa": ssa if has_src else 0, "stride_sj": ssv if has_src else 0,
              "stride_sb": ssb if has_src else 0, "stride_ia": sia, "stride_ij": sij, "stride_ib": sib,
              "stride_oa": soa, "stride_ov": som, "stride_ob": sob},
        constexprs=constexprs, grid=_grid, domain=_domain(constexprs[0], V), bounded_shapes=_bounded(),
        may_be_zero=[sia, sij, sib, ssa, ssv, ssb])


def for_config(variant: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contract covering exactly the kernel and constexprs ``config`` launches."""
    meta = {"BLOCK_J": config["BLOCK_J"], "BLOCK_B": config["BLOCK_B"]}
    if variant.op == "gather":
        return [gather([meta])]
    return [scatter([{**meta, "ADD": variant.op == "scatter_add", "HAS_SRC": True, "EMULATE": False}])]


CONTRACTS = [
    gather([{"BLOCK_J": 4, "BLOCK_B": 64}, {"BLOCK_J": 64, "BLOCK_B": 1}]),
    scatter([{"BLOCK_J": 4, "BLOCK_B": 64, "ADD": True, "HAS_SRC": True, "EMULATE": False},
             {"BLOCK_J": 16, "BLOCK_B": 8, "ADD": False, "HAS_SRC": True, "EMULATE": False}]),
    scatter([{"BLOCK_J": 64, "BLOCK_B": 1, "ADD": False, "HAS_SRC": False, "EMULATE": False}]),
]
