"""The ``torch.compile`` backend and :func:`warpsmith.compile`: any module or function, inference and training.

``torch.compile(model, backend="warpsmith")`` (registered when warpsmith is installed, through the
``torch_dynamo_backends`` entry point, and again on import of this module) hands every graph dynamo
captures to AOTAutograd, which gives ATen graphs: one for inference, or a forward and a backward for
training. Each graph goes through the compiler's own stages, as ``warpsmith solve`` takes a problem:
:func:`~.ir.build_fx` (the IR), :func:`~.lower.lower` (library ops), a partitioner (codegen groups),
:func:`~.emit.emit_function` (a self-contained module defining ``run``), loaded from a file (Triton
reads its kernels' source).

**Verified before use.** A compiled graph runs only after it matched the original graph on two
fresh draws of its inputs (same shapes and dtypes, or for a graph with symbolic sizes, at three
assignments of its sizes that satisfy its guards; floating inputs standard normal, integer ones
zero, booleans random): every floating output within the error criterion the verifier and
``warpsmith check`` use (:func:`warpsmith.core.error_contract.within_reference`: at most 4x the eager
graph's own error against the graph run in float64, plus two ulps of the output's scale), NaNs in the
same places, other outputs equal. A graph that fails, cannot be compiled (an op the emitter cannot
write, a symbolic size a kernel's text would carry) or has no float64 oracle runs as the original ATen graph, and the report says
why. Nothing unverified runs silently.

**Launch configs.** Each generated kernel of a graph with fixed sizes is emitted at the config the
compiler's config search chooses for the target (:func:`warpsmith.cost.program.tune_kernel`, as
``warpsmith solve`` does: the default kept at predicted ties); the target is the device's
(:func:`warpsmith.targets.current_device`: on a CPU ``WARPSMITH_TARGET``, default h100) unless
``Backend(target=...)`` names one. A graph with symbolic sizes keeps the defaults (its kernels'
shapes are not fixed). Library calls keep their launchers' defaults here (``solve`` tunes them).

Tensor constants the program built (``get_attr`` nodes) become the generator ``full`` when all their
elements hold one value; the others (a Hugging Face Llama's empty tensors, ``torch.tensor([1., 2.])``)
are passed to the compiled program as extra inputs, never inlined. Backward graphs are compiled and
verified as forwards are; an ATen op returning ``None`` (a gradient nobody needs) stays whole.

Every graph's report (:class:`GraphReport`: the IR, the lowering notes, kernels, library calls,
fallbacks, the verification) is kept by the backend instance; ``warpsmith.compile`` returns it with
the compiled callable.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import re
import tempfile
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..core.error_contract import within_reference
from .emit import emit_function
from .fuse import partition, problems
from .ir import is_generator, build_fx
from .lower import lower
from .symbolic_shapes import ShapeGuardFailed, SymbolicShapes, has_symbols

_UNIT = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53}


@dataclass
class GraphReport:
    """What happened to one ATen graph: ``status`` is ``compiled`` (verified, runs warpsmith's
    program) or ``eager`` (runs the original graph; ``reason`` says why)."""

    kind: str  # inference, forward, backward
    status: str = "eager"
    reason: str = ""
    ir: str = ""
    notes: list[str] = field(default_factory=list)
    kernels: int = 0
    kernel_configs: list[str] = field(default_factory=list)  # each generated kernel's launch config, in order
    library_calls: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # one line per verified output and draw
    source: str = ""  # the emitted module, when one was written
    # symbolic shapes (compiler.symbolic_shapes): symbol -> description, the guards, the sizes verified,
    # and how many calls violated warpsmith's guards and ran the original graph
    symbols: dict[str, str] = field(default_factory=dict)
    guards: list[str] = field(default_factory=list)
    sizes_verified: list[dict[str, int]] = field(default_factory=list)
    guard_fallbacks: int = 0
    # tensor constants of differing values passed to the program as extra inputs (name: dtype[shape])
    constants: list[str] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)  # compiler.coverage of the compiled program

    def summary(self) -> str:
        what = (f"{self.kernels} generated kernel(s), library {', '.join(self.library_calls) or 'none'}, "
                f"ATen fallbacks {', '.join(self.fallbacks) or 'none'}")
        if self.symbols:
            what += f"; symbolic sizes {', '.join(self.symbols)}"
        return f"{self.kind}: {self.status}" + (f" ({self.reason})" if self.reason else "") + f"; {what}"

    def shape_lines(self) -> list[str]:
        """The symbols, the guards and the sizes verified (empty for a static graph)."""
        if not self.symbols:
            return []
        return ([f"symbol {d}" for d in self.symbols.values()] + [f"guard {g}" for g in self.guards] +
                [f"verified at sizes {v}" for v in self.sizes_verified] +
                ([f"{self.guard_fallbacks} call(s) outside warpsmith's guards ran the original graph"]
                 if self.guard_fallbacks else []))


class Backend:
    """A ``torch.compile`` backend (``torch.compile(m, backend=Backend())``) that keeps its reports.

    ``on_program(report, graph, program)``, when given, is told of every graph that compiled (its
    report, the IR graph and the emitted :class:`~.emit.Program`, whose ``kernels`` are the generated
    ones with their configs) and may return a function of no arguments, then called each time the
    compiled graph runs (``warpsmith tune-model --generated-kernels`` counts calls so). ``target``:
    the hardware model the generated kernels' configs are chosen for (a name, default the device's)."""

    def __init__(self, partitioner: Callable[..., Any] = partition, verify: bool = True, draws: int = 2,
                 on_program: Callable[..., Callable[[], None] | None] | None = None,
                 target: str | None = None) -> None:
        self.partitioner, self.verify, self.draws, self.on_program = partitioner, verify, draws, on_program
        self.target = target
        self.reports: list[GraphReport] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        from torch._dynamo.backends.common import aot_autograd

        return aot_autograd(fw_compiler=self._compiler("forward"), bw_compiler=self._compiler("backward"),
                            inference_compiler=self._compiler("inference"),
                            decompositions=_decompositions())(gm, example_inputs)

    def _compiler(self, kind: str) -> Callable[..., Any]:
        def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
            emitted: list[Any] = []
            fn, report = compile_graph_module(gm, example_inputs, kind, self.partitioner, self.verify, self.draws,
                                              emitted=emitted, target=self.target)
            self.reports.append(report)
            if self.on_program is not None and report.status == "compiled" and emitted:
                tick = self.on_program(report, *emitted[0])
                if tick is not None:
                    return _counted(fn, tick)
            return fn
        return compile_graph


class EagerFallbackWarning(UserWarning):
    """A graph given to the warpsmith backend runs as the original ATen graph (eagerly)."""


_WARNED: set[str] = set()


def _warn_eager(report: GraphReport) -> None:
    """Warn, once per kind of reason and process, that a graph falls back to eager: without it only
    the reports (``Compiled.explain()``, ``BACKEND.reports``) or ``torch._dynamo.explain()`` show it."""
    key = re.split(r"[\d(]", ":".join(report.reason.split(":")[:2]))[0].strip()  # "rejected: max error"
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"warpsmith: a {report.kind} graph runs eagerly (original ATen graph), not warpsmith's "
                  f"kernels: {report.reason}. Later graphs falling back for this reason are not warned "
                  f"about; see the backend's reports (warpsmith.compile(...).explain()).",
                  EagerFallbackWarning, stacklevel=2)


def compile_graph_module(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str = "inference",
                         partitioner: Callable[..., Any] = partition, verify: bool = True,
                         draws: int = 2, emitted: list[Any] | None = None,
                         target: str | None = None) -> tuple[Callable[..., Any], GraphReport]:
    """One ATen graph -> (the callable to run, its report). The callable is the original graph
    (boxed like it) unless a verified program was built; then an :class:`EagerFallbackWarning` says
    so (once per kind of reason). ``emitted``, when given, gets ``(IR graph, Program)`` appended once
    a program is emitted (whether or not it then verifies: the report's status says). ``target``: the
    hardware model of the generated kernels' config search (a name; default the device's)."""
    fn, report = _compile_graph_module(gm, example_inputs, kind, partitioner, verify, draws, emitted, target)
    if report.status != "compiled":
        _warn_eager(report)
    return fn, report


def _compile_graph_module(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str,
                          partitioner: Callable[..., Any], verify: bool, draws: int,
                          emitted: list[Any] | None = None,
                          target: str | None = None) -> tuple[Callable[..., Any], GraphReport]:
    report = GraphReport(kind)
    eager = _boxed(gm)
    sym = None
    try:
        if has_symbols(example_inputs):  # before any int() of a size: that would specialize it (a guard)
            sym = SymbolicShapes.from_graph(gm, example_inputs)  # ValueError: why it is not served
            metas = [(tuple(sym.probe_value(e) for e in ex), x.dtype, x.device) if isinstance(x, torch.Tensor) else None
                     for x, ex in zip(example_inputs, sym.inputs)]  # tensors at their probe shapes
            report.symbols = {n: d.describe() for n, d in sym.dims.items()}
            report.guards = sym.guard_lines()
        else:
            metas = [_meta(x) for x in example_inputs]
            if any(m is None for m in metas):
                report.reason = "an input that is not a tensor"
                return eager, report
        kept, positions = _without_none_outputs(gm)
        constants = _lift_constants(kept)
        report.constants = [f"{name}: {str(t.dtype).replace('torch.', '')}{list(t.shape)}" for name, t in constants]
        with sym.probing() if sym is not None else contextlib.nullcontext():
            g = build_fx(kept.graph)
            if sym is not None:
                sym.mark(g, kept)
            report.notes = lower(g)
            part = partitioner(g)
            bad = problems(g, part)
            if bad:
                raise ValueError("unusable partition: " + "; ".join(bad))
            grouped = part.group_of()
            for n in g.nodes:
                if n.kind in ("pointwise", "reduction", "scan") and n.name not in grouped and not is_generator(n):
                    n.kind = "aten"
            report.ir = g.format()
            prog = emit_function(g, part, f"{kind} graph", [tuple(m[0]) if m is not None else None for m in metas]
                                 + [tuple(t.shape) for _, t in constants],
                                 configure=None if sym is not None else _config_search(target))
            text = prog.text if sym is None else sym.finalize(prog, [f"v_{n.name}" for n in g.inputs])
        report.coverage = prog.coverage
        report.source = text
        report.kernels = len(prog.kernels)
        report.kernel_configs = [k.config.meta() if k.config is not None else "default" for k in prog.kernels]
        report.library_calls = [n.op for n in prog.library_calls]
        report.fallbacks = [str(n.target).replace("aten.", "") for n in prog.fallbacks]
        run = _load(text, kind)
        if emitted is not None:
            emitted.append((g, prog))
    except Exception as e:  # noqa: BLE001 - any failure leaves the original graph in place, said in the report
        report.reason = f"not compiled: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        if sym is not None:
            report.reason += " (symbolic shapes)"
        return eager, report

    lifted = [t for _, t in constants]

    def compiled(*args: Any) -> list[Any]:
        try:
            out = list(run(*args, *lifted))
        except RuntimeError as e:  # a size outside warpsmith's guards: this call runs the original graph
            if type(e).__name__ != ShapeGuardFailed.__name__:
                raise
            report.guard_fallbacks += 1
            return _as_list(gm(*args))
        for pos in positions:
            out.insert(pos, None)
        return out

    if verify:
        if sym is None:
            failure = _verify(gm, compiled, metas, draws, report)
        else:  # at the hint and at a smaller and a larger size that satisfy every guard
            failure = ""
            for i, values in enumerate(sym.sizes()):
                shapes = sym.concrete(values)
                at = [(s, x.dtype, x.device) if isinstance(x, torch.Tensor) else s for s, x in zip(shapes, example_inputs)]
                failure = _verify(gm, compiled, at, draws if i == 0 else 1, report, f"sizes {values}, ")
                if failure:
                    failure += f" at sizes {values}"
                    break
                sym.verified.append(values)
            report.sizes_verified = list(sym.verified)
        if failure:
            report.reason = failure
            return eager, report
    report.status = "compiled"
    return _boxed(compiled), report


def _decompositions() -> dict[Any, Any]:
    """The backward ops AOTAutograd leaves whole, decomposed into the pointwise ops and last-dim
    reductions codegen fuses (``sigmoid_backward`` becomes ``grad * y * (1 - y)``, ...)."""
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    return get_decompositions([aten.sigmoid_backward, aten.tanh_backward, aten.threshold_backward,
                               aten.gelu_backward, aten.silu_backward, aten.hardtanh_backward,
                               aten.leaky_relu_backward, aten.elu_backward, aten.softplus_backward,
                               aten._softmax_backward_data, aten._log_softmax_backward_data])


# ---- pieces ----------------------------------------------------------------------------------------
def _meta(x: Any) -> tuple[tuple[int, ...], torch.dtype, torch.device] | None:
    if not isinstance(x, torch.Tensor):
        return None
    try:
        shape = tuple(int(s) for s in x.shape)
    except (TypeError, RuntimeError):
        return None
    if any(not isinstance(s, int) for s in x.shape):
        return None
    return shape, x.dtype, x.device


def _without_none_outputs(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list[int]]:
    """A copy of ``gm`` returning only its tensor outputs, and where the ``None`` ones go back (a
    backward graph returns None for inputs that need no gradient)."""
    # the graph is copied, not the module: its tensor constants are shared (deep-copying them under
    # the fake mode AOTAutograd calls compilers in fails for real tensors)
    graph = torch.fx.Graph()
    res = graph.graph_copy(gm.graph, {})
    items = list(res) if isinstance(res, (list, tuple)) else [res]
    positions = [i for i, r in enumerate(items) if r is None]
    graph.output(tuple(r for r in items if r is not None))
    g2 = torch.fx.GraphModule(gm, graph)
    return g2, positions


def _lift_constants(gm: torch.fx.GraphModule) -> list[tuple[str, torch.Tensor]]:
    """Turn the tensor constants of ``gm`` (``get_attr`` nodes: tensors the program built from Python
    values, e.g. ``torch.tensor([1.0, 2.0])``) whose elements do not all hold one value into trailing
    placeholders, in place; returns (placeholder name, the real tensor) for each, in order. The
    compiled program receives them as extra arguments (never inlined as a wrong value); constants of
    one value stay ``get_attr`` and become the generator ``full`` in the IR."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from .ir import uniform_value

    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    lifted: list[tuple[str, torch.Tensor]] = []
    for n in list(graph.nodes):
        if n.op != "get_attr":
            continue
        t = getattr(gm, n.target, None)
        if not isinstance(t, torch.Tensor):
            continue
        with unset_fake_temporarily():  # AOTAutograd calls compilers under its fake mode; t is real
            if uniform_value(t) is not None:
                continue
            t = t.detach()
        anchor = placeholders[-1] if placeholders else next(iter(graph.nodes))
        with (graph.inserting_after(anchor) if placeholders else graph.inserting_before(anchor)):
            p = graph.placeholder(f"_ws_constant_{len(lifted)}")
        p.meta = dict(n.meta)
        if "val" not in p.meta:
            from torch._subclasses.fake_tensor import FakeTensorMode

            with unset_fake_temporarily():
                p.meta["val"] = FakeTensorMode(allow_non_fake_inputs=True).from_tensor(t)
        n.replace_all_uses_with(p)
        graph.erase_node(n)
        placeholders.append(p)
        lifted.append((p.name, t))
    if lifted:
        gm.recompile()
    return lifted


