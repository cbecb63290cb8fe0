"""Imports only point down: every module under src/warpsmith is parsed with ``ast``, mapped to its
layer, and every warpsmith import (module level or inside a function) must point to the same layer
or a lower one; and the import graph between units (a package such as ``verify``, or one family
``ops.norm``) must have no cycle, so two units of one layer may not import each other either.

Imports under ``if TYPE_CHECKING:`` are annotations only (no import at run time) and are skipped:
core annotates with ``Target`` and ``Space``, which sit above it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "warpsmith"

# (prefix, layer), most specific prefix first; a module belongs to the first prefix it starts with
LAYERS: tuple[tuple[str, int], ...] = (
    ("warpsmith.core", 0),
    ("warpsmith.errors", 0),  # the public name of core.errors
    ("warpsmith.space", 1),
    ("warpsmith.targets", 1),
    ("warpsmith.cost", 2),
    ("warpsmith.search", 2),
    ("warpsmith.learned", 2),  # held-out evaluation, gate and JSON of the learned orderings (numpy only)
    ("warpsmith.measure", 3),
    ("warpsmith.verify", 4),
    ("warpsmith.check", 5),  # the isolated harness for foreign kernels
    ("warpsmith.db", 5),
    ("warpsmith.dispatch", 6),
    ("warpsmith.ops.shared", 7),
    ("warpsmith.ops.", 8),  # the families: warpsmith.ops.<family>
    ("warpsmith.comm", 8),  # collectives: kernels over symmetric buffers, like a family (uses ops.shared)
    ("warpsmith.ops", 9),  # the family list, the registry and the public functions
    ("warpsmith.gpucheck", 10),  # compile every family's kernels for a GPU target; the search's compiler-facts worker
    ("warpsmith.tune", 10),
    ("warpsmith.fleet", 10),  # merging tuning DBs between machines: re-verifies certificates (verify, ops)
    ("warpsmith.ranker", 10),  # the tuner's learned ranker: features from the op registry (ops)
    ("warpsmith.numerics", 10),  # the format study behind `warpsmith numerics`
    ("warpsmith.compiler", 11),  # capture -> IR -> lower -> fuse -> codegen -> emit -> verify (check)
    ("warpsmith.nn", 11),
    ("warpsmith.patching", 12),
    ("warpsmith.modelkernels", 12),  # a model's generated kernels under warpsmith's torch.compile backend (compiler)
    ("warpsmith.modeltune", 12),  # tune_model: capture a model's problems (patching), tune them on an executor
    ("warpsmith.profile", 12),  # reports, roofline plots, Perfetto traces: the ops (collect), the compiler (emitted programs)
    ("warpsmith.quantization", 12),  # quantize(model, scheme): nn.Linear -> low-precision modules
    ("warpsmith.cli", 13),
    ("warpsmith", 14),  # the package itself: patch(), lazy ops and nn
)


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:
        inside = module.startswith(prefix) if prefix.endswith(".") else (
            module == prefix or module.startswith(prefix + "."))
        if inside:
            return layer
    raise KeyError(f"module {module} is in no layer: add it to LAYERS")


def unit_of(module: str) -> str:
    """The package-level node of the cycle check: ``warpsmith.verify`` for every module of verify,
    ``warpsmith.ops.norm`` for a family, a top-level module for itself."""
    parts = module.split(".")
    if parts[:2] == ["warpsmith", "ops"] and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def modules(root: Path = SRC) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    skip.update(id(n) for n in ast.walk(sub))
    return skip


def imports(module: str, source: str, is_package: bool, known: set[str]) -> list[tuple[str, int]]:
    """The warpsmith modules ``module`` imports, with line numbers (``from pkg import sub`` counts
    as importing ``pkg.sub`` where that is a module)."""
    tree = ast.parse(source)
    skip = _type_checking_nodes(tree)
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "warpsmith":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in known else target, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "warpsmith"]
    return out


def edges(root: Path = SRC) -> list[tuple[str, str, int]]:
    mods = modules(root)
    known = set(mods)
    out = []
    for mod, path in mods.items():
        for target, line in imports(mod, path.read_text(), path.name == "__init__.py", known):
            out.append((mod, target, line))
    return out


def violations(all_edges: list[tuple[str, str, int]]) -> list[str]:
    """Upward imports and cycles between units, each as a readable line."""
    bad = []
    graph: dict[str, set[str]] = {}
    for src, dst, line in all_edges:
        if layer_of(dst) > layer_of(src):
            bad.append(f"{src}:{line} imports {dst}: layer {layer_of(src)} -> {layer_of(dst)} points up")
        a, b = unit_of(src), unit_of(dst)
        if a != b:
            graph.setdefault(a, set()).add(b)
    # cycles between units (Tarjan's strongly connected components)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                bad.append("import cycle between " + ", ".join(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return bad


def test_every_module_has_a_layer():
    for mod in modules():
        layer_of(mod)


def test_imports_point_down_and_no_cycles():
    bad = violations(edges())
    assert not bad, "\n".join(bad)


def test_an_upward_import_is_reported():
    # a bad edge: core importing dispatch (and a dispatch -> core edge closing a cycle)
    bad = violations([("warpsmith.core.variant", "warpsmith.dispatch", 3),
                      ("warpsmith.dispatch", "warpsmith.core.opspec", 1)])
    assert any("warpsmith.core.variant:3 imports warpsmith.dispatch" in b and "points up" in b for b in bad)
    assert any(b.startswith("import cycle between warpsmith.core, warpsmith.dispatch") for b in bad)


def test_a_cycle_within_a_layer_is_reported():
    # two families of the same layer importing each other: no edge points up, the cycle is caught
    bad = violations([("warpsmith.ops.norm.variant", "warpsmith.ops.softmax.spec", 5),
                      ("warpsmith.ops.softmax.op", "warpsmith.ops.norm.op", 7)])
    assert bad == ["import cycle between warpsmith.ops.norm, warpsmith.ops.softmax"]


def test_the_parser_finds_relative_function_level_and_skips_type_checking_imports(tmp_path):
    pkg = tmp_path / "warpsmith"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "dispatch.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "variant.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..targets import Target\n"
        "def f():\n    from .. import dispatch\n")
    found = edges(pkg)
    assert found == [("warpsmith.core.variant", "warpsmith.dispatch", 5)]
    assert len(violations(found)) == 1


@pytest.mark.parametrize("module,layer", [("warpsmith.ops.norm.kernel", 8), ("warpsmith.ops", 9),
                                          ("warpsmith.ops.shared.validate", 7), ("warpsmith.core.registry", 0),
                                          ("warpsmith", 14), ("warpsmith.tune", 10)])
def test_layer_map(module, layer):
    assert layer_of(module) == layer


def test_the_checks_child_loads_neither_the_harness_nor_the_prover():
    """The candidate's process (``python -m warpsmith.check.child``) imports the ``warpsmith.check``
    and ``warpsmith.verify`` packages for a few submodules; their ``__init__`` load the rest on first
    use, so every check's child starts without the harness, the prover and z3 (0.2 CPU-s a start)."""
    import os
    import subprocess
    import sys

    code = ("import sys, warpsmith.check.child as c; from warpsmith.check import compare, formats, guards; "
            "print(sorted(m for m in ('z3', 'warpsmith.check.hardened', 'warpsmith.verify.certificate', "
            "'warpsmith.verify.verifier', 'warpsmith.verify.symbolic') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(SRC.parent)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout
    import warpsmith.check as check_pkg
    import warpsmith.verify as verify_pkg

    assert callable(check_pkg.check) and check_pkg.CheckReport.__name__ == "CheckReport"  # loaded on first use
    assert verify_pkg.verify_candidate.__module__ == "warpsmith.verify.verifier"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        check_pkg.nope
