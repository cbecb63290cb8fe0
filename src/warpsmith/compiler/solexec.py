"""SOL-ExecBench / FlashInfer-Bench problems: ``definition.json`` + ``workload.jsonl`` -> a verified ``solution.json``.

**Input.** A problem folder (or its ``definition.json``) in the subset ``warpsmith check`` reads
(:mod:`warpsmith.check.flashinfer`: axes, inputs, outputs, a ``reference`` defining ``run``, and
workloads giving every ``var`` axis and the scalar inputs). The check's own loader validates the
files, so ``solve`` and ``check`` refuse the same things; this module adds what compiling needs:
every axis a tensor's shape names must be an axis of the definition, input names must be Python
identifiers (the entry point's parameters: SOL-ExecBench matches them by name), and a Python-scalar
input must have a value in each workload (``type: scalar``): a program is specialized to it.

**Compiling.** The workloads (all, or ``workloads=``) are grouped by *input signature*: the shape
and dtype of every tensor input and the value of every scalar one. Each distinct signature is
compiled once: one draw of its inputs, ``torch.export`` of a small ``nn.Module`` whose ``forward``
calls the reference's ``run`` (the compiler's own :func:`~.capture.capture`), then the compiler's
IR, lowering, search (or a given partitioner), codegen and :func:`~.emit.emit_function`.

**As SOL-ExecBench writes them.** The reference is captured with grad disabled (a ``@torch.no_grad()``
``run`` then exports as plain ATen). A reference that launches its own Triton kernels
(:func:`triton_kernels`) is not traced: its program is the reference as given, judged by the check
on its outputs (``Signature.as_given``), and ``strict`` refuses it. ``cpu_cap`` is the check's CPU
cap (:mod:`warpsmith.check.flashinfer`): applied only where the check runs on a CPU
(:func:`cap_here`), to the compiled signatures and to the check alike. Constraints on input data
(``.item()``) are met by the check loader's draws, which ``solve`` uses too.

**Output.** A ``solution.json`` with inline sources: ``main.py`` (the entry point
``main.py::run``, parameters named as the definition's inputs, value-returning) and one
``shape_<i>.py`` per signature. ``run`` looks its arguments' signature up and calls that program;
an argument signature that was not compiled raises ``ValueError`` naming the signatures it has:
nothing falls back to the reference or to torch. The sources import only ``torch``, ``triton``
and the standard library. The solution is verified with :func:`warpsmith.check.check` against the
problem over the compiled workloads, and written (atomically) only when accepted.
"""
from __future__ import annotations

import ast
import json
import keyword
import linecache
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..core.errors import InvalidInputError
from .capture import LoadedProblem, capture
from .emit import Program, emit_function
from .fuse import Partition
from .ir import Graph, build
from .solve import MAX_CANDIDATES, Candidates, SolveResult, _rewritten, _write_atomic, plan, proved, store_low

ENTRY_FILE = "main.py"
SCHEMAS = ("sol-execbench", "flashinfer-bench")  # spec.languages: ["triton"] / spec.language: "triton"


@dataclass
class Signature:
    """One compiled input signature: ``key`` (what ``run`` matches), the workloads that have it."""

    key: tuple[tuple[str, Any, Any], ...]
    workloads: list[str]
    text: str  # readable: ``x float32[3, 64], eps = 1e-06``
    file: str = ""
    graph: Graph | None = None
    notes: list[str] = field(default_factory=list)
    program: Program | None = None
    proofs: Any = None  # proofs.ProgramProofs of its generated kernels (None: not proved)
    as_given: list[str] = field(default_factory=list)  # the reference's own Triton kernels: run as given


