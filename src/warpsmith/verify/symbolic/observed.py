"""Proofs of the Triton launches ``warpsmith check`` observed, from source a whitelist admits.

``warpsmith check`` records each launch of a candidate's Triton kernels in the candidate's process
(check/launches.py): the grid, every argument (tensors as shape, strides and storage extent), the
constexprs. The prover traces a kernel by *running its Python* against a symbolic ``tl``, so the
kernel's source is untrusted code: it is never imported. Instead

1. :func:`kernel_source` reads the kernel's function out of the candidate's file by its AST and
   :func:`refusals` admits only Triton's DSL: statements and expressions of the kernel language; calls
   of ``tl.*``, ``triton.cdiv``/``next_power_of_2``, ``range``/``min``/``max``/``int``/``float``/``bool``/
   ``abs``/``len``, the value methods ``to``/``reshape``/``trans``/``permute``/``expand_dims``/
   ``broadcast_to``/``split`` and ``@triton.jit`` functions of the same file (checked the same way);
   attributes only of ``tl``/``triton`` and ``dtype``/``element_ty``/``T``/``shape`` of values; no dunder
   name or attribute (``__class__``, ``__globals__``); no global but the file's numeric constants and its jit
   functions; no ``import``, ``lambda``, comprehension, ``with``, ``try``, ``global``, ``assert``,
   nested ``def``, starred or ``**`` arguments. Anything else makes the launch *not provable* (named),
   never a rejection.
2. What is admitted runs in a process of its own (:func:`main`, ``python -m
   warpsmith.verify.symbolic.observed JOBS OUT``, with memory and CPU limits set before any job is
   read), from a text holding only those functions' lines (everything else blanked, so lines keep
   their numbers), with the constants as plain values.
3. Each launch becomes a :class:`LaunchContract` with every size a number: the grid observed, each
   tensor's shape and strides (or, for a view that does not reach the end of its storage, the storage
   that follows its first element as one flat extent: what the kernel may touch without a fault),
   each integer argument's value, float arguments as data, the constexprs as launched. Its
   ``in_bounds`` and ``race_free`` obligations (a race: two *programs* storing to one element; atomics
   are exempt) are proved, or settled on the one shape there is (the launch itself: exhaustive), or run
   concretely where the tracer cannot follow the kernel (concrete.py).

One JSON line per job is written as soon as it is done, so a time limit that stops the process keeps
what was finished.
"""
from __future__ import annotations

import ast
import json
import linecache
import sys
import time
from typing import Any

BUILTIN_CALLS = frozenset({"range", "min", "max", "int", "float", "bool", "abs", "len"})
METHODS = frozenset({"to", "reshape", "trans", "permute", "expand_dims", "broadcast_to", "split"})
VALUE_ATTRS = frozenset({"dtype", "element_ty", "T", "shape"}) | METHODS
TRITON_ATTRS = frozenset({"language", "cdiv", "next_power_of_2", "jit"})
OBLIGATIONS = ("in_bounds", "race_free")
_NODES = (ast.FunctionDef, ast.arguments, ast.arg, ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For,
          ast.While, ast.If, ast.Break, ast.Continue, ast.Pass, ast.Return, ast.Name, ast.Load, ast.Store,
          ast.Constant, ast.Tuple, ast.List, ast.Subscript, ast.Slice, ast.BinOp, ast.UnaryOp, ast.BoolOp,
          ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Attribute, ast.operator, ast.unaryop, ast.boolop,
          ast.cmpop, ast.expr_context)
_CMP = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot)


