"""Launch contracts of the generated kernels, so that ``warpsmith prove`` proves them like the library's.

A generated kernel is specialized to one captured shape only in its launcher; its text is the same
for every shape of its kind (the sizes, strides and products arrive as arguments). So each kernel
gets a :class:`~warpsmith.verify.symbolic.LaunchContract` with **symbolic** sizes:

- every domain dim is a size ``D<d> >= 1`` (a dim a ``cat`` splits stays the captured size: the
  kernel text holds its pieces' sizes as literals); ``NUMEL`` (pointwise) and ``M``, ``N`` and the
  contiguous output strides ``cs<d>`` (rows) are sizes equal to the products the launcher passes;
- every operand is read through its own symbolic non-negative strides ``s<i>_<k>`` (0 where it
  broadcasts is one case of them), as the shape the kernel reads it as: the domain, a row shape
  (keepdim: the reduced dims 1; or without them), or a piece of a ``cat``;
- outputs are what the launcher allocates, contiguous: a pointwise kernel's as its ``NUMEL``
  elements, a row kernel's row-shaped ones as its ``M`` elements (``out + row``), and its full
  ones in the domain's shape with strides ``cs<d>``;
- the grid and constexprs are the launcher's: ``cdiv(NUMEL, BLOCK)`` programs of ``BLOCK`` or
  ``cdiv(M, ROWS)`` programs of ``ROWS`` rows with ``BLOCK_N``, ``EMULATE`` off (what the GPU compiles);
- the domain: every scalar argument below ``2**31`` (Triton passes such arguments as int32, which
  is what the tracer models; a larger one would compile another specialization, not covered), a
  whole-row kernel's rows no longer than its ``BLOCK_N`` (the launcher picks ``BLOCK_N >= N``),
  and a looped kernel's ``N + BLOCK_N < 2**31`` (its column offsets are int32).

Writer witnesses say who writes each output element: element ``e`` of a pointwise output is lane
``e % BLOCK`` of program ``e // BLOCK``; row ``m`` of a row output is program ``m``'s; element
``(i_0, ..)`` of a full output is program ``row`` (the row-major index of its dims not reduced),
column ``col`` (of its reduced dims, counted from the end for a reverse scan), at iteration
``col // BLOCK_N`` and lane ``col % BLOCK_N`` when looped. The prover checks them (contract.py).

**What the contract is built from.** The compiler writes, next to the launchers in the emitted file,
a plain-data table ``_WS_LAUNCHES`` (:func:`launch_table`: per kernel its kind, domain, reduced
dims, each operand slot's shape, mode and which domain dim each of its dims follows, each output's
form). The contract is built from that table and the file itself: the kernels traced are the
file's own ``@triton.jit`` text (:func:`kernel_module` loads the file's kernels, launchers and
table, keeping their line numbers, without running the problem's source), and the constexprs are
those its launcher passes. :func:`launch_check` runs the launcher with a recording stand-in for the
kernel on ``meta`` tensors of the captured shapes and checks that this launch is an instance of the
contract (grid, every scalar argument, constexprs, each tensor's shape and strides, the domain):
the obligation ``launch``.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import z3

from ..verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv
from ..verify.symbolic.prove import Obligation

TABLE = "_WS_LAUNCHES"
INT32_MAX = 2**31 - 1


# ---- the table the emitted file carries -------------------------------------------------------------
def launch_spec(k: Any) -> dict[str, Any]:
    """The launch description of one generated :class:`~.codegen.Kernel` (plain data)."""
    g = k.group
    rank = len(g.domain)
    slots = []
    for s in k.slots:
        if s.mode in ("elem", "full"):
            dims = [d if s.shape[d] == g.domain[d] else None for d in range(rank)]
        elif len(s.shape) == rank:  # keepdim row shape: the reduced dims are 1
            dims = [None if d in g.red else d for d in range(rank)]
        else:  # the row shape without the reduced dims
            dims = [d for d in range(rank) if d not in g.red]
        slots.append({"node": s.node.name, "operand": list(s.node.shape), "shape": list(s.shape), "mode": s.mode,
                      "dims": dims})
    outputs = []
    for n in k.outputs:
        form = "flat" if g.kind == "pointwise" else "full" if tuple(n.shape) == tuple(g.domain) else "row"
        outputs.append({"node": n.name, "shape": list(n.shape), "form": form})
    fixed = sorted({n.attrs["dim"] for n in g.nodes if n.op == "cat"})
    return {"kernel": k.name, "launcher": k.launcher_name, "kind": g.kind, "domain": list(g.domain),
            "red": list(g.red), "looped": bool(k.looped), "fixed": fixed,
            "reverse": any(n.kind == "scan" and n.attrs.get("reverse") for n in g.nodes),
            "slots": slots, "outputs": outputs}


def launch_table(kernels: list[Any]) -> str:
    """The ``_WS_LAUNCHES`` assignment the emitted file carries (plain data; nothing imports it)."""
    rows = ",\n".join(f"    {launch_spec(k)!r}" for k in kernels)
    return ("# the launch of each generated kernel, as data: `warpsmith prove --solution FILE` builds its launch\n"
            f"# contract from this table and the kernel's own text (warpsmith/compiler/contracts.py)\n"
            f"{TABLE} = [\n{rows},\n]\n")


# ---- the file's kernels, without the problem's source ------------------------------------------------
def kernel_module(text: str, path: Path) -> Any:
    """The emitted file's imports of torch/triton/os/math, ``@triton.jit`` functions, constexpr
    globals, launchers and launch table, written to ``path`` with every other line blanked (line
    numbers are the file's) and imported."""
    tree = ast.parse(text)
    lines = text.splitlines()
    keep = [False] * len(lines)
    table = _table_of(tree)
    launchers = {s["launcher"] for s in table}
    for node in tree.body:
        if _kept(node, launchers):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            for i in range(start - 1, node.end_lineno):
                keep[i] = True
    out = "\n".join(ln if k else "" for ln, k in zip(lines, keep)) + "\n"
    path.write_text(out)
    name = f"_ws_gen_kernels_{abs(hash((str(path), out)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource finds the kernels' text through the module
    spec.loader.exec_module(module)
    return module


def _table_of(tree: ast.Module) -> list[dict[str, Any]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TABLE for t in node.targets):
            return ast.literal_eval(node.value)
    return []


def _kept(node: ast.stmt, launchers: set[str]) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module == "__future__" or (node.module or "").split(".")[0] in ("torch", "triton", "os", "math")
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] in ("torch", "triton", "os", "math") for a in node.names)
    if isinstance(node, ast.Assign):
        names = {t.id for t in node.targets if isinstance(t, ast.Name)}
        if names & {"_EMULATE", TABLE}:
            return True
        v = node.value
        return isinstance(v, ast.Call) and ast.unparse(v.func) in ("tl.constexpr", "triton.language.constexpr")
    if isinstance(node, ast.FunctionDef):
        return node.name in launchers or any(ast.unparse(d).split("(")[0] in ("triton.jit", "jit")
                                             for d in node.decorator_list)
    return False


