"""The warpsmith graph IR: a small, readable graph built from the exported ATen graph
(:mod:`.classify` decides each ATen call's kind).

Every node has a kind:

- ``input`` (a forward argument), ``param`` (a parameter or buffer of the model);
- ``pointwise``: an elementwise op with a canonical name (``add``, ``sigmoid``, ``where``, ...)
  and numeric attributes; operands are nodes or Python scalars, broadcast as ATen broadcasts;
  generators (``full``, ``iota``) have no tensor operand;
- ``reduction``: ``sum``, ``mean``, ``amax``, ``amin``, ``prod`` (and, until :mod:`.expand`
  rewrites them, ``var``, ``std``, ``logsumexp``, ``argmax``, ``argmin``) over any dims;
- ``scan``: ``cumsum``, ``cumprod`` along one dim, either direction;
- ``view``: layout only (view, reshape, permute, expand, ...), run by ATen in the emitted program;
- ``aten``: any other ATen op; lowering turns some into ``library`` nodes, the rest stay and are
  run as ATen fallbacks;
- ``library``: a call of a warpsmith library op (matmul with epilogue, softmax, norms).

:meth:`Graph.format` prints it (``warpsmith solve --explain``).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch

Value = Any  # a Node, a Python scalar, or a list/tuple of them (ATen arguments)


@dataclass(eq=False)
class Node:
    name: str
    kind: str
    op: str
    args: list[Value]
    shape: tuple[int, ...] | None
    dtype: torch.dtype | None
    attrs: dict[str, Any] = field(default_factory=dict)
    target: Any = None  # the ATen overload (view/aten nodes) or operator.getitem
    kwargs: dict[str, Any] = field(default_factory=dict)
    line: str = ""  # the user's source line, when known
    # the ATen call as captured (args may be rewritten into a canonical form; an unfused node is
    # emitted from these)
    aten_args: list[Value] | None = None
    aten_kwargs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.aten_args is None:
            self.aten_args = list(self.args)
        if self.aten_kwargs is None:
            self.aten_kwargs = dict(self.kwargs)

    def operands(self) -> list["Node"]:
        """The nodes among the arguments (nested lists and tuples walked), in order, repeats kept."""
        out: list[Node] = []
        _nodes_in(self.args, out)
        if self.kwargs:
            _nodes_in(self.kwargs.values(), out)
        return out

    def __repr__(self) -> str:
        return f"%{self.name}"


def _nodes_in(xs: Any, out: list[Node]) -> None:
    for x in xs:
        if isinstance(x, Node):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            _nodes_in(x, out)


@dataclass
class Graph:
    nodes: list[Node]
    outputs: list[Node]
    inputs: list[Node]  # user inputs, in call order
    state: dict[str, tuple[str, bool]]  # param node name -> (state_dict key, is_buffer)
    single_output: bool = True
    # in-place updates of the model's buffers or the inputs, applied after the call: (target, value)
    mutations: list[tuple[Node, Node]] = field(default_factory=list)
    # values computed from the parameters alone, folded out of the call (compiler.hoist): their graph,
    # whose outputs are the call's ``param`` nodes of op ``folded``; None when nothing is folded
    init: "Graph | None" = None
    # tensor constants of differing values the program built (``torch.tensor([1.0, 2.0])``): state key
    # (in ``state``, a buffer) -> the tensor; the emitted ModelNew registers them as non-persistent buffers
    constants: dict[str, torch.Tensor] = field(default_factory=dict)

    def results(self) -> list[Node]:
        """What the program must compute: its outputs and the values its mutations write."""
        return self.outputs + [v for _, v in self.mutations]

    def users(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for a in dict.fromkeys(a.name for a in n.operands()):  # each user once per operand
                out[a].append(n)
        return out

    def remove_dead(self) -> None:
        live = {n.name for n in self.results()} | {t.name for t, _ in self.mutations}
        for n in reversed(self.nodes):
            if n.name in live:
                live.update(a.name for a in n.operands())
        self.nodes = [n for n in self.nodes if n.name in live or n.kind in ("input", "param")]

    def snapshot(self) -> Any:
        """What :meth:`restore` needs to undo a rewrite: the node list, outputs, mutations and every
        node's arguments."""
        return (list(self.nodes), list(self.outputs), list(self.mutations),
                [(n, n.args, dict(n.kwargs), n.aten_args, dict(n.aten_kwargs or {})) for n in self.nodes])

    def restore(self, snap: Any) -> None:
        nodes, outputs, mutations, args = snap
        self.nodes, self.outputs, self.mutations = list(nodes), list(outputs), list(mutations)
        for n, a, kw, aa, akw in args:
            n.args, n.kwargs, n.aten_args, n.aten_kwargs = a, kw, aa, akw

    def format(self) -> str:
        lines = []
        for n in self.nodes:
            shape = "x".join(map(str, n.shape)) if n.shape is not None else "?"
            dt = str(n.dtype).replace("torch.", "") if n.dtype is not None else ""
            args = ", ".join(_fmt(a) for a in n.args)
            attrs = "".join(f", {k}={v}" for k, v in n.attrs.items())
            lines.append(f"%{n.name}: {dt}[{shape}] = {n.kind} {n.op}({args}{attrs})")
        lines += [f"%{t.name} <- %{v.name} (in place)" for t, v in self.mutations]
        lines.append("return " + ", ".join(f"%{o.name}" for o in self.outputs))
        return "\n".join(lines)


def _fmt(a: Value) -> str:
    if isinstance(a, Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in a) + "]"
    return repr(a)


# the tables live in .classify; re-exported here for the modules that read them from the IR
from .classify import BINARY, CARRIED, FLOATS, INTS, REDUCTIONS, SCANS, UNARY, VIEWS, classify, packet_of  # noqa: E402,F401


