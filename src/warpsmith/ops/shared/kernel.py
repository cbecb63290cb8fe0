"""Triton helpers shared by kernel families (only ``@triton.jit`` code).

The interpreter shim: Triton's CPU interpreter computes ``tl.dot`` on bfloat16
operands wrongly (upstream lists bf16 as unsupported there), and it computes an
fp32 dot exactly in fp32 whatever ``input_precision`` says. When ``EMULATE`` is
set (the launcher sets it only under the interpreter) operands are converted to
fp32 first: exact for bf16 and fp16, and the products of two bf16 values are
exact in fp32, so the result is what a bf16 tensor-core dot with fp32
accumulation computes, up to summation order. For ``PRECISION="tf32"`` the
operands are rounded to tf32 (10 mantissa bits, round half away from zero, as
``cvt.rna.tf32.f32`` does) so the error contract sees tf32's real error.

The interpreter also converts fp32 to bfloat16 by truncation, where the GPU rounds
to nearest even (and it mangles subnormals, e.g. 2.16e-39 becomes 5.9e-39);
``to_output`` rounds first under ``EMULATE`` and moves the bits itself, so the stored
value is the one the GPU stores.
"""
from ...core._triton import tl, triton


@triton.jit
def round_to_tf32(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x1000) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def round_to_bf16(x):
    """fp32 -> the nearest bf16 value (ties to even), still held in fp32; NaN kept."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, bits.to(tl.float32, bitcast=True))


@triton.jit
def to_output(x, out_ptr, EMULATE: tl.constexpr):
    """Cast an fp32 value to the element type of ``out_ptr`` (round to nearest even)."""
    if EMULATE:
        if out_ptr.dtype.element_ty == tl.bfloat16:
            # the interpreter's own fp32 -> bf16 conversion also mangles subnormals: move the bits
            bits = round_to_bf16(x).to(tl.uint32, bitcast=True)
            return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return x.to(out_ptr.dtype.element_ty)


@triton.jit
def dot_acc(a, b, acc, IS_FP32: tl.constexpr, PRECISION: tl.constexpr, EMULATE: tl.constexpr):
    """``acc + a @ b`` with fp32 accumulation; see the module docstring for ``EMULATE``."""
    if EMULATE:
        a32 = a.to(tl.float32)
        b32 = b.to(tl.float32)
        if PRECISION == "tf32":
            a32 = round_to_tf32(a32)
            b32 = round_to_tf32(b32)
        acc = tl.dot(a32, b32, acc, input_precision="ieee")
    elif IS_FP32:
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def apply_activation(x, ACTIVATION: tl.constexpr):
    """Elementwise epilogue in fp32: none, relu, gelu (erf form, as torch's default) or silu."""
    if ACTIVATION == "relu":  # NaN stays NaN, as torch.relu (tl.maximum alone would return 0)
        x = tl.where(x != x, x, tl.maximum(x, 0.0))
    elif ACTIVATION == "gelu":
        x = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif ACTIVATION == "silu":
        x = x * tl.sigmoid(x)
    return x
