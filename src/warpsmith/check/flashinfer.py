"""FlashInfer-Bench / SOL-ExecBench problem folders: ``definition.json`` and ``workload.jsonl``.

The supported subset follows the public schema docs, FlashInfer-Bench's ``docs/flashinfer_trace/``
and SOL-ExecBench's ``docs/``. Anything outside it is refused with a message (exit 2).

**definition.json**

- ``name`` (str), ``reference`` (Python source defining ``run``), ``axes``, ``inputs`` and
  ``outputs`` are required.
- ``op_type``, ``tags``, ``description`` and ``constraints`` are optional.
- ``custom_inputs_entrypoint`` is optional. It names a function in the reference source,
  ``fn(axes_and_scalars, device) -> {name: tensor}``.
- Axes:
  - ``{"type": "const", "value": int}``;
  - ``{"type": "var"}``;
  - ``{"type": "expr", "expression": "hidden // heads"}``, using ``+ - * / // % **``,
    parentheses and axis names.
- ``constraints`` are Python-syntax comparisons of axes, such as ``"H_qo == H_kv * H_r"``.
  They are checked for every workload, after ``--set``. A constraint that names an input (SOL-ExecBench's
  ``"num_kv_indices == kv_indptr[-1].item()"``) is a *data constraint*: it is evaluated on every draw
  of inputs (axes and inputs by name, ``torch`` available), and a draw that breaks it is redrawn, up to
  :data:`REDRAWS` times; a constraint that no draw satisfies is refused (exit 2) with its text.
- Tensors are ``{"shape": [axis names] | [] | null, "dtype": ...}``. ``null`` is a Python
  scalar, and ``[]`` a 0-d tensor.
- Dtypes: float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int64, int32,
  int16, int8, uint8 and bool. ``float4_*`` is refused.
- Scalar outputs (``shape: null``) are refused.

**workload.jsonl**

- Each line is a bare workload ``{"uuid", "axes", "inputs"}``, or one wrapped as a trace
  ``{"definition", "workload": {...}, ...}``.
- ``axes`` gives every ``var`` axis.
- Each input's ``type`` is one of:
  - ``random``: fresh draws every trial. Floats use the trial's distribution
    (:data:`~.formats.DISTRIBUTIONS`, structured ones included: zeros, all-zero rows, repeated
    rows, powers of two, subnormals of the input's own dtype, fp8 included); ints are drawn
    uniformly from [0, 8); bools are fair coin flips.
  - ``scalar`` (with ``value``).
  - ``custom``: all inputs are then produced by ``custom_inputs_entrypoint``, with torch's RNG
    freshly seeded every trial. The input distributions do not apply to these.
- ``safetensors`` is refused. Its data is fixed, which defeats fresh inputs per trial.
- An input with no descriptor is treated as ``random``.
- Workloads that become identical after ``--set`` are merged.

**solution.json**: see :mod:`.solution`.

**--set** ``NAME=VALUE`` sets a ``var`` axis in every workload (a positive integer).

**CPU cap** (``cap=N``, ``--cpu-cap N``): every axis above ``N``, ``var`` and ``const``, is set to ``N``
(``expr`` axes follow), so that a problem written for a GPU is checked at sizes the CPU and Triton's
interpreter finish. A ``const`` axis the reference refuses at the capped size (its own ``assert
hidden_size == 4096``) or that breaks a constraint keeps its value: the consts are capped all together
or not at all, decided by one run of the reference. ``--set`` values are not capped. What was capped
is in ``CheckProblem.info["cpu_cap"]`` (and so in the report).
"""
from __future__ import annotations

import ast
import json
import math
import operator
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from ..core.errors import InvalidInputError, UnknownNameError
from ..core.opspec import draw, on_device
from .formats import (DISTRIBUTIONS, Float64Oracle, Number, CheckProblem, Workload, as_outputs, exec_module, fork_rng,
                      unique_module_name)

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "int64": torch.int64,
    "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
INT_HIGH = 8  # random integer inputs are drawn from [0, INT_HIGH)
REDRAWS = 256  # draws tried for inputs that satisfy the data constraints

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge}


