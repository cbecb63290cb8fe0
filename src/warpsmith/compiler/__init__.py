"""The compiler: a KernelBench problem -> a verified, self-contained ``ModelNew``; any module or
function -> verified kernels through ``torch.compile(..., backend="warpsmith")``.

Stages, one module each: ``capture`` (torch.export), ``ir`` (the graph IR), ``lower`` (patterns
-> library ops), ``fuse`` (partitions of pointwise/reduction nodes: greedy, unfused), ``search``
(rewrites and a partition search ranked by the cost model), ``codegen`` (one Triton kernel per
group), ``emit`` (the ModelNew file, or a module for the backend), ``solve`` (the pipeline and
verification with ``warpsmith.check``), ``backend`` (the torch.compile backend, each graph verified
before use), ``solexec`` (a SOL-ExecBench / FlashInfer-Bench definition -> a verified ``solution.json``,
one program per input signature), ``contracts``/``proofs`` (the generated kernels' launch contracts,
proved with the symbolic prover before a program is written).
"""
from .solve import SolveResult, compile_problem, solve, write_report

__all__ = ["SolveResult", "compile_problem", "solve", "write_report"]
