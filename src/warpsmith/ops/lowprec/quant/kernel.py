"""Quantization kernels (only ``@triton.jit`` code): dynamic per-row and per-group quantization to fp8
(e4m3/e5m2) and int8, optionally fused with a preceding RMSNorm; static-scale saturating casts;
dequantization; stochastic rounding fp32 -> bf16 and fp32 -> fp8. Per-tensor dynamic quantization is
three launches: the row kernel's amax pass (``AMAX_ONLY``), :func:`amax_scale_kernel`, then the row
kernel with that scale (``STATIC``).

Convention (reference.py): ``q = saturate(round(y / scale))``, ``real = q * scale``, dynamic
``scale = amax / QMAX`` (1 where amax == 0; NaN ignored by amax; int8 stores NaN as 0). fp8 values are stored as their bytes (the launcher passes a
uint8 view): on the GPU through Triton's conversion after an explicit clamp to ±QMAX (so e4m3 gives 448,
never NaN, and e5m2 57344, never inf); under the interpreter (``EMULATE``), whose fp32 -> fp8
conversion is wrong (500 -> 256, subnormals off, NaN -> 384: seen with Triton 3.9), the bytes are
computed here by :func:`round_fp8` and :func:`fp8_bits`.

Bytes: read M N x itemsize (twice with the fused norm: once for the sum of squares), write M N + scales.
"""
from ....core._triton import tl, triton
from ...shared.kernel import to_output


@triton.jit
def exp_of(a):
    """Unbiased exponent of |a| (fp32), as int32."""
    return ((a.to(tl.uint32, bitcast=True) >> 23) & 0xFF).to(tl.int32) - 127


@triton.jit
def pow2(e):
    """2^e for an int32 e in the normal fp32 range, exactly."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def sign_bit(x):
    """x's sign bit (fp32): -0.0 is negative too (x / inf of a negative x is -0, as the reference's cast keeps)."""
    return (x.to(tl.uint32, bitcast=True) >> 31) != 0


@triton.jit
def round_fp8(x, MAN: tl.constexpr, MIN_EXP: tl.constexpr, MAXV: tl.constexpr):
    """The fp8 value nearest ``x`` (ties to even), saturated to ±MAXV, held in fp32; NaN kept."""
    a = tl.abs(x)
    ulp = pow2(tl.maximum(exp_of(a), MIN_EXP) - MAN)
    r = ((a / ulp + 8388608.0) - 8388608.0) * ulp  # round half to even at the format's spacing
    r = tl.minimum(r, MAXV)
    return tl.where(x != x, x, tl.where(sign_bit(x), -r, r))


@triton.jit
def fp8_bits(r, MAN: tl.constexpr, MIN_EXP: tl.constexpr, BIAS: tl.constexpr, NAN_BITS: tl.constexpr):
    """The byte of the fp8 value ``r`` (exactly representable, held in fp32)."""
    a = tl.abs(r)
    e = exp_of(a)
    normal = e >= MIN_EXP
    man_n = (a.to(tl.uint32, bitcast=True) >> (23 - MAN)) & ((1 << MAN) - 1)
    man_s = (a / pow2(tl.zeros_like(e) + (MIN_EXP - MAN))).to(tl.uint32)
    ex = tl.where(normal, e + BIAS, 0).to(tl.uint32)
    bits = (ex << MAN) | tl.where(normal, man_n, man_s)
    bits = tl.where(sign_bit(r), bits | 0x80, bits)
    return tl.where(r != r, NAN_BITS, bits).to(tl.uint8)


@triton.jit
def amax_term(y):
    """|y| with NaN as 0: a NaN never sets its group's scale (explicitly: the GPU's max drops a NaN operand,
    the interpreter's may keep it)."""
    a = tl.abs(y)
    return tl.where(a != a, 0.0, a)


@triton.jit
def quantize_values(y, scale, FMT: tl.constexpr, EMULATE: tl.constexpr):
    """saturate(round(y / scale)) as the stored element: int8 (NaN -> 0, ±inf -> ±127), or the fp8 byte (uint8)."""
    v = y / scale
    if FMT == "int8":
        v = tl.where(v != v, 0.0, v)  # int8 has no NaN: 0, as reference.saturate_cast
        v = tl.minimum(tl.maximum(v, -127.0), 127.0)
        return ((v + 12582912.0) - 12582912.0).to(tl.int8)  # round half to even (|v| < 2^22)
    elif FMT == "e4m3":
        if EMULATE:
            return fp8_bits(round_fp8(v, 3, -6, 448.0), 3, -6, 7, 0x7F)
        return tl.minimum(tl.maximum(v, -448.0, propagate_nan=tl.PropagateNan.ALL), 448.0,
                          propagate_nan=tl.PropagateNan.ALL).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    else:
        if EMULATE:
            return fp8_bits(round_fp8(v, 2, -14, 57344.0), 2, -14, 15, 0x7F)  # torch's and the GPU's NaN
        return tl.minimum(tl.maximum(v, -57344.0, propagate_nan=tl.PropagateNan.ALL), 57344.0,
                          propagate_nan=tl.PropagateNan.ALL).to(tl.float8e5).to(tl.uint8, bitcast=True)


