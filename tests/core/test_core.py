"""core: typed configs (Knobs), the one registry built from the families' declarations, and
``import warpsmith`` reaching ``warpsmith.ops`` and ``warpsmith.nn``."""
import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from warpsmith.core.config import Knobs
from warpsmith.core.errors import InvalidInputError, UnknownNameError, WarpsmithError
from warpsmith.core.registry import Registry


@dataclass(frozen=True, kw_only=True)
class _RowKnobs(Knobs):
    num_warps: int
    ROWS: int = 1


def test_knobs_fill_defaults_and_are_frozen_mappings():
    k = _RowKnobs.of({"num_warps": 4})
    assert (k.num_warps, k.ROWS) == (4, 1) and k["ROWS"] == 1 and dict(k) == {"num_warps": 4, "ROWS": 1}
    assert _RowKnobs.of(k) is k
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.ROWS = 2
    with pytest.raises(KeyError):
        k["BLOCK_N"]


def test_knobs_name_unknown_and_missing_knobs():
    with pytest.raises(InvalidInputError, match="BLOCK_Q"):
        _RowKnobs.of({"num_warps": 4, "BLOCK_Q": 2})
    with pytest.raises(InvalidInputError, match="num_warps"):
        _RowKnobs.of({"ROWS": 2})


def test_every_family_variant_reads_its_configs_typed():
    from warpsmith.ops import REGISTRY
    from warpsmith.targets import get_target

    typed = [v for v in REGISTRY.all_variants() if v.knobs is not None]
    assert typed == list(REGISTRY.all_variants())  # every variant of every family declares its knobs
    h100 = get_target("h100")
    for v in typed:
        spec = REGISTRY.get_op(v.op)
        p = spec.problem({a.name: 64 for a in spec.axes if not a.optional}, spec.dtypes[0])
        for cfg in (v.default_config(p, h100), v.space(p, h100).default()):
            assert set(v.typed(cfg)) >= set(cfg), (v.op, v.name)  # every knob named; defaults filled


def _family(specs, variants, name="fam"):
    return SimpleNamespace(__name__=name, SPECS=specs, VARIANTS=variants)


def test_registry_is_built_from_declarations_and_checks_them():
    from warpsmith.ops import FAMILIES, OPS, REGISTRY

    assert REGISTRY.families == FAMILIES and list(OPS)[0] == "matmul"
    assert {v.op for v in REGISTRY.all_variants()} == set(OPS)
    norm = next(f for f in FAMILIES if f.__name__ == "warpsmith.ops.norm")
    softmax = next(f for f in FAMILIES if f.__name__ == "warpsmith.ops.softmax")
    with pytest.raises(WarpsmithError, match="does not declare"):  # a variant of an op its family does not declare
        Registry([_family(norm.SPECS, softmax.VARIANTS)])
    with pytest.raises(WarpsmithError, match="declared twice"):
        Registry([norm, norm])
    with pytest.raises(WarpsmithError, match="without a variant"):
        Registry([_family(norm.SPECS, ())])
    with pytest.raises(UnknownNameError):
        REGISTRY.get_op("conv9d")


def test_import_warpsmith_reaches_ops_and_nn():
    code = ("import sys, warpsmith\n"
            "assert 'warpsmith.ops' not in sys.modules and 'torch' not in sys.modules\n"
            "print(warpsmith.ops.matmul.__name__, warpsmith.nn.RMSNorm.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["matmul", "RMSNorm"]


def test_problems_are_built_only_through_their_spec():
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "warpsmith"
    direct = []
    for path in src.rglob("*.py"):
        if path.relative_to(src).as_posix() == "core/opspec.py":  # OpSpec.problem itself
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name == "Problem":
                    direct.append(f"{path.relative_to(src)}:{node.lineno}")
    assert not direct, "Problem(...) built directly (use spec.problem(...)): " + ", ".join(direct)
