"""The op families and their public ops.

Each family is one folder, ``ops/<family>/``: ``spec.py`` (what it computes), ``kernel.py`` (only
``@triton.jit`` code), ``variant.py`` (launchers, spaces, validity, guards), ``contract.py`` (launch
contracts) and ``op.py`` (the public function, the ``warpsmith::`` custom ops and autograd). Its
``__init__`` declares ``SPECS`` and ``VARIANTS``; :data:`FAMILIES` below is the one list of families,
and :data:`REGISTRY` (every op's spec and variants) is built from it.

The public ops validate their arguments, then call the ``warpsmith::`` custom op (which dispatches to
the best verified kernel for the shape, else the heuristic default). A public function may share
its family's name (``warpsmith.ops.matmul`` is the function; the family's modules are imported by
their full names, e.g. ``from warpsmith.ops.matmul.spec import MATMUL``).

Example:
    >>> import torch, warpsmith.ops as wops
    >>> c = wops.matmul(torch.randn(64, 32).half(), torch.randn(32, 16).half(), activation="relu")
"""
from ..core.registry import Registry
from . import matmul as _matmul, norm as _norm, activation as _activation, rope as _rope, softmax as _softmax
from . import cross_entropy as _cross_entropy
from . import attention as _attention
from . import lowprec as _lowprec
from . import pool as _pool
from . import conv as _conv
from . import gather as _gather
from ..comm import family as _comm

# the one list of families, in the order `warpsmith ops` lists them
FAMILIES = (_matmul, _norm, _activation, _rope, _softmax, _cross_entropy, _attention, _conv, _pool, _lowprec, _gather,
            _comm)
REGISTRY = Registry(FAMILIES)
OPS = REGISTRY.ops
get_op = REGISTRY.get_op
variants = REGISTRY.variants
get_variant = REGISTRY.get_variant
default_variant = REGISTRY.default_variant

# the public functions (a function named like its family replaces the package as an attribute here)
from .matmul.op import matmul  # noqa: E402
from .norm.op import layer_norm, rms_norm  # noqa: E402
from .activation.op import geglu, swiglu  # noqa: E402
from .rope.op import rope, rope_hf  # noqa: E402
from .softmax.op import log_softmax, softmax  # noqa: E402
from .cross_entropy.op import cross_entropy, fused_linear_cross_entropy  # noqa: E402
from .attention.op import attention, merge_attention_states, scaled_dot_product_attention  # noqa: E402
from .attention.decode.op import attention_decode, mla_decode  # noqa: E402
from .lowprec.int4.op import int4_matmul  # noqa: E402
from .pool.op import adaptive_avg_pool, avg_pool, max_pool  # noqa: E402
from .norm.channel.op import batch_norm, group_norm, instance_norm  # noqa: E402
from .lowprec.scaled.op import scaled_matmul  # noqa: E402
from .lowprec.quant.op import dequantize, quantize, quantize_static, stochastic_round  # noqa: E402
from .conv.op import conv_transpose, convolution  # noqa: E402
from .conv.fold import fold_batch_norm  # noqa: E402
from .conv.op import conv  # noqa: E402  (the function replaces the package as an attribute)
from .gather.op import embedding, embedding_backward, index_add, index_select, scatter, scatter_add  # noqa: E402
from .gather.op import gather  # noqa: E402  (the function replaces the package as an attribute)

__all__ = ["matmul"]
__all__ += ["rms_norm", "layer_norm"]
__all__ += ["softmax", "log_softmax"]
__all__ += ["swiglu", "geglu"]
__all__ += ["rope", "rope_hf"]
__all__ += ["cross_entropy", "fused_linear_cross_entropy"]
__all__ += ["attention", "scaled_dot_product_attention", "merge_attention_states"]
__all__ += ["attention_decode", "mla_decode"]
__all__ += ["int4_matmul"]
__all__ += ["max_pool", "avg_pool", "adaptive_avg_pool"]
__all__ += ["batch_norm", "group_norm", "instance_norm"]
__all__ += ["scaled_matmul", "quantize", "quantize_static", "dequantize", "stochastic_round"]
__all__ += ["conv", "conv_transpose", "convolution", "fold_batch_norm"]
__all__ += ["gather", "embedding", "embedding_backward", "index_select", "index_add", "scatter", "scatter_add"]
