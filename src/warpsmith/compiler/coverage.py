"""Coverage: how much of a compiled program's work runs in warpsmith kernels.

Each step of the program is weighed by a simple model of its work, the same for both sides:

- **bytes**: every tensor a step reads from outside it plus every tensor it writes (a generated
  kernel reads each outside operand once and writes what leaves it; a library call or an ATen
  fallback reads its tensor arguments and writes its result);
- **FLOPs**: ``2 * prod(output) * K`` for a matmul (K its reduction length), ``2 * prod(output) *
  C_in/groups * prod(kernel)`` for a convolution, ``4 * B * H * S_q * S_k * D`` for attention, and
  one per output element for everything else (pointwise, reductions over their input's elements).

Views are metadata and weigh nothing. ``fraction_bytes`` / ``fraction_flops`` are warpsmith's
share (generated kernels and library calls) of the totals; fallbacks are listed by weight.
"""
from __future__ import annotations

import math
from typing import Any

from .fuse import Partition
from .ir import Graph, Node, is_generator


def _bytes(n: Any) -> int:
    if not isinstance(n, Node) or n.shape is None or n.dtype is None or is_generator(n):
        return 0
    return math.prod(n.shape) * n.dtype.itemsize


def _elems(n: Node) -> int:
    return math.prod(n.shape) if n.shape is not None else 0


def node_flops(n: Node) -> float:
    """The FLOP model of one node (see the module docstring)."""
    op = n.op
    a = [x for x in n.args if isinstance(x, Node)]
    if op in ("matmul", "mm", "bmm", "addmm", "linear") and len(a) >= 2 and a[0].shape:
        return 2.0 * _elems(n) * a[0].shape[-1]
    if op in ("conv", "convolution") and len(a) >= 2 and a[1].shape and len(a[1].shape) >= 3:
        w = a[1].shape
        per = (w[0] if n.attrs.get("transposed") else w[1]) * math.prod(w[2:])
        return 2.0 * _elems(n) * per
    if (op == "attention" or "scaled_dot_product" in op) and a and a[0].shape and len(a[0].shape) == 4:
        # ATen's attention ops (_scaled_dot_product_flash_attention_for_cpu, ...) too; a backward reads
        # (grad_out, q, k, ...) and does twice the forward's work
        bwd = op.endswith("_backward") and len(a) > 2
        q, k = (a[1], a[2]) if bwd else (a[0], a[1] if len(a) > 1 else a[0])
        b, h, sq, d = q.shape
        sk = k.shape[-2] if k.shape else sq
        return (8.0 if bwd else 4.0) * b * h * sq * sk * d
    if (n.kind in ("reduction", "scan") or n.shape is None) and a:  # (a tuple result: weighed by its input)
        return float(max(_elems(x) for x in a))
    return float(_elems(n))


def coverage(g: Graph, part: Partition) -> dict[str, Any]:
    """Shares of bytes and FLOPs in warpsmith kernels, and the fallbacks by weight."""
    users = g.users()
    results = {n.name for n in g.results()}
    mine_b = mine_f = other_b = other_f = 0.0
    fallbacks = []
    for grp in part.groups:
        inside = {n.name for n in grp.nodes}
        reads = {a.name: a for n in grp.nodes for a in n.operands() if a.name not in inside}
        writes = [n for n in grp.nodes if n.name not in grp.copies and
                  (n.name in results or any(u.name not in inside for u in users[n.name]))]
        mine_b += sum(_bytes(x) for x in reads.values()) + sum(_bytes(x) for x in writes)
        mine_f += sum(node_flops(n) for n in grp.nodes)
    grouped = set(part.group_of()) | part.copied()
    for n in g.nodes:
        if n.kind in ("input", "param", "view") or n.name in grouped or is_generator(n):
            continue
        ins = {a.name: a for a in n.operands()}.values()
        b = (_bytes(n) or max([_bytes(x) for x in ins] + [0])) + sum(_bytes(x) for x in ins)
        f = node_flops(n)
        if n.kind == "library":
            mine_b, mine_f = mine_b + b, mine_f + f
        else:
            other_b, other_f = other_b + b, other_f + f
            fallbacks.append({"node": n.name, "op": str(n.target), "bytes": b, "flops": f})
    tb, tf = mine_b + other_b, mine_f + other_f
    return {"model": "bytes read + written per step; FLOPs: matmul/conv/attention 2-4 per MAC, else 1 per element",
            "bytes_total": tb, "flops_total": tf,
            "fraction_bytes": mine_b / tb if tb else 1.0, "fraction_flops": mine_f / tf if tf else 1.0,
            "fallbacks": sorted(fallbacks, key=lambda r: -r["bytes"])}


def line(cov: dict[str, Any]) -> str:
    return (f"coverage: {cov['fraction_flops']:.1%} of FLOPs and {cov['fraction_bytes']:.1%} of bytes in warpsmith "
            f"kernels ({len(cov['fallbacks'])} ATen fallback(s))")
