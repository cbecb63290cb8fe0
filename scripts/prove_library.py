"""Prove every library kernel's launch contracts and count the obligations by status.

    python scripts/prove_library.py                    # every family, a markdown table
    python scripts/prove_library.py --families conv,pool --timeout-ms 3000 --json out.json

Runs ``warpsmith.verify.symbolic.prove`` on the ``CONTRACTS`` of every ``ops/<family>/**/*contract.py``
with the CLI's default budget (``--timeout-ms``, counted in z3's resource units: the counts do not
depend on the machine's load), and prints one row per family (obligations, proved, bounded,
unknown or failed, wall time) plus the totals per obligation kind.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import pkgutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")


def contract_modules(families: list[str]) -> list[tuple[str, str]]:
    import warpsmith.ops as ops

    out = []
    for info in pkgutil.iter_modules(ops.__path__):
        if not info.ispkg or (families and info.name not in families):
            continue
        pkg = importlib.import_module(f"warpsmith.ops.{info.name}")
        for sub in pkgutil.walk_packages(pkg.__path__, f"warpsmith.ops.{info.name}."):  # sub-families too
            if not sub.ispkg and sub.name.rpartition(".")[2].endswith("contract"):
                out.append((info.name, sub.name))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="", help="comma-separated families (default: all)")
    p.add_argument("--timeout-ms", type=int, default=3000)
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    from warpsmith.verify.symbolic import prove

    rows: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    kinds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    seconds: dict[str, float] = collections.defaultdict(float)
    doc = []
    for family, name in contract_modules([f for f in a.families.split(",") if f]):
        mod = importlib.import_module(name)
        for c in getattr(mod, "CONTRACTS", []):
            t0 = time.perf_counter()
            for rep in prove(c, timeout_ms=a.timeout_ms):
                for o in rep.obligations:
                    status = o.status.split("(")[0]
                    status = status if status in ("proved", "bounded") else "unknown/failed"
                    rows[family][status] += 1
                    kinds[o.name][status] += 1
                    doc.append({"family": family, "kernel": rep.contract, "obligation": o.name,
                                "subject": o.subject, "status": o.status})
            seconds[family] += time.perf_counter() - t0
            print(f"{family}: {c.name} done ({seconds[family]:.0f} s)", file=sys.stderr, flush=True)
    lines = ["| family | obligations | proved | bounded | unknown / failed | time |", "|---|---|---|---|---|---|"]
    total: collections.Counter = collections.Counter()
    for fam in sorted(rows):
        r = rows[fam]
        total.update(r)
        lines.append(f"| {fam} | {sum(r.values())} | {r['proved']} | {r['bounded']} | {r['unknown/failed']} | "
                     f"{seconds[fam]:.0f} s |")
    lines.append(f"| **all** | **{sum(total.values())}** | **{total['proved']}** | **{total['bounded']}** | "
                 f"**{total['unknown/failed']}** | |")
    lines.append("")
    lines.append("By obligation: " + "; ".join(f"`{k}` {v['proved']} proved, {v['bounded']} bounded, "
                                              f"{v['unknown/failed']} unknown/failed" for k, v in sorted(kinds.items())))
    print("\n".join(lines))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
