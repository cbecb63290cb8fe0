"""Op specifications: what is computed, the reference, the error contract."""
from ..errors import UnknownNameError
from .contract import ErrorContract
from .dtypes import DTYPES, dtype_name, parse_dtype
from .matmul import MATMUL, MatmulSpec
from .opspec import DISTRIBUTIONS, INTEGERS, Axis, OpSpec, Problem, Scalar, as_tuple, parse_shape

OPS: dict[str, OpSpec] = {MATMUL.name: MATMUL}
from .norm import NORM_SPECS  # noqa: E402
OPS.update({_s.name: _s for _s in NORM_SPECS})
from .activation import ACTIVATION_OPS  # noqa: E402
OPS.update({_s.name: _s for _s in ACTIVATION_OPS})
from .rope import ROPE_OPS  # noqa: E402
OPS.update({_s.name: _s for _s in ROPE_OPS})
from .softmax import SPECS as SOFTMAX_SPECS  # noqa: E402
OPS.update({_s.name: _s for _s in SOFTMAX_SPECS})
from .xent import CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY, FUSED_LINEAR_CROSS_ENTROPY_BACKWARD  # noqa: E402
OPS.update({_s.name: _s for _s in (CROSS_ENTROPY, CROSS_ENTROPY_BACKWARD, FUSED_LINEAR_CROSS_ENTROPY,
                                   FUSED_LINEAR_CROSS_ENTROPY_BACKWARD)})


def get_op(name: str) -> OpSpec:
    if name not in OPS:
        raise UnknownNameError("op", name, list(OPS))
    return OPS[name]


__all__ = ["ErrorContract", "DTYPES", "dtype_name", "parse_dtype", "MATMUL", "MatmulSpec", "DISTRIBUTIONS", "INTEGERS",
           "Axis", "OpSpec", "Problem", "Scalar", "as_tuple", "parse_shape", "OPS", "get_op"]
