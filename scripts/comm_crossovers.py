"""Plot the alpha-beta model's predicted time of every collective algorithm against message size
(warpsmith.cost.comm_model), one panel per topology, the crossovers marked; print the crossovers.
Every figure is predicted from nominal constants, not measured.

    python scripts/comm_crossovers.py --out docs/ops/comm_crossovers.png
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import warpsmith  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from warpsmith.cost import comm_model as cm  # noqa: E402

PANELS = (("nvlink", 8), ("pcie", 8), ("multinode", 16))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="comm_crossovers.png", help="the PNG to write")
    p.add_argument("--collective", default="all_reduce", choices=cm.COLLECTIVES)
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [2.0 ** (k / 4) for k in range(4 * 8, 4 * 32 + 1)]  # 256 B .. 4 GiB
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4), constrained_layout=True)
    for ax, (topo, world) in zip(axes, PANELS):
        for alg in cm.available(args.collective, world, topo):
            ax.plot(sizes, [cm.predict_s(args.collective, alg, n, world, topo) * 1e6 for n in sizes], label=alg)
        for n, below, above in cm.crossovers(args.collective, world, topo):
            ax.axvline(n, color="grey", linestyle=":", linewidth=1)
            print(f"{topo} W={world} {args.collective}: {below} -> {above} at {n / 1024:.1f} KiB")
        ax.set(xscale="log", yscale="log", xlabel="message bytes per rank", ylabel="predicted time (us)",
               title=f"{topo}, {world} ranks ({args.collective}, predicted)")
        ax.legend()
    fig.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
