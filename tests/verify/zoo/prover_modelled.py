"""Kernels using the constructs real Triton kernels index with, correct (``BUG=0``) and with a
planted out-of-bounds access (``BUG=1``). Data for tests/verify/test_prove_constructs.py."""
from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Tensor, sizes

M, N = sizes("M N")
DOMAIN = [M <= 2**12, N <= 2**12]
SHAPES = [{"M": 1, "N": 1}, {"M": 37, "N": 21}]


@triton.jit
def trans_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """y = x^T by tiles: the transposed tile's indices come from tl.trans."""
    rm = tl.program_id(0) * B + tl.arange(0, B)
    rn = tl.program_id(1) * B + tl.arange(0, B)
    src = rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M + BUG) & (rn[None, :] < N)
    x = tl.load(x_ptr + src, mask=mask)
    dst = tl.trans(rn[None, :] * M + rm[:, None])  # [B(n), B(m)]
    tl.store(y_ptr + dst, tl.trans(x), mask=tl.trans(mask))


@triton.jit
def permute_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    rm = tl.program_id(0) * B + tl.arange(0, B)
    rn = tl.program_id(1) * B + tl.arange(0, B)
    offs = tl.permute(rn[:, None] + rm[None, :] * N, (1, 0))  # [m, n]
    mask = tl.permute((rn[:, None] < N + BUG) & (rm[None, :] < M), 1, 0)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def reshape_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """A flat block seen as a [2, B // 2] tile and back."""
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tile = tl.reshape(offs, (2, B // 2))
    mask = tile < M * N + BUG
    tl.store(y_ptr + tl.reshape(tile, (B,)), tl.load(x_ptr + tile, mask=mask).reshape(B), mask=tl.reshape(mask, (B,)))


@triton.jit
def join_split_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """Even and odd elements as a pair (interleaved complex layout)."""
    k = tl.program_id(0) * B + tl.arange(0, B)
    pair = tl.join(2 * k, 2 * k + 1 + BUG)  # [B, 2]
    mask = tl.join(2 * k < M * N, 2 * k + 1 < M * N)
    v = tl.load(x_ptr + pair, mask=mask)
    lo, hi = tl.split(pair)
    mlo, mhi = tl.split(mask)
    tl.store(y_ptr + lo, v, mask=mlo)
    tl.store(y_ptr + hi, v, mask=mhi)


@triton.jit
def flip_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    rev = tl.flip(offs)
    tl.store(y_ptr + rev, tl.load(x_ptr + rev + BUG, mask=rev < M * N), mask=rev < M * N)


@triton.jit
def bits_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """Row and column from shifts and masks (N = 2**k columns): row = i >> 4, col = i & 15."""
    i = tl.program_id(0) * B + tl.arange(0, B)
    row = i >> 4
    col = (i & 15) + BUG * 16
    mask = row < M
    tl.store(y_ptr + (row << 4) + col, tl.load(x_ptr + row * 16 + col, mask=mask), mask=mask)


@triton.jit
def where_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """Indices clamped with tl.where (a reflect-pad style read)."""
    i = tl.program_id(0) * B + tl.arange(0, B)
    src = tl.where(i < M * N, i, M * N - 1 + BUG)
    tl.store(y_ptr + i, tl.load(x_ptr + src), mask=i < M * N)


@triton.jit
def atomic_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """Column maxima with atomics: y[n] = max over m of x[m, n]."""
    m = tl.program_id(0)
    rn = tl.arange(0, B)
    for n0 in range(0, N, B):
        cols = n0 + rn
        x = tl.load(x_ptr + m * N + cols, mask=cols < N)
        tl.atomic_max(y_ptr + cols + BUG * N, x, mask=cols < N)


@triton.jit
def block_ptr_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """Row sums through block pointers advanced along N."""
    pid = tl.program_id(0)
    xp = tl.make_block_ptr(x_ptr, shape=(M, N + BUG), strides=(N, 1), offsets=(pid * B, 0), block_shape=(B, B),
                           order=(1, 0))
    acc = tl.zeros((B,), dtype=tl.float32)
    for _ in range(0, N, B):
        acc += tl.sum(tl.load(xp, boundary_check=(0, 1)), axis=1)
        xp = tl.advance(xp, (0, B))
    yp = tl.make_block_ptr(y_ptr, shape=(M,), strides=(1,), offsets=(pid * B,), block_shape=(B,), order=(0,))
    tl.store(yp, acc, boundary_check=(0,))


@triton.jit
def descriptor_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """A tile copy through tensor descriptors (TMA): the hardware checks the descriptor's shape."""
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M + BUG, N], strides=[N, 1], block_shape=[B, B])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[B, B])
    m0, n0 = tl.program_id(0) * B, tl.program_id(1) * B
    yd.store([m0, n0], xd.load([m0, n0]))


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """An index from a cumulative sum of integers (not modelled: unknown, named)."""
    i = tl.cumsum(tl.arange(0, B), axis=0) + BUG
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < M * N), mask=i < M * N)


@triton.jit
def xor_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr, BUG: tl.constexpr):
    """A swizzle with ^ (an opaque operator: proved from its sound facts, or bounded with `^` named)."""
    i = tl.program_id(0) * B + tl.arange(0, B)
    j = i ^ (1 + BUG)
    tl.store(y_ptr + j, tl.load(x_ptr + j, mask=j < M * N), mask=j < M * N)


def _flat(c):
    return ((M * N + c["B"] - 1) / c["B"],)


def _tiles(c):
    return ((M + c["B"] - 1) / c["B"], (N + c["B"] - 1) / c["B"])


def _c(kernel, bug, grid, n16=False, y=None) -> LaunchContract:
    n = 16 if n16 else N
    x = Tensor((M, n), (n, 1))
    args = {"x_ptr": x, "y_ptr": y or Tensor((M, n), (n, 1), output=True), "M": M, "N": n}
    name = getattr(getattr(kernel, "fn", kernel), "__name__", "kernel")
    return LaunchContract(kernel=kernel, name=f"{name}[BUG={bug}]", args=args, constexprs=[{"B": 16, "BUG": bug}],
                          grid=grid, domain=DOMAIN, bounded_shapes=SHAPES)


def contracts(bug: int) -> dict[str, LaunchContract]:
    return {
        "tl.trans": _c(trans_kernel, bug, _tiles, y=Tensor((N, M), (M, 1), output=True)),
        "tl.permute": _c(permute_kernel, bug, _tiles),
        "tl.reshape": _c(reshape_kernel, bug, _flat),
        "tl.join/tl.split": _c(join_split_kernel, bug, lambda c: ((M * N + 2 * c["B"] - 1) / (2 * c["B"]),)),
        "tl.flip": _c(flip_kernel, bug, _flat),
        "shifts and &": _c(bits_kernel, bug, lambda c: ((M * 16 + c["B"] - 1) / c["B"],), n16=True),
        "tl.where": _c(where_kernel, bug, _flat),
        "atomics": _c(atomic_kernel, bug, lambda c: (M,), y=Tensor((N,), (1,), output=True)),
        "tl.make_block_ptr/tl.advance": _c(block_ptr_kernel, bug, lambda c: ((M + c["B"] - 1) / c["B"],),
                                          y=Tensor((M,), (1,), output=True)),
        "tensor descriptors": _c(descriptor_kernel, bug, _tiles),
    }


def refused(bug: int) -> dict[str, LaunchContract]:
    return {"tl.cumsum": _c(cumsum_kernel, bug, (1,)), "integer `^`": _c(xor_kernel, bug, _flat)}


CONTRACTS = list(contracts(0).values())
