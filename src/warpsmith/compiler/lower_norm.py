"""Normalizations written as IR (reductions over the normalized dims plus pointwise ops), so that
each becomes one generated row kernel: statistics and normalization in one pass over the data
where the row fits on chip, in three short passes where it does not.

- ``group_norm`` (and ``native_group_norm``): x (N, C, *S) viewed as (N, G, C/G, prod(S)), mean and
  biased variance over the last two dims, the affine weight and bias read as (G, C/G, 1);
- ``instance_norm`` with input statistics: group norm with G = C;
- ``batch_norm`` in training (or without running statistics): statistics over every dim but the
  channel of x viewed as (N, C, prod(S)); the running mean and (unbiased) variance are updated as
  torch updates them (``(1 - momentum) * running + momentum * batch``) and written back into the
  model's buffers after the call (:attr:`.ir.Graph.mutations`); in inference, running statistics;
- ``layer_norm`` over more than the last dim (the last dim alone goes to the library's kernel) and
  ``native_layer_norm`` (AOTAutograd's form, whose mean and rstd are outputs too).

Statistics are in float32, variance two-pass (the mean first, then the squared deviations), as
torch computes them; the result is rounded once to the input's dtype.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import torch

from .expand import F32, _Builder
from .ir import FLOATS, Graph, Node


def _arg(n: Node, i: int, name: str, default: Any) -> Any:
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


def _float(*xs: Any) -> bool:
    ts = [x for x in xs if x is not None]
    return all(isinstance(x, Node) and x.dtype in FLOATS and x.shape is not None for x in ts)


def _view(b: _Builder, x: Node, shape: tuple[int, ...]) -> Node:
    if tuple(x.shape) == tuple(shape):
        return x
    v = b.node("view", "view", [x, list(shape)], tuple(shape), x.dtype)
    v.target = torch.ops.aten.view.default
    v.aten_args = [x, list(shape)]
    return v


def _normalize(b: _Builder, x: Node, dims: tuple[int, ...], eps: float, w: Node | None, bias: Node | None,
               out_dtype: Any, keep_stats: bool = False) -> tuple[Node, Node, Node]:
    """(y, mean, rstd): y = (x - mean) * rstd [* w] [+ bias] over ``dims`` of ``x`` (stats keepdim, fp32)."""
    m = b.red("mean", x, dims, True)
    d = b.pw("sub", [x, m], x.shape, alpha=1)
    v = b.red("mean", b.pw("mul", [d, d], x.shape), dims, True)
    r = b.pw("rsqrt", [b.pw("add", [v, float(eps)], v.shape, alpha=1)], v.shape)
    y = b.pw("mul", [d, r], x.shape)
    if w is not None:
        y = b.pw("mul", [y, w], x.shape)
    if bias is not None:
        y = b.pw("add", [y, bias], x.shape, alpha=1)
    y.dtype = out_dtype
    return y, m, r


def group_norm(g: Graph, n: Node) -> str | None:
    if n.kind != "aten" or n.op not in ("group_norm", "native_group_norm"):
        return None
    x = n.args[0]
    if n.op == "group_norm":
        groups, w, bias, eps = _arg(n, 1, "num_groups", None), _arg(n, 2, "weight", None), \
            _arg(n, 3, "bias", None), _arg(n, 4, "eps", 1e-5)
        native = False
    else:  # native_group_norm(x, w, b, N, C, HxW, group, eps) -> (y, mean, rstd)
        w, bias, groups, eps = n.args[1], n.args[2], n.args[6], n.args[7]
        native = True
    if not _float(x, w, bias) or not isinstance(groups, int) or len(x.shape) < 2 or x.shape[1] % groups:
        return None
    return _grouped(g, n, x, groups, w, bias, float(eps), native)


def _grouped(g: Graph, n: Node, x: Node, groups: int, w: Node | None, bias: Node | None, eps: float,
             native: bool) -> str | None:
    users = g.users()[n.name]
    if native and (n in g.outputs or not users or any(u.target is not operator.getitem for u in users)):
        return None
    nb, c = x.shape[0], x.shape[1]
    s = math.prod(x.shape[2:])
    b = _Builder(g, n)
    x4 = _view(b, x, (nb, groups, c // groups, s))
    w4 = _view(b, w, (groups, c // groups, 1)) if w is not None else None
    b4 = _view(b, bias, (groups, c // groups, 1)) if bias is not None else None
    y, m, r = _normalize(b, x4, (2, 3), eps, w4, b4, x.dtype)
    if not native:
        b.place(_view(b, y, x.shape))
        return f"{n.name}: group_norm ({groups} groups) -> one row kernel's statistics and normalization"
    outs = {0: _view(b, y, x.shape), 1: _view(b, _cast(b, m, x.dtype), (nb, groups)),
            2: _view(b, _cast(b, r, x.dtype), (nb, groups))}
    place_tuple(g, b.new, n, users, outs)
    return f"{n.name}: native_group_norm -> row kernel (output, mean, rstd)"


def _cast(b: _Builder, v: Node, dtype: Any) -> Node:
    return v if v.dtype == dtype else b.pw("cast", [v], v.shape, dtype)


def place_tuple(g: Graph, new: list[Node], n: Node, users: list[Node], outs: dict[int, Node]) -> None:
    """``n`` returns a tuple: the ``new`` nodes go where it was, and its getitem users become the
    matching nodes of ``outs`` (item index -> node)."""
    from .lower import _redirect

    i = g.nodes.index(n)
    g.nodes[i:i + 1] = new
    for u in users:
        new = outs[u.args[1]]
        _redirect(g, u, new)
        g.outputs = [new if o is u else o for o in g.outputs]
        g.nodes.remove(u)


def instance_norm(g: Graph, n: Node) -> str | None:
    if n.kind != "aten" or n.op != "instance_norm":
        return None
    x, w, bias, rm, rv = (_arg(n, i, k, None) for i, k in enumerate(("input", "weight", "bias", "running_mean",
                                                                      "running_var")))
    use_input_stats, eps = _arg(n, 5, "use_input_stats", True), _arg(n, 7, "eps", 1e-5)
    if not use_input_stats or rm is not None or rv is not None or not _float(x, w, bias) or len(x.shape) < 2:
        return None  # running statistics of an instance norm: not written here (stays ATen)
    return _grouped(g, n, x, x.shape[1], w, bias, float(eps), False) and \
        f"{n.name}: instance_norm -> one row kernel per (sample, channel)"


def batch_norm(g: Graph, n: Node) -> str | None:
    """``batch_norm`` in training (batch statistics, running statistics updated) or inference."""
    if n.kind != "aten" or n.op != "batch_norm":
        return None
    x, w, bias, rm, rv = (_arg(n, i, k, None) for i, k in enumerate(("input", "weight", "bias", "running_mean",
                                                                      "running_var")))
    training, momentum, eps = _arg(n, 5, "training", False), _arg(n, 6, "momentum", 0.1), _arg(n, 7, "eps", 1e-5)
    if not _float(x, w, bias, rm, rv) or len(x.shape) < 2 or n.dtype != x.dtype:
        return None
    nb, c = x.shape[0], x.shape[1]
    s = math.prod(x.shape[2:])
    b = _Builder(g, n)
    x3 = _view(b, x, (nb, c, s))
    w3 = _view(b, w, (c, 1)) if w is not None else None
    b3 = _view(b, bias, (c, 1)) if bias is not None else None
    if training or rm is None:
        if rm is not None and not isinstance(momentum, (int, float)):
            return None  # momentum=None (a cumulative average) needs num_batches_tracked: stays ATen
        y, m, r = _normalize(b, x3, (0, 2), float(eps), w3, b3, x.dtype)
        if training and rm is not None:
            count = nb * s
            mean_c = b.red("mean", x3, (0, 2), False)
            dev = b.pw("sub", [x3, m], x3.shape, alpha=1)
            var_c = b.red("sum", b.pw("mul", [dev, dev], x3.shape), (0, 2), False)
            unbiased = b.pw("div", [var_c, float(max(count - 1, 0))], (c,))
            new_rm = b.pw("add", [b.pw("mul", [rm, 1.0 - momentum], (c,)), b.pw("mul", [mean_c, float(momentum)], (c,))],
                          (c,), rm.dtype, alpha=1)
            new_rv = b.pw("add", [b.pw("mul", [rv, 1.0 - momentum], (c,)), b.pw("mul", [unbiased, float(momentum)], (c,))],
                          (c,), rv.dtype, alpha=1)
            g.mutations += [(rm, new_rm), (rv, new_rv)]
        kind = "batch statistics" + (", running statistics updated" if training and rm is not None else "")
    else:
        rm3, rv3 = _view(b, rm, (c, 1)), _view(b, rv, (c, 1))
        d = b.pw("sub", [x3, rm3], x3.shape, alpha=1)
        y = b.pw("mul", [d, b.pw("rsqrt", [b.pw("add", [rv3, float(eps)], (c, 1), alpha=1)], (c, 1))], x3.shape)
        if w3 is not None:
            y = b.pw("mul", [y, w3], x3.shape)
        if b3 is not None:
            y = b.pw("add", [y, b3], x3.shape, alpha=1)
        y.dtype = x.dtype
        kind = "running statistics"
    b.place(_view(b, y, x.shape))
    return f"{n.name}: batch_norm ({kind}) -> generated kernels"


def layer_norm(g: Graph, n: Node) -> str | None:
    """``layer_norm`` over several trailing dims, and ``native_layer_norm`` (any)."""
    if n.kind != "aten" or n.op not in ("layer_norm", "native_layer_norm"):
        return None
    x, shape = n.args[0], n.args[1]
    w, bias = _arg(n, 2, "weight", None), _arg(n, 3, "bias", None)
    eps = _arg(n, 4, "eps", 1e-5)
    if not _float(x, w, bias) or not isinstance(shape, (list, tuple)) or not shape or \
            list(x.shape[len(x.shape) - len(shape):]) != list(shape):
        return None
    native = n.op == "native_layer_norm"
    if not native and len(shape) == 1:
        return None  # the library's layer_norm takes it (lower._norm)
    dims = tuple(range(len(x.shape) - len(shape), len(x.shape)))
    if not native:
        b = _Builder(g, n)
        y, _, _ = _normalize(b, x, dims, float(eps), w, bias, x.dtype)
        b.place(y)
        return f"{n.name}: layer_norm over {len(shape)} dims -> one row kernel"
    users = g.users()[n.name]
    if n in g.outputs or any(u.target is not operator.getitem for u in users) or not users:
        return None
    b = _Builder(g, n)
    y, m, r = _normalize(b, x, dims, float(eps), w, bias, x.dtype)
    outs = {0: y, 1: _cast(b, m, x.dtype), 2: _cast(b, r, x.dtype)}
    place_tuple(g, b.new, n, users, outs)
    return f"{n.name}: native_layer_norm -> one row kernel (output, mean, rstd)"
