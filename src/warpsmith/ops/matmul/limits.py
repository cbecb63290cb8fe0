"""The matmul kernels' limits, one definition for the launchers (variant.py) and the launch contracts
(contract.py)."""
# The kernels index within one batch entry in int32 (Triton wraps on overflow). Every element offset a
# program computes, including the overshoot of a last partial tile (< MAX_BLOCK rows or columns),
# must stay below INDEX_LIMIT; kernel/contract.py states the same as a precondition of the proofs.
INDEX_LIMIT = 2**31
MAX_BLOCK = 256
