"""Witness answers remembered across constexpr combinations whose formulas are the same.

A kernel's output store often does not depend on most constexprs (the conv forward's epilogue
store is the same for both reduction orders, direct or transposed, with or without bias): the
witness proof of its ``race_free`` and ``coverage`` is then the same problem, and takes the same
tens of seconds, in every combination. :func:`witness_key` names that problem by everything the
answer depends on, as z3 terms (hash-consed: equal terms are one term, with one id while alive):

- the obligation, the output and every tensor's shape, strides and value preconditions;
- each store statement's offset, mask, path conditions, loops and block shape, the program ids
  of the trace, the grid, the contract's assumptions (domain and guards) and the solver budget;
- the witness itself, as the terms its ``writer`` gives for a symbolic index and its ``element``
  gives for a symbolic instance of each store statement.

Equal keys mean the prover would pose the same solver problems (the sizes of the bounded shapes
only pick which side conditions are tried, never what an answer means), so reusing an answer
claims nothing that was not proved for these very formulas. The memo keeps the keyed terms alive.
"""
from __future__ import annotations

from typing import Any

import z3

from .contract import Witness, Writer

_MEMO: dict[tuple, tuple[list[Any], Any]] = {}
_MAX = 512


def _ids(xs: Any, keep: list[Any]) -> tuple:
    out = []
    for x in xs:
        if isinstance(x, z3.AstRef):
            keep.append(x)
            out.append(("z3", x.get_id()))
        elif isinstance(x, (tuple, list)):
            out.append(_ids(x, keep))
        else:
            out.append(("py", repr(x)))
    return tuple(out)


def witness_key(prover: Any, name: str, tr: Any, stores: list[Any], base: str, w: Witness) -> tuple | None:
    """The key of one witness obligation (see the module docstring), or None when the witness cannot
    be evaluated symbolically here (it is then proved afresh)."""
    keep: list[Any] = []
    try:
        t = prover.tensors[base]
        idx = [z3.Int(f"__memo_index{d}") for d in range(len(t.shape))]
        wr = w.writer(*idx)
        if not isinstance(wr, Writer):
            return None
        parts: list[Any] = [name, base, prover.timeout_ms, _ids(prover.grid, keep), _ids(prover.assume, keep),
                            _ids(sorted(tr.pids.items()), keep),
                            _ids([(k, v.shape, v.strides, v.values, v.monotone, v.output)
                                  for k, v in sorted(prover.tensors.items())], keep),
                            _ids([wr.pid, wr.lanes, wr.iters, wr.store], keep)]
        pid = tuple(z3.Int(f"__memo_pid{a}") for a in range(len(prover.grid)))
        for k, a in enumerate(stores):
            iters = tuple(z3.Int(f"__memo_iter{j}") for j in range(len(a.loops)))
            lanes = tuple(z3.Int(f"__memo_lane{d}") for d in range(len(a.shape)))
            parts.append(_ids([a.kind, a.offset, a.mask, a.conds, a.loops, a.shape, a.havoc, a.data,
                               w.element(k, pid, iters, lanes)], keep))
    except Exception:  # noqa: BLE001 - a witness that does not evaluate here is simply not remembered
        return None
    return tuple(parts), keep


def get(key: Any) -> Any:
    if key is None:
        return None
    hit = _MEMO.get(key[0])
    return None if hit is None else hit[1]


def put(key: Any, result: Any) -> None:
    if key is None:
        return
    if len(_MEMO) >= _MAX:
        _MEMO.clear()
    _MEMO[key[0]] = (key[1], result)