def _meta(fx_node: Any) -> tuple[tuple[int, ...] | None, torch.dtype | None]:
    v = fx_node.meta.get("val")
    if isinstance(v, torch.Tensor):
        from .symbolic_shapes import size  # a symbolic dim: its probe value, never a guard on it

        return tuple(size(s) for s in v.shape), v.dtype
    return None, None


def _line(fx_node: Any, path: str) -> str:
    trace = fx_node.meta.get("stack_trace") or ""
    rows = trace.strip().splitlines()
    for i in range(len(rows) - 1, -1, -1):
        if path in rows[i]:
            code = rows[i + 1].strip() if i + 1 < len(rows) else ""
            ln = rows[i].split("line ")[-1].split(",")[0]
            return f"line {ln}: {code}"
    return ""


def build(captured: Any) -> Graph:
    """The IR of a :class:`~.capture.Captured` program."""
    ep = captured.program
    g = build_fx(ep.graph, captured.user_inputs, str(captured.problem.path.name))
    g.state = dict(captured.state)
    for n in g.nodes:
        if n.name in captured.constants:  # a lifted ``torch.tensor(c)``: a generator like ``full``
            _make_full(n, captured.constants[n.name])
    for i, (name, t) in enumerate(getattr(captured, "tensor_constants", {}).items()):
        key = f"_ws_constant_{i}"  # one of differing values: a buffer of the emitted ModelNew
        g.state[name] = (key, True)
        g.constants[key] = t
    g.single_output = g.single_output or len(g.outputs) == 1 and _single_leaf(ep)
    return g


def build_fx(graph: Any, user_inputs: list[str] | None = None, path: str = "") -> Graph:
    """The IR of an ATen-level ``torch.fx`` graph. Placeholders named in ``user_inputs`` are inputs,
    the others parameters (every placeholder is an input when ``user_inputs`` is None); ``path`` is
    the user's file, whose lines the nodes' stack traces name."""
    env: dict[Any, Node] = {}
    nodes: list[Node] = []
    outputs: list[Node] = []
    inputs: list[Node] = []
    single = True

    def conv(a: Any) -> Value:
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        return a

    for fx in graph.nodes:
        shape, dtype = _meta(fx)
        if fx.op == "placeholder":
            kind = "input" if user_inputs is None or fx.name in user_inputs else "param"
            n = Node(fx.name, kind, kind, [], shape, dtype)
            if kind == "input":
                inputs.append(n)
        elif fx.op == "output":
            res = fx.args[0]
            single = not isinstance(res, (list, tuple))
            for r in (res if isinstance(res, (list, tuple)) else [res]):
                if not isinstance(r, torch.fx.Node):
                    from ..core.errors import InvalidInputError

                    raise InvalidInputError("PROBLEM", "a forward that returns tensors", repr(r))
                outputs.append(env[r])
            continue
        elif fx.op == "get_attr":
            n = _constant(fx, shape, dtype)
        else:
            n = _classify(fx, conv, shape, dtype)
            n.line = _line(fx, path) if path else ""
        env[fx] = n
        nodes.append(n)
    return Graph(nodes, outputs, inputs, {}, single)


def uniform_value(t: torch.Tensor) -> bool | int | float | None:
    """The one value all elements of the constant tensor ``t`` hold (NaN included), or None when
    they differ or there are none."""
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return None
    same = bool((flat == flat[0]).all()) or flat.is_floating_point() and bool(flat.isnan().all())
    return flat[0].item() if same else None


def _make_full(n: Node, value: bool | int | float) -> None:
    """``n`` (a tensor constant of one value) becomes the generator ``full``."""
    n.kind, n.op, n.attrs, n.args = "pointwise", "full", {"value": value}, []
    n.target, n.aten_args, n.aten_kwargs = torch.ops.aten.full.default, [list(n.shape), value], {"dtype": n.dtype}


def _constant(fx: Any, shape: Any, dtype: Any) -> Node:
    """A ``get_attr`` node of a dynamo/AOTAutograd graph (a tensor the program built from Python
    values, e.g. ``torch.tensor(0.5)``): ``full`` when all its elements hold one value."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    t = getattr(fx.graph.owning_module, fx.target, None) if fx.graph.owning_module is not None else None
    with unset_fake_temporarily():  # AOTAutograd calls compilers under its fake mode; t is real
        value = uniform_value(t) if isinstance(t, torch.Tensor) else None
    if value is None:
        raise ValueError(f"tensor constant {fx.target} is not of one value (only such constants are inlined)")
    n = Node(fx.name, "pointwise", "full", [], tuple(t.shape), t.dtype)
    _make_full(n, value)
    return n


def _single_leaf(ep: Any) -> bool:
    spec = ep.call_spec.out_spec
    if spec is None:
        return True
    return spec.is_leaf() if hasattr(spec, "is_leaf") else spec.num_children == 0


def _classify(fx: Any, conv: Any, shape: Any, dtype: Any) -> Node:
    args = [conv(a) for a in fx.args]
    kwargs = {k: conv(v) for k, v in fx.kwargs.items()}
    if fx.target is operator.getitem:
        return Node(fx.name, "view", "getitem", args, shape, dtype, target=operator.getitem)
    packet, overload = packet_of(fx.target)
    base = Node(fx.name, "aten", packet, args, shape, dtype, target=fx.target, kwargs=kwargs)
    return classify(base, packet, overload)


def is_generator(n: Any) -> bool:
    """A node computed from its indices alone (``full``, ``iota``): generated kernels inline it."""
    return isinstance(n, Node) and n.kind == "pointwise" and n.op in ("full", "iota")