class Module:
    """What the whitelist needs of a kernel file: its top-level functions, numeric constants, imports."""

    def __init__(self, text: str, jit: Any = None) -> None:
        self.text = text
        self._jit = set(jit) if jit is not None else None  # the jit functions, where decorators were blanked
        self.tree = ast.parse(text)
        self.functions: dict[str, ast.FunctionDef] = {}
        self.constants: dict[str, Any] = {}
        self.aliases: dict[str, str] = {}  # local name -> "triton" | "triton.language" (what it is bound to)
        assigned: dict[str, int] = {}
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in ("triton", "triton.language"):
                        self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "triton"
            elif isinstance(node, ast.ImportFrom) and node.module == "triton" and node.level == 0:
                for a in node.names:
                    if a.name == "language":
                        self.aliases[a.asname or "language"] = "triton.language"
            targets = []
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                targets = [(node.targets[0].id, node.value)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                targets = [(node.target.id, node.value)]
            for name, value in targets:
                assigned[name] = assigned.get(name, 0) + 1
                v = _constant(value)
                if v is not None:
                    self.constants[name] = v
        for name, n in assigned.items():  # a name bound twice has no one value
            if n > 1:
                self.constants.pop(name, None)

    def jit(self, name: str) -> bool:
        """Whether top-level function ``name`` carries a ``jit`` decorator (possibly under autotune/heuristics)."""
        f = self.functions.get(name)
        if self._jit is not None:
            return f is not None and name in self._jit
        return f is not None and any("jit" in ast.unparse(d) for d in f.decorator_list)


def _constant(node: ast.AST) -> Any:
    """The value of a numeric constant expression (``128``, ``2**10``, ``-1``, ``tl.constexpr(64)``), else None."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
            and ast.unparse(node.func) in ("tl.constexpr", "triton.language.constexpr"):
        node = node.args[0]
    try:
        v = _fold(node)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        return None
    return v if type(v) in (int, float, bool) else None


def _fold(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _fold(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left), _fold(node.right)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b,
               ast.Mod: lambda: a % b, ast.Div: lambda: a / b, ast.LShift: lambda: a << b if 0 <= b < 64 else None,
               ast.Pow: lambda: a ** b if abs(b) < 64 else None}
        fn = ops.get(type(node.op))
        if fn is None:
            raise ValueError(node)
        v = fn()
        if v is None or (isinstance(v, int) and abs(v) > 2**63):
            raise ValueError(node)
        return v
    raise ValueError(node)


def refusals(module: Module, name: str, _seen: set | None = None) -> list[str]:
    """Why the jit function ``name`` of ``module`` (and the jit functions it calls) is not plain Triton DSL;
    empty when it is (the module docstring lists what is admitted)."""
    seen = _seen if _seen is not None else set()
    if name in seen:
        return []
    seen.add(name)
    f = module.functions.get(name)
    if f is None:
        return [f"{name} is not a top-level function of its file"]
    out: list[str] = []
    a = f.args
    if a.vararg or a.kwarg:
        out.append(f"{name} takes *args or **kwargs")
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    local = {n.id for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    shadow = local & ({"tl", "triton"} | BUILTIN_CALLS)
    if shadow:
        out.append(f"assigns to {', '.join(sorted(shadow))}")
    helpers: list[str] = []
    nodes = [f.args, *f.body]
    called = {id(n.func) for root in nodes for n in ast.walk(root) if isinstance(n, ast.Call)}  # named once, as calls
    for root in nodes:
        for node in ast.walk(root):
            where = f" (line {getattr(node, 'lineno', f.lineno)})"
            if not isinstance(node, _NODES) or (isinstance(node, ast.FunctionDef) and node is not f):
                out.append(f"`{type(node).__name__}`{where}")
                continue
            if isinstance(node, ast.cmpop) and not isinstance(node, _CMP):
                out.append(f"`{type(node).__name__}` comparison{where}")
            if isinstance(node, ast.Name):
                if node.id.startswith("__"):
                    out.append(f"the name {node.id}{where}")
                elif isinstance(node.ctx, ast.Load) and node.id not in params | local | {"tl", "triton"} \
                        | BUILTIN_CALLS and node.id not in module.constants and id(node) not in called:
                    if module.jit(node.id):
                        helpers.append(node.id)  # called, or passed (a tl.reduce combine function)
                    else:
                        out.append(f"the global {node.id}, neither a numeric constant nor a @triton.jit function of "
                                   f"the file{where}")
            elif isinstance(node, ast.Attribute):
                if node.attr.startswith("__"):
                    out.append(f"the attribute .{node.attr}{where}")
                else:
                    why = _attribute(node, {"tl"})
                    if why:
                        out.append(why + where)
            elif isinstance(node, ast.Call):
                fn = node.func
                if any(k.arg is None for k in node.keywords):
                    out.append(f"a ** argument{where}")
                if isinstance(fn, ast.Name):
                    if fn.id in params | local:
                        out.append(f"a call of the value {fn.id}{where}")
                    elif module.jit(fn.id):
                        helpers.append(fn.id)
                    elif fn.id not in BUILTIN_CALLS and not fn.id.startswith("__"):  # (a __name is named above)
                        out.append(f"a call of {fn.id}, not a tl function or a @triton.jit function of the file{where}")
                elif not isinstance(fn, ast.Attribute):
                    out.append(f"a call of {ast.unparse(fn)}{where}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and len(node.value) > 200:
                out.append(f"a long string constant{where}")
    for h in dict.fromkeys(helpers):
        out += [f"{h}: {r}" for r in refusals(module, h, seen)]
    return out


def _attribute(node: ast.Attribute, tl_names: set[str]) -> str:
    """Why an attribute access is not the DSL's ('' when it is)."""
    chain, x = [node.attr], node.value
    while isinstance(x, ast.Attribute):
        chain.append(x.attr)
        x = x.value
    chain.reverse()
    if isinstance(x, ast.Name) and x.id in tl_names:
        return ""
    if isinstance(x, ast.Name) and x.id == "triton":
        return "" if chain[0] in TRITON_ATTRS else f"the attribute triton.{chain[0]}"
    if node.attr in VALUE_ATTRS:  # a value's own: x.to(...), p.dtype.element_ty, x.T
        return ""
    return f"the attribute .{node.attr} of {ast.unparse(node.value)}"


def kernel_source(module: Module, name: str) -> tuple[str, list[str]]:
    """The file's text with only ``name`` and the jit functions it calls kept (decorators and every other
    line blanked, so that each kept line keeps its number), and the names of those functions."""
    keep = [name]
    todo = [name]
    while todo:
        f = module.functions[todo.pop()]
        for node in ast.walk(f):
            if isinstance(node, ast.Name) and node.id != f.name and module.jit(node.id) and node.id not in keep \
                    and node.id not in module.constants:
                keep.append(node.id)
                todo.append(node.id)
    lines = module.text.splitlines()
    kept = [""] * len(lines)
    for n in keep:
        f = module.functions[n]
        for i in range(f.lineno - 1, f.end_lineno):
            kept[i] = lines[i]
    return "\n".join(kept) + "\n", keep


def find_kernel(module: Module, function: str, line: int) -> str | None:
    """The top-level function ``function`` whose definition (first decorator or ``def``) is on ``line``,
    or the only one of that name."""
    f = module.functions.get(function)
    if f is None:
        return None
    first = min([f.lineno] + [d.lineno for d in f.decorator_list])
    return function if line in (first, f.lineno) or line <= 0 else None


# ---- the proving process ------------------------------------------------------------------------------
class SourceKernel:
    """A kernel function compiled from admitted source, as the tracer takes a jit function."""

    def __init__(self, fn: Any) -> None:
        import inspect

        self.fn = fn
        self.arg_names = list(inspect.signature(fn).parameters)
        self.__name__ = fn.__name__


_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8e4nv": "float8e4nv",
                "fp8e5": "float8e5", "i1": "int1", "int1": "int1"}


