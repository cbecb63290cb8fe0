"""Per problem, the chosen program's predicted time against greedy fusion and against the same
program with untuned (default-config) generated kernels: ``compile_problem`` (capture, rewrites,
search, config search, emit; no check) on each file, for one target. Predicted, never measured.

    python scripts/predicted_gains.py [--target h100] FILE...
"""
from __future__ import annotations

import argparse
import sys

from warpsmith.compiler.solve import compile_problem


def row(path: str, target: str) -> str:
    _, _, prog = compile_problem(path, target=target)
    s = prog.search
    us = lambda ms: f"{ms * 1e3:.2f}"  # noqa: E731
    moved = sum(1 for k in s.kernels if k["config"] != k["default_config"])
    return (f"| `{path.split('/')[-1]}` | {len(prog.kernels)} ({moved} off default) | {us(s.greedy_untuned_ms)} | "
            f"{us(s.greedy_ms)} | {us(s.untuned_ms)} | {us(s.best_ms)} | {s.greedy_ms / s.best_ms:.2f}x | "
            f"{s.untuned_ms / s.best_ms:.2f}x |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h100")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    print(f"| problem | generated kernels (configs moved) | greedy, default configs (us) | greedy (us) | "
          f"chosen, default configs (us) | chosen (us) | vs greedy | vs untuned |")
    print("|---|---|---|---|---|---|---|---|")
    for f in a.files:
        print(row(f, a.target), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
