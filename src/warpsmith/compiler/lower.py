"""Lowering: patterns of the IR -> calls of warpsmith library ops (``library`` nodes).

Recognized, whatever the spelling torch.export leaves:

- GEMM: ``aten.linear`` (x of any rank, weight (N, K), optional bias), ``mm``/``matmul`` of two
  2-D operands, ``addmm`` with a bias of N elements (beta = alpha = 1), ``bmm``; a following
  ``relu``, ``gelu`` (erf form) or ``silu`` that is the GEMM's only user becomes its epilogue.
- ``softmax``/``log_softmax`` over the last dim (``aten.softmax.int``, ``aten._softmax``, ...).
- convolutions, and a batch norm in inference after one (:mod:`.lower_conv`), with the same epilogues;
- ``layer_norm`` and ``rms_norm`` over the last dim, and RMSNorm written out:
  ``x * rsqrt(mean(x^2, -1, keepdim) + eps) [* w]``, with ``x^2`` as ``x.pow(2)``, ``x * x`` or
  ``x.square()``, ``rsqrt(v)`` or ``1 / sqrt(v)`` (as ``x / sqrt(v)``), and the weight on
  either side.

The operands must share one dtype among float16, bfloat16 and float32 (the library's). What is
not matched stays as it was: fused by codegen if pointwise or a reduction, else an ATen fallback.
"""
from __future__ import annotations

from . import lower_conv
from .ir import FLOATS, Graph, Node

ACTIVATIONS = {"relu": "relu", "silu": "silu"}


def lower(g: Graph) -> list[str]:
    """Rewrite ``g`` in place; returns one line per rewrite made (for ``--explain``)."""
    notes: list[str] = []
    for rule in (_identity, _reduce_other_dim, _gemm, lower_conv.conv, lower_conv.batch_norm, _softmax, _norm,
                 _rms_written_out, _epilogue):
        for n in list(g.nodes):
            if n in g.nodes:
                note = rule(g, n)
                if note:
                    notes.append(note)
    g.remove_dead()
    return notes


def _float_same(*xs: Node | None) -> bool:
    ts = [x for x in xs if x is not None]
    return all(isinstance(x, Node) and x.dtype in FLOATS and x.shape is not None for x in ts) and \
        len({x.dtype for x in ts}) == 1


def _replace(g: Graph, old: Node, new: Node) -> None:
    """Put ``new`` where ``old`` was and redirect every use of ``old``."""
    g.nodes[g.nodes.index(old)] = new
    _redirect(g, old, new)
    g.outputs = [new if o is old else o for o in g.outputs]


def _redirect(g: Graph, old: Node, new: Node) -> None:
    """Every use of ``old`` (canonical and captured arguments) becomes a use of ``new``."""
    for n in g.nodes:
        n.args = _sub(n.args, old, new)
        n.kwargs = {k: _sub(v, old, new) for k, v in n.kwargs.items()}
        n.aten_args = _sub(n.aten_args or [], old, new)
        n.aten_kwargs = {k: _sub(v, old, new) for k, v in (n.aten_kwargs or {}).items()}


def _sub(v, old, new):
    if v is old:
        return new
    if isinstance(v, (list, tuple)):
        return type(v)(_sub(x, old, new) for x in v)
    return v


def _lib(n: Node, op: str, args: list, **attrs) -> Node:
    return Node(n.name, "library", op, args, n.shape, n.dtype, attrs, line=n.line)


def _gemm(g: Graph, n: Node) -> str | None:
    if n.kind != "aten" or n.kwargs and n.op != "addmm":
        return None
    a = n.args
    if n.op == "linear" and len(a) >= 2 and _float_same(a[0], a[1], a[2] if len(a) > 2 else None):
        x, w, b = a[0], a[1], (a[2] if len(a) > 2 else None)
        if len(w.shape) != 2 or len(x.shape) < 1 or b is not None and b.shape != (w.shape[0],):
            return None
        _replace(g, n, _lib(n, "matmul", [x, w, b], form="linear", activation="none"))
        return f"{n.name}: linear -> library matmul (A @ W^T + bias)"
    if n.op == "matmul" and len(a) == 2 and _float_same(*a) and len(a[0].shape) > 2 and len(a[1].shape) == 2:
        _replace(g, n, _lib(n, "matmul", [a[0], a[1], None], form="nd", activation="none"))
        return f"{n.name}: matmul of a {len(a[0].shape)}-D and a 2-D operand -> library matmul (rows flattened)"
    if n.op in ("mm", "matmul") and len(a) == 2 and _float_same(*a) and len(a[0].shape) == 2 == len(a[1].shape):
        _replace(g, n, _lib(n, "matmul", [a[0], a[1], None], form="mm", activation="none"))
        return f"{n.name}: {n.op} -> library matmul"
    if n.op == "bmm" and len(a) == 2 and _float_same(*a) and len(a[0].shape) == 3 == len(a[1].shape):
        _replace(g, n, _lib(n, "matmul", [a[0], a[1], None], form="bmm", activation="none"))
        return f"{n.name}: bmm -> library matmul (batched)"
    if n.op == "addmm" and len(a) == 3 and _float_same(*a) and n.kwargs.get("beta", 1) == 1 and \
            n.kwargs.get("alpha", 1) == 1 and len(a[1].shape) == 2 == len(a[2].shape) and \
            a[0].shape in ((a[2].shape[1],), (1, a[2].shape[1])):
        _replace(g, n, _lib(n, "matmul", [a[1], a[2], a[0]], form="mm", activation="none"))
        return f"{n.name}: addmm -> library matmul (+ bias)"
    return None


