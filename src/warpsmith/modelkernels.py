"""The generated kernels of a model: what ``torch.compile(model, backend="warpsmith")`` emits for it.

``warpsmith tune-model --generated-kernels`` runs the model through warpsmith's ``torch.compile``
backend (a :class:`~warpsmith.compiler.backend.Backend` of its own, so its reports are this run's;
``dynamic=False``: every size is compiled apart) once per size, and collects every compiled graph's
generated (emitted-program) kernels: the fused group's ops, the shapes it reads and writes, its
dtype, the launch config the backend emitted and the cost model's time for it on the target
(predicted), de-duplicated, with how often the compiled graphs ran them.

**What the configs are.** The backend emits each generated kernel at the config the compiler's
config search chooses for the run's target (:func:`warpsmith.cost.program.tune_kernel`, an
exhaustive walk priced by the cost model, the default kept at predicted ties; as ``warpsmith solve``
does), and verifies the graph at those configs before it runs. ``config`` is what was emitted;
``search_config`` / ``search_ms`` the search's answer, the same unless the graph was compiled with
the defaults. Nothing is measured (times are predicted) and nothing is written to the tuning DB for
these kernels: they are tuned by the compiler's search, on the cost model, each time a graph compiles.

Graphs that did not compile or did not verify run as the original ATen graph; their kernels never
run and are not collected (``graphs`` lists every graph's summary, saying why). A graph with symbolic
sizes is not collected either (its kernels' shapes are not fixed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from .compiler.backend import Backend
from .cost.program import config_ms, default_config, tune_kernel
from .targets import get_target


@dataclass
class GeneratedKernel:
    """One distinct generated kernel of the model (times are the cost model's: predicted)."""

    kind: str  # the group's kind: pointwise, rows...
    ops: tuple[str, ...]  # the fused ATen ops, in order
    reads: tuple[tuple[int, ...], ...]  # the shapes of the operands it reads
    writes: tuple[tuple[int, ...], ...]  # the shapes of its outputs
    dtype: str
    config: dict[str, int]  # the launch config the backend emitted
    predicted_ms: float  # the cost model's time of ``config`` on the target
    search_config: dict[str, int]  # the compiler's config search's choice (``config`` unless the graph kept defaults)
    search_ms: float
    calls: int = 0  # runs of the compiled graphs holding it, times its copies in each
    share: float = 0.0

    def key(self) -> tuple:
        return (self.kind, self.ops, self.reads, self.writes, self.dtype, tuple(sorted(self.config.items())))

    def describe(self) -> str:
        return f"generated {self.kind} kernel {'+'.join(self.ops)} reading {list(self.reads)} ({self.dtype})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "ops": list(self.ops), "reads": [list(s) for s in self.reads],
                "writes": [list(s) for s in self.writes], "dtype": self.dtype, "config": dict(self.config),
                "predicted_ms": self.predicted_ms, "search_config": dict(self.search_config),
                "search_ms": self.search_ms, "calls": self.calls, "share": self.share, "status": "generated"}


def _dtype(nodes: Sequence[Any]) -> str:
    dtypes = [n.dtype for n in nodes if getattr(n, "dtype", None) is not None]
    return str(dtypes[0]).replace("torch.", "") if dtypes else "?"


def _kernels_of(graph: Any, program: Any, target: Any) -> list[GeneratedKernel]:
    users = graph.users()
    out = []
    for k in program.kernels:
        g = k.group
        choice = k.choice or tune_kernel(graph, g, target, users)  # the backend's own search, when it ran
        config = k.config or default_config(g)
        out.append(GeneratedKernel(
            g.kind, tuple(n.op for n in g.nodes), tuple(tuple(s.shape) for s in k.slots),
            tuple(tuple(o.shape or ()) for o in k.outputs), _dtype(k.outputs or g.nodes), config.to_json(),
            config_ms(graph, g, config, target, users), choice.config.to_json(), choice.predicted_ms))
    return out


def generated_kernels(model: torch.nn.Module, runs: Sequence[Any], target: str) -> tuple[list[GeneratedKernel], list[str]]:
    """Run ``model`` compiled by warpsmith's backend on each of ``runs`` (inputs, as ``capture`` takes
    them) and collect its generated kernels (see the module docstring), most called first.

    Returns:
        The distinct kernels, and one summary line per compiled graph (what ran where, and why).
    """
    tgt = get_target(target)
    found: dict[tuple, GeneratedKernel] = {}

    def on_program(report: Any, graph: Any, program: Any) -> Any:
        if report.symbols:
            return None
        keys = []
        for gk in _kernels_of(graph, program, tgt):
            keys.append(gk.key())
            found.setdefault(gk.key(), gk)

        def tick() -> None:
            for key in keys:
                found[key].calls += 1
        return tick

    backend = Backend(on_program=on_program, target=target)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    # one code object may be compiled once per module and size (a Hugging Face model's forwards share
    # transformers' deprecation wrapper): past dynamo's recompile limit (8) a frame would run eagerly
    # and its kernels would be missed
    cfg = torch._dynamo.config
    limit = max(cfg.recompile_limit, 64 * max(1, len(runs)))
    with torch.no_grad(), cfg.patch(recompile_limit=limit,
                                    accumulated_recompile_limit=max(cfg.accumulated_recompile_limit, 4 * limit)):
        for inputs in runs:
            if isinstance(inputs, Mapping):
                compiled(**inputs)
            elif isinstance(inputs, tuple):
                compiled(*inputs)
            else:
                compiled(inputs)
    kernels = sorted(found.values(), key=lambda k: -k.calls * k.predicted_ms)
    return kernels, [r.summary() for r in backend.reports]
