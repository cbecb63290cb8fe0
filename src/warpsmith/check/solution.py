"""FlashInfer-Bench / SOL-ExecBench ``solution.json`` candidates (the subset warpsmith checks).

- ``sources``: a list of ``{"path", "content"}``. The files are written to a private temporary
  folder, which is put on ``sys.path`` while the check runs. Absolute paths and ``..`` are
  refused.
- ``spec.entry_point``: ``"file.py::function"``.
- ``spec.language`` (FlashInfer-Bench) or ``spec.languages`` (SOL-ExecBench) must be
  ``python``, ``triton`` or ``pytorch``. CUDA and C++ solutions are refused (they need a
  build).
- ``spec.destination_passing_style`` defaults to true, as in both schemas. When it is true,
  outputs are preallocated (poisoned) and passed after the inputs; otherwise they are returned:
  a tensor, a tuple in ``outputs`` order, or a dict by output name.
- If ``definition`` is given, it must equal the definition's ``name``.
- Declaring nondeterminism: a warpsmith extension, ``"nondeterministic": true`` at the top
  level or in ``spec`` (or ``spec.deterministic: false``). ``WARPSMITH_NONDETERMINISTIC = True``
  in the entry module also works.
- Other fields (``author``, ``target_hardware``, ``dependencies``, ``binding``, ...) are ignored.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import torch

from ..core.errors import InvalidInputError
from .flashinfer import read_json
from .formats import (Candidate, CandidateError, CheckProblem, candidate_form, exec_module, forget_module,
                      on_sys_path, unique_module_name)

LANGUAGES = ("python", "triton", "pytorch", "torch")


def load_candidate(path: Path, problem: CheckProblem, *, device: torch.device) -> Candidate:
    """Load a ``solution.json`` for ``problem`` (see the module docstring)."""
    sol_path = candidate_form(path, "flashinfer")
    s = read_json(sol_path, "solution.json")
    if not isinstance(s, dict):
        raise InvalidInputError("solution.json", "an object", type(s).__name__)
    spec = s.get("spec") if isinstance(s.get("spec"), dict) else {}
    d = problem.context["definition"]
    if s.get("definition") not in (None, d["name"]):
        raise InvalidInputError("solution.json definition", f"{d['name']!r} (the definition's name)", s["definition"])
    langs = spec.get("languages", spec.get("language", "python"))
    langs = [langs] if isinstance(langs, str) else langs
    if not isinstance(langs, list) or not langs or any(str(x).lower() not in LANGUAGES for x in langs):
        raise InvalidInputError("solution language", "python, triton or pytorch (compiled CUDA/C++ is not supported)",
                                langs)
    entry = spec.get("entry_point", s.get("entry_point"))
    if not isinstance(entry, str) or entry.count("::") != 1:
        raise InvalidInputError("spec.entry_point", '"file.py::function"', entry)
    entry_file, func_name = entry.split("::")
    dps = spec.get("destination_passing_style", True)
    if not isinstance(dps, bool):
        raise InvalidInputError("spec.destination_passing_style", "true or false", dps)
    sources = s.get("sources")
    if not isinstance(sources, list) or not sources:
        raise InvalidInputError("solution.json sources", "a non-empty list of {path, content}", sources)
    declared = [s.get("nondeterministic"), spec.get("nondeterministic")]
    if spec.get("deterministic") is not None:
        declared.append(spec.get("deterministic") is False)
    for v in declared:
        if v is not None and not isinstance(v, bool):
            raise InvalidInputError("nondeterministic declaration", "true or false", v)
    folder = Path(tempfile.mkdtemp())  # a neutral name: the candidate sees it
    try:
        files = set()
        for src in sources:
            rel = src.get("path") if isinstance(src, dict) else None
            if not isinstance(rel, str) or not isinstance(src.get("content"), str):
                raise InvalidInputError("solution.json sources", "items {path, content} with strings", src)
            p = PurePosixPath(rel)
            if p.is_absolute() or ".." in p.parts or not p.parts:
                raise InvalidInputError("source path", "a relative path inside the solution", rel)
            target = folder.joinpath(*p.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(src["content"])
            files.add(str(p))
        if entry_file not in files:
            raise InvalidInputError("spec.entry_point", "a file listed in sources", entry_file)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    name = unique_module_name("fi_cand")
    sys_path = on_sys_path(folder)
    sys_path.__enter__()

    def cleanup() -> None:
        sys_path.__exit__(None, None, None)
        forget_module(name, folder)
        shutil.rmtree(folder, ignore_errors=True)

    try:
        module = exec_module(folder / entry_file, name)
    except Exception as e:
        cleanup()
        raise CandidateError(f"importing {entry_file} raised {type(e).__name__}: {e}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        cleanup()
        raise InvalidInputError("spec.entry_point", f"a function {func_name} in {entry_file}", "none")
    flag = getattr(module, "WARPSMITH_NONDETERMINISTIC", False) is True

    def call(args: list[Any], outs: list[torch.Tensor] | None) -> Any:
        return func(*args, *outs) if dps else func(*args)

    return Candidate(name=str(s.get("name", sol_path.stem)), path=sol_path, call=call, destination_passing=dps,
                     nondeterministic=flag or any(v is True for v in declared), cleanup=cleanup)
