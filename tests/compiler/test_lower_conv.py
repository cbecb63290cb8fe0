"""Convolutions lowered to the library's implicit-GEMM conv: direct, transposed, grouped, dilated,
depthwise, "same" padding, an inference batch norm folded into the weights and an activation fused;
every program verified by the check, with no ATen fallback."""
import ast
import sys
from pathlib import Path

import pytest

from warpsmith.compiler import solve
from warpsmith.compiler.solve import compile_problem

HERE = Path(__file__).parent / "problems"


def _imports(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            tops.add((node.module or "").split(".")[0])
    return tops


def test_conv_bn_relu_is_folded_fused_and_verified(tmp_path):
    res = solve(HERE / "conv_bn_relu.py", tmp_path / "new.py", strict=True)
    assert res.status == "accepted", res.verdict
    p = res.program
    assert [n.op for n in p.library_calls] == ["conv", "conv"] and p.fallbacks == []
    folded = next(n for n in p.library_calls if n.attrs.get("folded_bn") is not None)
    assert folded.attrs["activation"] == "relu" and folded.attrs["folded_bn"] == 1e-5
    assert any("folded" in n for n in res.notes) and any("epilogue" in n for n in res.notes)
    # the fold is computed from the parameters alone: once per parameter version, not at each call
    h = p.search.hoisted
    assert h is not None and set(h["read"]) == {"batch_norm_bn_w_folded", "batch_norm_bn_shift"}
    assert all(a.kind == "param" and a.op == "folded" for a in folded.args[1:])
    assert _imports(tmp_path / "new.py") <= {"torch", "triton"} | set(sys.stdlib_module_names)


def test_a_bf16_convs_batch_norm_is_not_folded_into_rounded_weights(tmp_path):
    # Folded weights rounded to bfloat16 move each product by up to 2^-9: with large cancelling
    # inputs (the check's "outliers") the output erred 30 ulps, past the contract, in about one run
    # in three. The batch norm stays after the conv, in a generated kernel, rounded where torch rounds.
    res = solve(HERE / "conv_bn_bf16.py", tmp_path / "new.py", strict=True, candidates=1)
    assert res.status == "accepted", res.verdict
    [conv] = res.program.library_calls
    assert conv.attrs["activation"] == "none" and not conv.attrs.get("folded_bn")
    assert res.program.fallbacks == []
    assert any("batch_norm" in n and "generated" in n for n in res.notes), res.notes


@pytest.mark.slow  # the library conv lowering is solved quickly by test_conv_bn_relu_is_folded_fused_and_verified;
# these three variants' attributes (about 90 s of interpreter) are checked in the full tier
def test_transposed_grouped_dilated_same_and_depthwise(tmp_path):
    res = solve(HERE / "conv_variants.py", tmp_path / "new.py", strict=True)
    assert res.status == "accepted", res.verdict
    calls = res.program.library_calls
    assert [n.attrs["transposed"] for n in calls] == [True, False, False]
    up, vol, dw = calls
    assert up.attrs["output_padding"] == [1] and up.attrs["activation"] == "gelu"
    assert vol.attrs["padding"] == [1, 2, 1] and vol.attrs["groups"] == 2  # "same" with dilation (1, 2, 1)
    assert dw.attrs["groups"] == 3 and dw.attrs["stride"] == [2, 2]
    text = (tmp_path / "new.py").read_text()  # the depthwise conv runs the library's direct kernel, the others the implicit GEMM
    assert "def conv_depthwise_kernel(" in text and "def conv_fwd_kernel(" in text
    from warpsmith.compiler.library import depthwise

    assert [depthwise(n) for n in calls] == [False, False, True]


def test_asymmetric_same_padding_stays_aten(tmp_path):
    src = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 2, padding="same", bias=False)
    def forward(self, x):
        return self.c(x)
def get_inputs():
    return [torch.randn(1, 3, 5, 5)]
def get_init_inputs():
    return []
'''
    f = tmp_path / "even_same.py"
    f.write_text(src)
    _, notes, prog = compile_problem(f)
    assert prog.library_calls == [] and [n.op for n in prog.fallbacks] == ["conv2d"]
