"""Kernels the solver cannot settle alone: integer operators with runtime operands, runtime control flow.

``row_last_kernel`` finds the start of an element's row as ``offs - (offs & (N - 1))``: that is
``offs - offs % N`` only when ``N`` is a power of two. At ``N = 3`` (M = 1) the element at offset 1
gets ``1 & 2 = 0``, its row's last element is taken to be 1 + 2 = 3, and the load reads past the end
of x. ``ring_kernel`` reads a table of ``N`` entries at ``offs & (N - 1)``, which lies in
``[0, N - 1]`` for every ``N``: in bounds (only its values are wrong where ``N`` is no power of two).
``shift_kernel`` reads ``x[offs >> S]`` with a runtime shift. ``last_program_kernel`` branches on
its program id (the symbolic tracer refuses that: run concretely) and, with ``BUG=1``, has the last
program read one element past the end. Data for tests/verify/test_prove_bounded.py.
"""
from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Tensor, sizes

M, N, S = sizes("M N S")
DOMAIN = [M <= 2**10, N <= 2**10]
POW2 = [{"M": 1, "N": 1}, {"M": 3, "N": 2}, {"M": 2, "N": 4}, {"M": 5, "N": 8}, {"M": 2, "N": 16}]
MIXED = POW2[:2] + [{"M": 1, "N": 3}, {"M": 2, "N": 5}]


@triton.jit
def row_last_kernel(x_ptr, y_ptr, M, N, B: tl.constexpr):
    """y[i] = x[i] + x[the last element of i's row] (M x N contiguous, N meant to be a power of two)."""
    offs = tl.program_id(0) * B + tl.arange(0, B)
    mask = offs < M * N
    last = offs - (offs & (N - 1)) + N - 1
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x + tl.load(x_ptr + last, mask=mask), mask=mask)


@triton.jit
def ring_kernel(x_ptr, t_ptr, y_ptr, M, N, B: tl.constexpr):
    """y[i] = x[i] + t[i & (N - 1)], t of N entries."""
    offs = tl.program_id(0) * B + tl.arange(0, B)
    mask = offs < M * N
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x + tl.load(t_ptr + (offs & (N - 1)), mask=mask), mask=mask)


@triton.jit
def shift_kernel(x_ptr, y_ptr, N, S, B: tl.constexpr, BUG: tl.constexpr):
    """y[i] = x[i >> S] (x of N entries, y of N entries): in bounds for S >= 0; BUG adds one."""
    offs = tl.program_id(0) * B + tl.arange(0, B)
    mask = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + (offs >> S) + BUG, mask=mask), mask=mask)


@triton.jit
def last_program_kernel(x_ptr, y_ptr, N, B: tl.constexpr, BUG: tl.constexpr):
    """A copy whose last program takes its own branch (control flow on the program id)."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    if pid == tl.num_programs(0) - 1:
        x = tl.load(x_ptr + offs, mask=offs < N + BUG)
    else:
        x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x, mask=offs < N)


def _flat(c):
    return ((M * N + c["B"] - 1) / c["B"],)


def row_last(shapes=()) -> LaunchContract:
    return LaunchContract(kernel=row_last_kernel, name="row_last",
                          args={"x_ptr": Tensor((M, N), (N, 1)), "y_ptr": Tensor((M, N), (N, 1), output=True),
                                "M": M, "N": N},
                          constexprs=[{"B": 16}], grid=_flat, domain=DOMAIN, bounded_shapes=shapes)


def ring(shapes=()) -> LaunchContract:
    return LaunchContract(kernel=ring_kernel, name="ring",
                          args={"x_ptr": Tensor((M, N), (N, 1)), "t_ptr": Tensor((N,), (1,)),
                                "y_ptr": Tensor((M, N), (N, 1), output=True), "M": M, "N": N},
                          constexprs=[{"B": 16}], grid=_flat, domain=DOMAIN, bounded_shapes=shapes)


def shift(bug: int) -> LaunchContract:
    return LaunchContract(kernel=shift_kernel, name=f"shift[BUG={bug}]",
                          args={"x_ptr": Tensor((N,), (1,)), "y_ptr": Tensor((N,), (1,), output=True), "N": N,
                                "S": S},
                          may_be_zero=[S], constexprs=[{"B": 16, "BUG": bug}],
                          grid=lambda c: ((N + c["B"] - 1) / c["B"],), domain=[N <= 2**10, S <= 8])


def last_program(bug: int) -> LaunchContract:
    return LaunchContract(kernel=last_program_kernel, name=f"last_program[BUG={bug}]",
                          args={"x_ptr": Tensor((N,), (1,)), "y_ptr": Tensor((N,), (1,), output=True), "N": N},
                          constexprs=[{"B": 16, "BUG": bug}], grid=lambda c: ((N + c["B"] - 1) / c["B"],),
                          domain=[N <= 2**10])