def _value(desc: Any, what: str) -> Any:
    """A launch argument's value as the tracer takes it (``desc`` as check/launches.py records it)."""
    from .contract import Tensor
    from .lang import DTYPES

    if not isinstance(desc, dict) or len(desc) != 1:
        raise ValueError(f"{what}: malformed record")
    (kind, v), = desc.items()
    if kind == "tensor":
        shape, strides, extent = [int(x) for x in v["shape"]], [int(x) for x in v["strides"]], int(v["extent"])
        if len(shape) != len(strides) or any(s < 0 for s in strides) or extent < 0:
            raise ValueError(f"{what}: a tensor with negative strides or a malformed shape")
        span = sum((n - 1) * s for n, s in zip(shape, strides)) if all(n > 0 for n in shape) else -1
        if span + 1 == extent and shape:
            return Tensor(tuple(shape), tuple(strides))
        return Tensor((extent,), (1,))  # the storage from the tensor's first element on, flat
    if kind in ("int", "bool"):
        return int(v)
    if kind == "float":
        return float(v)
    if kind == "none":
        return None
    if kind == "str":
        return str(v)
    if kind == "dtype":
        name = _DTYPE_NAMES.get(str(v), str(v))
        if name not in DTYPES:
            raise ValueError(f"{what}: the dtype {v} is not modelled")
        return DTYPES[name]
    raise ValueError(f"{what}: an argument of type {v} is not modelled")


