"""Planted-bug Triton kernels with their launch contracts (data for tests/verify/test_prove.py).

Each kernel copies or reduces a matrix; each has one classic bug the prover must find.
``BUGS`` maps a contract name to the obligation that must fail.
"""
from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Split, Tensor, cdiv, sizes

M, N, K, S = sizes("M N K S")
DOMAIN = [M <= 2**16, N <= 2**16, K <= 2**16, (M + 64) * (N + 64) < 2**31]  # 32-bit indexing
SHAPES = [{"M": 1, "N": 1, "K": 1, "S": 1}, {"M": 37, "N": 23, "K": 40, "S": 3}]


@triton.jit
def rows_kernel(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    pid = tl.program_id(0)
    if BUG == "overlap":
        rm = pid * (BLOCK // 2) + tl.arange(0, BLOCK)  # tiles overlap by half
    else:
        rm = pid * BLOCK + tl.arange(0, BLOCK)
    rn = tl.arange(0, 32)
    for n0 in range(0, N, 32):
        cols = n0 + rn
        if BUG == "off_by_one":
            mask = (rm[:, None] <= M) & (cols[None, :] < N)  # <= M reads and writes one row past the end
        elif BUG == "no_mask":
            mask = cols[None, :] < N  # rows of the last tile are not masked
        else:
            mask = (rm[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rm[:, None] * N + cols[None, :], mask=mask)
        if BUG == "wrong_stride":
            tl.store(y_ptr + rm[:, None] * (N + 1) + cols[None, :], x, mask=mask)  # row stride N+1, not N
        else:
            tl.store(y_ptr + rm[:, None] * N + cols[None, :], x, mask=mask)


def _rows(bug: str, grid, domain=DOMAIN) -> LaunchContract:
    return LaunchContract(
        kernel=rows_kernel, name=f"rows[{bug}]",
        args={"x_ptr": Tensor((M, N), (N, 1)), "y_ptr": Tensor((M, N), (N, 1), output=True), "M": M, "N": N},
        constexprs=[{"BLOCK": 16, "BUG": bug}], grid=grid, domain=domain, bounded_shapes=SHAPES)


@triton.jit
def duplicate_writer_kernel(x_ptr, y_ptr, M, BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # program_id(1) ignored: two programs write each row
    tl.store(y_ptr + rm, tl.load(x_ptr + rm, mask=rm < M), mask=rm < M)


@triton.jit
def split_sum_kernel(x_ptr, p_ptr, K, K_PER_SPLIT, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """p[s] = sum of x[k] over slice s of K (the second pass adds the slices)."""
    s = tl.program_id(0)
    k_lo = s * K_PER_SPLIT
    if BUG == "twice":
        k_hi = tl.minimum(k_lo + 2 * K_PER_SPLIT, K)  # each slice also reads the next one
    elif BUG == "drops_tail":
        k_hi = tl.minimum(k_lo + K_PER_SPLIT, K - 1)  # the last element is never read
    else:
        k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK):
        rk = k + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + rk, mask=rk < k_hi, other=0.0)
    tl.store(p_ptr + s, tl.sum(acc, axis=0))


def _split(bug: str) -> LaunchContract:
    return LaunchContract(
        kernel=split_sum_kernel, name=f"split_sum[{bug}]",
        args={"x_ptr": Tensor((K,), (1,)), "p_ptr": Tensor((S,), (1,), output=True), "K": K,
              "K_PER_SPLIT": cdiv(cdiv(K, S), 16) * 16},
        constexprs=[{"BLOCK": 16, "BUG": bug}], grid=(S,), domain=[K <= 2**16, S <= 8, S <= cdiv(K, 16)],
        bounded_shapes=[{"K": 40, "S": 2}, {"K": 33, "S": 3}, {"K": 1, "S": 1}], split=Split("x_ptr", dim=0, axis=0))


@triton.jit
def strided_pick_kernel(x_ptr, y_ptr, P):
    """y[i] = x[i, 0]: the row offset i * P is int32 and wraps once it reaches 2^31."""
    i = tl.program_id(0)
    tl.store(y_ptr + i, tl.load(x_ptr + i * P))


P = sizes("P")[0]
STRIDED_PICK = LaunchContract(
    kernel=strided_pick_kernel, name="strided_pick[int32]",
    args={"x_ptr": Tensor((M, P), (P, 1)), "y_ptr": Tensor((M,), (1,), output=True), "P": P},
    grid=(M,), domain=[M <= 16, P <= 2**31], bounded_shapes=[{"M": 3, "P": 2**30}])

CORRECT = [_rows("none", lambda c: (cdiv(M, c["BLOCK"]),)), _split("none")]
BUGS = {
    "rows[off_by_one]": (_rows("off_by_one", lambda c: (cdiv(M, c["BLOCK"]),)), "in_bounds"),
    "rows[no_mask]": (_rows("no_mask", lambda c: (cdiv(M, c["BLOCK"]),)), "in_bounds"),
    "rows[wrong_stride]": (_rows("wrong_stride", lambda c: (cdiv(M, c["BLOCK"]),)), "in_bounds"),
    "rows[overlap]": (_rows("overlap", lambda c: (cdiv(M, c["BLOCK"]),)), "race_free"),
    # a correct kernel whose declared domain allows 2^32-element matrices: int32 indices wrap
    "rows[int32_overflow]": (_rows("none", lambda c: (cdiv(M, c["BLOCK"]),), DOMAIN[:3]), "int32_no_overflow"),
    "rows[missing_tail_tile]": (_rows("none", lambda c: (M / c["BLOCK"],)), "coverage"),
    "duplicate_writer": (LaunchContract(
        kernel=duplicate_writer_kernel, args={"x_ptr": Tensor((M,), (1,)), "y_ptr": Tensor((M,), (1,), output=True),
                                              "M": M},
        constexprs=[{"BLOCK": 16}], grid=lambda c: (cdiv(M, c["BLOCK"]), 2), domain=DOMAIN,
        bounded_shapes=SHAPES), "race_free"),
    "strided_pick[int32]": (STRIDED_PICK, "int32_no_overflow"),
    "split_sum[twice]": (_split("twice"), "split_coverage"),
    "split_sum[drops_tail]": (_split("drops_tail"), "split_coverage"),
}
CONTRACTS = CORRECT


@triton.jit
def paged_gather_kernel(pool_ptr, table_ptr, out_ptr, PAGE: tl.constexpr):
    """out[i, :] = pool[table[i], :] — a block-table gather (data-dependent addresses)."""
    i = tl.program_id(0)
    page = tl.load(table_ptr + i)
    r = tl.arange(0, PAGE)
    tl.store(out_ptr + i * PAGE + r, tl.load(pool_ptr + page * PAGE + r))


@triton.jit
def checked_gather_kernel(pool_ptr, table_ptr, out_ptr, NB, PAGE: tl.constexpr):
    """The same gather, masked by the table entry's range: safe whatever the table holds."""
    i = tl.program_id(0)
    page = tl.load(table_ptr + i)
    r = tl.arange(0, PAGE)
    ok = (page >= 0) & (page < NB)
    tl.store(out_ptr + i * PAGE + r, tl.load(pool_ptr + page * PAGE + r, mask=ok & (r < PAGE), other=0.0))


NB, NT = sizes("NB NT")


def gather(values, checked: bool = False) -> LaunchContract:
    """``values``: the declared precondition on table entries (None: no precondition)."""
    return LaunchContract(
        kernel=checked_gather_kernel if checked else paged_gather_kernel, name=f"paged_gather[{values}]",
        args={"pool_ptr": Tensor((NB, 16), (16, 1)), "table_ptr": Tensor((NT,), (1,), values=values),
              "out_ptr": Tensor((NT, 16), (16, 1), output=True), **({"NB": NB} if checked else {})},
        constexprs=[{"PAGE": 16}], grid=(NT,), domain=[NB <= 4096, NT <= 4096],
        bounded_shapes=[{"NB": 3, "NT": 5}])


@triton.jit
def neighbour_kernel(y_ptr, M, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """In place: y[i] += 1 (correct), or y[i] = y[i + 1] (reads what the next program writes)."""
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = rm + 1 if BUG else rm
    mask = (rm < M) & (src < M)
    tl.store(y_ptr + rm, tl.load(y_ptr + src, mask=mask) + 1, mask=mask)


def neighbour(bug: int) -> LaunchContract:
    return LaunchContract(kernel=neighbour_kernel, name=f"neighbour[{bug}]",
                          args={"y_ptr": Tensor((M,), (1,), output=True), "M": M},
                          constexprs=[{"BLOCK": 16, "BUG": bug}], grid=lambda c: (cdiv(M, c["BLOCK"]),),
                          domain=DOMAIN, bounded_shapes=SHAPES)
