"""KernelBench: a reference ``Model`` with ``get_inputs()``, a candidate ``ModelNew``.

- **Weights.** ``get_init_inputs()`` is called once, with torch's RNG seeded. ``Model`` and
  ``ModelNew`` are each constructed right after seeding the RNG with the same value, so a
  candidate that creates its parameters in the same order gets the same values. Nothing is
  copied from one model to the other. The oracle model is a float64 copy of ``Model``. It runs
  on float64 inputs under :class:`~.formats.Float64Oracle`, which keeps the reference in
  float64.
- **Inputs.** Each draw calls the reference module's ``get_inputs()`` with a fresh seed. Under
  the ``native`` distribution its tensors are used as they are. Under every other distribution
  (:data:`~.formats.DISTRIBUTIONS`: ``normal``, ``uniform``, ``outliers``, ``tiny``, ``sparse``,
  ``padded``, ``repeated``, ``pow2``, ``subnormal``), every floating-point tensor is replaced by a
  draw of the same shape and dtype from that distribution (rows along its last dimension). Integer
  and bool tensors (indices, masks) and other arguments are kept as they are.
- **Calls.** Calls run under ``torch.no_grad()``, as KernelBench's own evaluation does.
- **``--set``.** It rewrites top-level size constants in the source of both modules. A name
  the reference does not assign at top level to an int or float is refused (exit 2).
- **Nondeterminism.** A candidate declares it with ``WARPSMITH_NONDETERMINISTIC = True``.
"""
from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import torch

from ..core.errors import InvalidInputError, UnknownNameError
from ..core.opspec import draw
from .formats import (DISTRIBUTIONS, Candidate, CandidateError, CheckProblem, Float64Oracle, Number, Workload,
                      as_outputs,
                      exec_module, forget_module, fork_rng, on_sys_path, rewrite_constants, top_level_assignments,
                      unique_module_name)

