"""Decomposition on demand: an ATen op that nothing lowers is replaced by its decomposition into
simpler ATen ops, when every op of that decomposition can then be lowered or generated.

The op is traced once with ``make_fx`` on meta tensors of its operands' shapes and dtypes, under
torch's core ATen decomposition table (plus ``linalg_vector_norm``'s, ``_softmax``'s and
``_log_softmax``'s); composite ops (those torch
itself implements with other ops: ``triplet_margin_loss``, ``kl_div``, ``einsum``, ...) decompose
in the same trace. The traced graph becomes IR (:func:`.ir.build_fx`), is lowered and expanded
like the program itself (recursively, to a bounded depth), and replaces the op only if no ATen
fallback is left in it; otherwise the op stays as it was, a fallback the report names. An op whose
decomposition returns something other than tensors (a backward op's ``None`` gradient for an input its
``output_mask`` declines) is kept whole.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from .ir import Graph, Node, build_fx

MAX_DEPTH = 4


def _table() -> dict[Any, Any]:
    from torch._decomp import core_aten_decompositions, decomposition_table

    table = dict(core_aten_decompositions())
    aten = torch.ops.aten
    # core ATen ops of their own, decomposed here only when nothing lowers them (a softmax over a
    # non-last dim: max, exp, sum and a division the codegen fuses)
    for op in (aten.linalg_vector_norm.default, aten._softmax.default, aten._log_softmax.default):
        if op in decomposition_table:
            table[op] = decomposition_table[op]
    return table


def _tensors(v: Any, out: list[Node]) -> Any:
    """``v`` with every Node replaced by a placeholder index (collected in ``out``)."""
    if isinstance(v, Node):
        out.append(v)
        return ("__ws_tensor__", len(out) - 1)
    if isinstance(v, (list, tuple)):
        return type(v)(_tensors(x, out) for x in v)
    return v


def _rebuild(v: Any, ts: tuple) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "__ws_tensor__":
        return ts[v[1]]
    if isinstance(v, (list, tuple)):
        return type(v)(_rebuild(x, ts) for x in v)
    return v


def _trace(n: Node) -> tuple[Any, list[Node]] | None:
    """(the traced fx GraphModule, the operand nodes its placeholders stand for), or None."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if n.target is None or n.target is operator.getitem or not hasattr(n.target, "_schema"):
        return None
    operands: list[Node] = []
    args = _tensors(list(n.aten_args or []), operands)
    kwargs = _tensors(dict(n.aten_kwargs or {}), operands)
    if any(o.shape is None or o.dtype is None for o in operands):
        return None
    metas = [torch.empty(o.shape, dtype=o.dtype, device="meta") for o in operands]
    target = n.target

    def fn(*ts: torch.Tensor) -> Any:
        return target(*_rebuild(args, ts), **_rebuild(kwargs, ts))

    try:
        gm = make_fx(fn, decomposition_table=_table())(*metas)
    except Exception:  # noqa: BLE001 - an op that cannot be traced on meta tensors stays whole
        return None
    calls = [m for m in gm.graph.nodes if m.op == "call_function"]
    if len(calls) == 1 and calls[0].target is target:
        return None  # nothing to decompose into
    out = next(m for m in gm.graph.nodes if m.op == "output").args[0]
    if any(not isinstance(r, torch.fx.Node) for r in (out if isinstance(out, (list, tuple)) else [out])):
        # a result that is not a tensor (None: a backward op's gradient its output_mask declines, e.g.
        # native_layer_norm_backward's or convolution_backward's): the op stays whole
        return None
    return gm, operands


def decompose(g: Graph, depth: int = 0) -> list[str]:
    """Replace the fallbacks of ``g`` that decompose fully (see the module docstring); one note each."""
    from .lower import lower_graph

    notes = []
    if depth >= MAX_DEPTH:
        return notes
    for n in list(g.nodes):
        if n.kind != "aten" or n not in g.nodes:
            continue
        traced = _trace(n)
        if traced is None:
            continue
        gm, operands = traced
        sub = build_fx(gm.graph)
        if len(sub.inputs) != len(operands):
            continue
        sub_notes = lower_graph(sub, depth + 1)
        left = [m for m in sub.nodes if m.kind == "aten"]
        if left:
            continue
        _splice(g, n, sub, operands)
        ops = sorted({m.op for m in sub.nodes if m.kind not in ("input", "param")})
        notes.append(f"{n.name}: {n.op} decomposed into {', '.join(ops)}" +
                     (f" ({len(sub_notes)} rewrites inside)" if sub_notes else ""))
    return notes


def _splice(g: Graph, n: Node, sub: Graph, operands: list[Node]) -> None:
    """Put ``sub``'s nodes in place of ``n`` (its inputs are ``operands``; its outputs are ``n``'s)."""
    from .lower import _redirect

    env = {p.name: o for p, o in zip(sub.inputs, operands)}
    body = [m for m in sub.nodes if m.kind not in ("input", "param")]
    for m in body:
        m.name = f"{n.name}_{m.name}"
        m.line = n.line
    for p, o in zip(sub.inputs, operands):
        for m in body:
            _swap_in(m, p, o)
    users = g.users().get(n.name, [])
    i = g.nodes.index(n)
    g.nodes[i:i + 1] = body
    outs = [env.get(o.name, o) if o.kind == "input" else o for o in sub.outputs]
    if len(outs) == 1 and sub.single_output:
        _redirect(g, n, outs[0])
        g.outputs = [outs[0] if o is n else o for o in g.outputs]
        return
    for u in users:  # a tuple result: its getitem users take the matching output
        if u.target is operator.getitem and u.args[0] is n and isinstance(u.args[1], int):
            _redirect(g, u, outs[u.args[1]])
            g.outputs = [outs[u.args[1]] if o is u else o for o in g.outputs]
            if u in g.nodes:
                g.nodes.remove(u)


def _swap_in(m: Node, old: Node, new: Node) -> None:
    from .lower import _sub

    m.args = _sub(m.args, old, new)
    m.kwargs = {k: _sub(v, old, new) for k, v in m.kwargs.items()}
    m.aten_args = _sub(m.aten_args or [], old, new)
    m.aten_kwargs = {k: _sub(v, old, new) for k, v in (m.aten_kwargs or {}).items()}
