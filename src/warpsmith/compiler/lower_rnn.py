"""Recurrent layers as a loop of fused steps: ``aten.lstm``, ``aten.gru``, ``aten.rnn_tanh`` and
``aten.rnn_relu`` (what ``nn.LSTM``/``nn.GRU``/``nn.RNN`` export to), and ``mkldnn_rnn_layer`` (what
the torch.compile capture makes of ``nn.LSTM`` on the CPU), one layer, one direction, static length.

The layer is rewritten as ATen calls written here (:func:`_lstm`, :func:`_gru`, :func:`_rnn`), traced
once on meta tensors and lowered like the program (:mod:`.decompose`'s splice): the input projection
of every step is one library GEMM (``x W_ih^T + b_ih`` over (T B) rows); each step is one GEMM
``h W_hh^T + b_hh`` and **one generated kernel**: the gate math reads the two projections' column
slices (views, no copy) so all of it runs over one (B, H) domain (LSTM: ``c = s(f) c + s(i) tanh(g)``,
``h = s(o) tanh(c)``; GRU: ``r``, ``z``, ``n = tanh(x_n + r (h W_hn + b_hn))``, ``h = (1 - z) n + z h``).
The outputs are the steps' ``h`` concatenated (a generated copy). The single cells (``nn.LSTMCell``,
``GRUCell``, ``RNNCell``) are already decomposed by torch into the same GEMMs and pointwise ops.

The rewrite is taken only if nothing in it is left to ATen.
"""
from __future__ import annotations

from typing import Any

import torch

from .ir import FLOATS, Graph, Node, build_fx

MAX_STEPS = 512  # the loop is unrolled in the emitted program


def _lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, batch_first):  # noqa: ANN001 - traced on meta tensors
    if batch_first:
        x = x.transpose(0, 1)
    T, B, _ = x.shape
    H = h.shape[-1]
    h, c = h[0], c[0]
    xp = torch.nn.functional.linear(x.reshape(T * B, -1), w_ih, b_ih)
    outs = []
    for t in range(T):
        xt = xp[t * B:(t + 1) * B]
        hp = torch.nn.functional.linear(h, w_hh, b_hh)
        i, f, g, o = (torch.sigmoid(xt[:, k * H:(k + 1) * H] + hp[:, k * H:(k + 1) * H]) if k != 2 else
                      torch.tanh(xt[:, k * H:(k + 1) * H] + hp[:, k * H:(k + 1) * H]) for k in range(4))
        c = f * c + i * g
        h = o * torch.tanh(c)
        outs.append(h)
    y = torch.stack(outs, 1 if batch_first else 0)
    return y, h[None], c[None]


def _gru(x, h, w_ih, w_hh, b_ih, b_hh, batch_first):  # noqa: ANN001
    if batch_first:
        x = x.transpose(0, 1)
    T, B, _ = x.shape
    H = h.shape[-1]
    h = h[0]
    xp = torch.nn.functional.linear(x.reshape(T * B, -1), w_ih, b_ih)
    outs = []
    for t in range(T):
        xt = xp[t * B:(t + 1) * B]
        hp = torch.nn.functional.linear(h, w_hh, b_hh)
        r = torch.sigmoid(xt[:, :H] + hp[:, :H])
        z = torch.sigmoid(xt[:, H:2 * H] + hp[:, H:2 * H])
        n = torch.tanh(xt[:, 2 * H:] + r * hp[:, 2 * H:])
        h = (1 - z) * n + z * h
        outs.append(h)
    return torch.stack(outs, 1 if batch_first else 0), h[None]


def _rnn(x, h, w_ih, w_hh, b_ih, b_hh, batch_first, relu):  # noqa: ANN001
    if batch_first:
        x = x.transpose(0, 1)
    T, B, _ = x.shape
    h = h[0]
    xp = torch.nn.functional.linear(x.reshape(T * B, -1), w_ih, b_ih)
    outs = []
    for t in range(T):
        s = xp[t * B:(t + 1) * B] + torch.nn.functional.linear(h, w_hh, b_hh)
        h = torch.relu(s) if relu else torch.tanh(s)
        outs.append(h)
    return torch.stack(outs, 1 if batch_first else 0), h[None]


