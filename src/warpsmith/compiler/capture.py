"""Capture: a KernelBench problem file -> an exported ATen graph with shapes and dtypes.

The problem's ``Model`` is built with torch's RNG seeded (as ``warpsmith check`` builds it), its
inputs come from ``get_inputs()``, and ``torch.export`` traces ``forward`` with fake tensors into
an ATen graph (the pre-dispatch IR: ``aten.linear``, ``aten.softmax.int``, ... are kept whole, so
lowering sees the program as written). Every failure is an :class:`InvalidInputError` (exit 2)
that names the file, and for a failed trace the op and the line of ``forward`` at fault
(data-dependent control flow such as ``if x.sum() > 0:`` cannot be captured).
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..core.errors import InvalidInputError


@dataclass
class LoadedProblem:
    """A loaded KernelBench problem: its module, the built model and one input draw."""

    path: Path
    source: str
    module: Any
    model: torch.nn.Module
    inputs: list[Any]
    init_inputs: list[Any]


@dataclass
class Captured:
    """The exported program of a problem, and what emit needs to rebuild its interface."""

    problem: LoadedProblem
    program: Any  # torch.export.ExportedProgram
    user_inputs: list[str] = field(default_factory=list)  # placeholder names, in call order
    state: dict[str, tuple[str, bool]] = field(default_factory=dict)  # placeholder -> (state_dict key, is_buffer)
    # tensors the forward creates from Python values (``torch.tensor(c)``), which torch.export lifts
    # into inputs: placeholder -> the one value all their elements hold (the IR makes them ``full``)
    constants: dict[str, bool | int | float] = field(default_factory=dict)
    # such tensors whose elements differ (``torch.tensor([1.0, 2.0])``): placeholder -> the tensor; the
    # emitted ModelNew keeps each as a non-persistent buffer written into the file (never inlined)
    tensor_constants: dict[str, torch.Tensor] = field(default_factory=dict)


def load_problem(path: str | Path, seed: int = 0, overrides: Any = None) -> LoadedProblem:
    """Import a KernelBench problem file and build its model and inputs.

    ``overrides`` (``["batch_size=8", ...]`` or a mapping, as ``warpsmith check --set``) rewrite
    top-level int/float constants of the source before it runs; :attr:`LoadedProblem.source` is then
    the rewritten source (regenerated from the syntax tree: comments are dropped).

    Raises:
        InvalidInputError: the file is missing, does not import, lacks ``Model``/``get_inputs``/
            ``get_init_inputs``, or the model or its inputs cannot be built.
    """
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError("PROBLEM", "an existing KernelBench .py file", str(p))
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError("PROBLEM", "a readable Python file", f"{p}: {e}") from None
    if overrides:
        source = _rewrite(p, source, overrides)
    name = f"_warpsmith_problem_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, p)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.path.insert(0, str(p.parent.resolve()))
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        exec(compile(source, str(p), "exec"), module.__dict__)  # noqa: S102 - the user's own problem file
    except BaseException as e:  # noqa: BLE001 - any failure of the user's file is bad input
        sys.modules.pop(name, None)
        from .progress import SolveTimeout

        if isinstance(e, (KeyboardInterrupt, SolveTimeout)):  # the user's or the time limit's, not the file's
            raise
        raise InvalidInputError("PROBLEM", "a Python file that imports",
                                f"{p}: {type(e).__name__}: {e}{_where(e, p)}") from None
    finally:
        sys.path.remove(str(p.parent.resolve()))
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise InvalidInputError("PROBLEM", "a KernelBench file defining Model, get_inputs and get_init_inputs",
                                f"{p}: no {', '.join(missing)}")
    try:
        torch.manual_seed(seed)
        init = list(module.get_init_inputs())
        torch.manual_seed(seed)
        model = module.Model(*init)
        torch.manual_seed(seed + 1)
        inputs = list(module.get_inputs())
    except Exception as e:  # noqa: BLE001
        raise InvalidInputError("PROBLEM", "a Model and inputs that can be built",
                                f"{p}: {type(e).__name__}: {e}{_where(e, p)}") from None
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError("PROBLEM", "Model(*get_init_inputs()) to be an nn.Module", type(model).__name__)
    return LoadedProblem(p, source, module, model, inputs, init)


def _where(e: BaseException, path: Path) -> str:
    """`` (at FILE:LINE: code)`` for the innermost frame of ``e`` inside ``path``, or ''."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {path.name}:{f.lineno}: {(f.line or '').strip()})"


