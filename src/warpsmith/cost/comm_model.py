"""The alpha-beta model of collectives: predicted time per algorithm, per topology, and the
message sizes where the best algorithm changes (the crossovers).

A collective over ``world`` ranks moving ``nbytes`` (the size of one rank's full tensor: the
all-reduce input, the all-gather output, the reduce-scatter input) takes, per algorithm,
``steps * alpha + bytes_on_the_busiest_link * beta`` where ``alpha`` is one synchronized step
(launch, flag round trip) and ``beta`` the seconds per byte of one rank's link bandwidth
(all links of a rank together on an all-to-all fabric; one ring neighbour on a ring).

| algorithm | steps | bytes one rank moves |
|---|---|---|
| all_reduce one_shot (read every peer's whole buffer, reduce locally) | 1 | (W-1) n |
| all_reduce two_shot (reduce-scatter, then all-gather, direct reads) | 2 | 2 (W-1)/W n |
| all_reduce ring (NCCL's large-message algorithm) | 2 (W-1) | 2 (W-1)/W n |
| all_gather / reduce_scatter direct (one_shot) | 1 | (W-1)/W n |
| all_gather / reduce_scatter ring | W-1 | (W-1)/W n |

Topologies: ``nvlink`` (all-to-all through a switch: every direct read at full bandwidth),
``pcie`` (a ring of PCIe links: a direct read from a peer ``d`` hops away crosses ``d`` links, so
the direct algorithms pay the mean hop count on beta; the ring pays one hop), ``multinode``
(``gpus_per_node`` ranks on NVLink per node, a slower network between nodes: peer memory reaches
only inside a node, so across nodes only the ring, or the hierarchical all-reduce: two-shot
reduce-scatter inside a node, a ring all-reduce of each 1/g shard across nodes, all-gather inside).

**Programs and chunk size** (:func:`predict_config_s`, :func:`best_config`): the kernels move
each step's ``B / S`` bytes (``B`` on the busiest link, ``S`` steps) in chunks of ``c`` bytes strided
over ``P`` programs. One program moves at most ``program_bw`` bytes/s (one SM's loads from peer
memory), and the programs at work share the link: a step takes
``rounds * (c / min(program_bw, link_bw / active) + chunk_overhead)`` with ``chunks = ceil(B / S / c)``,
``active = min(P, chunks)``, ``rounds = ceil(chunks / P)``: too few programs cannot fill the link,
small chunks pay the per-chunk overhead, large ones leave programs idle or unevenly loaded. Ties
go to fewer programs (they take SMs from the compute overlapping the collective), then to larger
chunks. Multi-node algorithms beyond a node keep the plain alpha-beta time (the knobs do not change it).

The constants are nominal datasheet-order figures, not measurements: every number this module
gives is *predicted* and says so where it is shown (docs/ops/comm.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import InvalidInputError, UnknownNameError


@dataclass(frozen=True)
class Topology:
    """One interconnect. ``alpha_s``: seconds per synchronized step; ``beta_s_per_byte``: seconds per
    byte of one rank's bandwidth (all-to-all: all links; ring: one neighbour link). Multi-node adds
    the network's ``net_alpha_s``/``net_beta_s_per_byte`` and ``gpus_per_node``."""

    name: str
    kind: str  # "all_to_all" | "ring" | "multinode"
    alpha_s: float
    beta_s_per_byte: float
    gpus_per_node: int = 8
    net_alpha_s: float = 0.0
    net_beta_s_per_byte: float = 0.0
    program_bw: float = 25e9  # bytes/s one program (one SM) moves through peer memory
    chunk_overhead_s: float = 0.2e-6  # per chunk a program handles: loop, address math, flag checks