# ---- the symbolic contract ---------------------------------------------------------------------------
@dataclass
class Symbols:
    """The sizes of one kernel's contract and how each is defined from the domain dims."""

    dims: list[Any]
    defs: dict[str, tuple[Any, list[int]]] = field(default_factory=dict)  # name -> (symbol, dims multiplied)


def _prod(xs: list[Any]) -> Any:
    out = z3.IntVal(1)
    for x in xs:
        out = x if z3.is_int_value(out) and out.as_long() == 1 else out * x
    return out


def contract(kernel: Any, spec: dict[str, Any], constexprs: dict[str, Any]) -> tuple[LaunchContract, Symbols]:
    """The symbolic launch contract of one generated kernel (see the module docstring)."""
    rank = len(spec["domain"])
    D = [z3.Int(f"D{d}") for d in range(rank)]
    syms = Symbols(D)
    domain: list[Any] = [D[d] == spec["domain"][d] for d in spec["fixed"]]
    args: dict[str, Any] = {f"D{d}": D[d] for d in range(rank)}
    strides: list[Any] = []  # every operand stride: >= 0 (0 where the operand broadcasts)
    for i, slot in enumerate(spec["slots"]):
        shape = tuple(D[d] if d is not None else z3.IntVal(n) for d, n in zip(slot["dims"], slot["shape"]))
        st = tuple(z3.Int(f"s{i}_{k}") for k in range(len(shape)))
        args[f"in{i}_ptr"] = Tensor(shape, st)
        args.update({f"s{i}_{k}": x for k, x in enumerate(st)})
        strides += st

    def size(name: str, dims: list[int]) -> Any:
        sym = z3.Int(name)
        syms.defs[name] = (sym, dims)
        domain.append(sym == _prod([D[d] for d in dims]))
        return sym

    consts = {**constexprs, "EMULATE": False}
    witnesses: dict[str, Any] = {}
    if spec["kind"] == "pointwise":
        numel = size("NUMEL", list(range(rank)))
        args["NUMEL"] = numel
        for j, _ in enumerate(spec["outputs"]):
            args[f"out{j}_ptr"] = Tensor((numel,), (1,), output=True)
            witnesses[f"out{j}_ptr"] = _flat_witness
        grid: Any = lambda c: (cdiv(numel, c["BLOCK"]),)  # noqa: E731
    else:
        red = spec["red"]
        outer = [d for d in range(rank) if d not in red]
        M, N = size("M", outer), size("N", red)
        args.update(M=M, N=N)
        cs = [size(f"cs{d}", list(range(d + 1, rank))) for d in range(rank - 1)] + [z3.IntVal(1)]
        args.update({f"cs{d}": cs[d] for d in range(rank - 1)})
        args[f"cs{rank - 1}"] = 1
        for j, o in enumerate(spec["outputs"]):
            if o["form"] == "full":
                args[f"out{j}_ptr"] = Tensor(tuple(D), tuple(cs), output=True)
                witnesses[f"out{j}_ptr"] = _full_witness(D, N, outer, red, spec["looped"], spec["reverse"])
            else:
                args[f"out{j}_ptr"] = Tensor((M,), (1,), output=True)
                witnesses[f"out{j}_ptr"] = _row_witness
        grid = lambda c: (cdiv(M, c["ROWS"]),)  # noqa: E731
        block = consts["BLOCK_N"]
        domain.append(N + block <= INT32_MAX if spec["looped"] else N <= block)
    for v in args.values():  # every scalar argument is an int32 one
        for e in ([v] if isinstance(v, z3.ExprRef) else []):
            domain.append(e <= INT32_MAX)
    c = LaunchContract(kernel=kernel, args=args, grid=grid, constexprs=[consts], domain=domain,
                       name=spec["kernel"], witnesses=witnesses, may_be_zero=strides)
    c.bounded_shapes = bounded_shapes(spec, syms, consts)
    return c, syms


