"""Names in one emitted file: a namespace allocator and an AST-based rename of global references.

An emitted file is one Python module holding the problem's source, the library's ``@triton.jit``
kernels and helpers (copied from several ``warpsmith.ops`` modules), their constants and imports,
the generated kernels and the launchers. Two library modules may each define a global of one name
(``store_tile`` in both the conv and the matmul kernels): copied side by side, the later one would
replace the earlier, and a kernel would call the wrong helper. So every copied global gets a name
unique in the file from :class:`Namespace` (one name per *object*: one function object imported by
two modules is copied once), and the copied text refers to it through :func:`rename_globals`, which
rewrites only the ``Name`` nodes that are global references (not attributes, strings, comments,
parameters or locals), in place, so that the rest of the text (its comments, its layout, its line
structure) is unchanged.
"""
from __future__ import annotations

import ast
import builtins
import re
from typing import Any, Hashable


class Namespace:
    """The global names of one emitted file: those fixed by the file's own text (reserved) and those
    given out, one per key (an object's identity, a module's name), each unique in the file."""

    def __init__(self, reserved: set[str] | frozenset[str] | list[str] = ()) -> None:
        self.taken: set[str] = set(reserved)
        self.names: dict[Hashable, str] = {}

    def reserve(self, *names: str) -> None:
        self.taken.update(names)

    def bind(self, key: Hashable, name: str) -> None:
        """``key`` is already bound to ``name`` by the file's fixed text (``import triton.language as tl``)."""
        self.names[key] = name
        self.taken.add(name)

    def get(self, key: Hashable) -> str | None:
        return self.names.get(key)

    def name(self, key: Hashable, preferred: str) -> str:
        """The file's name for ``key``: ``preferred`` if it is free, else ``preferred_1``, ``_2``, ...;
        the same key always gets the same name."""
        if key in self.names:
            return self.names[key]
        cand, i = preferred, 1
        while cand in self.taken or cand in _KEYWORDS:
            cand, i = f"{preferred}_{i}", i + 1
        self.taken.add(cand)
        self.names[key] = cand
        return cand


_KEYWORDS = frozenset(__import__("keyword").kwlist) | frozenset(dir(builtins))


def bound_names(src: str) -> set[str]:
    """Every name a module source binds or reads as a global (conservatively: every ``Name`` in it,
    every function, class and import it defines): what copied text must not take."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Global):
            out.update(node.names)
    return out


def defined(src: str) -> set[str]:
    """The names a source binds at its top level (functions, classes, assignments, imports)."""
    out: set[str] = set()
    for stmt in ast.parse(src).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*")
        else:
            out.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return out


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names local to a function: its parameters and every name bound anywhere in its body (nested
    scopes included, conservatively), less those declared ``global``."""
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    glob: set[str] = set()
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((x.asname or x.name).split(".")[0] for x in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Global):
                glob.update(node.names)
    return names - glob


def _global_refs(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """(node, name) of every global reference in a module: ``Name`` nodes read or bound at module
    level or read inside a top-level function where the name is not local, and the names of the
    top-level functions and classes themselves."""
    refs: list[tuple[ast.AST, str]] = []

    def outside(node: ast.AST) -> None:  # evaluated in the module's scope
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                refs.append((sub, sub.id))

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            refs.append((stmt, stmt.name))
            for d in stmt.decorator_list:
                outside(d)
            a = stmt.args
            for default in a.defaults + [d for d in a.kw_defaults if d is not None]:
                outside(default)
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                if arg.annotation is not None:
                    outside(arg.annotation)
            if stmt.returns is not None:
                outside(stmt.returns)
            local = _locals(stmt)
            for s in stmt.body:
                for sub in ast.walk(s):
                    if isinstance(sub, ast.Name) and sub.id not in local:
                        refs.append((sub, sub.id))
        elif isinstance(stmt, ast.ClassDef):
            raise ValueError(f"rename_globals: a class ({stmt.name}) is not copied into emitted files")
        else:
            outside(stmt)
    return refs


def global_names(src: str) -> set[str]:
    """The global names a source (top-level functions and statements) refers to or defines."""
    return {name for _, name in _global_refs(ast.parse(src))}


def rename_globals(src: str, mapping: dict[str, str]) -> str:
    """``src`` with every global reference to a key of ``mapping`` renamed to its value (the
    ``def`` lines of top-level functions included); attributes, strings, comments, parameters and
    locals are left alone, and so is every other character of the text."""
    mapping = {k: v for k, v in mapping.items() if k != v}
    if not mapping:
        return src
    lines = src.splitlines(keepends=True)
    raw = [ln.encode() for ln in lines]  # ast's columns count UTF-8 bytes
    edits: list[tuple[int, int, int, str]] = []  # (line index, start byte, end byte, new name)
    for node, name in _global_refs(ast.parse(src)):
        if name not in mapping:
            continue
        if isinstance(node, ast.Name):
            edits.append((node.lineno - 1, node.col_offset, node.end_col_offset, mapping[name]))
        else:  # a def: the name follows the keyword on the def's own line
            i = node.lineno - 1
            m = re.compile(rb"(async\s+)?def\s+(" + re.escape(name.encode()) + rb")\b").search(raw[i], node.col_offset)
            edits.append((i, m.start(2), m.end(2), mapping[name]))
    for i, start, end, new in sorted(edits, reverse=True):
        raw[i] = raw[i][:start] + new.encode() + raw[i][end:]
    return b"".join(raw).decode()


def is_constant(obj: Any) -> bool:
    """A plain value a copied source may carry as ``NAME = <repr>``."""
    return obj is None or isinstance(obj, (bool, int, float, str))