KB_DISTRIBUTIONS = ("native",) + tuple(DISTRIBUTIONS)
NONDETERMINISTIC_FLAG = "WARPSMITH_NONDETERMINISTIC"


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _parse(path: Path, what: str) -> ast.Module:
    try:
        return ast.parse(path.read_text(), filename=str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(what, "a readable Python file", f"{path}: {e}") from None
    except SyntaxError as e:
        if what == "REFERENCE":
            raise InvalidInputError(what, "valid Python", f"{path}:{e.lineno}: {e.msg}") from None
        raise CandidateError(f"the candidate does not parse: {path.name}:{e.lineno}: {e.msg}") from None


def _constants(module: Any, tree: ast.Module) -> dict[str, Number]:
    return {n: getattr(module, n) for n in top_level_assignments(tree) if _is_number(getattr(module, n, None))}


def _coerce(overrides: dict[str, Number], known: dict[str, Number], path: Path) -> dict[str, Number]:
    out: dict[str, Number] = {}
    for name, value in overrides.items():
        if name not in known:
            raise UnknownNameError(f"size constant of {path.name} (--set)", name, sorted(known))
        if isinstance(known[name], int) and not isinstance(value, int):
            raise InvalidInputError(f"--set {name}", f"an integer (the reference sets {name} = {known[name]})", value)
        out[name] = float(value) if isinstance(known[name], float) else value
    return out


def _model_tensors(model: Any) -> list[torch.Tensor]:
    if isinstance(model, torch.nn.Module):
        return [*model.parameters(), *model.buffers()]
    return []


def load_problem(path: Path, overrides: dict[str, Number], *, seed: int, device: torch.device) -> CheckProblem:
    """Load a KernelBench reference file (see the module docstring)."""
    tree = _parse(path, "REFERENCE")
    name = unique_module_name("kb_ref")
    try:
        with on_sys_path(path.parent):
            module = exec_module(path, name, tree)
            known = _constants(module, tree)
            values = _coerce(overrides, known, path)
            if values:
                forget_module(name)
                module = exec_module(path, name, rewrite_constants(_parse(path, "REFERENCE"), values))
    except InvalidInputError:
        raise
    except Exception as e:  # the reference is trusted input: if it cannot run, the input is unusable
        raise InvalidInputError("REFERENCE", "a module that imports cleanly", f"{type(e).__name__}: {e}") from None
    for attr in ("Model", "get_inputs"):
        if not callable(getattr(module, attr, None)):
            raise InvalidInputError("REFERENCE", "a KernelBench module defining Model and get_inputs()",
                                    f"{path.name} without {attr}")
    get_init = getattr(module, "get_init_inputs", None)
    try:
        with fork_rng(device):
            torch.manual_seed(seed)
            init = tuple(get_init()) if callable(get_init) else ()
        with fork_rng(device):
            torch.manual_seed(seed)
            model = module.Model(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
        oracle_model = copy.deepcopy(model)
        if isinstance(oracle_model, torch.nn.Module):
            oracle_model = oracle_model.double()
    except Exception as e:
        raise InvalidInputError("REFERENCE", "Model(*get_init_inputs()) to construct",
                                f"{type(e).__name__}: {e}") from None

    def draw_inputs(workload: Workload, gen: torch.Generator, dist: str, dev: torch.device) -> list[Any]:
        s = int(torch.randint(0, 2**62, (1,), generator=gen))
        try:
            with fork_rng(dev):
                torch.manual_seed(s)
                args = list(module.get_inputs())
        except Exception as e:
            raise InvalidInputError("REFERENCE", "get_inputs() to run", f"{type(e).__name__}: {e}") from None
        out = []
        for a in args:
            if isinstance(a, torch.Tensor):
                a = a.to(dev)
                if dist != "native" and a.is_floating_point():
                    a = draw(tuple(a.shape), dist, gen, a.dtype, dev)
            out.append(a)
        return out

    def run_reference(args: list[Any]) -> tuple[Any, ...]:
        with torch.no_grad():
            return as_outputs(model(*args), ())

    def run_oracle(args: list[Any]) -> tuple[Any, ...]:
        x64 = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        with torch.no_grad(), Float64Oracle():
            return as_outputs(oracle_model(*x64), ())

    consts = _constants(module, tree)
    return CheckProblem(
        name=path.stem, format="kernelbench", path=path, workloads=[Workload("get_inputs()")],
        distributions=KB_DISTRIBUTIONS, output_names=(), draw_inputs=draw_inputs, run_reference=run_reference,
        run_oracle=run_oracle, seed=seed, overrides=values,
        info={"constants": {k: v for k, v in consts.items() if not k.startswith("_")},
              "init_inputs": [_describe(a) for a in init]},
        context={"init": init, "module": name}, set_eval=lambda: _eval(model, oracle_model))


def _eval(*models: Any) -> None:
    for m in models:
        if isinstance(m, torch.nn.Module):
            m.eval()


def _describe(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"
    return a if isinstance(a, (int, float, str, bool)) or a is None else type(a).__name__


def load_candidate(path: Path, problem: CheckProblem, *, device: torch.device) -> Candidate:
    """Load a KernelBench candidate (``class ModelNew``) for ``problem``."""
    tree = _parse(path, "CANDIDATE")  # its form was checked by formats.candidate_form
    mine = {n: v for n, v in problem.overrides.items() if n in top_level_assignments(tree)}
    if mine:
        tree = rewrite_constants(tree, mine)
    name = unique_module_name("kb_cand")
    try:
        with on_sys_path(path.parent):
            module = exec_module(path, name, tree)
    except Exception as e:
        forget_module(name)
        raise CandidateError(f"importing {path.name} raised {type(e).__name__}: {e}") from None
    cls = getattr(module, "ModelNew", None)
    if not callable(cls):
        forget_module(name)
        raise InvalidInputError("CANDIDATE", "a KernelBench module defining class ModelNew", f"{path.name} without it")
    try:
        with fork_rng(device):
            torch.manual_seed(problem.seed)
            model = cls(*copy.deepcopy(problem.context["init"]))
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
    except Exception as e:
        forget_module(name)
        raise CandidateError(f"ModelNew(*get_init_inputs()) raised {type(e).__name__}: {e}") from None
    flag = getattr(module, NONDETERMINISTIC_FLAG, False)

    def call(args: list[Any], outs: list[torch.Tensor] | None) -> Any:
        return model(*args)

    return Candidate(name=path.stem, path=path, call=call, destination_passing=False,
                     nondeterministic=flag is True, state=lambda: _model_tensors(model),
                     cleanup=lambda: forget_module(name), set_eval=lambda: _eval(model))