def _epilogue(g: Graph, n: Node) -> str | None:
    if n.kind != "library" or n.op not in ("matmul", "conv") or n.attrs["activation"] != "none":
        return None
    users = g.users()[n.name]
    if len(users) != 1 or n in g.outputs:
        return None
    u = users[0]
    act = None
    if u.kind == "pointwise" and u.args == [n] and u.dtype == n.dtype:
        if u.op in ACTIVATIONS:
            act = ACTIVATIONS[u.op]
        elif u.op == "gelu" and u.attrs.get("approximate") == "none":
            act = "gelu"
    if act is None:
        return None
    fused = _lib(u, n.op, list(n.args), **{**n.attrs, "activation": act})
    g.nodes.remove(n)
    _replace(g, u, fused)
    return f"{u.name}: {u.op} fused into {n.name}'s {n.op} as its epilogue"


def _last_dim(dim: object, rank: int) -> bool:
    return isinstance(dim, int) and rank > 0 and dim % rank == rank - 1


def _softmax(g: Graph, n: Node) -> str | None:
    if n.kind != "aten" or n.op not in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        return None
    x = n.args[0]
    if not _float_same(x) or n.dtype != x.dtype or not _last_dim(n.args[1], len(x.shape)):
        return None
    if len(n.args) > 2 and n.args[2] not in (None, False, x.dtype) or n.kwargs:
        return None
    log = "log" in n.op
    _replace(g, n, _lib(n, "softmax", [x], log=log))
    return f"{n.name}: {n.op} -> library {'log_' if log else ''}softmax"


def _norm(g: Graph, n: Node) -> str | None:
    if n.kind != "aten" or n.op not in ("layer_norm", "rms_norm") or n.kwargs:
        return None
    x, shape = n.args[0], n.args[1]
    w = n.args[2] if len(n.args) > 2 else None
    if n.op == "layer_norm":
        b = n.args[3] if len(n.args) > 3 else None
        eps = n.args[4] if len(n.args) > 4 else 1e-5
    else:
        b = None
        eps = n.args[3] if len(n.args) > 3 else None
    if not _float_same(x, w, b) or list(shape) != [x.shape[-1]] or n.dtype != x.dtype:
        return None
    if eps is None:
        import torch

        eps = torch.finfo(x.dtype).eps
    _replace(g, n, _lib(n, n.op, [x, w, b], eps=float(eps)))
    return f"{n.name}: {n.op} -> library {n.op}"


def _is_square_of(v: Node, x: Node) -> bool:
    if v.kind != "pointwise":
        return False
    return (v.op == "pow" and v.attrs["exponent"] == 2 and v.args[0] is x) or \
        (v.op == "mul" and v.args[0] is x and v.args[1] is x) or (v.op == "square" and v.args[0] is x)


