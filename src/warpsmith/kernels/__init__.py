"""Hand-written Triton kernels, one folder per family.

Importing this package first imports :mod:`warpsmith._triton`, which decides
whether Triton runs natively or under its CPU interpreter.
"""
from .. import _triton  # noqa: F401  (must precede any `import triton`)
