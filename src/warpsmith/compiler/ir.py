"""The warpsmith graph IR: a small, readable graph built from the exported ATen graph.

Every node has a kind:

- ``input`` (a forward argument), ``param`` (a parameter or buffer of the model);
- ``pointwise``: an elementwise op with a canonical name (``add``, ``sigmoid``, ``where``, ...)
  and numeric attributes; operands are nodes or Python scalars, broadcast as ATen broadcasts;
- ``reduction``: ``sum``, ``mean``, ``amax``, ``amin``, ``var``, ``logsumexp`` over the last dim;
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
        return [a for a in _flatten(self.args) + _flatten(list(self.kwargs.values())) if isinstance(a, Node)]

    def __repr__(self) -> str:
        return f"%{self.name}"


def _flatten(xs: list[Value]) -> list[Value]:
    out: list[Value] = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out += _flatten(list(x))
        else:
            out.append(x)
    return out


@dataclass
class Graph:
    nodes: list[Node]
    outputs: list[Node]
    inputs: list[Node]  # user inputs, in call order
    state: dict[str, tuple[str, bool]]  # param node name -> (state_dict key, is_buffer)
    single_output: bool = True

    def users(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.operands():
                if n not in out[a.name]:
                    out[a.name].append(n)
        return out

    def remove_dead(self) -> None:
        live = {n.name for n in self.outputs}
        for n in reversed(self.nodes):
            if n.name in live:
                live.update(a.name for a in n.operands())
        self.nodes = [n for n in self.nodes if n.name in live or n.kind in ("input", "param")]

    def format(self) -> str:
        lines = []
        for n in self.nodes:
            shape = "x".join(map(str, n.shape)) if n.shape is not None else "?"
            dt = str(n.dtype).replace("torch.", "") if n.dtype is not None else ""
            args = ", ".join(_fmt(a) for a in n.args)
            attrs = "".join(f", {k}={v}" for k, v in n.attrs.items())
            lines.append(f"%{n.name}: {dt}[{shape}] = {n.kind} {n.op}({args}{attrs})")
        lines.append("return " + ", ".join(f"%{o.name}" for o in self.outputs))
        return "\n".join(lines)


def _fmt(a: Value) -> str:
    if isinstance(a, Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in a) + "]"
    return repr(a)


# --- classification of ATen ops -------------------------------------------------------------------
# pointwise: ATen packet name -> canonical op; the attrs come from _pointwise_attrs
UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt",
         "rsqrt": "rsqrt", "reciprocal": "reciprocal", "abs": "abs", "neg": "neg", "erf": "erf", "sin": "sin",
         "cos": "cos", "silu": "silu", "gelu": "gelu", "log1p": "log1p", "expm1": "expm1",
         "leaky_relu": "leaky_relu", "hardtanh": "clamp", "clamp": "clamp", "clamp_min": "clamp",
         "clamp_max": "clamp", "softplus": "softplus", "elu": "elu", "hardsigmoid": "hardsigmoid",
         "hardswish": "hardswish", "mish": "mish", "sign": "sign", "square": "square",
         "_to_copy": "cast", "to": "cast", "type_as": "cast", "pow": "pow", "logical_not": "not"}
BINARY = {"add": "add", "sub": "sub", "rsub": "rsub", "mul": "mul", "div": "div", "maximum": "maximum",
          "minimum": "minimum", "gt": "gt", "lt": "lt", "ge": "ge", "le": "le", "eq": "eq", "ne": "ne",
          "where": "where", "logical_and": "and", "logical_or": "or"}
REDUCTIONS = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin", "var": "var", "logsumexp": "logsumexp"}
VIEWS = {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "expand", "permute", "transpose", "t",
         "contiguous", "clone", "alias", "flatten", "select", "slice", "detach", "expand_as", "view_as", "unflatten"}
POW_EXPONENTS = (0, 0.5, -0.5) + tuple(range(-8, 9))  # the exponents codegen writes exactly
FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _meta(fx_node: Any) -> tuple[tuple[int, ...] | None, torch.dtype | None]:
    v = fx_node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return tuple(int(s) for s in v.shape), v.dtype
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
        else:
            n = _classify(fx, conv, shape, dtype)
            n.line = _line(fx, path) if path else ""
        env[fx] = n
        nodes.append(n)
    return Graph(nodes, outputs, inputs, {}, single)


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
    packet = getattr(fx.target, "_opname", None) or getattr(getattr(fx.target, "overloadpacket", None),
                                                              "__name__", str(fx.target))
    overload = getattr(fx.target, "_overloadname", "")
    base = Node(fx.name, "aten", packet, args, shape, dtype, target=fx.target, kwargs=kwargs)
    if packet in VIEWS:
        base.kind = "view"
        return base
    if shape is None or dtype not in FLOATS + (torch.bool,):
        return base
    if packet in REDUCTIONS:
        return _reduction(base, packet, overload, args, kwargs)
    if packet in UNARY or packet in BINARY:
        return _pointwise(base, packet, overload, args, kwargs)
    return base


def _reduction(base: Node, packet: str, overload: str, args: list, kwargs: dict) -> Node:
    x = args[0]
    if not isinstance(x, Node) or not x.shape or x.dtype not in FLOATS or base.dtype not in FLOATS:
        return base
    rank = len(x.shape)
    if packet == "var":
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        if overload == "dim":  # var(x, dim, unbiased=True, keepdim=False)
            unbiased = args[2] if len(args) > 2 else kwargs.get("unbiased", True)
            keep = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
            corr = 1 if unbiased else 0
        elif overload == "correction":  # var(x, dim, *, correction=None, keepdim=False)
            keep = kwargs.get("keepdim", False)
            corr = kwargs.get("correction", 1)
        else:
            return base
        if isinstance(corr, bool) or not isinstance(corr, (int, float)) and corr is not None:
            return base
        attrs = {"correction": 1 if corr is None else corr}
    else:
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        attrs = {}
        if kwargs.get("dtype") is not None or len(args) > 3:
            return base
    if isinstance(dims, int):
        dims = [dims]
    if dims is None or len(dims) != 1 or dims[0] % rank != rank - 1:
        return base  # only the last dim, for now
    base.kind, base.op, base.args, base.kwargs = "reduction", REDUCTIONS[packet], [x], {}
    base.attrs = {**attrs, "keepdim": bool(keep)}
    return base


def _pointwise(base: Node, packet: str, overload: str, args: list, kwargs: dict) -> Node:
    op = UNARY.get(packet) or BINARY[packet]
    attrs: dict[str, Any] = {}
    operands = list(args)
    if any(isinstance(a, Node) and (a.shape is None or a.dtype not in FLOATS + (torch.bool,) and
                                    a.dtype not in (torch.int32, torch.int64)) for a in operands):
        return base
    if op in ("add", "sub", "rsub"):
        alpha = kwargs.pop("alpha", args[2] if len(args) > 2 else 1)
        operands = operands[:2]
        attrs["alpha"] = alpha
    elif op == "div":
        if kwargs.get("rounding_mode") is not None:
            return base
        kwargs = {}
    elif op == "gelu":
        attrs["approximate"] = kwargs.pop("approximate", args[1] if len(args) > 1 else "none")
        operands = operands[:1]
    elif op == "leaky_relu":
        attrs["slope"] = args[1] if len(args) > 1 else kwargs.pop("negative_slope", 0.01)
        operands = operands[:1]
    elif op == "clamp":
        lo = hi = None
        if packet == "hardtanh":
            lo, hi = (list(args[1:3]) + [-1.0, 1.0][len(args) - 1:])[:2]
        elif packet == "clamp_min":
            lo = args[1]
        elif packet == "clamp_max":
            hi = args[1]
        else:
            lo = args[1] if len(args) > 1 else kwargs.get("min")
            hi = args[2] if len(args) > 2 else kwargs.get("max")
        if isinstance(lo, Node) or isinstance(hi, Node):
            return base
        attrs = {"min": lo, "max": hi}
        operands = operands[:1]
    elif op == "softplus":
        attrs = {"beta": args[1] if len(args) > 1 else 1.0, "threshold": args[2] if len(args) > 2 else 20.0}
        operands = operands[:1]
    elif op == "elu":
        if len(args) > 2 and (args[2] != 1 or len(args) > 3 and args[3] != 1):
            return base
        attrs = {"alpha": args[1] if len(args) > 1 else 1.0}
        operands = operands[:1]
    elif op == "pow":
        if overload != "Tensor_Scalar" or not isinstance(args[1], (int, float)):
            return base
        if args[1] not in POW_EXPONENTS:
            return base
        attrs = {"exponent": args[1]}
        operands = operands[:1]
    elif op == "cast":
        if packet == "type_as":
            operands = operands[:1]
        elif packet == "to" and overload not in ("dtype",):
            return base
        else:
            operands = operands[:1]
        extra = {k: v for k, v in kwargs.items() if k not in ("dtype", "non_blocking", "copy", "memory_format")}
        if extra or base.dtype not in FLOATS:
            return base
    elif op in ("gt", "lt", "ge", "le", "eq", "ne", "where", "and", "or", "not", "maximum", "minimum", "mul",
                "sign", "square"):
        operands = operands[: 3 if op == "where" else 2 if op not in ("not", "sign", "square") else 1]
    else:
        operands = operands[:1]
    if kwargs and op not in ("cast",):
        return base
    if any(not isinstance(a, (Node, int, float, bool)) for a in operands):
        return base
    base.kind, base.op, base.args, base.kwargs, base.attrs = "pointwise", op, operands, {}, attrs
    return base
