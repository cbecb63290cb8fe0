"""A 1-D copy whose every obligation is proved (data for tests/verify/test_prove.py)."""
from warpsmith.core._triton import tl, triton
from warpsmith.verify.symbolic import LaunchContract, Tensor, cdiv, sizes

(M,) = sizes("M")


@triton.jit
def copy_kernel(x_ptr, y_ptr, M, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < M), mask=offs < M)


CONTRACTS = [LaunchContract(kernel=copy_kernel, args={"x_ptr": Tensor((M,), (1,)), "y_ptr": Tensor((M,), (1,), output=True),
                                                      "M": M},
                            constexprs=[{"BLOCK": 16}], grid=lambda c: (cdiv(M, c["BLOCK"]),), domain=[M <= 2**20],
                            bounded_shapes=[{"M": 1}, {"M": 37}])]