TOPOLOGIES: dict[str, Topology] = {
    # H100 SXM NVSwitch: ~450 GB/s per direction per GPU, a few microseconds per synchronized step
    "nvlink": Topology("nvlink", "all_to_all", alpha_s=3e-6, beta_s_per_byte=1 / 450e9),
    # PCIe Gen4 x16 ring: ~25 GB/s per link, slower steps (no NVLink signalling)
    "pcie": Topology("pcie", "ring", alpha_s=8e-6, beta_s_per_byte=1 / 25e9),
    # 8 GPUs per node on NVLink, 400 Gb/s (50 GB/s) network per GPU between nodes
    "multinode": Topology("multinode", "multinode", alpha_s=3e-6, beta_s_per_byte=1 / 450e9,
                          gpus_per_node=8, net_alpha_s=15e-6, net_beta_s_per_byte=1 / 50e9),
}

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("one_shot", "two_shot", "ring", "hierarchical"),
    "all_gather": ("one_shot", "ring"),
    "reduce_scatter": ("one_shot", "ring"),
}


def topology(name: str | Topology) -> Topology:
    if isinstance(name, Topology):
        return name
    if name not in TOPOLOGIES:
        raise UnknownNameError("topology", name, list(TOPOLOGIES))
    return TOPOLOGIES[name]


def _mean_hops(world: int) -> float:
    """Mean ring distance from one rank to the others (bidirectional ring)."""
    return sum(min(d, world - d) for d in range(1, world)) / (world - 1)


def _check(collective: str, world: int, nbytes: float) -> None:
    if collective not in ALGORITHMS:
        raise UnknownNameError("collective", collective, COLLECTIVES)
    if not isinstance(world, int) or world < 1:
        raise InvalidInputError("world size", "an int >= 1", world)
    if nbytes < 0:
        raise InvalidInputError("message size", "bytes >= 0", nbytes)


def available(collective: str, world: int, topo: str | Topology) -> tuple[str, ...]:
    """The algorithms the topology allows (direct reads need every peer addressable)."""
    t = topology(topo)
    algs = ALGORITHMS[collective] if collective in ALGORITHMS else ()
    if t.kind == "multinode" and world > t.gpus_per_node:
        return tuple(a for a in algs if a in ("ring", "hierarchical"))
    return tuple(a for a in algs if a != "hierarchical")


def _steps_and_bytes(collective: str, algorithm: str, n: float, w: int, t: Topology) -> tuple[int, float]:
    """(synchronized steps, bytes on the busiest link) of a single-node algorithm (the module's table;
    on a ring topology a direct read crosses the mean hop count of links)."""
    frac, hops = (w - 1) / w, (_mean_hops(w) if t.kind == "ring" else 1.0)
    if collective == "all_reduce":
        return {"one_shot": (1, (w - 1) * n * hops), "two_shot": (2, 2 * frac * n * hops),
                "ring": (2 * (w - 1), 2 * frac * n)}[algorithm]
    return (1, frac * n * hops) if algorithm == "one_shot" else (w - 1, frac * n)


def predict_s(collective: str, algorithm: str, nbytes: float, world: int, topo: str | Topology) -> float:
    """Predicted seconds of one collective (see the module's table)."""
    _check(collective, world, nbytes)
    t = topology(topo)
    if algorithm not in available(collective, world, t):
        raise InvalidInputError(f"{collective} algorithm on {t.name} with world {world}",
                                "one of " + ", ".join(available(collective, world, t)), algorithm)
    if world == 1:
        return 0.0
    w, n = world, float(nbytes)
    frac = (w - 1) / w
    if t.kind == "multinode" and w > t.gpus_per_node:
        nodes = math.ceil(w / t.gpus_per_node)
        g = t.gpus_per_node
        if algorithm == "hierarchical":  # intra two-shot halves around an inter-node ring on n/g
            intra = 2 * t.alpha_s + 2 * (g - 1) / g * n * t.beta_s_per_byte
            inter = 2 * (nodes - 1) * t.net_alpha_s + 2 * (nodes - 1) / nodes * (n / g) * t.net_beta_s_per_byte
            return intra + inter
        ring_steps = 2 * (w - 1) if collective == "all_reduce" else w - 1
        ring_bytes = (2 if collective == "all_reduce" else 1) * frac * n
        return ring_steps * t.net_alpha_s + ring_bytes * t.net_beta_s_per_byte  # the slowest link bounds the ring
    steps, link = _steps_and_bytes(collective, algorithm, n, w, t)
    return steps * t.alpha_s + link * t.beta_s_per_byte