@dataclass
class SolExecResult:
    """What ``warpsmith solve DEFINITION`` did; ``status`` as :class:`~.solve.SolveResult`'s
    (``accepted``, ``rejected``, ``refused`` by --strict, ``unverified``)."""

    problem: str
    definition: str
    status: str
    signatures: list[Signature]
    workloads_all: list[str]
    solution: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)
    written: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)  # rejected candidates (see solve_definition)
    cpu_cap: dict[str, Any] | None = None  # what the CPU cap shrank (check.flashinfer), None: full sizes

    @property
    def fallbacks(self) -> list[Any]:
        return [n for s in self.signatures if s.program for n in s.program.fallbacks]

    @property
    def as_given(self) -> list[str]:
        """The reference's own Triton kernels, when its programs run it as given (not compiled)."""
        return sorted({k for s in self.signatures for k in s.as_given})

    @property
    def workloads_compiled(self) -> list[str]:
        return [w for s in self.signatures for w in s.workloads]

    def _per(self, s: Signature) -> SolveResult:
        return SolveResult(f"{self.problem} [{s.file}: {s.text}]", self.status, s.program, s.graph, s.notes,
                           proofs=s.proofs)

    def explain(self) -> str:
        return "\n\n".join(self._per(s).explain() for s in self.signatures)

    def to_json(self) -> dict[str, Any]:
        progs = []
        for s in self.signatures:
            doc = self._per(s).to_json()
            for k in ("problem", "status", "written", "check"):
                doc.pop(k, None)
            progs.append({"file": s.file, "signature": s.text, "workloads": s.workloads, **doc})
        return {"problem": self.problem, "format": "flashinfer", "definition": self.definition,
                "status": self.status, "written": self.written, "entry_point": f"{ENTRY_FILE}::run",
                "workloads": {"compiled": self.workloads_compiled,
                              "not_compiled": [w for w in self.workloads_all if w not in self.workloads_compiled]},
                "programs": progs, "check": self.verdict, "rejected_candidates": self.attempts,
                "reference_as_given": self.as_given,
                "cpu_cap": self.cpu_cap}


# ---- loading ------------------------------------------------------------------------------------
def _relabel(e: InvalidInputError, path: Path) -> InvalidInputError:
    """The check loader's error, with the problem's path named (it names only the field)."""
    return InvalidInputError(f"{e.what} (in {path})", e.expected, e.given)


def cap_here(cpu_cap: int | None) -> int | None:
    """The CPU cap as it applies on this machine: not at all where the check runs on a GPU (full sizes)."""
    return cpu_cap if cpu_cap is not None and not torch.cuda.is_available() else None


def load(path: str | Path, overrides: Any = None, seed: int = 0, cpu_cap: int | None = None) -> Any:
    """The problem as :func:`warpsmith.check.formats.load_problem` reads it, plus the checks compiling needs.

    Raises:
        InvalidInputError: the folder, definition.json or workload.jsonl is unusable (exit 2).
    """
    from ..check.formats import load_problem, parse_overrides

    p = Path(path)
    if not p.exists():
        raise InvalidInputError("PROBLEM", "a problem folder with definition.json and workload.jsonl, "
                                "or its definition.json", str(p))
    try:
        problem = load_problem(p, parse_overrides(overrides), seed=seed, device="cpu", cap=cap_here(cpu_cap))
    except InvalidInputError as e:
        raise _relabel(e, p) from None
    d = problem.context["definition"]
    def_path = problem.path
    axes = set(d["axes"])
    for key in ("inputs", "outputs"):
        for name, spec in d[key].items():
            unknown = [a for a in (spec.get("shape") or []) if a not in axes]
            if unknown:
                raise InvalidInputError(f"{def_path}: {key}.{name}.shape", "axes of the definition ("
                                        + ", ".join(sorted(axes)) + ")", ", ".join(unknown))
    names = list(d["inputs"])
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_ws"):
            raise InvalidInputError(f"{def_path}: input name", "a Python identifier not starting with _ws (the "
                                    "entry point's parameters are named as the inputs)", name)
    return problem


def _signature(args: Sequence[Any], names: Sequence[str]) -> tuple[tuple[tuple[str, Any, Any], ...], str]:
    key, text = [], []
    for name, a in zip(names, args):
        if isinstance(a, torch.Tensor):
            key.append(("tensor", tuple(int(s) for s in a.shape), str(a.dtype)))
            text.append(f"{name} {str(a.dtype).replace('torch.', '')}{list(a.shape)}")
        else:
            key.append(("scalar", type(a).__name__, repr(a)))
            text.append(f"{name} = {a!r}")
    return tuple(key), ", ".join(text)


