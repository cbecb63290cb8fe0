"""Kernels exercising each construct that could make a proof obligation vacuously true.

Every kernel has a ``BUG`` constexpr: ``0`` is correct, ``1`` plants an out-of-bounds access
*inside* the construct. The prover must find each planted bug (``failed``) or refuse the
construct (``unknown``): never ``proved``. Data for tests/verify/test_prove_constructs.py.
"""
from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Tensor, sizes

N, S = sizes("N S")
DOMAIN = [N <= 2**16, S <= 64]
SHAPES = [{"N": 1, "S": 1}, {"N": 37, "S": 5}, {"N": 64, "S": 3}]


@triton.jit
def reverse_scan_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """y = x, one block at a time from the end (a reversed scan's loop)."""
    r = tl.arange(0, BLOCK)
    last = ((N - 1) // BLOCK) * BLOCK
    for start in range(last, -1, -BLOCK):
        offs = start + r
        mask = offs <= N if BUG else offs < N
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def symbolic_bounds_kernel(x_ptr, y_ptr, N, S, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A loop from S to N: zero trips wherever S >= N."""
    r = tl.arange(0, BLOCK)
    for start in range(S, N, BLOCK):
        offs = start + r
        mask = offs < N + BUG
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def symbolic_step_kernel(x_ptr, y_ptr, N, STEP, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A loop whose step is a runtime value of either sign."""
    r = tl.arange(0, BLOCK)
    for start in range(N - 1, -1, STEP):
        offs = start + r
        mask = offs < N + BUG
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def nested_reverse_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A reversed loop inside a forward loop (rows of 4)."""
    r = tl.arange(0, BLOCK)
    for row in range(0, 4):
        for start in range(N - BLOCK + BUG, -BLOCK, -BLOCK):
            offs = start + r
            mask = (offs >= 0) & (offs <= N - 1 + BUG)
            tl.store(y_ptr + row * N + offs, tl.load(x_ptr + row * N + offs, mask=mask), mask=mask)


@triton.jit
def early_return_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """Programs past the end return early (a runtime condition)."""
    pid = tl.program_id(0)
    if pid * BLOCK >= N:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N + BUG
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def false_mask_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A mask that is never true (offs < 0): nothing is accessed, so nothing may be 'proved' of it."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < 0
    tl.store(y_ptr + offs + BUG * N, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def runtime_branch_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A branch on a runtime size."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if N > 64:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N + BUG), mask=offs < N + BUG)
    else:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N), mask=offs < N)


@triton.jit
def constexpr_branch_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """A branch on a constexpr: only the taken branch exists in the compiled kernel."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if BUG:
        mask = offs <= N
    else:
        mask = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def while_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    r = tl.arange(0, BLOCK)
    start = 0
    while start < N:
        offs = start + r
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N + BUG), mask=offs < N + BUG)
        start += BLOCK


@triton.jit
def break_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    r = tl.arange(0, BLOCK)
    for start in range(0, N, BLOCK):
        offs = start + r
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N + BUG), mask=offs < N + BUG)
        if BUG >= 0:
            break


@triton.jit
def grid_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """Launched on a grid that is empty for every size: no program runs."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N + BUG
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _args(**scalars):
    return {"x_ptr": Tensor((4 * N,), (1,)), "y_ptr": Tensor((4 * N,), (1,), output=True), "N": N, **scalars}


def _one(kernel, bug, grid=(1,), domain=DOMAIN, **scalars) -> LaunchContract:
    args = _args(**scalars)
    if kernel is not nested_reverse_kernel:  # one row: the 1-D kernels address x[0:N]
        args["x_ptr"], args["y_ptr"] = Tensor((N,), (1,)), Tensor((N,), (1,), output=True)
    return LaunchContract(kernel=kernel, name=f"{kernel.__name__ if hasattr(kernel, '__name__') else kernel.fn.__name__}"
                          f"[BUG={bug}]", args=args, constexprs=[{"BLOCK": 16, "BUG": bug}], grid=grid,
                          domain=domain, bounded_shapes=SHAPES)


def _blocks(c):
    return ((N + c["BLOCK"] - 1) / c["BLOCK"],)


def contracts(bug: int) -> dict[str, LaunchContract]:
    """Every construct's contract, correct (bug=0) or with the planted out-of-bounds access (bug=1)."""
    return {
        "reverse_scan": _one(reverse_scan_kernel, bug),
        "symbolic_bounds": _one(symbolic_bounds_kernel, bug, S=S),
        "symbolic_step": _one(symbolic_step_kernel, bug, STEP=S - 8),
        "nested_reverse": _one(nested_reverse_kernel, bug),
        "early_return": _one(early_return_kernel, bug, grid=lambda c: (N,)),
        "false_mask": _one(false_mask_kernel, bug, grid=_blocks),
        "runtime_branch": _one(runtime_branch_kernel, bug, grid=_blocks),
        "constexpr_branch": _one(constexpr_branch_kernel, bug, grid=_blocks),
        "while": _one(while_kernel, bug),
        "break": _one(break_kernel, bug),
        "empty_grid": _one(grid_kernel, bug, grid=(N - N,)),
        "empty_domain": _one(constexpr_branch_kernel, bug, grid=_blocks, domain=[N <= 2**16, N > 2**17]),
    }


CONTRACTS = list(contracts(0).values())