def predict_config_s(collective: str, algorithm: str, nbytes: float, world: int, topo: str | Topology,
                     programs: int, chunk_bytes: int) -> float:
    """Predicted seconds with ``programs`` programs moving ``chunk_bytes`` chunks (the module's
    docstring); the plain alpha-beta time across nodes and for a world of 1."""
    base = predict_s(collective, algorithm, nbytes, world, topo)
    for name, v in (("programs", programs), ("chunk bytes", chunk_bytes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidInputError(name, "an int >= 1", v)
    t = topology(topo)
    if world == 1 or (t.kind == "multinode" and world > t.gpus_per_node):
        return base
    steps, link = _steps_and_bytes(collective, algorithm, float(nbytes), world, t)
    per_step = link / steps
    chunks = max(1, math.ceil(per_step / chunk_bytes))
    active, rounds = min(programs, chunks), math.ceil(chunks / programs)
    rate = min(t.program_bw, 1.0 / (t.beta_s_per_byte * active))
    size = min(chunk_bytes, per_step)
    return steps * (t.alpha_s + rounds * (size / rate + t.chunk_overhead_s))


PROGRAMS = (1, 2, 4, 8, 16, 32, 64)  # the choices best_config and the tuner's space offer
CHUNKS = (256, 512, 1024, 2048, 4096, 8192)  # elements per chunk


def best_config(collective: str, nbytes: float, world: int, topo: str | Topology, element_bytes: int,
                among: tuple[str, ...] | None = None, programs: tuple[int, ...] = PROGRAMS,
                chunks: tuple[int, ...] = CHUNKS) -> tuple[str, int, int]:
    """``(algorithm, programs, chunk elements)`` of least :func:`predict_config_s` (ties: fewer
    programs, then larger chunks, then the algorithm listed first)."""
    cands = [a for a in available(collective, world, topo) if among is None or a in among]
    if not cands:
        raise InvalidInputError(f"{collective} algorithms on {topology(topo).name}",
                                "one of " + ", ".join(available(collective, world, topo)), among)
    scored = [(predict_config_s(collective, a, nbytes, world, topo, p, c * element_bytes), p, -c, i, a)
              for i, a in enumerate(cands) for p in programs for c in chunks]
    best_s = min(s[0] for s in scored)
    _, p, negc, _, a = min((s for s in scored if s[0] <= best_s * (1 + 1e-9)), key=lambda s: s[1:4])
    return a, p, -negc


def best(collective: str, nbytes: float, world: int, topo: str | Topology,
         among: tuple[str, ...] | None = None) -> str:
    """The algorithm of least predicted time (``among`` restricts the candidates; ties: first listed)."""
    cands = [a for a in available(collective, world, topo) if among is None or a in among]
    if not cands:
        raise InvalidInputError(f"{collective} algorithms on {topology(topo).name}",
                                "one of " + ", ".join(available(collective, world, topo)), among)
    return min(cands, key=lambda a: predict_s(collective, a, nbytes, world, topo))


def crossovers(collective: str, world: int, topo: str | Topology, lo: float = 1.0, hi: float = 2.0 ** 34,
               among: tuple[str, ...] | None = None) -> list[tuple[float, str, str]]:
    """The message sizes (bytes, to within 1%) in [lo, hi] where :func:`best` changes: a list of
    ``(bytes, algorithm below, algorithm above)``, smallest first."""
    points, pick = [], lambda n: best(collective, n, world, topo, among)
    grid = [lo * (hi / lo) ** (i / 256) for i in range(257)]
    for a, b in zip(grid, grid[1:]):
        pa, pb = pick(a), pick(b)
        if pa != pb:
            while b / a > 1.01:
                m = math.sqrt(a * b)
                a, b = (m, b) if pick(m) == pa else (a, m)
            points.append((b, pa, pick(b)))
    return points