def signatures(problem: Any, chosen: Sequence[str] | None = None) -> tuple[list[Signature], dict[str, list[Any]]]:
    """The distinct input signatures of the chosen workloads (indices or labels, as ``check --workloads``),
    and one draw of inputs for each.

    Raises:
        InvalidInputError: a workload leaves a scalar input random, or its inputs' signature
            changes between draws (a custom input maker that varies shapes or scalars).
    """
    from ..check.hardened import _select

    try:
        workloads = _select(problem, list(chosen) if chosen else None)
    except InvalidInputError as e:
        raise _relabel(e, problem.path) from None
    d = problem.context["definition"]
    names = list(d["inputs"])
    found: dict[Any, Signature] = {}
    draws: dict[str, list[Any]] = {}
    for w in workloads:
        custom = w.label.endswith("(custom)")
        for name, spec in d["inputs"].items():
            if spec.get("shape") is None and name not in w.scalars and not custom:
                raise InvalidInputError(f"scalar input {name} of workload {w.label} (in {problem.path})",
                                        "a value in the workload (type scalar): the compiled program is "
                                        "specialized to the values of Python-scalar inputs", "a random scalar")
        args = [problem.draw_inputs(w, torch.Generator().manual_seed(problem.seed + i), problem.distributions[0],
                                    torch.device("cpu")) for i in (0, 1)]
        (key, text), (key2, _) = _signature(args[0], names), _signature(args[1], names)
        if key != key2:
            raise InvalidInputError(f"workload {w.label} (in {problem.path})",
                                    "inputs whose shapes, dtypes and scalar values are the same in every draw",
                                    f"{text} vs {_signature(args[1], names)[1]}")
        if key not in found:
            found[key] = Signature(key, [], text, file=f"shape_{len(found)}.py")
            draws[found[key].file] = args[0]
        found[key].workloads.append(w.label)
    return list(found.values()), draws


# ---- capture --------------------------------------------------------------------------------------
def _reference(problem: Any) -> tuple[Path, Callable[..., Any]]:
    """The reference's ``run``, executed from a pseudo-file whose lines the stack traces (and so the
    report's node lines) show: ``<definition.json>:reference``."""
    import types

    d = problem.context["definition"]
    fname = f"{problem.path}:reference"
    source = d["reference"]
    lines = source.splitlines(keepends=True)
    linecache.cache[fname] = (len(source), None, lines, fname)
    module = types.ModuleType(f"_warpsmith_solexec_ref_{id(problem)}")
    module.__file__ = fname
    try:
        code = compile(source, fname, "exec")
        _anchor(code)
        exec(code, module.__dict__)  # noqa: S102 - the user's own reference
    except Exception as e:  # noqa: BLE001 - the check's loader ran it already; kept for safety
        raise InvalidInputError(f"{problem.path}: reference", "Python source that runs",
                                f"{type(e).__name__}: {e}") from None
    return Path(fname), module.run


def _anchor(code: Any) -> None:
    """Keep the reference's frames in the stack traces torch.export records (so the report names
    the reference's lines). Export keeps only frames of functions named ``forward``, and those of
    registered anchors: every function of the reference (its own pseudo-file) is registered, through
    torch's private hook when this torch has it (without it the report's lines are empty)."""
    import types

    register = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if register is None:
        return
    todo = [code]
    while todo:
        c = todo.pop()
        register(types.SimpleNamespace(__code__=c))
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]