def _rms_written_out(g: Graph, n: Node) -> str | None:
    """Match ``n = x * rsqrt(mean(x^2) + eps)`` (or ``x / sqrt(...)``), then an optional ``* w``."""
    if n.kind != "pointwise" or n.op not in ("mul", "div") or len(n.args) != 2:
        return None
    users = g.users()
    for x, r in ((n.args[0], n.args[1]), (n.args[1], n.args[0])) if n.op == "mul" else ((n.args[0], n.args[1]),):
        if not (isinstance(x, Node) and isinstance(r, Node)) or not _float_same(x) or x.shape != n.shape:
            continue
        want = "rsqrt" if n.op == "mul" else "sqrt"
        if r.kind != "pointwise" or r.op != want:
            continue
        s = r.args[0]
        if not isinstance(s, Node) or s.kind != "pointwise" or s.op != "add" or s.attrs.get("alpha", 1) != 1:
            continue
        m, eps = (s.args[0], s.args[1]) if isinstance(s.args[0], Node) else (s.args[1], s.args[0])
        if not isinstance(eps, (int, float)) or not isinstance(m, Node) or m.kind != "reduction" or \
                m.op != "mean" or not m.attrs["keepdim"]:
            continue
        sq = m.args[0]
        if not _is_square_of(sq, x):
            continue
        inner = [r, s, m, sq]
        if any(len(users[v.name]) != 1 or v in g.outputs for v in inner) or n.dtype != x.dtype:
            continue
        # the optional weight: the only user of n multiplies it by a vector of N elements
        w, last = None, n
        nu = users[n.name]
        if len(nu) == 1 and n not in g.outputs and nu[0].kind == "pointwise" and nu[0].op == "mul":
            u = nu[0]
            other = u.args[1] if u.args[0] is n else u.args[0]
            if isinstance(other, Node) and other.shape == (x.shape[-1],) and other.dtype == x.dtype and \
                    u.shape == n.shape and u.dtype == n.dtype:
                w, last = other, u
        lib = _lib(last, "rms_norm", [x, w, None], eps=float(eps))
        for v in inner + ([n] if last is not n else []):
            g.nodes.remove(v)
        _replace(g, last, lib)
        return f"{last.name}: RMSNorm written out ({', '.join(v.name for v in inner[::-1] + [n])}) -> library rms_norm"
    return None


def _identity(g: Graph, n: Node) -> str | None:
    """``dropout`` with p = 0 or outside training is its input."""
    if n.kind != "aten" or n.op not in ("dropout", "feature_dropout") or n.kwargs or len(n.args) < 3:
        return None
    x, p, train = n.args[:3]
    if not isinstance(x, Node) or not (p == 0 or train is False) or n in g.outputs:
        return None
    _redirect(g, n, x)
    g.nodes.remove(n)
    return f"{n.name}: {n.op} with p={p}, train={train} is the identity"


def _reduce_other_dim(g: Graph, n: Node) -> str | None:
    """A reduction over one dim that is not the last: permute that dim last (a view), reduce the
    last dim, and unsqueeze it back for keepdim, so that codegen's row kernels take it."""
    import torch

    from .ir import REDUCTIONS, _reduction

    if n.kind != "aten" or n.op not in REDUCTIONS or n.op == "var" and n.target is not None and \
            getattr(n.target, "_overloadname", "") not in ("dim", "correction"):
        return None
    x = n.args[0]
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if isinstance(dims, int):
        dims = [dims]
    if not isinstance(x, Node) or not x.shape or not isinstance(dims, (list, tuple)) or len(dims) != 1 or \
            x.dtype not in FLOATS or n.dtype not in FLOATS:
        return None
    rank = len(x.shape)
    d = dims[0] % rank
    from .fuse import MAX_ROW

    if d == rank - 1 or not 2 <= x.shape[d] <= MAX_ROW:  # no row kernel would take it: keep the ATen op
        return None
    perm = [i for i in range(rank) if i != d] + [d]
    pshape = tuple(x.shape[i] for i in perm)
    view = Node(f"{n.name}_perm", "view", "permute", [x, perm], pshape, x.dtype,
                target=torch.ops.aten.permute.default, line=n.line)
    args = [view, [-1]] + list(n.args[2:])
    probe = Node(n.name, "aten", n.op, args, None, n.dtype, target=n.target, kwargs=dict(n.kwargs))
    if n.op == "var":
        keep = args[3] if getattr(n.target, "_overloadname", "") == "dim" and len(args) > 3 else n.kwargs.get("keepdim", False)
    else:
        keep = args[2] if len(args) > 2 else n.kwargs.get("keepdim", False)
    probe.shape = pshape[:-1] + ((1,) if keep else ())
    red = _reduction(probe, n.op, getattr(n.target, "_overloadname", ""), args, dict(n.kwargs))
    if red.kind != "reduction":
        return None
    i = g.nodes.index(n)
    if keep:  # reduce without keepdim, then put the size-1 dim back where it was
        red.attrs["keepdim"] = False
        if "keepdim" in (red.aten_kwargs or {}):
            red.aten_kwargs["keepdim"] = False
        else:
            red.aten_args[3 if n.op == "var" else 2] = False
        red.shape = pshape[:-1]
        red.name = f"{n.name}_rows"
        back = Node(n.name, "view", "unsqueeze", [red, d], n.shape, n.dtype, target=torch.ops.aten.unsqueeze.default,
                    line=n.line)
        g.nodes[i:i] = [view, red]
        _replace(g, n, back)
    else:
        g.nodes[i:i] = [view]
        _replace(g, n, red)
    return f"{n.name}: {n.op} over dim {d} -> permute (view) + row reduction over the last dim"
