"""The compiler, first slice: a KernelBench problem -> a verified, self-contained ``ModelNew``.

Stages, one module each: ``capture`` (torch.export), ``ir`` (the graph IR), ``lower`` (patterns
-> library ops), ``fuse`` (greedy partition of pointwise/reduction nodes), ``codegen`` (one Triton
kernel per group), ``emit`` (the ModelNew file), ``solve`` (the pipeline and verification with
``warpsmith.check``). Not yet: a search over partitions and rewrites, a torch.compile backend,
SOL-ExecBench emission.
"""
from .solve import SolveResult, compile_problem, solve, write_report

__all__ = ["SolveResult", "compile_problem", "solve", "write_report"]
