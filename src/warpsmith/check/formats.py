"""Problems and candidates from public formats, in one internal shape.

``warpsmith check REFERENCE CANDIDATE`` accepts two formats. Each loader turns its files
into a :class:`CheckProblem` (the trusted side) and a :class:`Candidate` (the side under test).

**KernelBench** (``kernelbench.py``)

- REFERENCE is a ``.py`` file defining ``class Model(nn.Module)``, ``get_inputs()`` and,
  optionally, ``get_init_inputs()`` (``()`` when absent).
- CANDIDATE is a ``.py`` file defining ``class ModelNew``, which takes the same constructor
  arguments.
- Weights start out identical because torch's RNG is seeded with the same value just before
  ``Model(*init)`` and just before ``ModelNew(*init)``. Nothing is copied between the two.
- ``--set NAME=VALUE`` rewrites a top-level ``NAME = <expr>`` assignment whose value is an int
  or a float. The rewrite happens in the source of both modules, before either runs, so derived
  constants and import-time code see the new value.
- A candidate declares nondeterminism with a top-level ``WARPSMITH_NONDETERMINISTIC = True``.

**FlashInfer-Bench / SOL-ExecBench** (``flashinfer.py`` and ``solution.py``; their
docstrings list the supported subset)

- REFERENCE is a problem folder holding ``definition.json`` and ``workload.jsonl``, or the
  ``definition.json`` itself.
- CANDIDATE is a ``solution.json``, or a folder that contains one.
- ``--set NAME=VALUE`` overrides a ``var`` axis in every workload.

Errors in the files (missing class, malformed JSON, unsupported feature, unknown ``--set``
name) raise :class:`warpsmith.errors.InvalidInputError`, which the CLI turns into exit code 2.
An exception raised by the candidate's own code while it loads raises :class:`CandidateError`.
The harness reports that as a rejection (``candidate_error``), not as bad input.
"""
from __future__ import annotations

import ast
import contextlib
import os
import itertools
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from torch.overrides import TorchFunctionMode

from ..core.errors import InvalidInputError
from ..core.opspec import DISTRIBUTIONS as SPEC_DISTRIBUTIONS, STRUCTURED

Number = int | float
Inputs = list[Any]
Outputs = tuple[Any, ...]
#: The float input distributions trials cycle through (drawn by :func:`warpsmith.core.opspec.draw`),
#: each applied to every floating-point input tensor, integer and bool inputs left as drawn:
#: the spec's random distributions, less those an arbitrary problem may not accept ("large" needs
#: the op's own scale, "specials" (NaN/Inf inputs) would make many references reject their
#: inputs), then the structured ones (:data:`~warpsmith.core.opspec.STRUCTURED`): exact zeros
#: (``sparse``), all-zero rows (``padded``), repeated rows, powers of two and subnormals of the
#: input's dtype. A trial per distribution by default, so each is drawn at least once per workload.
DISTRIBUTIONS: tuple[str, ...] = tuple(d for d in SPEC_DISTRIBUTIONS if d not in ("large", "specials")) + STRUCTURED


class CandidateError(Exception):
    """The candidate's own code raised while being imported or constructed."""


@dataclass(frozen=True)
class Workload:
    """One concrete instance of a problem: sizes (and scalar inputs) for one set of draws.

    Args:
        label: how the report names it (a workload uuid, or ``get_inputs()``).
        axes: every axis value (FlashInfer), empty for KernelBench.
        scalars: values of scalar inputs given by the workload.
    """

    label: str
    axes: Mapping[str, int] = field(default_factory=dict)
    scalars: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class CheckProblem:
    """The trusted side of a check, independent of the format it came from.

    ``draw_inputs(workload, gen, dist, device)`` returns fresh positional arguments. It
    depends only on ``gen``, and it is called only after the candidate has been loaded.
    ``run_reference`` runs the reference on the arguments as given, in the working dtype.
    ``run_oracle`` runs it on float64 copies of every floating-point tensor. Both return a
    tuple of outputs, in ``output_names`` order. ``allocate_outputs`` (FlashInfer only) gives
    uninitialised destination buffers for a destination-passing candidate.
    """

    name: str
    format: str
    path: Path
    workloads: list[Workload]
    distributions: tuple[str, ...]
    output_names: tuple[str, ...]
    draw_inputs: Callable[[Workload, torch.Generator, str, torch.device], Inputs]
    run_reference: Callable[[Inputs], Outputs]
    run_oracle: Callable[[Inputs], Outputs]
    allocate_outputs: Callable[[Workload, torch.device], list[torch.Tensor]] | None = None
    seed: int = 0
    overrides: dict[str, Number] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    context: Any = None  # format-specific state the candidate loader needs
    set_eval: Callable[[], None] = lambda: None  # puts the reference model in eval mode (KernelBench)

    @property
    def child_context(self) -> dict[str, Any]:
        """What the candidate's process needs of ``context`` to load the candidate (plain data only)."""
        ctx = self.context or {}
        return {k: ctx[k] for k in ("init", "definition") if k in ctx}


