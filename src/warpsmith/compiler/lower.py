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

from . import lower_attention, lower_conv, lower_gather, lower_norm, lower_ops, lower_rnn, lower_route
from .ir import FLOATS, Graph, Node

ACTIVATIONS = {"relu": "relu", "silu": "silu"}
MAX_ROUNDS = 4


def lower(g: Graph) -> list[str]:
    """Rewrite ``g`` in place; returns one line per rewrite made (for ``--explain``)."""
    return lower_graph(g, 0)


def lower_graph(g: Graph, depth: int) -> list[str]:
    """The lowering rules, then :mod:`.expand`'s canonical forms, then the decomposition of what is
    left (:mod:`.decompose`, whose pieces are lowered the same way, ``depth`` levels down), until
    nothing changes."""
    from .decompose import decompose
    from .expand import expand

    notes: list[str] = []
    for _ in range(MAX_ROUNDS):
        before = len(notes)
        for rule in (_inplace, _identity, _gemm, lower_conv.conv, lower_conv.batch_norm, _softmax, _norm, _own_norm,
                     lower_norm.group_norm, lower_norm.instance_norm, lower_norm.batch_norm, lower_norm.layer_norm,
                     lower_ops.pool, lower_ops.cross_entropy, lower_ops.attention, lower_attention.masked_attention,
                     lower_gather.gather, lower_gather.scatter, lower_route.topk_sort, lower_rnn.recurrent,
                     lower_rnn.split_through, _rms_written_out, _epilogue):
            for n in list(g.nodes):
                if n in g.nodes:
                    note = rule(g, n)
                    if note:
                        notes.append(note)
        g.remove_dead()
        notes += expand(g)
        notes += decompose(g, depth)
        g.remove_dead()
        if len(notes) == before:
            break
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
    g.mutations = [(t, new if v is old else v) for t, v in g.mutations]


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


def _own_norm(g: Graph, n: Node) -> str | None:
    """warpsmith's own ``warpsmith::rms_norm`` / ``warpsmith::layer_norm`` in a captured graph (a
    ``warpsmith.nn.RMSNorm``, a model ``warpsmith.patch`` changed): the library norm, where only the
    normalized output is used and there is no residual (an inference graph). Otherwise the op stays,
    and the graph is refused with its name (an emitted program calls ATen ops only)."""
    if n.kind != "aten" or n.op not in ("warpsmith::rms_norm", "warpsmith::layer_norm") or n.kwargs:
        return None
    op = n.op.split("::")[1]
    x, w, b, residual, eps = n.args if op == "layer_norm" else (n.args[0], n.args[1], None, *n.args[2:])
    users = g.users()[n.name]
    if residual is not None or n in g.outputs or not users or \
            any(u.op != "getitem" or u.args[1] != 0 or u in g.outputs and len(users) > 1 for u in users):
        return None
    if not _float_same(x, w, b) or len(x.shape) != 2 or not isinstance(eps, (int, float)) or \
            any(p is not None and list(p.shape) != [x.shape[-1]] for p in (w, b)):
        return None
    lib = Node(n.name, "library", op, [x, w, b], x.shape, x.dtype, {"eps": float(eps)}, line=n.line)
    lower_norm.place_tuple(g, [lib], n, users, {0: lib})
    return f"{n.name}: warpsmith::{op} -> library {op}"


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
                m.op != "mean" or not m.attrs["keepdim"] or m.attrs["dims"] != (len(x.shape) - 1,):
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


def _inplace(g: Graph, n: Node) -> str | None:
    """An in-place ATen op (``add_``, ``mul_``, ``copy_``, ...) becomes its out-of-place form; when
    it updates a buffer or an input, the result is written back after the call (``g.mutations``);
    on an intermediate value, the later uses read the new value."""
    import torch

    from .classify import classify, packet_of

    if n.kind != "aten" or not n.op.endswith("_") or n.op.startswith("_") or not n.args:
        return None
    dst = n.args[0]
    if not isinstance(dst, Node) or dst.kind == "view" or dst.shape is None:
        return None
    if n.op == "copy_":
        src = n.args[1] if len(n.args) > 1 else None
        if not isinstance(src, Node):
            return None
        new = Node(f"{n.name}_value", "pointwise", "cast" if src.dtype != dst.dtype else "identity", [src],
                   dst.shape, dst.dtype, line=n.line)
    else:
        packet = getattr(torch.ops.aten, n.op[:-1], None)
        overload = getattr(n.target, "_overloadname", "default")
        target = getattr(packet, overload, None) if packet is not None else None
        if target is None:
            return None
        new = Node(f"{n.name}_value", "aten", n.op[:-1], list(n.args), dst.shape, dst.dtype, target=target,
                   kwargs=dict(n.kwargs), line=n.line)
        new = classify(new, *packet_of(target))
    i = g.nodes.index(n)
    g.nodes[i] = new
    later = g.nodes[i + 1:]
    for m in later:  # uses after the update read the new value
        for old in (n, dst):
            m.args = _sub(m.args, old, new)
            m.kwargs = {k: _sub(v, old, new) for k, v in m.kwargs.items()}
            m.aten_args = _sub(m.aten_args or [], old, new)
            m.aten_kwargs = {k: _sub(v, old, new) for k, v in (m.aten_kwargs or {}).items()}
    g.outputs = [new if o is n or o is dst else o for o in g.outputs]
    if dst.kind in ("param", "input"):
        g.mutations = [(t, v) for t, v in g.mutations if t is not dst] + [(dst, new)]
        return f"{n.name}: {n.op} on {dst.name} -> {new.op}, written back after the call"
    return f"{n.name}: {n.op} -> {new.op} (later uses read the result)"
