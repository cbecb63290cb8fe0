"""The strategies of the search over rewrite decisions (hill, mcts) compared: on a synthetic
landscape (no compiler), and on problem files (the search's predicted times; no check).

    python scripts/sequence_strategies.py [--sites 8] [--seeds 20]
    python scripts/sequence_strategies.py --sequences 8 [--target h100] FILE...

Synthetic: ``--sites`` sites, every flip costs 1 on a score of 10, but the last two flipped together
save 7 (each alone is worse, as in tests/compiler/test_sequence_strategies.py). Per rollout depth, the budget
at which mcts first has exactly the pair as its winner, over ``--seeds`` seeds; the hill climb's
winner at the largest budget. Files: per strategy, the winner's predicted time and forced sites, the
states evaluated and the dead ends (predicted on the target, never measured), and the search's wall
time on this machine (measured).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


def synthetic(sites: int, seeds: int) -> None:
    from warpsmith.compiler import strategies as S

    names = [f"s{i}" for i in range(sites - 2)] + ["a", "b"]
    pair = {"a": True, "b": True}

    def landscape(forced):
        return 10.0 + len(forced) - (7.0 if forced.get("a") and forced.get("b") else 0.0), None

    def moves(forced, value, rng):
        return [(k, True) for k in names if k not in forced]

    cap = 2 ** sites
    print(f"{sites} sites ({cap} states), the pair last in the move order, seeds 0..{seeds - 1}")
    print("| strategy | budget at which the pair is the winner: min | median | max | not found by the cap |")
    print("|---|---|---|---|---|")
    for depth in (0, 1, 2):
        found = []
        for seed in range(seeds):
            found.append(next((b for b in range(1, cap + 1)
                               if S.mcts(landscape, {}, moves, b, random.Random(seed), rollout_depth=depth).best.forced
                               == pair), None))
        hit = [b for b in found if b is not None]
        print(f"| mcts, rollouts of {depth} flip(s) | {min(hit) if hit else '-'} | "
              f"{statistics.median(hit) if hit else '-'} | {max(hit) if hit else '-'} | {found.count(None)} |")
    h = S.hill_climb(landscape, {}, moves, cap, random.Random(0))
    print(f"| hill | winner {sorted(h.best.forced) or 'the initial state'} after {len(h.trials)} states "
          f"(budget {cap}) | | | |")


def files(paths: list[str], sequences: int, target: str) -> None:
    from warpsmith.compiler.capture import capture, load_problem
    from warpsmith.compiler.ir import build
    from warpsmith.compiler.lower import lower
    from warpsmith.compiler.sequence import search_sequences
    from warpsmith.targets import get_target

    tgt = get_target(target)
    print(f"| problem | strategy | evaluated | dead ends | winner forced | predicted us (winner) | "
          f"predicted us (greedy rewrites) | search wall s (measured here) |")
    print("|---|---|---|---|---|---|---|---|")
    for p in paths:
        g = build(capture(load_problem(p)))
        lower(g)
        for strategy in ("hill", "mcts"):
            t0 = time.perf_counter()
            q = search_sequences(g, tgt, sequences, 0, strategy=strategy)[1].to_json()
            wall = time.perf_counter() - t0
            forced = ", ".join(f"{k}: {v}" for k, v in q["winner_forced"].items()) or "none"
            print(f"| `{p.split('/')[-1]}` | {strategy} | {q['evaluated']} | {q['dead_ends']} | {forced} | "
                  f"{q['predicted_ms'] * 1e3:.2f} | {q['greedy_rewrites_ms'] * 1e3:.2f} | {wall:.1f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--sequences", type=int, default=8)
    ap.add_argument("--target", default="h100")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args(argv)
    if a.sites < 2 or a.sites > 12:
        ap.error(f"--sites: expected 2 to 12 (the pair and the others), got {a.sites}")
    if a.files:
        files(a.files, a.sequences, a.target)
    else:
        synthetic(a.sites, a.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