def _wrapper(run: Callable[..., Any], names: Sequence[str], out_names: Sequence[str],
             where: str) -> tuple[torch.nn.Module, list[InvalidInputError]]:
    """An ``nn.Module`` whose ``forward(<input names>)`` returns ``run``'s outputs as a tuple, in
    the definition's output order (placeholders are named as the inputs), and the list of what its
    forward refused (kept off the module: torch.export restores a module's attributes after tracing)."""
    from ..check.formats import as_outputs

    errors: list[InvalidInputError] = []

    def outputs(result: Any) -> tuple[Any, ...]:
        out = as_outputs(result, out_names)
        if len(out) != len(out_names) or not all(isinstance(t, torch.Tensor) for t in out):
            errors.append(InvalidInputError(f"{where}: reference run", f"{len(out_names)} tensor output(s) "
                                            f"({', '.join(out_names)}), as the definition's outputs",
                                            f"{len(out)} value(s): " + ", ".join("tensor" if isinstance(t, torch.Tensor) else type(t).__name__ for t in out)))
            raise errors[-1]
        return tuple(out)

    params = ", ".join(names)
    ns: dict[str, Any] = {"_ws_run": run, "_ws_outputs": outputs}
    exec(f"def forward(self, {params}):\n    return _ws_outputs(_ws_run({params}))\n", ns)  # noqa: S102
    return type("Reference", (torch.nn.Module,), {"forward": ns["forward"]})(), errors


def compile_signature(problem: Any, sig: Signature, args: list[Any],
                      partitioner: Callable[[Graph], Partition] | None = None, target: str = "h100",
                      choice: int = 0, rewrites_on: bool = True) -> Signature:
    """Capture, lower, partition and emit the program of one signature (no verification); ``choice``
    takes the search's ``choice``-th best partition (its last when it explored fewer), and
    ``rewrites_on=False`` the program as written (as :func:`.solve.compile_problem`)."""
    d = problem.context["definition"]
    names, out_names = list(d["inputs"]), list(d["outputs"])
    kernels = triton_kernels(d["reference"])
    if kernels:  # its own Triton kernels: run as given, the solution judged on its outputs
        sig.graph, sig.as_given = None, kernels
        sig.notes = [f"the reference launches its own Triton kernel(s) ({', '.join(kernels)}): this program runs "
                     "the reference as given (not compiled; --strict refuses it), judged on its outputs"]
        sig.program = Program(_as_given_source(d, sig, kernels))
        return sig
    ref_path, run = _reference(problem)
    model, refused = _wrapper(run, names, out_names, str(problem.path))
    loaded = LoadedProblem(ref_path, d["reference"], None, model, list(args), [])
    try:
        with torch.no_grad():  # as SOL-ExecBench runs it; a @torch.no_grad() reference then exports plainly
            cap = capture(loaded)
    except InvalidInputError as e:
        if refused:  # raised as it is rather than as a failed trace
            raise refused[0] from None
        raise InvalidInputError(f"the reference of {problem.path} (input signature {sig.text})", e.expected,
                                e.given) from None
    g = build(cap)
    if len(g.inputs) != len(names):
        raise InvalidInputError(f"{problem.path}: captured program", f"{len(names)} inputs ({', '.join(names)})",
                                len(g.inputs))
    sig.notes, part, found = plan(g, partitioner, target, choice, rewrites_on, clamp=True)
    declared = store_low(g, part, found, cap.program, args, target, sig.notes) if rewrites_on else None
    shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
    prog = emit_function(g, part, f"{d['name']}, input signature {sig.text} (workloads {', '.join(sig.workloads)})",
                         shapes, origin="warpsmith solve, SOL-ExecBench solution")
    prog.search, prog.declared = found, declared
    sig.graph, sig.program = g, prog
    return sig