def capture(problem: LoadedProblem) -> Captured:
    """``torch.export`` the problem's model on its inputs.

    Raises:
        InvalidInputError: the trace failed (data-dependent control flow, an unsupported Python
            construct), the program mutates its buffers, or it lifts a tensor constant whose elements
            differ and that is too large to write into the emitted file (:data:`MAX_CONSTANT_ELEMENTS`).
    """
    try:
        ep = torch.export.export(problem.model, tuple(problem.inputs), strict=False)
    except Exception as e:  # noqa: BLE001
        first = " ".join(str(e).strip().splitlines()[:1]) or type(e).__name__
        kind = "data-dependent control flow or a value read from a tensor" if _data_dependent(e) else "a traceable forward"
        raise InvalidInputError("PROBLEM", f"a forward torch.export can capture ({kind} cannot be)",
                                f"{problem.path.name}: {type(e).__name__}: {first}{_where(e, problem.path)}") from None
    from torch.export.graph_signature import InputKind, OutputKind

    sig = ep.graph_signature
    out = Captured(problem, ep)
    for spec in sig.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            out.user_inputs.append(name)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            out.state[name] = (spec.target, spec.kind == InputKind.BUFFER)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            t = ep.constants[spec.target]
            value = _uniform_value(t, problem.path.name, name)
            if value is None:
                out.tensor_constants[name] = t.detach().clone()
            else:
                out.constants[name] = value
        else:
            raise InvalidInputError("PROBLEM", "a forward without lifted tensor constants or custom objects",
                                    f"{problem.path.name}: input {name} of kind {spec.kind.name}")
    bad = [s for s in sig.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if bad:
        raise InvalidInputError("PROBLEM", "a forward that does not mutate its inputs or buffers (not supported yet)",
                                f"{problem.path.name}: mutates {', '.join(str(s.target) for s in bad)}"
                                " (BatchNorm in training mode updates its running statistics)")
    return out


MAX_CONSTANT_ELEMENTS = 1 << 16  # a larger constant of differing values is refused (the file would carry it)


def _uniform_value(t: torch.Tensor, problem: str, name: str) -> bool | int | float | None:
    """The value every element of the lifted constant ``t`` holds, or None when they differ (the
    constant is then kept as a buffer); refused when it differs and is too large to write out."""
    from .ir import uniform_value

    value = uniform_value(t)
    if value is None and t.numel() > MAX_CONSTANT_ELEMENTS:
        raise InvalidInputError("PROBLEM", f"a forward whose lifted tensor constants hold one value each or at most "
                                f"{MAX_CONSTANT_ELEMENTS} elements; build others in __init__ as a buffer",
                                f"{problem}: constant {name} of shape {tuple(t.shape)} with differing elements")
    return value


def _data_dependent(e: BaseException) -> bool:
    text = f"{type(e).__name__} {e}"
    return any(k in text for k in ("DataDependent", "data-dependent", "data dependent", "GuardOnDataDependent",
                                   "Could not guard on", "unbacked"))


def _rewrite(p: Path, source: str, overrides: Any) -> str:
    """The source with ``--set`` constants replaced; unknown names are refused."""
    import ast

    from ..check.formats import parse_overrides, rewrite_constants, top_level_assignments

    values = parse_overrides(overrides)
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as e:
        raise InvalidInputError("PROBLEM", "valid Python", f"{p}:{e.lineno}: {e.msg}") from None
    known = top_level_assignments(tree)
    unknown = [k for k in values if k not in known]
    if unknown:
        raise InvalidInputError("--set", f"top-level constants of {p.name} ({', '.join(sorted(known)) or 'none'})",
                                ", ".join(unknown))
    return ast.unparse(rewrite_constants(tree, values)) + "\n"
