"""GEMM: ``C = act(A @ B + bias)`` (tiled, split-K and persistent variants)."""