@triton.jit
def load_normed(x_ptr, w_ptr, row, cols, N, stride_xm, rstd, NORM: tl.constexpr):
    mask = cols < N
    y = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
    if NORM:
        y = y * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    return y


@triton.jit
def group_index(c, N, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    """The scale groups of the chunk starting at column c, c // GROUP + [0, BLOCK // GROUP), and which of
    them hold columns below N."""
    g = c // GROUP + tl.arange(0, BLOCK // GROUP)
    return g, g * GROUP < N


@triton.jit
def quant_rows_kernel(
    x_ptr, w_ptr, q_ptr, s_ptr, static_ptr,
    N, stride_xm, stride_qm, stride_sm, eps, QMAX,
    GROUP: tl.constexpr, BLOCK: tl.constexpr, NORM: tl.constexpr, STATIC: tl.constexpr,
    FMT: tl.constexpr, EMULATE: tl.constexpr, AMAX_ONLY: tl.constexpr = False,
):
    """Row ``program_id(0)`` of x (M, N), in chunks of BLOCK columns: y = rms_norm(x) * w (NORM) or x; then
    per row (GROUP == 0) or per GROUP columns (BLOCK a multiple of GROUP: BLOCK // GROUP groups a chunk): scale = amax / QMAX (1 if 0), or the static scale
    static_ptr[0] (STATIC); q = saturate(round(y / scale)); s[row] or s[row, group] = scale.
    ``AMAX_ONLY`` (GROUP == 0, the first pass of per-tensor quantization): s[row] = the row's amax, q untouched."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK)
    rstd = 1.0
    if NORM:
        ss = tl.zeros((BLOCK,), dtype=tl.float32)
        for c in range(0, N, BLOCK):
            x = tl.load(x_ptr + row * stride_xm + c + cols0, mask=c + cols0 < N, other=0.0).to(tl.float32)
            ss += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(ss, 0) / N + eps)
    if GROUP == 0:
        if STATIC:
            scale = tl.load(static_ptr)
        else:
            amax = tl.zeros((BLOCK,), dtype=tl.float32)
            for c in range(0, N, BLOCK):
                y = load_normed(x_ptr, w_ptr, row, c + cols0, N, stride_xm, rstd, NORM)
                amax = tl.maximum(amax, amax_term(y))
            m = tl.max(amax, 0)
            scale = tl.where(m > 0, m / QMAX, 1.0)
            if AMAX_ONLY:
                tl.store(s_ptr + row * stride_sm, m)
            else:
                tl.store(s_ptr + row * stride_sm, scale)
        if not AMAX_ONLY:
            for c in range(0, N, BLOCK):
                y = load_normed(x_ptr, w_ptr, row, c + cols0, N, stride_xm, rstd, NORM)
                tl.store(q_ptr + row * stride_qm + c + cols0, quantize_values(y, scale, FMT, EMULATE),
                         mask=c + cols0 < N)
    else:
        for c in range(0, N, BLOCK):
            y = tl.reshape(load_normed(x_ptr, w_ptr, row, c + cols0, N, stride_xm, rstd, NORM), (BLOCK // GROUP, GROUP))
            m = tl.max(amax_term(y), 1)
            scale = tl.where(m > 0, m / QMAX, 1.0)
            g, live = group_index(c, N, GROUP, BLOCK)
            tl.store(s_ptr + row * stride_sm + g, scale, mask=live)
            q = tl.reshape(quantize_values(y, scale[:, None], FMT, EMULATE), (BLOCK,))
            tl.store(q_ptr + row * stride_qm + c + cols0, q, mask=c + cols0 < N)


@triton.jit
def amax_scale_kernel(a_ptr, s_ptr, M, QMAX, BLOCK: tl.constexpr):
    """One program: s[0] = max(a[0:M]) / QMAX (1 if 0), the per-tensor scale from the rows' amaxes."""
    rows0 = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for r in range(0, M, BLOCK):
        acc = tl.maximum(acc, tl.load(a_ptr + r + rows0, mask=r + rows0 < M, other=0.0))
    m = tl.max(acc, 0)
    tl.store(s_ptr, tl.where(m > 0, m / QMAX, 1.0))


@triton.jit
def fp8_value(b, MAN: tl.constexpr, BIAS: tl.constexpr, IS_E4M3: tl.constexpr):
    """The fp32 value of the fp8 byte ``b`` (int32): normal, subnormal, ±0, NaN (e4m3: 0x7F/0xFF; e5m2:
    exponent 31 with a mantissa), ±inf (e5m2)."""
    mag = b & 0x7F
    e = mag >> MAN
    m = (mag & ((1 << MAN) - 1)).to(tl.float32)
    sub = m * pow2(tl.zeros_like(e) + (1 - BIAS - MAN))
    nor = (1.0 + m * (1.0 / (1 << MAN))) * pow2(tl.maximum(e, 1) - BIAS)
    v = tl.where(e == 0, sub, nor)
    if IS_E4M3:
        v = tl.where(mag == 0x7F, float("nan"), v)
    else:
        v = tl.where(e == 31, tl.where(m == 0, float("inf"), float("nan")), v)
    return tl.where(b >= 128, -v, v)


@triton.jit
def dequant_rows_kernel(
    q_ptr, s_ptr, out_ptr,
    N, stride_qm, stride_sm, stride_om,
    GROUP: tl.constexpr, BLOCK: tl.constexpr, TENSOR: tl.constexpr, EMULATE: tl.constexpr,
    DECODE: tl.constexpr = "",
):
    """out[row] = q[row] * scale: scale s[0] (TENSOR), s[row] (GROUP == 0) or s[row, col // GROUP].
    ``DECODE`` ("e4m3"/"e5m2", under the interpreter, whose fp8 -> fp32 conversion is wrong for NaN and
    inf: e4m3 NaN gives 480): q holds the fp8 bytes, decoded by :func:`fp8_value`."""
    row = tl.program_id(0).to(tl.int64)
    cols0 = tl.arange(0, BLOCK)
    for c in range(0, N, BLOCK):
        cols = c + cols0
        mask = cols < N
        if DECODE == "e4m3":
            q = fp8_value(tl.load(q_ptr + row * stride_qm + cols, mask=mask, other=0).to(tl.int32), 3, 7, True)
        elif DECODE == "e5m2":
            q = fp8_value(tl.load(q_ptr + row * stride_qm + cols, mask=mask, other=0).to(tl.int32), 2, 15, False)
        else:
            q = tl.load(q_ptr + row * stride_qm + cols, mask=mask, other=0.0).to(tl.float32)
        if TENSOR:
            s = tl.load(s_ptr)
        elif GROUP == 0:
            s = tl.load(s_ptr + row * stride_sm)
        else:
            s = tl.load(s_ptr + row * stride_sm + cols // GROUP, mask=mask, other=0.0)
        tl.store(out_ptr + row * stride_om + cols, to_output(q * s, out_ptr, EMULATE), mask=mask)


@triton.jit
def stochastic_round_kernel(x_ptr, y_ptr, n, seed, FMT: tl.constexpr, BLOCK: tl.constexpr, EMULATE: tl.constexpr):
    """y[i] = x[i] rounded to one of its two neighbours in FMT ("bf16" or "e4m3"), up with probability
    (|x| - |lo|) / (|hi| - |lo|), so E[y] = x; the random draw is Philox(seed, i): bit-reproducible for
    a seed. e4m3 saturates to ±448; NaN and ±inf stay (bf16)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if FMT == "bf16":
        bits = x.to(tl.uint32, bitcast=True)
        r = tl.randint(seed, offs.to(tl.uint32)).to(tl.uint32, bitcast=True) & 0xFFFF
        rounded = ((bits + r) & 0xFFFF0000) >> 16
        finite = tl.abs(x) < float("inf")
        out = tl.where(finite, rounded, bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        tl.store(y_ptr + offs, out, mask=mask)
    else:
        a = tl.minimum(tl.abs(x), 448.0)
        ulp = pow2(tl.maximum(exp_of(a), -6) - 3)
        lo = (a / ulp).to(tl.int32).to(tl.float32) * ulp  # toward zero (a / ulp < 16: exact)
        u = tl.rand(seed, offs.to(tl.uint32))
        v = tl.where(u < (a - lo) / ulp, lo + ulp, lo)
        v = tl.minimum(v, 448.0)
        v = tl.where(x != x, x, tl.where(x < 0, -v, v))
        if EMULATE:
            tl.store(y_ptr + offs, fp8_bits(v, 3, -6, 7, 0x7F), mask=mask)
        else:
            tl.store(y_ptr + offs, v.to(tl.float8e4nv).to(tl.uint8, bitcast=True), mask=mask)
