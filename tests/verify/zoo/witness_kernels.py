"""Kernels with writer witnesses, correct and with planted bugs (data for tests/verify/test_prove_witness.py).

``grouped_copy_kernel`` copies a matrix tile by tile in GEMM's grouped tile order, which z3 does not
invert by itself (race freedom and coverage come out bounded without a witness); ``strided_rows_kernel``
is a persistent kernel whose programs stride over blocks of rows. Each has a correct witness; the bugs:
a skipped tile, two programs writing one row, and witnesses that lie about a correct kernel.
"""
import z3

from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Tensor, Witness, Writer, cdiv, sizes

M, N, P = sizes("M N P")
BM, BN, GM = 16, 32, 4
DOMAIN = [M <= 2**16, N <= 2**16, P <= 64, (M + 64) * (N + 64) < 2**31]
SHAPES = [{"M": 1, "N": 1, "P": 1}, {"M": 37, "N": 70, "P": 3}, {"M": 130, "N": 33, "P": 2}]


@triton.jit
def grouped_copy_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                        BUG: tl.constexpr):
    tile = tl.program_id(0)
    if tile >= tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) - (BUG == "skip_last_tile"):  # the bug skips a tile
        return
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % size_m
    pid_n = (tile % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _min(a, b):
    return z3.If(a < b, a, b)


def tile_coords(tile):
    num_m, num_n = cdiv(M, BM), cdiv(N, BN)
    first_m = (tile / (GM * num_n)) * GM
    size_m = _min(num_m - first_m, GM)
    return first_m + (tile % (GM * num_n)) % size_m, (tile % (GM * num_n)) / size_m


def tile_of(pm, pn):
    num_m, num_n = cdiv(M, BM), cdiv(N, BN)
    first_m = (pm / GM) * GM
    return first_m * num_n + pn * _min(num_m - first_m, GM) + (pm - first_m)


def grouped_witness(lie: str = "") -> Witness:
    """The copy's witness; ``lie`` plants a wrong part (the kernel stays correct)."""

    def writer(m, n):
        tile = tile_of(m / BM, n / BN)
        if lie == "program":
            tile = tile_of(m / BM, 0) + n / BN  # as if tiles were numbered row-major within a group
        if lie == "lane":
            return Writer(pid=(tile,), lanes=(n % BM, m % BN))
        return Writer(pid=(tile,), lanes=(m % BM, n % BN))

    def element(store, pid, iters, lanes):
        pm, pn = tile_coords(pid[0])
        if lie == "element":
            return pm * BM + lanes[0], pn * BN + lanes[1] + 1
        return pm * BM + lanes[0], pn * BN + lanes[1]

    return Witness(writer=writer, element=element)


def grouped(bug: str = "none", lie: str = "", witness: bool = True) -> LaunchContract:
    return LaunchContract(
        kernel=grouped_copy_kernel, name=f"grouped_copy[{bug}{', lie=' + lie if lie else ''}]",
        args={"x_ptr": Tensor((M, N), (N, 1)), "y_ptr": Tensor((M, N), (N, 1), output=True), "M": M, "N": N},
        constexprs=[{"BLOCK_M": BM, "BLOCK_N": BN, "GROUP_M": GM, "BUG": bug}],
        grid=(cdiv(M, BM) * cdiv(N, BN),), domain=DOMAIN, bounded_shapes=SHAPES,
        witnesses={"y_ptr": grouped_witness(lie)} if witness else {})


@triton.jit
def strided_rows_kernel(x_ptr, y_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BUG: tl.constexpr):
    """Programs stride over blocks of ROWS rows; each row in chunks of BLOCK_N columns."""
    for blk in range(tl.program_id(0), tl.cdiv(M, ROWS), tl.num_programs(0)):
        if BUG == "shared_row":
            rows = blk * (ROWS - 1) + tl.arange(0, ROWS)  # blocks overlap: two programs write one row
        else:
            rows = blk * ROWS + tl.arange(0, ROWS)
        for n0 in range(0, N, BLOCK_N):
            cols = n0 + tl.arange(0, BLOCK_N)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            offs = rows[:, None] * N + cols[None, :]
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def strided_witness(rows: int, block_n: int, lie: str = "") -> Witness:
    def writer(m, n):
        blk = m / rows
        it = (blk + 1) / P if lie == "iteration" else blk / P
        return Writer(pid=(blk % P,), iters=(it, n / block_n), lanes=(m % rows, n % block_n))

    return Witness(writer=writer, element=lambda store, pid, iters, lanes: (
        (pid[0] + iters[0] * P) * rows + lanes[0], iters[1] * block_n + lanes[1]))


def strided(bug: str = "none", lie: str = "", witness: bool = True) -> LaunchContract:
    rows, block_n = 4, 16
    return LaunchContract(
        kernel=strided_rows_kernel, name=f"strided_rows[{bug}{', lie=' + lie if lie else ''}]",
        args={"x_ptr": Tensor((M, N), (N, 1)), "y_ptr": Tensor((M, N), (N, 1), output=True), "M": M, "N": N},
        constexprs=[{"ROWS": rows, "BLOCK_N": block_n, "BUG": bug}], grid=(P,), domain=DOMAIN,
        bounded_shapes=SHAPES, witnesses={"y_ptr": strided_witness(rows, block_n, lie)} if witness else {})


CORRECT = [grouped(), strided()]
CONTRACTS = CORRECT
