"""Quantization (``quantize``: dynamic per-row / per-block / per-tensor, ``quantize_static``,
``dequantize``, ``stochastic_round``): the formats and the plain-PyTorch quantization every reference
uses (reference.py), the specs (spec.py), their verification criteria (judge.py), kernel.py,
variant.py, launch contracts contract.py, the public ops op.py."""