def triton_kernels(source: str) -> list[str]:
    """The functions of a reference source decorated with a Triton decorator (``@triton.jit``,
    ``@triton.autotune``, ``@jit`` imported from triton, ...): a reference that launches its own kernels."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    from_triton = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   and (n.module or "").split(".")[0] == "triton" for a in n.names}
    tops = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
            if a.name.split(".")[0] == "triton"}

    def is_triton(dec: ast.AST) -> bool:
        dec = dec.func if isinstance(dec, ast.Call) else dec
        while isinstance(dec, ast.Attribute):
            if isinstance(dec.value, ast.Name) and dec.value.id in tops | {"triton"}:
                return True
            dec = dec.value
        return isinstance(dec, ast.Name) and dec.id in from_triton

    return [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(is_triton(dec) for dec in n.decorator_list)]


def _as_given_source(d: dict[str, Any], sig: Signature, kernels: list[str]) -> str:
    """A signature's program that is the reference itself: its source, then ``run`` returning a tuple of
    the definition's outputs (as the compiled programs' ``run`` does)."""
    outs = list(d["outputs"])
    return (f'"""{d["name"]}, input signature {sig.text}: the reference as given (it launches its own Triton '
            f'kernel(s): {", ".join(kernels)}), written by `warpsmith solve` (not compiled)."""\n'
            + d["reference"].rstrip() + "\n\n\n"
            f"_ws_reference_run = run\n_WS_OUTPUTS = {outs!r}\n\n\n"
            "def run(*args):\n"
            "    out = _ws_reference_run(*args)\n"
            "    if isinstance(out, dict):\n"
            "        return tuple(out[k] for k in _WS_OUTPUTS)\n"
            "    return (out,) if not isinstance(out, (tuple, list)) else tuple(out)\n")


