"""Cost models: the predicted time of a variant's config on a hardware target (roofline, the GEMM
tile model, the memory-bound model), behind one function, :func:`predict_ms`; and the compiler's
program pricing and generated-kernel config search on the same models (:mod:`.program`)."""
from .cost import predict_ms
from .memory_model import MemoryWork

__all__ = ["predict_ms", "MemoryWork"]