def _load(text: str, kind: str) -> Callable[..., Any]:
    """Import the emitted module from a file of its own (Triton reads kernel source from files)."""
    where = Path(tempfile.mkdtemp(prefix="warpsmith-compiled-"))
    name = f"warpsmith_compiled_{kind}_{uuid.uuid4().hex[:12]}"
    path = where / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def _boxed(fn: Any) -> Callable[..., Any]:
    """AOTAutograd's calling convention: one list of arguments, cleared by the callee."""
    def call(args: list[Any]) -> Any:
        xs = list(args)
        args.clear()
        return fn(*xs)
    call._boxed_call = True  # type: ignore[attr-defined]
    return call


def _counted(fn: Any, tick: Callable[[], None]) -> Callable[..., Any]:
    """``fn`` (boxed) calling ``tick()`` before each run."""
    def call(args: list[Any]) -> Any:
        tick()
        return fn(args)
    call._boxed_call = True  # type: ignore[attr-defined]
    return call


def _draw(meta: Any, gen: torch.Generator) -> Any:
    if isinstance(meta, int):  # a symbolic size's value
        return meta
    shape, dtype, device = meta
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype=dtype, device=device)
    if dtype == torch.bool:
        return (torch.rand(shape, generator=gen) < 0.5).to(device)
    return torch.zeros(shape, dtype=dtype, device=device)


