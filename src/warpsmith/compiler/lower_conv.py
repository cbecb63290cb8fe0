"""Lowering of convolutions to the library's implicit-GEMM conv (``ops/conv``).

Recognized: ``aten.conv1d/2d/3d`` (integer padding, ``"valid"``, and ``"same"`` where torch pads
symmetrically: stride 1 and an even ``dilation * (kernel - 1)`` on every axis), ``aten.conv_transpose1d/2d/3d``
and ``aten.convolution``. Each becomes one ``library conv`` node with aten.convolution's geometry
(``stride``, ``padding``, ``dilation``, ``transposed``, ``output_padding``, ``groups``, per spatial axis).
Then, where the conv is the only user of its input:

- a following ``batch_norm`` in inference (``training=False``) is folded into the conv's weight and
  bias (``w * gamma / sqrt(var + eps)``, ``(b - mean) * gamma / sqrt(var + eps) + beta``): the fold is
  written as IR nodes over the parameters (float32 in between, rounded once to the conv's dtype),
  so generated kernels compute it, and :mod:`.hoist` computes it once per parameter version
  rather than at each call;
- a following ``relu``, ``gelu`` (erf) or ``silu`` becomes the conv's epilogue (the matmul rule in
  :mod:`.lower` does this for both).

The operands must share one float dtype; anything else stays an ATen fallback.
"""
from __future__ import annotations

import torch

from .ir import Graph, Node


def _ints(v: object, nd: int, default: int) -> list[int] | None:
    if v is None:
        return [default] * nd
    if isinstance(v, int):
        return [v] * nd
    if isinstance(v, (list, tuple)) and all(isinstance(i, int) for i in v):
        return list(v) * nd if len(v) == 1 else list(v) if len(v) == nd else None
    return None


def _arg(n: Node, i: int, name: str, default: object) -> object:
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


