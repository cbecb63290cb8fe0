"""Generated kernels up to names: the form two kernels share when they differ only in what they are
called, their docstring and the names of their local variables (the emitter names values after the
program's nodes, so one layer repeated makes kernels that differ in nothing else), and the launch
description with the node names dropped. :mod:`.proofs` keys the proofs it shares on these.
"""
from __future__ import annotations

import ast
import textwrap
from typing import Any

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp, ast.ClassDef, ast.Global, ast.Nonlocal)


def canonical_kernel(source: str, name: str) -> str:
    """``source`` (one ``def name(...)``, decorators allowed) with the function called ``_ws_kernel``,
    its docstring dropped and every local variable (a name bound in the body that is no parameter)
    renamed ``_v0, _v1, ...`` in order of first appearance. Parameters, globals (``tl``, helpers)
    and attribute and keyword names stay. A body with a scope of its own (a nested function, a
    comprehension, a lambda, ``global``/``nonlocal``) keeps its local names: the renaming must not
    cross scopes."""
    tree = ast.parse(textwrap.dedent(source))
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef) or fn.name != name:
        raise ValueError(f"expected the definition of {name}")
    fn.name, fn.decorator_list = "_ws_kernel", []
    if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) \
            and isinstance(fn.body[0].value.value, str):
        fn.body = fn.body[1:] or [ast.Pass()]
    inner = [n for stmt in fn.body for n in ast.walk(stmt)]
    if not any(isinstance(n, _SCOPES) for n in inner):
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        bound = {n.id for n in inner if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} - params
        fresh: dict[str, str] = {}
        names = sorted((n for n in inner if isinstance(n, ast.Name) and n.id in bound),  # ast.walk is breadth-
                       key=lambda n: (n.lineno, n.col_offset))  # first: the order of first appearance is the text's
        for n in names:
            n.id = fresh.setdefault(n.id, f"_v{len(fresh)}")
    return ast.unparse(fn)


def launch_shape(spec: dict[str, Any], sized: bool = True) -> dict[str, Any]:
    """A ``_WS_LAUNCHES`` entry without its kernel, launcher and node names; with ``sized=False`` also
    without the sizes the symbolic contract leaves free (:func:`.contracts.contract` binds only the
    fixed domain dims and the slot dims no domain dim maps to): those become None, and the operand
    shapes (used by the concrete launch check and the bounded shapes only) are dropped."""
    fixed = set(spec.get("fixed", []))
    out = {k: v for k, v in spec.items() if k not in ("kernel", "launcher", "slots", "outputs")}
    slots = [{k: v for k, v in s.items() if k != "node"} for s in spec.get("slots", [])]
    outputs = [{k: v for k, v in o.items() if k != "node"} for o in spec.get("outputs", [])]
    if not sized:
        out["domain"] = [s if d in fixed else None for d, s in enumerate(spec["domain"])]
        for s in slots:
            s.pop("operand", None)
            s["shape"] = [n if d is None else None for d, n in zip(s["dims"], s["shape"])]
        for o in outputs:
            o.pop("shape", None)
    return {**out, "slots": slots, "outputs": outputs}
