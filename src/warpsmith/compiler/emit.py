"""Emit: the lowered, partitioned graph -> one self-contained KernelBench ``ModelNew`` file.

The file imports only ``os``, ``torch`` and ``triton``. It holds, in order: the problem's own
source (so that ``ModelNew(*get_init_inputs())`` builds ``Model`` to take over its parameters,
buffers and submodules under the same names and in the same order: seeded alike, the weights
are the same; ``Model.forward`` is never called), the library kernels used (their
``@triton.jit`` text, copied, each global under a name unique in the file: :mod:`.names`), the generated kernels and their launchers, and ``ModelNew`` whose
``forward`` runs the steps in program order: generated kernels, library calls, views (ATen, no
compute) and ATen fallbacks (``torch.ops.aten...``, listed in the file's docstring).

The program is specialized to the captured shapes; ``forward`` raises on others.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import InvalidInputError
from . import library, names
from .codegen import HELPERS, Kernel, generate
from .coverage import coverage
from .fuse import Partition, mark_unfused, partition
from .ir import Graph, Node, is_generator


@dataclass
class Program:
    text: str
    kernels: list[Kernel] = field(default_factory=list)
    library_calls: list[Node] = field(default_factory=list)
    fallbacks: list[Node] = field(default_factory=list)
    views: list[Node] = field(default_factory=list)
    search: Any = None  # the search's record (compiler.search.SearchResult), when a search chose
    coverage: dict[str, Any] = field(default_factory=dict)  # compiler.coverage: warpsmith's share of the work
    declared: Any = None  # compiler.precision.Declaration: the deviation from the program the check is told of


def _render(a: Any) -> str:
    if isinstance(a, Node):
        return f"v_{a.name}"
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_render(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, torch.device):
        return "_dev"
    if isinstance(a, (torch.dtype, torch.layout, torch.memory_format)):
        return str(a)
    if isinstance(a, float):
        if math.isnan(a):
            return 'float("nan")'
        if math.isinf(a):
            return f'float("{"-" if a < 0 else ""}inf")'
        return repr(a)
    if a is None or isinstance(a, (bool, int, str)):
        return repr(a)
    raise InvalidInputError("program", "ATen arguments the emitter can write", f"{type(a).__name__}: {a!r}")


def _aten_call(n: Node) -> str:
    args, kwargs = n.aten_args or [], n.aten_kwargs or {}
    if n.target is operator.getitem:
        return f"{_render(args[0])}[{args[1]!r}]"
    name = str(n.target)
    if not name.startswith("aten."):
        raise InvalidInputError("program", "ATen ops only", f"{name} at {n.name}")
    parts = [_render(a) for a in args] + [f"{k}={_render(v)}" for k, v in kwargs.items()]
    return f"torch.ops.{name}({', '.join(parts)})"


def _steps(g: Graph, part: Partition) -> list[tuple[str, Any]]:
    """Groups and single nodes in a topological order that keeps program order where it can."""
    where = part.group_of()
    order = {n.name: i for i, n in enumerate(g.nodes)}
    key = lambda n: f"g{where[n.name]}" if n.name in where else n.name  # noqa: E731
    items: dict[str, tuple[str, Any]] = {}
    deps: dict[str, set[str]] = {}
    first: dict[str, int] = {}
    copied = part.copied()  # recomputed inside the kernels holding them: no step of their own
    held = {f"g{i}": {m.name for m in grp.nodes} for i, grp in enumerate(part.groups)}

    def need(k: str, a: Node) -> None:
        if a.kind not in ("input", "param") and key(a) != k and a.name not in held.get(k, ()) and \
                not (is_generator(a) and a.name not in where):
            deps.setdefault(k, set()).add(key(a))

    for n in g.nodes:
        if n.kind in ("input", "param") or is_generator(n) and n.name not in where or n.name in copied:
            continue  # generators outside every group are computed inline by the kernels using them
        k = key(n)
        items.setdefault(k, ("group", part.groups[where[n.name]]) if n.name in where else ("node", n))
        first[k] = min(first.get(k, 1 << 30), order[n.name])
        for a in n.operands():
            need(k, a)
    for i, grp in enumerate(part.groups):  # a copy reads its operands in the kernel holding it
        for m in grp.nodes:
            if m.name in grp.copies:
                for a in m.operands():
                    need(f"g{i}", a)
    out, done = [], set()
    while len(out) < len(items):
        ready = [k for k in items if k not in done and deps.get(k, set()) <= done]
        k = min(ready, key=lambda x: first[x])
        done.add(k)
        out.append(items[k])
    return out


def _program(g: Graph, part: Partition, init_part: Partition | None = None,
             reserved: set[str] | frozenset[str] = frozenset(),
             configure: Any = None) -> tuple[Program, str, list[str], list[str]]:
    """The kernels (generated and library), their launchers as source text, and the body lines
    (8 spaces deep) computing every node of ``g`` as ``v_<name>``; then the lines computing
    ``g.init`` (partitioned by ``init_part``), the values folded out of the call (empty without one).
    ``reserved``: the global names the rest of the file binds or reads (the problem's source).
    ``configure(graph, group, users)``, when given, chooses each generated kernel of ``g`` its launch
    config (a ``cost.program.KernelChoice``: the config search's); else (and for ``g.init``, run once)
    the default config."""
    prog = Program("")
    jit: list[Any] = []
    launchers: list[tuple[str, list[Any]]] = []

    def lines(graph: Graph, partition: Partition, tune: Any = None) -> list[str]:
        users = graph.users()
        body: list[str] = []
        for kind, item in _steps(graph, partition):
            if kind == "group":
                ch = tune(graph, item, users) if tune is not None else None
                k = generate(item, len(prog.kernels), users, graph.results(),
                             ch.config if ch is not None else None, ch)
                prog.kernels.append(k)
                outs = ", ".join(f"v_{n.name}" for n in k.outputs) + ("," if len(k.outputs) == 1 else "")
                args = ", ".join(["_dev"] + [f"v_{s.node.name}" for s in k.slots])
                body.append(f"        {outs} = {k.launcher_name}({args})")
                continue
            n = item
            if n.kind == "library":
                kernels, launcher = library.needs(n)
                jit.extend(x for x in kernels if x not in jit)
                if launcher not in [t for t, _ in launchers]:
                    launchers.append((launcher, kernels))
                launchers.extend((text, kernels) for text in library.generated(n))  # a GEMM's generated epilogue
                prog.library_calls.append(n)
                note = f": {n.attrs['launch_note']}" if n.attrs.get("launch_note") else ""  # its chosen config
                body.append(f"        v_{n.name} = {library.call(n, _render)}  # library {n.op}{note}")
            elif n.kind == "view" and n.op in RESHAPES:
                prog.views.append(n)
                body.append(f"        v_{n.name} = _ws_view({_render(n.aten_args[0])}, {tuple(n.shape)!r})  # view (a copy "
                            "kernel first when the strides do not allow one)")
            elif n.kind == "sym":  # size arithmetic of a symbolic graph (compiler.symbolic_shapes)
                body.append(f"        v_{n.name} = {n.attrs['py']}  # symbolic size")
            elif n.kind == "view" and n.op in COPIES:
                prog.views.append(n)
                body.append(f"        v_{n.name} = _ws_clone({_render(n.aten_args[0])})  # copy kernel")
            else:
                (prog.views if n.kind == "view" else prog.fallbacks).append(n)
                tag = "view" if n.kind == "view" else "ATen fallback"
                body.append(f"        v_{n.name} = {_aten_call(n)}  # {tag}")
        return body

    init = lines(g.init, init_part) if g.init is not None and init_part is not None else []
    body = lines(g, part, configure)
    for t, v in g.mutations:
        body.append(f"        _ws_assign(v_{t.name}, v_{v.name})  # in-place update of {t.name}, as the original does")
    code = kernel_code(jit, launchers, prog.kernels, reserved)
    if prog.kernels:  # plain data: what `warpsmith prove --solution` builds the launch contracts from
        from .contracts import launch_table

        code += launch_table(prog.kernels) + "\n\n"
    code += RUNTIME + "\n\n"
    return prog, code, body, init


def kernel_code(jit: list[Any], launchers: list[tuple[str, list[Any]]], kernels: list[Kernel],
                reserved: set[str] | frozenset[str] = frozenset()) -> str:
    """The kernels section of an emitted file: the library's ``jit`` kernels (copied with their helpers,
    constants and imports), the codegen helpers and generated ``kernels`` (when there are any), and
    the library ``launchers`` (text, the kernels it launches) and the generated ones. Every global
    the copied library text defines gets a name unique in the file (:mod:`.names`), clear of
    ``reserved`` (what the problem's source binds or reads) and of the fixed text's names."""
    jit = list(jit)
    if kernels:
        from ..ops.shared.kernel import to_output

        jit.append(to_output)
    helper_names = names.defined(HELPERS)  # a GEMM's generated epilogue (launcher text) may call them too
    helpers = bool(kernels) or any(names.global_names(t) & helper_names for t, _ in launchers)
    ns = _namespace(reserved, [HELPERS, RUNTIME] + [t for t, _ in launchers] + [k.source + k.launcher for k in kernels])
    code = "# " + "-" * 96 + "\n# kernels: the warpsmith library's (copied) and the generated ones\n# " + "-" * 96 + "\n"
    if jit:
        code += library.jit_source(jit, ns) + "\n\n"
    if kernels:
        out_name = library.name_of(to_output, ns)
        for k in kernels:  # the generated kernels call the library's to_output by its name in the file
            k.source = names.rename_globals(k.source, {to_output.fn.__name__: out_name})
    if helpers:
        code += HELPERS + "\n\n" + "\n\n".join(k.source for k in kernels) + "\n\n"
    return code + "\n\n".join([library.launcher_source(t, ks, ns) for t, ks in launchers] +
                               [k.launcher for k in kernels]) + "\n\n"


# what the file's fixed text imports: a copied kernel's `tl` is the file's `tl`
_FILE_MODULES = {"os": "os", "torch": "torch", "torch.nn": "nn", "triton": "triton", "triton.language": "tl"}


def _namespace(reserved: set[str] | frozenset[str], fixed: list[str]) -> names.Namespace:
    """The emitted file's namespace: the names ``reserved`` (the problem's), the file's imports and
    ``_EMULATE``, and every name the fixed texts (runtime, codegen helpers, launchers, generated
    kernels) define at top level are taken; copied library text gets the rest."""
    ns = names.Namespace(set(reserved) | {"_EMULATE", "ModelNew", "run"})
    for text in fixed:
        ns.reserve(*names.defined(text))
    for mod, local in _FILE_MODULES.items():
        ns.bind(("module", mod), local)
    return ns


RESHAPES = ("view", "reshape", "_unsafe_view", "flatten", "unflatten", "view_as")
COPIES = ("clone", "contiguous")

RUNTIME = '''
@triton.jit
def _ws_copy_kernel(src_ptr, dst_ptr, NUMEL, D1, D2, D3, D4, D5, s0, s1, s2, s3, s4, s5, t0, t1, t2, t3, t4, t5,
                    BLOCK: tl.constexpr):
    """dst[i] = src[i] over a shape of rank <= 6, any strides on both sides (a broadcast src: stride 0)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    r = offs
    i5 = r % D5
    r = r // D5
    i4 = r % D4
    r = r // D4
    i3 = r % D3
    r = r // D3
    i2 = r % D2
    r = r // D2
    i1 = r % D1
    i0 = r // D1
    v = tl.load(src_ptr + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3 + i4 * s4 + i5 * s5, mask=mask)
    tl.store(dst_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4 + i5 * t5, v.to(dst_ptr.dtype.element_ty),
             mask=mask)


def _ws_copy(src, dst):
    """dst[...] = src (broadcast to dst's shape, cast to its dtype) by a Triton kernel."""
    src = src.expand(dst.shape)
    if dst.dim() > 6:
        raise ValueError(f"_ws_copy handles rank <= 6, got {dst.dim()}")
    lead = 6 - dst.dim()
    shape = [1] * lead + list(dst.shape)
    ss = [0] * lead + list(src.stride())
    ts = [0] * lead + list(dst.stride())
    n = dst.numel()
    if n:
        _ws_copy_kernel[(triton.cdiv(n, 1024),)](src, dst, n, *shape[1:], *ss, *ts, BLOCK=1024)
    return dst


def _ws_clone(x):
    return _ws_copy(x, torch.empty(x.shape, dtype=x.dtype, device=x.device))


def _ws_view(x, shape):
    """x viewed as ``shape``; a copy kernel first when x's strides allow no view (as reshape does)."""
    try:
        return x.view(shape)
    except RuntimeError:
        return _ws_clone(x).view(shape)


def _ws_assign(dst, src):
    """The in-place update of a buffer or an input (what the original program's in-place op did)."""
    _ws_copy(src, dst)
'''


def _summary(prog: Program) -> list[str]:
    return [f"Generated kernels: {len(prog.kernels)}; library calls: "
            f"{', '.join(n.op for n in prog.library_calls) or 'none'}.",
            "ATen fallbacks: " + (", ".join(f"{n.op} ({n.name})" for n in prog.fallbacks) or "none") + ".",
            "Views run by ATen: " + (", ".join(n.op for n in prog.views) or "none") + "."]


_IMPORTS = ["import os", "", "import torch", "import torch.nn as nn", "import triton", "import triton.language as tl",
            "", '_EMULATE = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")  # Triton\'s CPU interpreter']


def emit(g: Graph, part: Partition, problem_source: str, problem_name: str,
         shapes: list[tuple[int, ...] | None], values: list[Any] | None = None, configure: Any = None) -> Program:
    init_part = None
    if g.init is not None:  # computed once per parameter version: greedy fusion, no search
        init_part = partition(g.init)
        mark_unfused(g.init, init_part)
    prog, code, body, init = _program(g, part, init_part, names.bound_names(problem_source), configure)
    prog.coverage = coverage(g, part)
    # a `from __future__` import must open the file: lifted out of the problem's source
    future = [ln for ln in problem_source.splitlines() if ln.startswith("from __future__ import")]
    problem_source = "\n".join(ln for ln in problem_source.splitlines() if ln not in future)
    head = [f'"""ModelNew for {problem_name}, written by `warpsmith solve` (warpsmith compiler, first slice).',
            "", *_summary(prog),
            "Specialized to the input shapes " + ", ".join(str(s) for s in shapes) + '."""',
            *future, *_IMPORTS,
            "", "# " + "-" * 96, f"# the problem's own source ({problem_name}): ModelNew builds Model to take over its",
            "# parameters, buffers and submodules (same names, same order, same RNG draws); Model.forward is never called",
            "# " + "-" * 96]
    text = "\n".join(head) + "\n" + problem_source.rstrip() + "\n\n\n" + code
    text += _model_new(g, shapes, body, values, init)
    prog.text = text
    return prog


def emit_function(g: Graph, part: Partition, name: str, shapes: list[tuple[int, ...] | None],
                  origin: str = "the torch.compile backend", configure: Any = None) -> Program:
    """A module defining ``run(*inputs)``: the graph ``g`` (every placeholder an input, in order),
    returning the tuple of its outputs; what the torch.compile backend loads (and, one per shape,
    a SOL-ExecBench solution: ``origin`` names the user in the docstring). ``configure`` as for
    :func:`_program` (None: every generated kernel at its default config)."""
    prog, code, body, _ = _program(g, part, reserved={"run"}, configure=configure)
    prog.coverage = coverage(g, part)
    args = [f"v_{n.name}" for n in g.inputs]
    tensors = [a for a, s in zip(args, shapes) if s is not None]
    head = [f'"""{name}, compiled by warpsmith ({origin}).', "", *_summary(prog),
            "Specialized to the input shapes " + ", ".join(str(s) for s in shapes) + '."""', *_IMPORTS, "", ""]
    lines = [f"def run({', '.join(args)}):",
             f"    _dev = {tensors[0]}.device" if tensors else "    _dev = torch.device('cpu')"]
    lines += [ln[4:] for ln in body]
    lines.append(f"    return ({''.join(f'v_{o.name}, ' for o in g.outputs)})")
    prog.text = "\n".join(head) + code + "\n".join(lines) + "\n"
    return prog


def _state_lines(g: Graph) -> list[str]:
    """The parameters and buffers ``g`` reads, as ``v_<name>`` (8 spaces deep)."""
    users = g.users()
    used = {n.name for n in g.nodes if users[n.name]} | {n.name for n in g.results()} | {t.name for t, _ in g.mutations}
    return [f"        v_{name} = self.get_{'buffer' if is_buffer else 'parameter'}({key!r})"
            for name, (key, is_buffer) in g.state.items() if name in used]


def _folded_method(g: Graph, init: list[str]) -> list[str]:
    """``ModelNew._ws_folded``: the values of ``g.init`` (compiler.hoist), computed again only when a
    parameter they read changes (its version counter, storage, device or dtype)."""
    params = [f"v_{n}" for n in g.init.state]
    outs = ", ".join(f"v_{o.name}" for o in g.init.outputs) + ("," if len(g.init.outputs) == 1 else "")
    return ["    def _ws_folded(self, _dev):",
            '        """What the forward computes from its parameters alone (warpsmith\'s fold at init), computed',
            "        on the first call and again whenever a parameter it reads changes (an optimizer step,",
            '        load_state_dict, .to()): keyed by each parameter\'s version counter, storage, device and dtype."""',
            *_state_lines(g.init),
            f"        key = tuple((t.data_ptr(), t._version, t.device, t.dtype) for t in ({', '.join(params)},))",
            '        if getattr(self, "_ws_fold_key", None) == key:',
            "            return self._ws_fold_values",
            *init,
            f"        self._ws_fold_values, self._ws_fold_key = ({outs}), key",
            "        return self._ws_fold_values",
            ""]


def _constant_lines(g: Graph) -> list[str]:
    """``ModelNew.__init__`` lines registering the tensor constants of differing values the forward
    built (``torch.tensor([1.0, 2.0])``) as non-persistent buffers, their values written out (so the
    ``state_dict`` stays ``Model``'s)."""
    out = []
    for key, t in g.constants.items():
        values = _render(t.detach().cpu().tolist()) if t.dim() else _render(t.item())
        out.append(f"        self.register_buffer({key!r}, torch.tensor({values}, dtype={t.dtype}).reshape("
                   f"{tuple(t.shape)!r}), persistent=False)  # a constant the forward builds")
    return out


def _model_new(g: Graph, shapes: list[tuple[int, ...] | None], body: list[str],
               values: list[Any] | None = None, init: list[str] | None = None) -> str:
    args = [f"v_{n.name}" for n in g.inputs]
    lines = ["class ModelNew(nn.Module):",
             "    def __init__(self, *args, **kwargs):",
             "        super().__init__()",
             "        ref = Model(*args, **kwargs)",
             "        for name, p in ref._parameters.items():",
             "            self.register_parameter(name, p)",
             "        for name, b in ref._buffers.items():",
             "            self.register_buffer(name, b, persistent=name not in ref._non_persistent_buffers_set)",
             "        for name, m in ref._modules.items():",
             "            self.add_module(name, m)",
             *_constant_lines(g),
             ""]
    if g.init is not None:
        lines += _folded_method(g, init or [])
    lines.append(f"    def forward(self, {', '.join(args)}):")
    checks = [f"tuple({a}.shape) != {s!r}" for a, s in zip(args, shapes) if s is not None]
    if checks:
        lines += [f"        if {' or '.join(checks)}:",
                  f"            raise ValueError('this ModelNew is specialized to input shapes {shapes}')"]
    for a, s, v in zip(args, shapes, values or [None] * len(args)):
        if s is None and isinstance(v, (bool, int, float, str, type(None))):  # captured as a constant
            lines += [f"        if {a} != {v!r}:",
                      f"            raise ValueError('this ModelNew is specialized to {a[2:]} == {v!r}')"]
    tensor_inputs = [a for a, s in zip(args, shapes) if s is not None]
    lines.append(f"        _dev = {tensor_inputs[0]}.device" if tensor_inputs else "        _dev = torch.device('cpu')")
    lines += _state_lines(g)
    if g.init is not None:
        outs = ", ".join(f"v_{o.name}" for o in g.init.outputs) + ("," if len(g.init.outputs) == 1 else "")
        lines.append(f"        {outs} = self._ws_folded(_dev)  # computed from the parameters alone (fold at init)")
    lines += body
    outs = [f"v_{o.name}" for o in g.outputs]
    lines.append(f"        return {outs[0]}" if g.single_output else f"        return ({', '.join(outs)},)")
    return "\n".join(lines) + "\n"
