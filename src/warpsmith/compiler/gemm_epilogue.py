"""GEMM epilogues: a chain of pointwise ops after a library GEMM, run on the GEMM's fp32 accumulator tile.

The KernelBench level-2 pattern: a GEMM (``linear``, ``mm``, ``matmul``, ``addmm``, ``bmm``; any
rank of ``linear``) followed by bias adds, activations, scalings, per-column vectors (a bias or a
scale of shape ``(N,)``), per-row vectors (``(M, 1)``) or full ``(M, N)`` tensors. :func:`fuse_epilogues`
replaces the GEMM and its chain by one library node (op ``matmul``, attribute ``epilogue``): the
emitted program gets a copy of the library's tile loop (``tile_coords``, ``tile_dot``, copied and
renamed like every library kernel) with the chain written as Triton text by the codegen's own
expression writer (:func:`.codegen_expr.pointwise`), in a kernel named after the node
(``_ws_gemm_epi_<name>``), launched by ``library.GEMM_EPILOGUE``'s ``_ws_gemm_epilogue``. The GEMM's
output is never written; the chain is computed in fp32 on the tile and rounded once, on store.

**What fuses.** Starting from the GEMM, every later pointwise node (one the codegen can write: not
``flip``/``cat``, no generator but ``full``, which is a literal) of the GEMM's output shape whose
tensor operands are the GEMM, nodes already in the chain, or values that do not depend on the GEMM
and broadcast to its output. Those outside values are read at the tile's offsets through their
strides: a scalar (0-d or all dims 1), a per-column vector (varies along N only: loaded once per
tile column), a per-row vector (varies along the rows only) or a full tensor; a batch dim of a
``bmm`` through its own stride (0 where broadcast). The chain ends at its *sink*: the last node
such that every value between the GEMM and it is used only inside the chain and is no result of
the program (an intermediate used elsewhere would have to be written: then the chain is cut
earlier, or nothing fuses). The sink is a float value.

**Not fused.** Reductions over the features (a ``sum``/``mean``/``amax`` after the chain stays a row
kernel reading the stored result), convolutions (their epilogue stays the library activation),
ops that read at other indices (``flip``, ``cat``, ``iota``), and values computed from the GEMM's
output by anything that is not in the chain.

**How it is chosen.** It is a rewrite with a predicted effect: the whole program's predicted time
(:func:`warpsmith.cost.program.program_ms`, greedy fusion) before and after, recorded like the other rewrites
(``rewrite: gemm_epilogue``), taken when predicted cheaper. It never changes the exact value, but it
changes the rounding (the GEMM's output is not rounded to its dtype before the chain): the emitted
program is verified by ``warpsmith check`` like every other, and ``solve`` keeps the program as
written (no rewrite) as its last candidate.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from .decisions import decided
from .codegen_expr import pointwise, vtype
from .fuse import INDEXED, fusable, partition
from .ir import CARRIED, Graph, Node, is_generator
from .lower import _redirect
from ..cost.program import program_ms

FORMS = ("linear", "nd", "mm", "bmm")
ACTIVATIONS = ("none", "relu", "gelu", "silu")
# the index and its bound an operand that varies along one axis of the tile only is read with
INDEX = {"col": ("rn", "N"), "row": ("rm", "M")}


def kernel_name(n: Node) -> str:
    """The name of the specialized GEMM kernel of library node ``n`` in the emitted file."""
    return f"_ws_gemm_epi_{n.name}"


# ---- finding the chain --------------------------------------------------------------------------------
def _gemm(m: Node) -> bool:
    return m.kind == "library" and m.op == "matmul" and m.attrs.get("form") in FORMS and \
        not m.attrs.get("epilogue") and m.attrs.get("activation") in ACTIVATIONS and m.shape is not None and \
        len(m.shape) >= 1 and m.dtype in (torch.float16, torch.bfloat16, torch.float32)


def _broadcasts(a: Node, shape: tuple[int, ...]) -> bool:
    if a.shape is None or a.dtype not in CARRIED or len(a.shape) > len(shape):
        return False
    lead = len(shape) - len(a.shape)
    return all(s in (1, shape[lead + i]) for i, s in enumerate(a.shape))


def _writable(n: Node) -> bool:
    """A pointwise node the epilogue can compute (the codegen's expression writer takes it)."""
    return n.kind == "pointwise" and n.op not in INDEXED and fusable(n) and not n.kwargs and \
        all(isinstance(a, (Node, bool, int, float)) for a in n.args)


def _joins(n: Node, m: Node, inside: set[str], desc: set[str]) -> bool:
    if not _writable(n) or n.shape != m.shape:
        return False
    for a in n.operands():
        if a.name in inside:
            continue
        if a.name in desc:  # computed from the GEMM outside the chain
            return False
        if is_generator(a):
            if a.op != "full":
                return False
            continue
        if not _broadcasts(a, m.shape):
            return False
    return True


def chain(g: Graph, m: Node) -> tuple[list[Node], Node] | None:
    """The pointwise chain after GEMM ``m`` that can run in its epilogue and its sink (module docstring),
    or None."""
    if not _gemm(m):
        return None
    users = g.users()
    results = {n.name for n in g.results()}
    if m.name in results:
        return None
    inside, desc, nodes = {m.name}, {m.name}, []
    for n in g.nodes[g.nodes.index(m) + 1:]:
        if not any(a.name in desc for a in n.operands()):
            continue
        desc.add(n.name)
        if _joins(n, m, inside, desc):
            inside.add(n.name)
            nodes.append(n)
    by_name = {n.name: n for n in nodes}
    for sink in reversed(nodes):
        if vtype(sink.dtype) != "f":
            continue
        anc, stack = {sink.name}, [sink]
        while stack:  # the chain nodes (and the GEMM) the sink is computed from
            for a in stack.pop().operands():
                if a.name not in anc and (a.name in by_name or a is m):
                    anc.add(a.name)
                    if a is not m:
                        stack.append(a)
        if m.name in anc and all(x == sink.name or x not in results and all(u.name in anc for u in users[x])
                                 for x in anc):
            anc |= _producers(g, m, anc, desc, users, results)
            return [n for n in g.nodes if n.name in anc and n is not m], sink
    return None


def _producers(g: Graph, m: Node, inside: set[str], desc: set[str], users: dict[str, list[Node]],
               results: set[str]) -> set[str]:
    """Pointwise values not computed from the GEMM that only the chain reads (``shift.expand(M, N) * 3``,
    ``torch.sigmoid(gate)``): computed in the epilogue from their own operands rather than written by a
    kernel of their own and read back."""
    by_name = {n.name: n for n in g.nodes}
    taken: set[str] = set()
    grew = True
    while grew:  # to a fixed point: a producer read by two others is taken once both are
        grew = False
        for n in [by_name[x] for x in sorted(inside | taken) if x != m.name]:
            for a in n.operands():
                if a.name in inside or a.name in taken or a.name in desc or a.name in results or not _writable(a) \
                        or not all(u.name in inside or u.name in taken for u in users[a.name]):
                    continue
                if all(b.op == "full" if is_generator(b) else _broadcasts(b, m.shape) for b in a.operands()):
                    taken.add(a.name)
                    grew = True
    return taken


# ---- the rewrite ----------------------------------------------------------------------------------------
def _mode(a: Node, m: Node) -> str:
    """How the tile reads outside operand ``a`` (broadcast to the GEMM's output ``m.shape``)."""
    shape = m.shape
    lead = len(shape) - len(a.shape)
    varies = [lead + i for i, s in enumerate(a.shape) if s > 1]
    rows = [d for d in range(len(shape) - 1) if not (m.attrs["form"] == "bmm" and d == 0)]
    col = len(shape) - 1 in varies
    row = any(d in varies for d in rows)
    return "full" if col and row else "col" if col else "row" if row else "scalar"


def fuse_one(g: Graph, m: Node, nodes: list[Node], sink: Node) -> Node:
    """Replace GEMM ``m`` and its chain ``nodes`` (ending at ``sink``) by one library node; returns it."""
    names = {n.name for n in nodes}
    operands: list[Node] = []

    def arg(a: Any) -> list[Any]:
        if not isinstance(a, Node):
            return ["const", a]
        if a is m:
            return ["acc"]
        if a.name in names:
            return ["value", a.name]
        if is_generator(a):
            return ["const", a.attrs["value"]]
        if a not in operands:
            operands.append(a)
        return ["operand", operands.index(a)]

    steps = [{"name": n.name, "op": n.op, "attrs": dict(n.attrs), "dtype": n.dtype, "args": [arg(a) for a in n.args]}
             for n in nodes]
    ops = [{"node": a.name, "mode": _mode(a, m), "dtype": a.dtype} for a in operands]
    attrs = {**m.attrs, "epilogue": steps, "operands": ops, "gemm": m.name}
    new = Node(sink.name, "library", "matmul", list(m.args[:3]) + operands, sink.shape, sink.dtype, attrs,
               line=sink.line)
    gone = {id(n) for n in nodes} | {id(m)}
    g.nodes = [new if n is sink else n for n in g.nodes if n is sink or id(n) not in gone]
    _redirect(g, sink, new)
    g.outputs = [new if o is sink else o for o in g.outputs]
    return new


def fuse_epilogues(g: Graph, target: Any) -> list[dict[str, Any]]:
    """Fuse each GEMM's pointwise chain into its epilogue where the whole program is predicted cheaper
    (greedy fusion before and after); one record per site, as :mod:`.rewrite` records its rewrites."""
    records = []
    for m in list(g.nodes):
        if m not in g.nodes:
            continue
        site = chain(g, m)
        if site is None:
            continue
        nodes, sink = site
        before = program_ms(g, partition(g), target)
        saved = g.snapshot()
        shapes = [list(a.shape) for a in m.args[:3] if isinstance(a, Node)]
        new = fuse_one(g, m, nodes, sink)
        after = program_ms(g, partition(g), target)
        rec = {"rewrite": "gemm_epilogue", "at": m.name, "fused": [n.name for n in nodes],
               "chain": " -> ".join(n.op for n in nodes), "operands": [dict(o, dtype=str(o["dtype"]))
                                                                      for o in new.attrs["operands"]],
               "shapes": shapes, "before_ms": before, "after_ms": after,
               "taken": decided("gemm_epilogue", m.name, after < before)}
        if not rec["taken"]:  # undo: the old nodes come back and their users read the sink again
            g.restore(saved)
        records.append(rec)
    return records


# ---- the kernel text ------------------------------------------------------------------------------------
def _load(i: int, mode: str, dtype: torch.dtype) -> str:
    base = f"e{i}_ptr + batch * e{i}_sb"
    if mode == "full":
        text = f"tl.load({base} + rm[:, None] * e{i}_sm + rn[None, :] * e{i}_sn, mask=mask, other=0)"
    elif mode == "scalar":
        text = f"tl.load({base})"
    else:
        idx, bound = INDEX[mode]
        stride = f"e{i}_sn" if mode == "col" else f"e{i}_sm"
        text = f"tl.load({base} + {idx} * {stride}, mask={idx} < {bound}, other=0)" + \
            ("[None, :]" if mode == "col" else "[:, None]")
    return text + {"b": " != 0", "f": ".to(tl.float32)", "i": ".to(tl.int64)"}[vtype(dtype)]


def kernel_source(n: Node) -> str:
    """The ``@triton.jit`` text of library node ``n``'s GEMM with its epilogue (see the module docstring);
    it calls the library's ``tile_coords``, ``tile_dot`` and ``to_output`` by their own names (the emitted
    file renames them) and the codegen helpers (``_ws_tanh``, ...)."""
    steps, ops = n.attrs["epilogue"], n.attrs["operands"]
    name = kernel_name(n)
    params = (["a_ptr", "b_ptr", "c_ptr", "bias_ptr"] + [f"e{i}_ptr" for i in range(len(ops))] + ["M", "N", "K"] +
              ["stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn", "stride_cb", "stride_cm",
               "stride_cn", "stride_bias"] + [f"e{i}_s{d}" for i in range(len(ops)) for d in "bmn"] +
              [f"{c}: tl.constexpr" for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "HAS_BIAS",
                                              "IS_FP32", "PRECISION", "EMULATE")])
    chain_text = " -> ".join(f"{s['name']}={s['op']}" for s in steps)
    lines = ["@triton.jit", f"def {name}({', '.join(params)}):",
             f'    """GEMM {n.attrs["gemm"]} ({n.attrs["form"]}) with its epilogue on the fp32 tile: {chain_text}"""',
             "    batch = tl.program_id(1).to(tl.int64)",
             "    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)",
             "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
             "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
             "    acc = tile_dot(a_ptr + batch * stride_ab, b_ptr + batch * stride_bb, rm, rn, 0, K, M, N,",
             "                   stride_am, stride_ak, stride_bk, stride_bn,",
             "                   BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, IS_FP32, PRECISION, EMULATE)",
             "    mask = (rm[:, None] < M) & (rn[None, :] < N)",
             "    if HAS_BIAS:",
             "        bias = tl.load(bias_ptr + rn * stride_bias, mask=rn < N, other=0.0)",
             "        acc = acc + bias.to(tl.float32)[None, :]"]
    act = n.attrs.get("activation", "none")
    if act != "none":
        f = SimpleNamespace(op=act, attrs={"approximate": "none"}, dtype=torch.float32)
        lines.append(f"    acc = {pointwise(f, [('acc', 'f')])}  # the GEMM's activation")
    values: dict[str, tuple[str, str]] = {}
    loaded: dict[int, str] = {}
    for j, s in enumerate(steps):
        texts = []
        for a in s["args"]:
            if a[0] == "acc":
                texts.append(("acc", "f"))
            elif a[0] == "value":
                texts.append(values[a[1]])
            elif a[0] == "const":
                texts.append((a[1], "c"))
            else:
                i = a[1]
                if i not in loaded:
                    lines.append(f"    e{i} = {_load(i, ops[i]['mode'], ops[i]['dtype'])}  # {ops[i]['node']}, "
                                 f"{ops[i]['mode']}")
                    loaded[i] = f"e{i}"
                texts.append((loaded[i], vtype(ops[i]["dtype"])))
        node = SimpleNamespace(op=s["op"], attrs=s["attrs"], dtype=s["dtype"])
        lines.append(f"    v{j} = {pointwise(node, texts)}  # {s['name']} = {s['op']}")
        values[s["name"]] = (f"v{j}", vtype(s["dtype"]))
    last = values[steps[-1]["name"]][0]
    lines += ["    c_ptrs = c_ptr + batch * stride_cb + rm[:, None] * stride_cm + rn[None, :] * stride_cn",
              f"    tl.store(c_ptrs, to_output({last}, c_ptr, EMULATE), mask=mask)"]
    return "\n".join(lines) + "\n"


def call(n: Node, v: Any) -> str:  # noqa: ANN401 - v renders an argument
    """The emitted expression computing library node ``n`` (a GEMM with an epilogue), at its chosen tiles."""
    from .library import launch_config

    a = n.args
    extra = ", ".join(v(x) for x in a[3:])
    return (f"_ws_gemm_epilogue({kernel_name(n)}, {n.attrs['form']!r}, {v(a[0])}, {v(a[1])}, {v(a[2])}, "
            f"[{extra}], {tuple(n.shape)!r}, {n.dtype}{launch_config(n)})")