@dataclass
class Candidate:
    """The side under test. ``call(args, outs)`` runs it once. ``outs`` holds the destination
    buffers when ``destination_passing`` is set, and is None otherwise."""

    name: str
    path: Path
    call: Callable[[Inputs, list[torch.Tensor] | None], Any]
    destination_passing: bool = False
    nondeterministic: bool = False
    state: Callable[[], list[torch.Tensor]] = lambda: []
    cleanup: Callable[[], None] = lambda: None
    set_eval: Callable[[], None] = lambda: None


# ---- --set ------------------------------------------------------------------------------------
_SET_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\S+)\s*$")


def parse_overrides(items: Sequence[str] | Mapping[str, Any] | None) -> dict[str, Number]:
    """``["dim=64", "eps=1e-5"]`` → ``{"dim": 64, "eps": 1e-05}`` (ints stay ints)."""
    if not items:
        return {}
    if isinstance(items, Mapping):
        items = [f"{k}={v}" for k, v in items.items()]
    out: dict[str, Number] = {}
    for item in items:
        m = _SET_ITEM.match(item)
        if not m:
            raise InvalidInputError("--set", "NAME=VALUE with a number VALUE, e.g. batch_size=8", item)
        name, text = m.groups()
        try:
            value: Number = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise InvalidInputError(f"--set {name}", "an int or float value", text) from None
        if name in out:
            raise InvalidInputError("--set", "each NAME once", f"{name} given twice")
        out[name] = value
    return out


# ---- module loading ---------------------------------------------------------------------------
_counter = itertools.count()


def unique_module_name(kind: str) -> str:
    """A fresh module name that says nothing of the harness (a candidate can read its own ``__name__``);
    ``kind`` only documents the call site."""
    return f"module_{next(_counter)}_{os.urandom(4).hex()}"


@contextlib.contextmanager
def on_sys_path(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for the duration (sibling imports of a loaded file)."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def exec_module(path: Path, name: str, tree: ast.Module | None = None, source: str | None = None) -> types.ModuleType:
    """Execute a Python file (or its rewritten ``tree``) as a fresh module registered as ``name``.

    The module stays in ``sys.modules`` under its unique name (Triton and dataclasses look
    their module up there); :func:`forget_module` removes it. Exceptions propagate unchanged.
    """
    filename = str(path)
    if source is not None:  # source held in the file (a definition.json's reference): a pseudo-file of its own,
        filename = f"{path}:reference"  # so that inspect (and so @triton.jit) finds the functions' lines
        import linecache

        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    if tree is None:
        tree = ast.parse(source if source is not None else path.read_text(), filename=filename)
    code = compile(tree, filename, "exec")
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module


def forget_module(name: str, folder: Path | None = None) -> None:
    """Drop ``name`` (and, with ``folder``, every module imported from under it) from ``sys.modules``."""
    sys.modules.pop(name, None)
    if folder is None:
        return
    root = str(folder.resolve())
    for key, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and f.startswith(root):
            sys.modules.pop(key, None)


def top_level_assignments(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """Top-level ``NAME = expr`` / ``NAME: T = expr`` statements, by name."""
    found: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.setdefault(node.target.id, []).append(node)
    return found


def rewrite_constants(tree: ast.Module, values: Mapping[str, Number]) -> ast.Module:
    """Replace the value of every top-level assignment to a name in ``values`` by that literal."""
    assigns = top_level_assignments(tree)
    for name, value in values.items():
        for node in assigns.get(name, []):
            const = ast.copy_location(ast.Constant(value), node.value)  # type: ignore[attr-defined]
            node.value = const  # type: ignore[attr-defined]
    return ast.fix_missing_locations(tree)


def as_outputs(result: Any, names: Sequence[str]) -> Outputs:
    """Normalise what a call returned to a tuple of outputs (in ``names`` order for a dict)."""
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)):
        return tuple(result)
    if isinstance(result, dict) and names and all(n in result for n in names):
        return tuple(result[n] for n in names)
    return (result,)


def fork_rng(device: torch.device) -> contextlib.AbstractContextManager:
    """Fork torch's global RNG (and the GPU's when the problem runs there)."""
    devices = [device.index or 0] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices)