def _plan(n: Node) -> tuple[Any, list[Node], int] | None:
    """(the function to trace over the operand nodes, the operands, the outputs it gives) or None."""
    a = list(n.args)
    if n.op == "mkldnn_rnn_layer":  # (input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode,
        #                              hidden, layers, has_biases, bidirectional, batch_first, train)
        if len(a) < 16 or a[7] or a[8] or a[9] != 2 or a[11] != 1 or a[13]:
            return None
        x, w_ih, w_hh, b_ih, b_hh, h, c = a[:7]
        bf = bool(a[14])
        if not a[12]:
            return None  # weights 2, 3 are then placeholders, not biases: left to ATen
        return (lambda *t: _lstm(*t, bf)), [x, h, c, w_ih, w_hh, b_ih, b_hh], 3
    if len(a) < 9:
        return None
    x, hx, params, has_b, layers, _dropout, _train, bidir, bf = a[:9]
    if layers != 1 or bidir or not isinstance(params, (list, tuple)) or len(params) != (4 if has_b else 2):
        return None
    w = list(params) + ([None, None] if not has_b else [])
    if n.op == "lstm":
        if not isinstance(hx, (list, tuple)) or len(hx) != 2:
            return None
        return (lambda *t: _lstm(*t, bf)), [x, hx[0], hx[1], *w], 3
    fn = {"gru": lambda *t: _gru(*t, bf), "rnn_tanh": lambda *t: _rnn(*t, bf, False),
          "rnn_relu": lambda *t: _rnn(*t, bf, True)}[n.op]
    return fn, [x, hx, *w], 2


def recurrent(g: Graph, n: Node) -> str | None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from .decompose import _splice
    from .lower import lower_graph

    if n.kind != "aten" or n.op not in ("lstm", "gru", "rnn_tanh", "rnn_relu", "mkldnn_rnn_layer"):
        return None
    plan = _plan(n)
    if plan is None:
        return None
    fn, ops, n_out = plan
    present = [o for o in ops if o is not None]
    x = ops[0]
    if not all(isinstance(o, Node) and o.shape is not None and o.dtype in FLOATS for o in present) or \
            len({o.dtype for o in present}) != 1 or len(x.shape) != 3 or max(x.shape[:2]) > MAX_STEPS:
        return None
    users = g.users()[n.name]
    if n in g.outputs or any(u.op != "getitem" or u.args[1] >= n_out for u in users):
        return None
    slots = [i for i, o in enumerate(ops) if o is not None]

    def traced(*ts: torch.Tensor) -> Any:
        full = [None] * len(ops)
        for i, t in zip(slots, ts):
            full[i] = t
        return fn(*full)

    metas = [torch.empty(o.shape, dtype=o.dtype, device="meta") for o in present]
    try:
        gm = make_fx(traced)(*metas)
    except Exception:  # noqa: BLE001 - a layer the rewrite cannot trace stays ATen
        return None
    sub = build_fx(gm.graph)
    sub.single_output = False
    if len(sub.inputs) != len(present):
        return None
    sub_notes = lower_graph(sub, 1)
    if any(m.kind == "aten" for m in sub.nodes):
        return None
    _splice(g, n, sub, present)
    return (f"{n.name}: {n.op} unrolled over its steps (one input GEMM; per step a GEMM and one gate kernel)"
            f" ({len(sub_notes)} rewrites inside)")


def split_through(g: Graph, n: Node) -> str | None:
    """``split(a + b)`` (an LSTM cell's gates: torch's decomposition adds the two projections over all
    4H columns, then splits) becomes ``a_k + b_k`` per chunk, read through column views: every chunk's
    gate math then runs over one (B, H) domain, in one kernel with the rest of the step."""
    if n.kind != "view" or n.op not in ("split_with_sizes", "split") or not n.args:
        return None
    s = n.args[0]
    if not isinstance(s, Node) or s.kind != "pointwise" or s.op != "add" or s.attrs.get("alpha", 1) != 1 or \
            len(s.args) != 2 or not all(isinstance(a, Node) and a.shape == s.shape for a in s.args) or \
            s.shape is None or s in g.outputs:
        return None
    users = g.users()
    if users[s.name] != [n] or n in g.outputs:
        return None
    dim = n.args[2] if len(n.args) > 2 else 0
    sizes = n.args[1]
    if not isinstance(dim, int):
        return None
    dim %= len(s.shape)
    if isinstance(sizes, int):
        sizes = [min(sizes, s.shape[dim] - i) for i in range(0, s.shape[dim], sizes)]
    if not isinstance(sizes, (list, tuple)) or sum(sizes) != s.shape[dim]:
        return None
    gets = users[n.name]
    if any(u.kind != "view" or u.op != "getitem" or not isinstance(u.args[1], int) for u in gets):
        return None
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    for u in gets:
        k = u.args[1]
        pieces = []
        for j, a in enumerate(s.args):
            shape = list(a.shape)
            shape[dim] = sizes[k]
            v = Node(f"{u.name}_in{j}", "view", "slice", [a, dim, starts[k], starts[k] + sizes[k]], tuple(shape),
                     a.dtype, target=torch.ops.aten.slice.Tensor, line=u.line)
            pieces.append(v)
        add = Node(u.name, "pointwise", "add", pieces, u.shape, s.dtype, {"alpha": 1}, line=s.line,
                   target=torch.ops.aten.add.Tensor)
        i = g.nodes.index(u)
        g.nodes[i:i + 1] = pieces + [add]
        from .lower import _redirect

        _redirect(g, u, add)
        g.outputs = [add if o is u else o for o in g.outputs]
    return f"{s.name}: add pushed through {n.op} into its {len(gets)} chunks (read as column views)"