def conv(g: Graph, n: Node) -> str | None:
    """``aten`` conv node -> ``library conv`` (see the module docstring)."""
    from .lower import _float_same, _lib, _replace

    if n.kind != "aten" or not (n.op.startswith("conv") and n.op[-2:] in ("1d", "2d", "3d")
                                or n.op in ("convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")):
        return None
    x, w = n.args[0], n.args[1]
    bias = _arg(n, 2, "bias", None)
    if not isinstance(x, Node) or not isinstance(w, Node) or not _float_same(x, w, bias) or n.dtype != x.dtype:
        return None
    nd = len(x.shape) - 2
    if nd not in (1, 2, 3) or len(w.shape) != nd + 2:
        return None
    if n.op == "convolution":
        stride, padding, dilation = (_ints(_arg(n, i, k, d), nd, d) for i, k, d in
                                     ((3, "stride", 1), (4, "padding", 0), (5, "dilation", 1)))
        transposed, opad, groups = bool(_arg(n, 6, "transposed", False)), _ints(_arg(n, 7, "output_padding", 0), nd, 0), \
            _arg(n, 8, "groups", 1)
    elif n.op.startswith("conv_transpose"):
        stride, padding, opad = (_ints(_arg(n, i, k, d), nd, d) for i, k, d in
                                 ((3, "stride", 1), (4, "padding", 0), (5, "output_padding", 0)))
        groups, dilation, transposed = _arg(n, 6, "groups", 1), _ints(_arg(n, 7, "dilation", 1), nd, 1), True
    else:
        stride, dilation = _ints(_arg(n, 3, "stride", 1), nd, 1), _ints(_arg(n, 5, "dilation", 1), nd, 1)
        pad = _arg(n, 4, "padding", 0)
        groups, transposed, opad = _arg(n, 6, "groups", 1), False, [0] * nd
        if pad == "valid":
            padding = [0] * nd
        elif pad == "same":
            if stride is None or dilation is None or any(s != 1 for s in stride) or \
                    any(d * (k - 1) % 2 for d, k in zip(dilation, w.shape[2:])):
                return None  # torch pads asymmetrically there: left to ATen
            padding = [d * (k - 1) // 2 for d, k in zip(dilation, w.shape[2:])]
        else:
            padding = _ints(pad, nd, 0)
    if None in (stride, padding, dilation, opad) or not isinstance(groups, int) or groups < 1:
        return None
    _replace(g, n, _lib(n, "conv", [x, w, bias], stride=stride, padding=padding, dilation=dilation,
                        transposed=transposed, output_padding=opad, groups=groups, activation="none"))
    return f"{n.name}: {n.op} -> library conv ({'transposed, ' if transposed else ''}{nd}-D implicit GEMM)"


def batch_norm(g: Graph, n: Node) -> str | None:
    """``library conv`` -> ``batch_norm`` (inference) folded into the conv."""
    from .lower import _float_same, _lib, _replace

    if n.kind != "aten" or n.op not in ("batch_norm", "_native_batch_norm_legit_no_training"):
        return None
    c = n.args[0]
    if not (isinstance(c, Node) and c.kind == "library" and c.op == "conv" and not c.attrs.get("folded_bn")
            and c.attrs["activation"] == "none" and not c.attrs["transposed"]) or c in g.outputs or len(g.users()[c.name]) != 1:
        return None
    if n.op == "batch_norm":
        if len(n.args) < 8 or n.args[5] is not False:
            return None  # training mode: statistics of the batch, not foldable
        weight, bias, mean, var, eps = n.args[1], n.args[2], n.args[3], n.args[4], n.args[7]
    else:
        return None
    if not isinstance(mean, Node) or not isinstance(var, Node) or not _float_same(mean, var, weight, bias):
        return None
    if n.dtype != c.dtype or n.shape != c.shape:
        return None
    if c.dtype != _F32:
        # Folded weights rounded to 16 bits are not the weights the reference multiplies: each moves by
        # up to half an ulp (2^-9 relative in bfloat16), and under cancellation (large inputs, a small
        # output) that costs tens of output ulps, past the error contract. The batch norm stays a
        # pointwise step after the conv, rounded where the reference rounds.
        return None
    x, w, b = c.args
    steps: list[Node] = []
    w2, b2 = _fold_nodes(n, w, b, weight, bias, mean, var, float(eps), steps)
    fused = _lib(n, "conv", [x, w2, b2], **c.attrs, folded_bn=float(eps))
    g.nodes[g.nodes.index(c):g.nodes.index(c)] = steps
    g.nodes.remove(c)
    _replace(g, n, fused)
    return f"{n.name}: batch_norm (inference) folded into {c.name}'s conv weight and bias"


_F32 = torch.float32
_AT = torch.ops.aten


def _fold_nodes(n: Node, w: Node, b: Node | None, gamma: Node | None, beta: Node | None, mean: Node, var: Node,
                eps: float, steps: list[Node]) -> tuple[Node, Node]:
    """IR nodes (appended to ``steps``) computing the folded weight and bias in float32, each rounded
    once to the conv's dtype: ``inv = gamma / sqrt(var + eps)``, ``w inv``, ``(b - mean) inv + beta``."""
    dt, line = w.dtype, n.line

    def node(tag: str, op: str, args: list, shape: tuple, dtype: torch.dtype, target: object, kind: str = "pointwise",
             **attrs: object) -> Node:
        kw = {"dtype": dtype} if op == "cast" else {}
        out = Node(f"{n.name}_bn_{tag}", kind, op, args, shape, dtype, attrs, target=target, aten_args=list(args),
                   aten_kwargs=kw, line=line)
        steps.append(out)
        return out

    def f32(v: Node, tag: str) -> Node:
        return v if v.dtype == _F32 else node(f"{tag}_f32", "cast", [v], v.shape, _F32, _AT._to_copy.default)

    c = (w.shape[0],)
    inv = node("inv", "rsqrt", [node("var_eps", "add", [f32(var, "var"), eps], c, _F32, _AT.add.Tensor, alpha=1)],
               c, _F32, _AT.rsqrt.default)
    if gamma is not None:
        inv = node("scale", "mul", [inv, f32(gamma, "gamma")], c, _F32, _AT.mul.Tensor)
    col = [w.shape[0]] + [1] * (len(w.shape) - 1)
    inv_w = node("scale_w", "view", [inv, col], tuple(col), _F32, _AT.view.default, kind="view")
    w2 = node("w_folded", "mul", [f32(w, "w"), inv_w], w.shape, _F32, _AT.mul.Tensor)
    m32 = f32(mean, "mean")
    d = node("centre", "sub", [f32(b, "b"), m32], c, _F32, _AT.sub.Tensor, alpha=1) if b is not None else \
        node("centre", "neg", [m32], c, _F32, _AT.neg.default)
    b2 = node("b_folded", "mul", [d, inv], c, _F32, _AT.mul.Tensor)
    if beta is not None:
        b2 = node("shift", "add", [b2, f32(beta, "beta")], c, _F32, _AT.add.Tensor, alpha=1)
    if dt != _F32:
        w2 = node("w", "cast", [w2], w.shape, dt, _AT._to_copy.default)
        b2 = node("b", "cast", [b2], c, dt, _AT._to_copy.default)
    return w2, b2
