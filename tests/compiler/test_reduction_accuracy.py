"""A generated reduction is as accurate as a float64-accumulating reference: a mean over a long
axis of values far larger than the mean is within one float32 rounding of the exact mean (a float32
accumulator errs by several ulps there: KernelBench's BatchNorm was rejected for it)."""
from __future__ import annotations

import importlib.util
import sys

import torch

from warpsmith.compiler import compile_problem

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=(0, 2)) + x.sum(dim=(0, 2)) * 0.0

def get_inputs():
    return [torch.randn(32, 2, 1024)]

def get_init_inputs():
    return []
'''


def _load(path):
    spec = importlib.util.spec_from_file_location("_ws_reduction_accuracy", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


def test_a_long_mean_is_within_one_rounding_of_the_exact_mean(tmp_path):
    src = tmp_path / "long_mean.py"
    src.write_text(PROBLEM)
    _, _, prog = compile_problem(src)
    assert len(prog.kernels) == 1 and not prog.fallbacks
    assert "tl.float64" in prog.kernels[0].source
    out = tmp_path / "long_mean_new.py"
    out.write_text(prog.text)
    model = _load(out).ModelNew()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 2, 1024, generator=g) * 1000.0  # terms far larger than their mean
    y = model(x)
    exact = x.double().mean(dim=(0, 2))
    ulp = torch.finfo(torch.float32).eps * exact.abs()
    assert ((y.double() - exact).abs() <= ulp).all(), (y.double() - exact) / ulp