def _config_search(target: str | None) -> Callable[..., Any]:
    """``configure`` for :func:`~.emit.emit_function`: each generated kernel's config by the compiler's
    config search for ``target`` (a name; None: the device's target)."""
    from ..cost.program import tune_kernel
    from ..targets import current_device, get_target

    tgt = get_target(target) if target is not None else current_device().target
    return lambda graph, group, users: tune_kernel(graph, group, tgt, users)


def _own_norm_reference(kind: str) -> Callable[..., tuple[torch.Tensor, ...]]:
    """warpsmith's ``warpsmith::<kind>`` computed by its spec's reference in the inputs' own dtype
    (float64 in the oracle), with the op's outputs: (y, x + residual or an empty tensor, [mean,] rstd)."""
    from ..ops.norm.spec import normalize

    def reference(x: torch.Tensor, weight: Any, *rest: Any) -> tuple[torch.Tensor, ...]:
        bias, residual, eps = rest if kind == "layer_norm" else (None, *rest)
        s = x + residual if residual is not None else x
        y, mean, rstd = normalize(s, kind, eps, weight, bias)
        return (y.to(x.dtype), s if residual is not None else x.new_empty((0,))) + \
            (() if mean is None else (mean,)) + (rstd,)
    return reference


def _oracle_module(gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """What the float64 oracle runs: ``gm``, with warpsmith's own norm ops (kernels for 16- and 32-bit
    floats only) replaced by their references (:func:`_own_norm_reference`)."""
    own = {torch.ops.warpsmith.rms_norm.default: "rms_norm", torch.ops.warpsmith.layer_norm.default: "layer_norm"} \
        if hasattr(torch.ops, "warpsmith") and hasattr(torch.ops.warpsmith, "rms_norm") else {}
    if not any(n.op == "call_function" and n.target in own for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for n in graph.nodes:
        if n.op == "call_function" and n.target in own:
            n.target = _own_norm_reference(own[n.target])
    return torch.fx.GraphModule(gm, graph)


def _verify(gm: torch.fx.GraphModule, compiled: Callable[..., Any], metas: list[Any], draws: int,
            report: GraphReport, where: str = "") -> str:
    """'' when the compiled graph matches the original on ``draws`` fresh input draws, else why not."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():
        for seed in range(draws):
            gen = torch.Generator().manual_seed(0x5EED + seed)
            inputs = [_draw(m, gen) for m in metas]
            try:
                expected = _as_list(gm(*inputs))
                oracle = _as_list(_oracle_module(gm)(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                       for x in inputs]))
            except Exception as e:  # noqa: BLE001
                return f"no float64 oracle for this graph ({type(e).__name__}: {' '.join(str(e).split())[:200]})"
            try:
                got = _as_list(compiled(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
            except Exception as e:  # noqa: BLE001
                return f"rejected: the compiled graph raised {type(e).__name__}: {' '.join(str(e).split())[:200]}"
            if len(got) != len(expected):
                return f"rejected: {len(got)} outputs, the graph has {len(expected)}"
            for i, (y, ref, ora) in enumerate(zip(got, expected, oracle)):
                why = _judge(y, ref, ora)
                if why.startswith("rejected"):
                    return f"{why} (output {i}, draw {seed})"
                report.checks.append(f"{where}output {i}, draw {seed}: {why}")
    return ""


def _judge(y: Any, ref: Any, ora: Any) -> str:
    if not isinstance(ref, torch.Tensor):
        return "ok (not a tensor)" if y is None and ref is None or y == ref else f"rejected: {y!r} != {ref!r}"
    if not isinstance(y, torch.Tensor) or y.shape != ref.shape or y.dtype != ref.dtype:
        return (f"rejected: got {getattr(y, 'dtype', type(y).__name__)}{tuple(getattr(y, 'shape', ()))}, "
                f"expected {ref.dtype}{tuple(ref.shape)}")
    if not ref.is_floating_point():
        return "ok (exact)" if torch.equal(y, ref) else "rejected: a non-float output differs"
    o = ora.to(torch.float64)
    if not torch.equal(torch.isnan(y), torch.isnan(o)):
        return "rejected: NaN where the float64 graph has none, or the reverse"
    finite = torch.isfinite(o)
    if not torch.equal(y[~finite].double().nan_to_num(), o[~finite].nan_to_num()):
        return "rejected: infinities differ"
    yf, rf, of = y[finite].double(), ref[finite].double(), o[finite]
    if of.numel() == 0:
        return "ok (no finite element)"
    err = float((yf - of).abs().max())
    ref_err = float((rf - of).abs().max())
    largest = float(of.abs().max())
    ok, allowed = within_reference(err, ref_err, largest, _UNIT.get(ref.dtype, 2.0 ** -24))
    return (f"{'ok' if ok else 'rejected'}: max error {err:.3g} vs float64, eager {ref_err:.3g}, "
            f"allowed {allowed:.3g}")


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


# ---- warpsmith.compile -------------------------------------------------------------------------------
@dataclass
class Compiled:
    """The result of :func:`compile`: call it like the original; ``reports`` lists every graph."""

    fn: Callable[..., Any]
    backend: Backend

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def reports(self) -> list[GraphReport]:
        return self.backend.reports

    def explain(self) -> str:
        out = []
        for r in self.reports:
            out += [r.summary(), *(f"  {ln}" for ln in r.shape_lines()), *(f"  {n}" for n in r.notes),
                    *(f"  {ln}" for ln in r.ir.splitlines()),
                    *(f"  verified {c}" for c in r.checks)]
        return "\n".join(out)


def compile(fn_or_module: Callable[..., Any], example_inputs: Sequence[Any] | None = None, *,
            fullgraph: bool = False, verify: bool = True, dynamic: bool | None = False) -> Compiled:  # noqa: A001
    """Compile a module or function with warpsmith (through ``torch.compile``'s capture).

    Args:
        fn_or_module: an ``nn.Module`` or a function of tensors.
        example_inputs: if given, the program is compiled (and verified) now, on these inputs;
            otherwise on its first call.
        fullgraph: refuse graph breaks (as ``torch.compile``).
        dynamic: as ``torch.compile``'s: False compiles every shape apart, True compiles symbolic
            sizes (one program serves a range of sizes, see :mod:`.symbolic_shapes`), None lets dynamo
            make a size symbolic once it has changed (automatic dynamic).
        verify: check each compiled graph against the original before using it (see the module
            docstring); False only for experiments: an unverified graph is then used as compiled.

    Returns:
        A :class:`Compiled` callable; its ``reports`` say what ran where, and ``explain()`` prints them.
    """
    backend = Backend(verify=verify)
    fn = torch.compile(fn_or_module, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    compiled = Compiled(fn, backend)
    if example_inputs is not None:
        compiled(*example_inputs)
    return compiled


BACKEND = Backend()  # the instance registered as "warpsmith"; its reports accumulate in BACKEND.reports


def warpsmith_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """The backend ``torch.compile(..., backend="warpsmith")`` uses."""
    return BACKEND(gm, example_inputs)


def register() -> None:
    """Register ``"warpsmith"`` with dynamo, unless an installed entry point does it (dynamo then loads
    this module and registers the entry point's function itself: registering here too would clash)."""
    from importlib.metadata import entry_points

    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    installed = any(e.name == "warpsmith" for e in entry_points(group="torch_dynamo_backends"))
    if "warpsmith" not in _COMPILER_FNS and not installed:
        register_backend(warpsmith_backend, name="warpsmith")


register()