def _flat_witness(c: dict[str, Any]) -> Witness:
    b = c["BLOCK"]
    return Witness(writer=lambda e: Writer(pid=(e / b,), lanes=(e % b,)),
                   element=lambda store, pid, iters, lanes: (pid[0] * b + lanes[0],))


def _row_witness(c: dict[str, Any]) -> Witness:
    """Row m is written by program m // ROWS, lane (m % ROWS, 0) of its (ROWS, 1) column."""
    r = c["ROWS"]
    return Witness(writer=lambda m: Writer(pid=(m / r,), lanes=(m % r, 0)),
                   element=lambda store, pid, iters, lanes: (pid[0] * r + lanes[0],))


def _full_witness(D: list[Any], N: Any, outer: list[int], red: list[int], looped: bool, reverse: bool):
    def lin(idx: tuple, dims: list[int]) -> Any:
        out: Any = None
        for d in dims:
            out = idx[d] if out is None else out * D[d] + idx[d]
        return z3.IntVal(0) if out is None else out

    def split(flat: Any, dims: list[int], idx: list[Any]) -> None:
        for d in reversed(dims[1:]):
            idx[d], flat = flat % D[d], flat / D[d]
        if dims:
            idx[dims[0]] = flat

    def make(c: dict[str, Any]) -> Witness:
        b, r = c["BLOCK_N"], c["ROWS"]

        def writer(*e: Any) -> Writer:
            t, row = lin(e, red), lin(e, outer)
            col = N - 1 - t if reverse else t
            if looped:
                return Writer(pid=(row / r,), iters=(col / b,), lanes=(row % r, col % b))
            return Writer(pid=(row / r,), lanes=(row % r, col))

        def element(store: Any, pid: tuple, iters: tuple, lanes: tuple) -> tuple:
            col = iters[0] * b + lanes[1] if looped else lanes[1]
            idx: list[Any] = [None] * len(D)
            split(pid[0] * r + lanes[0], outer, idx)
            split(N - 1 - col if reverse else col, red, idx)
            return tuple(idx)

        return Witness(writer=writer, element=element)

    return make