# ---- the oracle ------------------------------------------------------------------------------
_LOW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_UPCASTS = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}


class Float64Oracle(TorchFunctionMode):
    """Keep a reference in float64 while it computes the oracle.

    References often upcast explicitly (``x.to(torch.float32)``, ``x.float()``,
    ``torch.zeros(..., dtype=torch.float32)``). Fed float64 inputs, such a reference would drop
    back to float32 and the "oracle" would be no better than the reference itself. While this
    mode is active, a float32, float16 or bfloat16 target dtype is replaced by float64. That
    covers ``dtype=`` keywords, ``Tensor.to(dtype)`` and ``.float()``, ``.half()`` and
    ``.bfloat16()``. Casts to fp8 or to integers are left alone.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: D105
        kwargs = dict(kwargs or {})
        if func in _UPCASTS and args and isinstance(args[0], torch.Tensor) and args[0].is_floating_point():
            return args[0].to(torch.float64)
        if isinstance(kwargs.get("dtype"), torch.dtype) and kwargs["dtype"] in _LOW_FLOATS:
            kwargs["dtype"] = torch.float64
        if func is torch.Tensor.to:
            args = tuple(torch.float64 if isinstance(a, torch.dtype) and a in _LOW_FLOATS else a for a in args)
        return func(*args, **kwargs)


# ---- dispatch ---------------------------------------------------------------------------------
def problem_format(path: Path) -> str:
    """``kernelbench`` for a ``.py`` file; ``flashinfer`` for a folder or a ``.json`` definition."""
    if path.is_dir() or path.suffix == ".json":
        return "flashinfer"
    if path.suffix == ".py":
        return "kernelbench"
    raise InvalidInputError("REFERENCE", "a KernelBench .py file, or a problem folder with definition.json",
                            str(path))


def load_problem(path: str | Path, overrides: Mapping[str, Number] | None = None, *, seed: int = 0,
                 device: str | torch.device = "cpu", cap: int | None = None) -> CheckProblem:
    """Load REFERENCE (file or folder) with ``--set`` overrides applied; ``cap``: the CPU cap of a
    FlashInfer-Bench / SOL-ExecBench problem's axes (:mod:`.flashinfer`; KernelBench: use ``--set``)."""
    path, device = Path(path), torch.device(device)
    if not path.exists():
        raise InvalidInputError("REFERENCE", "an existing file or folder", str(path))
    if problem_format(path) == "kernelbench":
        if cap is not None:
            raise InvalidInputError("--cpu-cap", "a FlashInfer-Bench / SOL-ExecBench problem (KernelBench sizes are "
                                    "set with --set)", str(path))
        from .kernelbench import load_problem as load

        return load(path, dict(overrides or {}), seed=seed, device=device)
    from .flashinfer import load_problem as load_fi

    return load_fi(path, dict(overrides or {}), seed=seed, device=device, cap=cap)


def candidate_form(path: str | Path, fmt: str) -> Path:
    """CANDIDATE's file for a problem of format ``fmt`` (:func:`problem_format`), or InvalidInputError
    when it has the other format's form: a question of names, answered before anything runs."""
    path = Path(path)
    if not path.exists():
        raise InvalidInputError("CANDIDATE", "an existing file or folder", str(path))
    if fmt == "kernelbench":
        if path.is_dir() or path.suffix != ".py":
            raise InvalidInputError("CANDIDATE", "a KernelBench .py file defining ModelNew (REFERENCE is a .py file)",
                                    str(path))
        return path
    if path.is_file():
        if path.suffix == ".py":
            raise InvalidInputError("CANDIDATE", "a solution.json, or a folder holding one (REFERENCE is a "
                                    "FlashInfer-Bench / SOL-ExecBench problem)", str(path))
        return path
    if (path / "solution.json").exists():
        return path / "solution.json"
    found = sorted(path.glob("solution*.json"))
    if len(found) == 1:
        return found[0]
    raise InvalidInputError("CANDIDATE", "a solution.json, or a folder with exactly one solution*.json",
                            f"{path} ({len(found)} found)")


def load_candidate(path: str | Path, problem: CheckProblem, *, device: str | torch.device = "cpu") -> Candidate:
    """Load CANDIDATE for ``problem``. Raises :class:`CandidateError` if the candidate's code raises."""
    path, device = candidate_form(path, problem.format), torch.device(device)
    if problem.format == "kernelbench":
        from .kernelbench import load_candidate as load
    else:
        from .solution import load_candidate as load
    return load(path, problem, device=device)