def safe_eval(text: str, names: Mapping[str, Number]) -> Any:
    """Evaluate an axis expression or constraint: numbers, axis names, arithmetic, comparisons, and/or/not."""
    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in names:
                raise InvalidInputError("axis expression", "names of axes with known values", f"{n.id} in {text!r}")
            return names[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            return _BINOPS[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.UAdd, ast.USub, ast.Not)):
            v = ev(n.operand)
            return v if isinstance(n.op, ast.UAdd) else (-v if isinstance(n.op, ast.USub) else not v)
        if isinstance(n, ast.Compare) and all(type(o) in _CMPS for o in n.ops):
            left, ok = ev(n.left), True
            for op, right in zip(n.ops, n.comparators):
                r = ev(right)
                ok, left = ok and _CMPS[type(op)](left, r), r
            return ok
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else any(vals)
        raise InvalidInputError("axis expression", "arithmetic on axis names (+ - * / // % **) and comparisons",
                                text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise InvalidInputError("axis expression", "a Python-syntax expression", text) from None
    try:
        return ev(tree)
    except ZeroDivisionError:
        raise InvalidInputError("axis expression", "no division by zero", text) from None


def _dtype(name: Any, where: str) -> torch.dtype:
    if isinstance(name, str) and name in DTYPES:
        return DTYPES[name]
    raise UnknownNameError(f"dtype of {where} (supported subset)", str(name), list(DTYPES))


def _tensor_specs(d: dict, key: str) -> dict[str, tuple[list[str] | None, torch.dtype]]:
    specs = d.get(key)
    if not isinstance(specs, dict) or not specs:
        raise InvalidInputError(f"definition.json {key}", "an object of name -> {shape, dtype}", specs)
    out = {}
    for name, s in specs.items():
        if not isinstance(s, dict) or "shape" not in s or "dtype" not in s:
            raise InvalidInputError(f"{key}.{name}", "an object with shape and dtype", s)
        shape = s["shape"]
        if shape is not None and (not isinstance(shape, list) or not all(isinstance(a, str) for a in shape)):
            raise InvalidInputError(f"{key}.{name}.shape", "a list of axis names, [] or null", shape)
        out[name] = (shape, _dtype(s["dtype"], f"{key}.{name}"))
    return out


def _paths(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        return path / "definition.json", path / "workload.jsonl"
    return path, path.parent / "workload.jsonl"


def _workload_lines(path: Path) -> list[dict]:
    if not path.exists():
        raise InvalidInputError("problem folder", "a workload.jsonl beside definition.json", f"none in {path.parent}")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidInputError("workload.jsonl", "one JSON object per line", f"line {i}: {e.msg}") from None
        if isinstance(doc, dict) and isinstance(doc.get("workload"), dict):
            doc = doc["workload"]
        if not isinstance(doc, dict) or not isinstance(doc.get("axes", {}), dict):
            raise InvalidInputError("workload.jsonl", "objects with axes and inputs", f"line {i}")
        doc["_line"] = i
        out.append(doc)
    if not out:
        raise InvalidInputError("workload.jsonl", "at least one workload", "an empty file")
    return out


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file; unreadable or malformed → InvalidInputError naming the file and line."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(what, "a readable JSON file", f"{path}: {e}") from None
    except json.JSONDecodeError as e:
        raise InvalidInputError(what, "valid JSON", f"{path.name}:{e.lineno}: {e.msg}") from None


def load_problem(path: Path, overrides: dict[str, Number], *, seed: int, device: torch.device,
                 cap: int | None = None) -> CheckProblem:
    """Load a FlashInfer-Bench / SOL-ExecBench problem (see the module docstring); ``cap``: the CPU cap."""
    def_path, wl_path = _paths(path)
    if not def_path.exists():
        raise InvalidInputError("REFERENCE", "a problem folder with definition.json", str(path))
    d = read_json(def_path, "definition.json")
    if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not isinstance(d.get("reference"), str):
        raise InvalidInputError("definition.json", "an object with name and reference (Python source)",
                                type(d).__name__)
    axes = d.get("axes")
    if not isinstance(axes, dict):
        raise InvalidInputError("definition.json axes", "an object of axis name -> {type, ...}", axes)
    const, var, expr = {}, [], {}
    for name, a in axes.items():
        kind = a.get("type") if isinstance(a, dict) else None
        if kind == "const" and isinstance(a.get("value"), int):
            const[name] = a["value"]
        elif kind == "var":
            var.append(name)
        elif kind == "expr" and isinstance(a.get("expression"), str):
            expr[name] = a["expression"]
        else:
            raise InvalidInputError(f"axis {name}", 'type "const" (with an int value), "var" or "expr"', a)
    inputs, outputs = _tensor_specs(d, "inputs"), _tensor_specs(d, "outputs")
    for name, (shape, _) in outputs.items():
        if shape is None:
            raise InvalidInputError(f"output {name}", "a tensor (scalar outputs are not supported)", "shape null")
    for name, value in overrides.items():
        if name not in var:
            what = "a const axis" if name in const else ("an expr axis" if name in expr else "not an axis")
            raise UnknownNameError(f"var axis of {d['name']} (--set; {name} is {what})", name, var)
        if not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"--set {name}", "a positive integer", value)
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise InvalidInputError("--cpu-cap", "a positive integer", cap)
    constraints, data_constraints = _split_constraints(d.get("constraints") or [], inputs)
    lines = _workload_lines(wl_path)

    def all_workloads(consts: dict[str, int], var_cap: int | None) -> list[Workload]:
        out, seen = [], set()
        for doc in lines:
            w = _workload(doc, consts, var, expr, constraints, inputs, overrides, var_cap)
            key = (tuple(sorted(w.axes.items())), tuple(sorted((k, repr(v)) for k, v in w.scalars.items())),
                   w.label.endswith("(custom)"))
            if key not in seen:
                seen.add(key)
                out.append(w)
        return out

    workloads = all_workloads(const, None)
    capped_consts = {k: min(v, cap) for k, v in const.items()} if cap is not None else const
    custom = any(w.label.endswith("(custom)") for w in workloads)
    ref_name = unique_module_name("fi_ref")
    if "triton" in d["reference"]:  # a reference that launches its own Triton kernels: on a CPU they must be
        from ..core import _triton  # noqa: F401  decorated for the interpreter (decided here, as for warpsmith's)
    try:
        module = exec_module(def_path, ref_name, source=d["reference"])
    except Exception as e:
        raise InvalidInputError("definition.json reference", "Python source that imports cleanly",
                                f"{type(e).__name__}: {e}") from None
    run = getattr(module, "run", None)
    if not callable(run):
        raise InvalidInputError("definition.json reference", "source defining a function run(...)", "no run")
    entry = d.get("custom_inputs_entrypoint")
    maker = getattr(module, entry, None) if isinstance(entry, str) else None
    if custom and not callable(maker):
        raise InvalidInputError("custom inputs", "custom_inputs_entrypoint naming a function of the reference", entry)
    out_names = tuple(outputs)

    def draw_inputs(w: Workload, gen: torch.Generator, dist: str, dev: torch.device) -> list[Any]:
        args = draw_once(w, gen, dist, dev)
        if not data_constraints:
            return args
        for _ in range(REDRAWS - 1):
            broken = _broken(data_constraints, w, inputs, args)
            if broken is None:
                return args
            args = draw_once(w, gen, dist, dev)  # the generator has moved on: a new draw
        broken = _broken(data_constraints, w, inputs, args)
        if broken is not None:
            raise InvalidInputError(f"constraint {broken!r} of {d['name']} (workload {w.label})",
                                    f"inputs drawn at random that satisfy it (tried {REDRAWS} draws; give the "
                                    "inputs a custom_inputs_entrypoint that makes them satisfy it)",
                                    f"false on every draw ({_shown(w)})")
        return args

    def draw_once(w: Workload, gen: torch.Generator, dist: str, dev: torch.device) -> list[Any]:
        if w.label.endswith("(custom)"):
            s = int(torch.randint(0, 2**62, (1,), generator=gen))
            with fork_rng(dev):
                torch.manual_seed(s)
                made = maker({**w.axes, **w.scalars}, dev)
            missing = [n for n in inputs if n not in made]
            if missing:
                raise InvalidInputError("custom_inputs_entrypoint", "a dict with every input", f"missing {missing}")
            return [made[n] for n in inputs]
        args = []
        for name, (shape, dtype) in inputs.items():
            if name in w.scalars:
                v = w.scalars[name]
                args.append(v if shape is None else torch.full([w.axes[a] for a in shape], v, dtype=dtype, device=dev))
            elif shape is None:
                args.append(_random_scalar(dtype, gen))
            else:
                args.append(_random_tensor(tuple(w.axes[a] for a in shape), dtype, dist, gen, dev))
        return args

    cap_info: dict[str, Any] | None = None
    if cap is not None:
        cap_info = {"cap": cap, "applied": True, "consts": {}, "consts_kept": None, "workloads": {}}
        full = {w.label: dict(w.axes) for w in workloads}
        try:
            workloads = all_workloads(capped_consts, cap)
            if capped_consts != const:  # the reference must take the capped consts (it may assert them)
                small = min(workloads, key=lambda w: math.prod(max(v, 1) for v in w.axes.values()))
                with torch.no_grad():
                    run(*draw_inputs(small, torch.Generator().manual_seed(seed), DISTRIBUTIONS[0], torch.device("cpu")))
            cap_info["consts"] = {k: [const[k], v] for k, v in capped_consts.items() if v != const[k]}
        except Exception as e:  # noqa: BLE001 - the reference (or a constraint) refuses the capped consts
            workloads = all_workloads(const, cap)
            cap_info["consts_kept"] = f"{type(e).__name__}: {e}"[:300]
        for w in workloads:
            before = full.get(w.label)
            if before is not None and before != w.axes:
                cap_info["workloads"][w.label] = {k: [before[k], v] for k, v in w.axes.items() if before.get(k) != v}

    def run_reference(args: list[Any]) -> tuple[Any, ...]:
        return as_outputs(run(*args), out_names)

    def run_oracle(args: list[Any]) -> tuple[Any, ...]:
        x64 = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        with Float64Oracle():
            return as_outputs(run(*x64), out_names)

    def allocate_outputs(w: Workload, dev: torch.device) -> list[torch.Tensor]:
        return [torch.empty([w.axes[a] for a in shape], dtype=dt, device=dev) for shape, dt in outputs.values()]

    return CheckProblem(
        name=d["name"], format="flashinfer", path=def_path, workloads=workloads, distributions=tuple(DISTRIBUTIONS),
        output_names=out_names, draw_inputs=draw_inputs, run_reference=run_reference, run_oracle=run_oracle,
        allocate_outputs=allocate_outputs, seed=seed, overrides=dict(overrides),
        info={"definition": d["name"], "var_axes": var, "const_axes": const,
              "outputs": {n: {"shape": s, "dtype": str(t).replace("torch.", "")} for n, (s, t) in outputs.items()},
              **({"cpu_cap": cap_info} if cap_info is not None else {}),
              **({"data_constraints": [c for c, _ in data_constraints]} if data_constraints else {})},
        context={"definition": d, "outputs": outputs, "reference_module": ref_name})


def _split_constraints(constraints: Any, inputs: dict) -> tuple[list[Any], list[tuple[str, Any]]]:
    """(axis constraints, data constraints with their compiled code): a constraint naming an input
    is evaluated on the drawn inputs."""
    if not isinstance(constraints, list):
        raise InvalidInputError("definition.json constraints", "a list of Python-syntax comparisons", constraints)
    axis, data = [], []
    for c in constraints:
        if not isinstance(c, str):
            axis.append(c)
            continue
        try:
            tree = ast.parse(c, mode="eval")
        except SyntaxError:
            raise InvalidInputError("constraint", "a Python-syntax expression", c) from None
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if names & set(inputs):
            data.append((c, compile(tree, f"<constraint {c}>", "eval")))
        else:
            axis.append(c)
    return axis, data


def _shown(w: Workload) -> str:
    return ", ".join(f"{k}={v}" for k, v in w.axes.items())


def _broken(data_constraints: list[tuple[str, Any]], w: Workload, inputs: dict, args: list[Any]) -> str | None:
    """The first data constraint the drawn ``args`` break, or None."""
    names: dict[str, Any] = {**w.axes, **dict(zip(inputs, args)), "torch": torch, "math": math}
    for text, code in data_constraints:
        try:
            ok = eval(code, {"__builtins__": {"int": int, "float": float, "bool": bool, "len": len, "abs": abs,
                                              "min": min, "max": max, "sum": sum, "all": all, "any": any}},
                      names)  # noqa: S307 - the definition's own constraint, as trusted as its reference
        except Exception as e:  # noqa: BLE001
            raise InvalidInputError(f"constraint {text!r} (workload {w.label})", "an expression over axes and "
                                    "inputs that evaluates", f"{type(e).__name__}: {e}") from None
        if not bool(ok):
            return text
    return None


def _workload(doc: dict, const: dict, var: list, expr: dict, constraints: list, inputs: dict,
              overrides: dict, cap: int | None = None) -> Workload:
    line = doc["_line"]
    axes: dict[str, Any] = dict(const)
    for name, v in doc.get("axes", {}).items():
        if name not in var:
            raise InvalidInputError(f"workload line {line} axes", "only var axes: " + ", ".join(var), name)
        axes[name] = min(v, cap) if cap is not None and isinstance(v, (int, float)) else v
    axes.update(overrides)
    missing = [a for a in var if a not in axes]
    if missing:
        raise InvalidInputError(f"workload line {line}", "a value for every var axis", f"missing {missing}")
    for name, text in expr.items():  # in order; an expression may use an earlier one
        axes[name] = safe_eval(text, axes)
    for name, v in axes.items():
        if isinstance(v, float) and v.is_integer():
            axes[name] = int(v)
        if isinstance(axes[name], bool) or not isinstance(axes[name], int) or axes[name] < 0:
            raise InvalidInputError(f"axis {name} (workload line {line})", "a non-negative integer", axes[name])
    for c in constraints:
        if not isinstance(c, str) or not safe_eval(c, axes):
            raise InvalidInputError(f"constraint (workload line {line})", f"{c} to hold",
                                    ", ".join(f"{k}={v}" for k, v in axes.items()))
    descs = doc.get("inputs", {}) or {}
    scalars: dict[str, Any] = {}
    kinds = set()
    for name, desc in descs.items():
        if name not in inputs:
            raise InvalidInputError(f"workload line {line} inputs", "names of definition inputs", name)
        kind = desc.get("type") if isinstance(desc, dict) else None
        kinds.add(kind)
        if kind == "scalar":
            if not isinstance(desc.get("value"), (int, float, bool)):
                raise InvalidInputError(f"scalar input {name}", "an int, float or bool value", desc.get("value"))
            scalars[name] = desc["value"]
        elif kind == "safetensors":
            raise InvalidInputError(f"input {name} (workload line {line})",
                                    "random, scalar or custom inputs (safetensors data is fixed, which defeats "
                                    "fresh inputs per trial)", "safetensors")
        elif kind not in ("random", "custom"):
            raise InvalidInputError(f"input {name} (workload line {line})", "type random, scalar or custom", kind)
    if "custom" in kinds and kinds != {"custom"}:
        raise InvalidInputError(f"workload line {line}", "custom for every input or for none", sorted(map(str, kinds)))
    label = str(doc.get("uuid", f"line {line}")) + (" (custom)" if kinds == {"custom"} else "")
    return Workload(label, {k: int(v) for k, v in axes.items()}, scalars)


def _random_scalar(dtype: torch.dtype, gen: torch.Generator) -> Any:
    u = float(torch.rand((), generator=gen))
    if dtype == torch.bool:
        return u < 0.5
    if dtype.is_floating_point:
        return u
    return 1 + int(u * (INT_HIGH - 1))


def _random_tensor(shape: tuple[int, ...], dtype: torch.dtype, dist: str, gen: torch.Generator,
                   dev: torch.device) -> torch.Tensor:
    if dtype.is_floating_point:
        return draw(shape, dist, gen, dtype, dev)  # fp8: drawn in float32 and cast, its own subnormals
    g = on_device(gen, dev)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g, device=dev).bool()
    return torch.randint(0, INT_HIGH, shape, generator=g, device=dev, dtype=dtype)
