"""Every persistent variant is verified on a one-SM target, where its programs stride over more
blocks than there are programs: a path small shapes on a 132-SM target never reach."""
import importlib.util
import sys
from pathlib import Path

import pytest

from warpsmith.ops import get_op, get_variant
from warpsmith.ops.norm import kernel as NK
from warpsmith.ops.norm.variant import PersistentNormBackward
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate
from warpsmith.verify.verifier import one_sm

H100 = get_target("h100")

# (op, variant, shape, dtype, config overrides): each persistent grid has several blocks per program
# on one SM (PROGRAMS_PER_SM programs), and one program per block on an H100
PERSISTENT = [
    ("matmul", "persistent", {"M": 40, "N": 24, "K": 24}, "float16",
     {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2, "num_warps": 2, "PROGRAMS_PER_SM": 2}),
    ("rms_norm", "persistent", {"M": 12, "N": 24}, "float32", {"PROGRAMS_PER_SM": 2, "ROWS_PER_PROGRAM": 2}),
    ("layer_norm", "persistent", {"M": 12, "N": 24}, "float16", {"PROGRAMS_PER_SM": 2, "ROWS_PER_PROGRAM": 2}),
    ("rms_norm_backward", "persistent", {"M": 12, "N": 24}, "float32", {"PROGRAMS_PER_SM": 2, "ROWS_PER_PROGRAM": 2}),
    ("layer_norm_backward", "persistent", {"M": 12, "N": 24}, "float32",
     {"PROGRAMS_PER_SM": 2, "ROWS_PER_PROGRAM": 2}),
    ("swiglu", "tiled", {"M": 12, "H": 40}, "float32", {"PROGRAMS_PER_SM": 1, "BLOCK_M": 2, "BLOCK_H": 16, "num_warps": 1}),
    ("geglu_backward", "tiled", {"M": 12, "H": 40}, "float32", {"PROGRAMS_PER_SM": 1, "BLOCK_M": 2, "BLOCK_H": 16, "num_warps": 1}),
    ("softmax", "single_pass", {"M": 12, "N": 40}, "float32", {"PROGRAMS_PER_SM": 1, "ROWS": 2}),
    ("softmax_backward", "single_pass", {"M": 12, "N": 40}, "float32", {"PROGRAMS_PER_SM": 1, "ROWS": 2}),
]


def _config(v, p, over):
    cfg = {**v.default_config(p, H100), **over}
    assert v.rejection(p, cfg, H100) is None, v.rejection(p, cfg, H100)
    return cfg


@pytest.mark.parametrize("op, name, shape, dtype, over", PERSISTENT, ids=[f"{o}-{n}" for o, n, *_ in PERSISTENT])
def test_every_persistent_variant_is_verified_striding(op, name, shape, dtype, over):
    spec, v = get_op(op), get_variant(op, name)
    p = spec.problem(shape, dtype)
    cfg = _config(v, p, over)
    tiny = one_sm(H100)
    assert tiny.sms == 1 and v.programs(p, cfg, tiny) < v.programs(p, cfg, H100)  # the loop is reached
    cert = verify_candidate(spec, p, v, cfg, H100)
    st = {c.name: c.status for c in cert.checks}
    assert cert.passed, st
    assert st["grid_stride"] == "tested(2 trials)", st


def _buggy_norm_kernels(tmp_path: Path):
    """The norm kernels with the persistent backward overwriting its dw/db accumulators per block."""
    src = Path(NK.__file__).read_text()
    for old, new in (("        dw += tdw\n        db += tdb\n", "        dw = tdw\n        db = tdb\n"),
                     ("from ...core._triton import", "from warpsmith.core._triton import"),
                     ("from ..shared.kernel import", "from warpsmith.ops.shared.kernel import")):
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / "overwriting_norm_kernel.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("overwriting_norm_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["overwriting_norm_kernel"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_norm_backward_that_overwrites_instead_of_accumulating_is_rejected(tmp_path):
    mod = _buggy_norm_kernels(tmp_path)

    class Overwrites(PersistentNormBackward):
        def _kernel(self):
            return mod.norm_bwd_persistent_kernel

    spec = get_op("rms_norm_backward")
    p = spec.problem({"M": 12, "N": 24}, "float32")
    v = Overwrites("rms")
    cfg = _config(v, p, {"PROGRAMS_PER_SM": 2, "ROWS_PER_PROGRAM": 2})
    cert = verify_candidate(spec, p, v, cfg, H100)
    st = {c.name: c.status for c in cert.checks}
    assert not cert.passed and cert.first_failure().name == "grid_stride", st
    assert "h100-1sm" in st["grid_stride"] and "output 1: error" in st["grid_stride"], st
    assert st["error_contract"] == "tested(6 trials)"  # on the 132-SM target the bug hides