def bounded_shapes(spec: dict[str, Any], syms: Symbols, consts: dict[str, Any]) -> list[dict[str, int]]:
    """Concrete shapes for the bounded fallback: the captured one (operands contiguous), all dims 1,
    and small odd sizes (the dims a cat fixes kept; a whole row within its BLOCK_N)."""
    rank = len(spec["domain"])
    red = set(spec["red"])
    out = []
    for sizes in (list(spec["domain"]), [1] * rank, [3 if d % 2 else 5 for d in range(rank)]):
        sizes = [spec["domain"][d] if d in spec["fixed"] else s for d, s in enumerate(sizes)]
        if spec["kind"] == "rows" and not spec["looped"]:
            while math.prod(sizes[d] for d in red) > consts["BLOCK_N"]:
                big = max((d for d in red if d not in spec["fixed"] and sizes[d] > 1), key=lambda d: sizes[d],
                          default=None)
                if big is None:
                    break
                sizes[big] = max(1, sizes[big] // 2)
        env = concrete(spec, syms, sizes)
        if env not in out:
            out.append(env)
    return out


def concrete(spec: dict[str, Any], syms: Symbols, sizes: list[int], strides: dict[str, int] | None = None
             ) -> dict[str, int]:
    """Values of every size symbol at domain dims ``sizes`` (operand strides: given, or those of a
    contiguous operand of each slot's captured broadcast, scaled to the sizes)."""
    env = {f"D{d}": int(s) for d, s in enumerate(sizes)}
    for name, (_, dims) in syms.defs.items():
        env[name] = math.prod(sizes[d] for d in dims)
    for i, slot in enumerate(spec["slots"]):
        shape = [sizes[d] if d is not None else n for d, n in zip(slot["dims"], slot["shape"])]
        lead = len(shape) - len(slot["operand"])  # the operand's dims, right-aligned to the shape read
        st, acc = [0] * len(shape), 1
        for k in reversed(range(len(shape))):
            if k >= lead and slot["operand"][k - lead] == slot["shape"][k]:  # not broadcast: contiguous
                st[k], acc = acc, acc * shape[k]
        for k in range(len(shape)):
            env[f"s{i}_{k}"] = int(strides[f"s{i}_{k}"]) if strides is not None else st[k]
    return env


# ---- the emitted launch, checked against the contract --------------------------------------------------
@dataclass
class Launch:
    """What the emitted launcher passed to its kernel at the captured shapes."""

    grid: tuple[int, ...]
    args: dict[str, Any]  # kernel parameter -> value (tensors: the meta tensors given or allocated)
    constexprs: dict[str, Any]
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


def record(module: Any, spec: dict[str, Any]) -> Launch:
    """Run the launcher of ``spec`` on ``meta`` tensors of the captured operand shapes, with a stand-in
    for its kernel that records the launch (nothing is computed or allocated)."""
    name, real = spec["kernel"], getattr(module, spec["kernel"])
    params = list(inspect.signature(real.fn).parameters)
    calls: list[tuple] = []

    class _Recorder:
        def __getitem__(self, grid: Any) -> Any:
            return lambda *a, **kw: calls.append((grid, a, kw))

    inputs = [torch.empty(s["operand"], device="meta") for s in spec["slots"]]
    module.__dict__[name] = _Recorder()
    try:
        outs = getattr(module, spec["launcher"])(torch.device("meta"), *inputs)
    finally:
        module.__dict__[name] = real
    if len(calls) != 1:
        raise ValueError(f"launcher {spec['launcher']} launched {len(calls)} times (one expected)")
    grid, a, kw = calls[0]
    bound = dict(zip(params, a))
    bound.update({k: v for k, v in kw.items() if k in params})
    consts = {k: v for k, v in bound.items() if k in _constexpr_names(real)}
    return Launch(tuple(grid), bound, consts, inputs, list(outs))


def _constexpr_names(jit_fn: Any) -> set[str]:
    """The parameters annotated ``tl.constexpr`` (an object, or a string under postponed annotations)."""
    return {n for n, p in inspect.signature(jit_fn.fn).parameters.items() if "constexpr" in str(p.annotation)}


def launch_check(c: LaunchContract, syms: Symbols, spec: dict[str, Any], launch: Launch) -> Obligation:
    """Whether the launch the emitted launcher makes at the captured shapes is an instance of ``c``:
    ``proved`` (it is: every value below agrees), ``failed`` with the disagreements, or ``unknown``
    when the kernel's parameters are not the ones this module writes contracts for (a codegen change
    it does not know: nothing is claimed either way)."""
    subject = f"{spec['launcher']} at {spec['domain']}"
    consts = c.constexprs[0]
    known = set(c.args) | set(consts)
    if set(launch.args) != known:
        return Obligation("launch", subject, "unknown", "the kernel's parameters are not those of the contract: "
                          f"unknown {sorted(set(launch.args) - known)}, absent {sorted(known - set(launch.args))}")
    strides = {k: v for k, v in launch.args.items() if k.startswith("s") and "_" in k and isinstance(v, int)}
    env = concrete(spec, syms, spec["domain"], strides)
    bad: list[str] = []

    def val(e: Any) -> Any:
        if not isinstance(e, z3.ExprRef):
            return e
        pairs = [(z3.Int(k), z3.IntVal(v)) for k, v in env.items()]
        r = z3.simplify(z3.substitute(e, *pairs))
        return r.as_long() if z3.is_int_value(r) else (z3.is_true(r) if z3.is_bool(r) else str(r))

    for p, v in launch.args.items():
        want = c.args.get(p, consts.get(p))
        if p == "EMULATE":
            continue
        if isinstance(want, Tensor) and p.startswith("in"):
            i = int(p[2:-4])
            slot, shape = spec["slots"][i], [val(x) for x in want.shape]
            if v is not launch.inputs[i] or shape != slot["shape"]:
                bad.append(f"{p}: the launcher passes operand {slot['node']} read as {slot['shape']}, the "
                           f"contract has shape {shape}")
        elif isinstance(want, Tensor):
            out = launch.outputs[int(p[3:-4])]
            shape, st = [val(x) for x in want.shape], [val(x) for x in want.strides]
            flat = len(shape) == 1 and shape[0] == out.numel()
            if not (v is out and out.is_contiguous() and (flat or (shape, st) == (list(out.shape), list(out.stride())))):
                bad.append(f"{p}: the launcher allocates {list(out.shape)} strides {list(out.stride())}, the "
                           f"contract has {shape} strides {st}")
        elif val(want) != v:
            bad.append(f"{p}: the launcher passes {v!r}, the contract {val(want)!r}")
    want_grid = [val(g) for g in c.grid_for(consts)]
    if want_grid != list(launch.grid):
        bad.append(f"grid: the launcher launches {list(launch.grid)}, the contract {want_grid}")
    for k, v in launch.constexprs.items():
        if k != "EMULATE" and consts.get(k) != v:
            bad.append(f"constexpr {k}: the launcher passes {v!r}, the contract {consts.get(k)!r}")
    outside = [str(a) for a in c.assumptions(consts) if val(a) is not True]
    if outside:
        bad.append("the captured launch lies outside the contract's domain: " + "; ".join(outside[:4]))
    if bad:
        return Obligation("launch", subject, "failed", "; ".join(bad[:6]), {"sizes": env})
    return Obligation("launch", subject, "proved", "the emitted launch at the captured shapes is an instance of the "
                      "contract (grid, scalar arguments, constexprs, tensor shapes and strides, domain)")