@dataclass
class SignatureDeclarations:
    """The declared deviations of a solution's programs (:class:`.precision.Declaration`, one per
    signature that took one), for ``check(..., declared=...)``: :meth:`run` picks its arguments'
    signature and raises ``KeyError`` for one without a declaration (the check then applies the strict
    contract to that call)."""

    by_key: dict[Any, Any]  # Signature.key -> Declaration

    def run(self, args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        return self.by_key[_signature(args, [""] * len(args))[0]].run(args)

    @property
    def summary(self) -> str:
        return "; ".join(d.summary for d in self.by_key.values())

    def to_json(self) -> dict[str, Any]:
        return {"kind": "per_signature", "signatures": [d.to_json() for d in self.by_key.values()]}


def declarations(sigs: Sequence[Signature]) -> SignatureDeclarations | None:
    """The solution's declarations, or None when no program declares a deviation."""
    found = {s.key: s.program.declared for s in sigs if s.program is not None and s.program.declared is not None}
    return SignatureDeclarations(found) if found else None


# ---- emit ----------------------------------------------------------------------------------------
def _main_source(d: dict[str, Any], sigs: list[Signature]) -> str:
    names, outs = list(d["inputs"]), list(d["outputs"])
    params = ", ".join(names)
    table = "\n".join(f"    {s.key!r}: {s.file!r},  # {', '.join(s.workloads)}" for s in sigs)
    listing = "\n".join(f"  {s.file}: {s.text} (workloads {', '.join(s.workloads)})" for s in sigs)
    fallbacks = [f"{n.op} ({s.file})" for s in sigs for n in (s.program.fallbacks if s.program else [])]
    ret = "out[0]" if len(outs) == 1 else "tuple(out)"
    return f'''"""SOL-ExecBench solution for {d["name"]}, written by `warpsmith solve` (warpsmith compiler).

Entry point run({params}): value-returning (destination_passing_style false), returning
{", ".join(outs)}. It is compiled for {len(sigs)} input signature(s), one program each:
{listing}
Arguments of any other signature (shapes, dtypes, scalar values) raise ValueError: nothing falls
back to the reference or to torch. ATen fallbacks inside the programs: {", ".join(fallbacks) or "none"}.
"""
import importlib.util
import os

import torch

_WS_HERE = os.path.dirname(os.path.abspath(__file__))
# input signature -> its program: per input, ("tensor", shape, dtype) or ("scalar", type, repr(value))
_WS_SIGNATURES = {{
{table}
}}


def _ws_load(file):
    spec = importlib.util.spec_from_file_location(f"{{__name__}}__ws_{{file[:-3]}}", os.path.join(_WS_HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WS_PROGRAMS = {{key: _ws_load(file) for key, file in _WS_SIGNATURES.items()}}


def _ws_signature(args):
    return tuple(("tensor", tuple(a.shape), str(a.dtype)) if isinstance(a, torch.Tensor)
                 else ("scalar", type(a).__name__, repr(a)) for a in args)


def _ws_call(args):
    key = _ws_signature(args)
    program = _WS_PROGRAMS.get(key)
    if program is None:
        raise ValueError(f"this solution (warpsmith) is compiled only for the input signatures "
                         f"{{list(_WS_SIGNATURES)}}; got {{key}}")
    out = program.run(*args)
    return {ret}


def run({params}):
    return _ws_call(({params}{"," if len(names) == 1 else ""}))
'''


def solution(d: dict[str, Any], sigs: list[Signature], schema: str = "sol-execbench") -> dict[str, Any]:
    """The ``solution.json`` document: inline sources, entry point ``main.py::run``, language triton."""
    if schema not in SCHEMAS:
        raise InvalidInputError("--schema", " or ".join(SCHEMAS), schema)
    lang: dict[str, Any] = {"languages": ["triton"]} if schema == "sol-execbench" else {"language": "triton"}
    sources = [{"path": ENTRY_FILE, "content": _main_source(d, sigs)}]
    sources += [{"path": s.file, "content": s.program.text} for s in sigs if s.program is not None]
    desc = (f"Compiled by warpsmith solve for {len(sigs)} input signature(s) "
            f"({'; '.join(s.text for s in sigs)}); other signatures raise ValueError.")
    return {"name": f"{d['name']}_warpsmith", "definition": d["name"], "author": "warpsmith",
            "description": textwrap.shorten(desc, 2000),
            "spec": {**lang, "target_hardware": ["LOCAL"], "entry_point": f"{ENTRY_FILE}::run",
                     "dependencies": ["torch", "triton"], "destination_passing_style": False},
            "sources": sources}


# ---- the pipeline ----------------------------------------------------------------------------------
def compile_definition(path: str | Path, *, workloads: Sequence[str] | None = None, overrides: Any = None,
                       seed: int = 0, partitioner: Callable[[Graph], Partition] | None = None,
                       target: str = "h100", schema: str = "sol-execbench", choice: int = 0,
                       rewrites_on: bool = True, cpu_cap: int | None = None) -> SolExecResult:
    """Load, compile every signature and build the solution document (no verification); ``choice``
    and ``rewrites_on`` as :func:`compile_signature`'s, for every signature."""
    if schema not in SCHEMAS:
        raise InvalidInputError("--schema", " or ".join(SCHEMAS), schema)
    problem = load(path, overrides, seed, cpu_cap)
    sigs, draws = signatures(problem, workloads)
    for s in sigs:
        compile_signature(problem, s, draws[s.file], partitioner, target, choice, rewrites_on)
    d = problem.context["definition"]
    res = SolExecResult(str(path), d["name"], "unverified", sigs, [w.label for w in problem.workloads],
                        cpu_cap=problem.info.get("cpu_cap"))
    res.solution = solution(d, sigs, schema)
    return res


def solve_definition(path: str | Path, out: str | Path | None = None, *, strict: bool = False, verify: bool = True,
                     workloads: Sequence[str] | None = None, overrides: Any = None, seed: int = 0,
                     partitioner: Callable[[Graph], Partition] | None = None, target: str = "h100",
                     schema: str = "sol-execbench", check_kwargs: dict[str, Any] | None = None,
                     progress: Callable[[str], None] | None = None, prove: bool = True,
                     prove_timeout_ms: int | None = None, candidates: int = MAX_CANDIDATES,
                     cpu_cap: int | None = None) -> SolExecResult:
    """Compile a SOL-ExecBench / FlashInfer-Bench problem into a verified ``solution.json``.

    The check runs over the compiled workloads (``workloads``, default all); ``out`` is written,
    atomically, only when it accepts (or, with ``verify=False``, unverified, as asked). With ``prove``,
    each program's generated kernels are proved first (:mod:`.proofs`): a failed obligation rejects
    the solution (reason ``proof_failed``) before the check runs. A rejected solution is never
    written: as :func:`.solve.solve` does, the next one (every signature's next partition, and as the
    last one, when the search took a rewrite, the programs as written) is tried, at most
    ``candidates`` in all; ``SolExecResult.attempts`` says what each rejected one failed.

    Raises:
        InvalidInputError: the problem is unusable (exit 2); nothing is written.
    """
    attempts: list[dict[str, Any]] = []
    res = None
    order = Candidates(max(1, candidates) if partitioner is None else 1)
    while (plan_ := order.next()) is not None:
        choice, rewrites_on = plan_
        cand = compile_definition(path, workloads=workloads, overrides=overrides, seed=seed, partitioner=partitioner,
                                  target=target, schema=schema, choice=choice, rewrites_on=rewrites_on,
                                  cpu_cap=cpu_cap)
        rewritten = rewrites_on and any(_rewritten(s.program) for s in cand.signatures if s.program is not None)
        text = json.dumps(cand.solution, indent=2) + "\n"
        if not order.fresh(text, rewritten):  # every signature past its last partition: nothing new this way
            if order.exhausted():
                break
            continue
        res = _verify_solution(path, cand, text, out, strict=strict, verify=verify, workloads=workloads,
                               overrides=overrides, seed=seed, check_kwargs=check_kwargs, progress=progress,
                               prove=prove, prove_timeout_ms=prove_timeout_ms, cpu_cap=cpu_cap)
        if res.status != "rejected":
            break
        attempts.append({"choice": choice, "rewrites": rewritten, "reason": res.verdict.get("reason"),
                         "message": res.verdict.get("message")})
        if progress is not None:
            progress(f"solution candidate {choice} rejected ({attempts[-1]['reason']}): trying the next")
    assert res is not None
    res.attempts = attempts
    return res


def _verify_solution(path: str | Path, res: SolExecResult, text: str, out: str | Path | None, *, strict: bool,
                     verify: bool, workloads: Sequence[str] | None, overrides: Any, seed: int,
                     check_kwargs: dict[str, Any] | None, progress: Callable[[str], None] | None, prove: bool,
                     prove_timeout_ms: int | None, cpu_cap: int | None = None) -> SolExecResult:
    """Prove and check one solution document; write it to ``out`` only when accepted."""
    import tempfile

    if strict and (res.fallbacks or res.as_given):
        res.status = "refused"
        if res.as_given:
            res.verdict = {"accepted": False, "reason": "refused",
                           "message": f"--strict: the reference launches its own Triton kernel(s) "
                                      f"({', '.join(res.as_given)}); the solution would run it as given, not compiled"}
        return res
    if prove:
        for s in res.signatures:
            if s.program is not None and not s.as_given:  # the reference's own kernels carry no launch contract
                holder = SolveResult(s.file, res.status)
                ok = proved(holder, s.program.text, s.file, prove_timeout_ms)
                s.proofs = holder.proofs
                if not ok:
                    res.status, res.verdict = holder.status, holder.verdict
                    return res
    if not verify:
        if out is not None:
            _write_atomic(text, Path(out))
            res.written = str(out)
        return res
    from ..check import check

    with tempfile.TemporaryDirectory(prefix="warpsmith-solve-") as tmp:
        cand = Path(tmp) / "solution.json"
        cand.write_text(text)
        report = check(path, cand, seed=seed, progress=progress, on_call=getattr(progress, "check_call", None),
                       overrides=overrides, workloads=workloads,
                       declared=declarations(res.signatures), cpu_cap=cap_here(cpu_cap), **(check_kwargs or {}))
    doc = report.to_json() if hasattr(report, "to_json") else {}
    f = report.first_failure
    res.verdict = {"accepted": f is None, "reason": None if f is None else f.code,
                   "message": None if f is None else f.message, "coverage": report.coverage_line, "report": doc}
    res.status = "accepted" if f is None else "rejected"
    if f is None and out is not None:
        _write_atomic(text, Path(out))
        res.written = str(out)
    return res


def write_report(res: SolExecResult, dest: Path) -> None:
    _write_atomic(json.dumps(res.to_json(), indent=2, default=str), dest)
