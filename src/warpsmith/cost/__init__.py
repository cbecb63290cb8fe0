"""Cost models: the predicted time of a variant's config on a hardware target (roofline, the GEMM
tile model, the memory-bound model), behind one function, :func:`predict_ms`."""
from .cost import predict_ms
from .memory_model import MemoryWork

__all__ = ["predict_ms", "MemoryWork"]
