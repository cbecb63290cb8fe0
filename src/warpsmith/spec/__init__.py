"""Op specifications: what is computed, the reference, the error contract."""
from ..errors import UnknownNameError
from .contract import ErrorContract
from .dtypes import DTYPES, dtype_name, parse_dtype
from .matmul import MATMUL, MatmulSpec
from .opspec import DISTRIBUTIONS, INTEGERS, Axis, OpSpec, Problem, Scalar, as_tuple, parse_shape

OPS: dict[str, OpSpec] = {MATMUL.name: MATMUL}


def get_op(name: str) -> OpSpec:
    if name not in OPS:
        raise UnknownNameError("op", name, list(OPS))
    return OPS[name]


__all__ = ["ErrorContract", "DTYPES", "dtype_name", "parse_dtype", "MATMUL", "MatmulSpec", "DISTRIBUTIONS", "INTEGERS",
           "Axis", "OpSpec", "Problem", "Scalar", "as_tuple", "parse_shape", "OPS", "get_op"]
