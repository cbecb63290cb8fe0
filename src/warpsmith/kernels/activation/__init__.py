"""Gated activations: SwiGLU and GeGLU (erf and tanh forms), forward and backward."""