def prove_job(job: dict[str, Any], timeout_ms: int) -> dict[str, Any]:
    """One observed launch: its obligations (``OBLIGATIONS``), or why it could not be proved."""
    from .contract import LaunchContract, Tensor
    from types import SimpleNamespace

    from .lang import DTYPES, constexpr
    from .prove import Prover

    out = {"id": job.get("id"), "kernel": job["kernel"]}
    t0 = time.perf_counter()
    module = Module(job["source"], jit=job["functions"])
    why = refusals(module, job["kernel"])
    if why:  # the parent checked this already; a second look costs nothing
        return {**out, "status": "not_provable", "why": "; ".join(why[:3])}
    filename = job["filename"]
    linecache.cache[filename] = (len(job["source"]), None, job["source"].splitlines(True), filename)
    ns: dict[str, Any] = {k: v for k, v in job.get("constants", {}).items() if type(v) in (int, float, bool)}
    stub = SimpleNamespace(constexpr=constexpr, **DTYPES)  # what a definition evaluates: annotations, defaults
    ns.update(tl=stub, triton=SimpleNamespace(language=stub, jit=lambda f=None, **_: f), __builtins__=__builtins__)
    try:
        exec(compile(job["source"], filename, "exec"), ns)  # only the admitted functions' definitions
        for name in job["functions"]:
            ns[name] = SourceKernel(ns[name])
        constexpr = set(job["constexprs"])
        args, consts = {}, {}
        for name in job["params"]:
            v = _value(job["args"][name], name)
            (consts if name in constexpr else args)[name] = v
        if not all(isinstance(v, (Tensor, int, float, type(None))) for v in args.values()):
            return {**out, "status": "not_provable", "why": "a runtime argument that is not a tensor, number or None"}
        grid = tuple(int(g) for g in job["grid"])
        contract = LaunchContract(kernel=ns[job["kernel"]], args=args, grid=grid, constexprs=[consts],
                                  bounded_shapes=[{}], name=job["kernel"])
        rep = Prover(contract, consts, timeout_ms, only=OBLIGATIONS, program_races=True).run()
    except Exception as exc:  # noqa: BLE001 - a malformed job or a kernel the prover cannot take
        return {**out, "status": "not_provable", "why": f"{type(exc).__name__}: {exc}"}
    return {**out, "status": "done", "obligations": [o.to_json() for o in rep.obligations],
            "seconds": round(time.perf_counter() - t0, 3)}


def main(argv: list[str]) -> None:
    """``JOBS OUT [MEMORY_BYTES CPU_S]``: prove each job of the JSON list JOBS, one JSON line per job to OUT."""
    import resource

    jobs_path, out_path = argv[0], argv[1]
    memory = int(argv[2]) if len(argv) > 2 else 8 << 30
    cpu = int(argv[3]) if len(argv) > 3 else 600
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    with open(jobs_path) as f:
        doc = json.load(f)
    timeout_ms = int(doc.get("timeout_ms", 3000))
    with open(out_path, "a") as out:
        for job in doc["jobs"]:
            try:
                res = prove_job(job, timeout_ms)
            except Exception as exc:  # noqa: BLE001 - never lose the other jobs
                res = {"id": job.get("id"), "kernel": job.get("kernel"), "status": "not_provable",
                       "why": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(res) + "\n")
            out.flush()


#: started as ``python -c BOOT JOBS OUT ...``: imports this module without ``warpsmith.verify``'s package
#: initialiser (which imports torch: a second and more of start-up for nothing the prover uses)
BOOT = (
    "import sys, types, pathlib\n"
    "import warpsmith\n"
    "pkg = types.ModuleType('warpsmith.verify')\n"
    "pkg.__path__ = [str(pathlib.Path(warpsmith.__file__).parent / 'verify')]\n"
    "sys.modules.setdefault('warpsmith.verify', pkg)\n"
    "from warpsmith.verify.symbolic.observed import main\n"
    "main(sys.argv[1:])\n"
)


if __name__ == "__main__":
    main(sys.argv[1:])
