// dtcast's scaled-format kernels: dtcast-quant's schemes (FP8 with tensor / channel / block
// scales, MXFP8, MXFP4, NVFP4, gpt-oss) quantized and dequantized on the GPU.
//
// Appended to kernels.cu (its lanes and rules are what these kernels round with), compiled by
// NVRTC, and compiled as C++ by the host tests, which run every element function here against
// dtcast-quant's CPU results. The numbers that make a scheme — what each element code reads as,
// each scale's factor, the scale rules from the amaxes — are not written here: the host computes
// them with dtcast-quant's own code (`DequantPlan`, `Quantizer::plan`) and hands them over as
// tables, so the CPU and the GPU apply one description. What is here is the per-element part:
//
//   dequantize: out[i] = round_out(values[code(i)] * factor(scale(i)))   (x86's NaN rules)
//   gpt-oss:    out[transposed i] = round_out(float(ldexp(values[code(i)], byte(i) - 127)))
//   amax:       per scale, the first NaN (in element order) else the largest magnitude
//   encode:     code(i) = encode(clamp(round_in(arithmetic, x(i) / or * factor(scale(i)))))
//
// The host appends one line per program, e.g. (lanes and quirks written by dtcast-device)
//   DTCAST_DEQUANT(4, Lane_bfloat16, false, true, false, false, false)
//   DTCAST_QUANTIZE(Lane_float16, Lane_float4_e2m1fn, false, false, false, false, true)

// ---- the references' arithmetic (dtcast-quant's arith.rs and quantize.rs)

DEV float quiet_f(float x) { return u2f(f2u(x) | 0x00400000u); }
// x86's NaN for an invalid operation on two numbers (0 * inf, 0 / 0: arith::X86_INDEFINITE, sign
// set); a GPU writes 0x7FFFFFFF, whose sign would give float8_e4m3fn's 0x7F instead of 0xFF.
DEV float as_on_x86(float y) { return isnan_f(y) ? u2f(0xFFC00000u) : y; }
// x86's `x * s` with `s` broadcast (arith::mul): a NaN `s` comes back quieted, else a NaN `x`.
DEV float q_mul(float x, float s) {
    if (isnan_f(s)) return quiet_f(s);
    if (isnan_f(x)) return quiet_f(x);
    return as_on_x86(x * s);
}
// x86's `a / b` (arith::div): a NaN operand comes back quieted, the first one if both are.
DEV float q_div(float a, float b) {
    if (isnan_f(a)) return quiet_f(a);
    if (isnan_f(b)) return quiet_f(b);
    return as_on_x86(a / b);
}
// The dtype a reference's arithmetic rounds each scaled value to (ScalePlan::arithmetic; the
// codes dtcast-device's `arithmetic_code` passes).
#define DTCAST_ARITH_F32 0u
#define DTCAST_ARITH_BF16 1u
#define DTCAST_ARITH_F16 2u
// `y` rounded as torch's arithmetic on tensors of that dtype rounds (arith.rs `round_in`): to
// bfloat16 by nearest even, a NaN the default NaN; to float16 by nearest even with overflow to
// inf, a NaN keeping its sign and top payload bits (the float16 cast and back).
DEV float round_in(float y, u32 arithmetic) {
    if (arithmetic == DTCAST_ARITH_BF16) return bf16_to_f32(f32_to_bf16(y));
    if (arithmetic == DTCAST_ARITH_F16) return f16_to_f32(f32_to_f16(y));
    return y;
}
// quantize.rs `clamp_to` of the value rounded in the reference's arithmetic: clamped to ±limit
// (NaN stays).
DEV float finish_scaled(float y, u32 arithmetic, float limit) {
    y = round_in(y, arithmetic);
    if (y > limit) return limit;
    if (y < -limit) return -limit;
    return y;
}

// compressed-tensors' float4 of a clamped value (quantize.rs `ct_fp4_code`): the magnitude
// rounded at its thresholds, then `x * sign(x)` (torch's sign of ±0 and NaN is 0: -0 is +0, a
// NaN the positive NaN), then the code from twice the value.
DEV u8 ct_fp4_code(float v) {
    float a = u2f(f2u(v) & 0x7FFFFFFFu);
    float magnitude;
    if (isnan_f(a)) magnitude = a;
    else if (a <= 0.25f) magnitude = 0.0f;
    else if (a < 0.75f) magnitude = 0.5f;
    else if (a <= 1.25f) magnitude = 1.0f;
    else if (a < 1.75f) magnitude = 1.5f;
    else if (a <= 2.5f) magnitude = 2.0f;
    else if (a < 3.5f) magnitude = 3.0f;
    else if (a <= 5.0f) magnitude = 4.0f;
    else magnitude = 6.0f;
    float sign = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f;
    float q = q_mul(magnitude, sign);
    // `(cvtt(q * 2) as i8).unsigned_abs()`: the low byte, read as signed.
    int low = cvtt32_f(q * 2.0f) & 0xFF;
    int s8 = low >= 128 ? low - 256 : low;
    u32 twice = (u32)(s8 < 0 ? -s8 : s8);
    u32 index = (twice >= 1 && twice <= 4) ? twice : twice == 6 ? 5 : twice == 8 ? 6 : twice >= 12 ? 7 : 0;
    return (u8)(index | ((f2u(q) >> 31) << 3));
}
// torchao's `_f32_to_floatx_unpacked` for e2m1 (quantize.rs `ao_fp4_code`): nearest even on the
// float32 bits, saturating at 6; a NaN's bits go through the normal branch, as there.
DEV u8 ao_fp4_code(float v) {
    u32 sign = (f2u(v) & 0x80000000u) >> 28;
    float x = u2f(f2u(v) & 0x7FFFFFFFu);
    u32 code;
    if (x >= 6.0f) {
        code = 7;
    } else if (x < 1.0f) {
        const u32 denorm_exp = (127 - 1) + (23 - 1) + 1;
        code = (f2u(x + u2f(denorm_exp << 23)) - (denorm_exp << 23)) & 0xFF;
    } else {
        u32 bits = f2u(x);
        u32 odd = (bits >> 22) & 1;
        const u32 add = (u32)(-126 * 8388608 + ((1 << 21) - 1));  // ((1 - 127) << 23) + 2^21 - 1
        u32 sum = bits + add + odd;
        // An arithmetic shift of the 32-bit sum, then its low byte.
        u32 shifted = (sum >> 22) | ((sum >> 31) ? 0xFFFFFC00u : 0u);
        code = shifted & 0xFF;
    }
    return (u8)(code | sign);
}

// ---- where an element's scale is (dtcast_quant::Scheme::scale_index)

// kind 0: the tensor's one scale; 1: one per row; 2: groups of `a` along a row; 3: blocks of `a`
// rows by `b` columns (`dtcast_quant::scale_layout`).
struct ScaleMap {
    u32 kind;
    u64 cols, a, b, per_row;
};
DEV ScaleMap scale_map(u32 kind, u64 a, u64 b, u64 cols) {
    ScaleMap m = {kind, cols, a ? a : 1, b ? b : 1, 0};
    m.per_row = kind == 2 ? cols / m.a : (cols + m.b - 1) / m.b;
    return m;
}
// `x / d` in 32-bit arithmetic where both fit (64-bit division is many instructions on a GPU).
DEV u64 div_u64(u64 x, u64 d) {
    if ((x >> 32) == 0 && (d >> 32) == 0) return (u32)x / (u32)d;
    return x / d;
}
DEV u64 scale_of(const ScaleMap& m, u64 i) {
    if (m.kind == 0) return 0;
    if (m.kind == 1) return div_u64(i, m.cols);
    // Groups divide every row evenly: a group's index is the element's divided by the group size.
    if (m.kind == 2) return div_u64(i, m.a);
    u64 r = div_u64(i, m.cols), c = i - r * m.cols;
    return div_u64(r, m.a) * m.per_row + div_u64(c, m.b);
}

// Element `i`'s code: float4 two per byte, the first in the low nibble.
template <int EBITS> DEV u32 code_at(const u8* elements, u64 i) {
    if (EBITS == 4) return (elements[i >> 1] >> (4 * (i & 1))) & 0xFu;
    return elements[i];
}
// Input element `i` (of the lane I: float32, bfloat16 or float16) as float32 bits: exact, a
// NaN's sign and payload kept (a float16 NaN quieted, as every use of it quiets it anyway).
template <class I> DEV u32 input_bits(const u8* src, u64 i) { return f2u(I::load(src + i * I::SIZE).f); }

// ---- dequantize

// Element `i` of a scheme that multiplies: `factors` indexed by the scale's byte where
// `by_byte`, else by its index.
template <int EBITS, class O>
DEV void dequant_element(const u8* elements, const float* values, const float* factors, const u8* scales,
                         bool by_byte, const ScaleMap& m, Quirks q, u64 i, u8* dst) {
    u64 s = scale_of(m, i);
    float f = by_byte ? factors[scales[s]] : factors[s];
    O::torch(v_float(q_mul(values[code_at<EBITS>(elements, i)], f)), q, dst + i * O::SIZE);
}
// Element `i` of gpt-oss (`[experts * per_expert, cols]`): `ldexp` exact in float64, rounded
// once to float32 and then to the output, written transposed to `[experts, cols, per_expert]`.
template <int EBITS, class O>
DEV void gpt_oss_element(const u8* elements, const float* values, const u8* scales, const ScaleMap& m,
                         u64 per_expert, Quirks q, u64 i, u8* dst) {
    int e = scales[scale_of(m, i)];
    float y = f64_to_f32((double)values[code_at<EBITS>(elements, i)] * pow2(e - 127));
    u64 r = div_u64(i, m.cols), c = i - r * m.cols;
    u64 expert = div_u64(r, per_expert), row = r - expert * per_expert;
    O::torch(v_float(y), q, dst + (expert * per_expert * m.cols + c * per_expert + row) * O::SIZE);
}

// ---- quantize: the amax of every scale

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
DEV void max_u32(u32* p, u32 v) { atomicMax(p, v); }
DEV void max_u64(u64* p, u64 v) { atomicMax(p, v); }
#else
DEV void max_u32(u32* p, u32 v) { if (v > *p) *p = v; }
DEV void max_u64(u64* p, u64 v) { if (v > *p) *p = v; }
#endif

// Elements `first..end` into their scales' running maxima: `magnitude[s]` the largest
// magnitude's bits (NaN aside), `nan_key[s]` the complement of the smallest index of a NaN (0:
// none). Both start at 0; maxima commute, so any split of the elements among threads gives the
// same result. Runs of one scale are folded locally first.
template <class I>
DEV void amax_elements(const u8* src, const ScaleMap& m, u64 first, u64 end, u32* magnitude, u64* nan_key) {
    u64 current = ~0ull, key = 0;
    u32 best = 0;
    for (u64 i = first; i < end; ++i) {
        u64 s = scale_of(m, i);
        if (s != current) {
            if (current != ~0ull) {
                if (best) max_u32(&magnitude[current], best);
                if (key) max_u64(&nan_key[current], key);
            }
            current = s;
            best = 0;
            key = 0;
        }
        u32 a = input_bits<I>(src, i) & 0x7FFFFFFFu;
        if (a > 0x7F800000u) {
            if (!key) key = ~i;
        } else if (a > best) {
            best = a;
        }
    }
    if (current != ~0ull) {
        if (best) max_u32(&magnitude[current], best);
        if (key) max_u64(&nan_key[current], key);
    }
}
// A scale's amax from its maxima (quantize.rs `Input::amax`): the first NaN as the input reads
// (the default NaN where `Quantizer::amax_nan_is_default`), else the largest magnitude.
template <class I>
DEV float amax_value(const u8* src, u32 magnitude, u64 nan_key, bool default_nan) {
    if (!nan_key) return u2f(magnitude);
    return default_nan ? u2f(0x7FC00000u) : u2f(input_bits<I>(src, ~nan_key));
}

// ---- quantize: the elements

// dtcast_quant::ScalePlan's element rules.
struct EncodeRules {
    bool divide;
    u32 arithmetic;
    bool canonical_nan, ct_float4;
    float limit;
};
// Element `i` scaled by its factor, rounded and clamped as the plan says, then encoded: float8 by
// the cast's rule; float4 by the cast's rule too, except NaN and -0, where the references' own
// float4 functions differ from it.
template <class I, class E>
DEV u32 encode_element(const u8* src, const float* factors, const ScaleMap& m, EncodeRules r, Quirks q, u64 i) {
    float x = u2f(input_bits<I>(src, i));
    if (r.canonical_nan && isnan_f(x)) x = u2f(0x7FC00000u);
    float f = factors[scale_of(m, i)];
    float y = finish_scaled(r.divide ? q_div(x, f) : q_mul(x, f), r.arithmetic, r.limit);
    if (E::BITS == 4 && (isnan_f(y) || f2u(y) == 0x80000000u)) return r.ct_float4 ? ct_fp4_code(y) : ao_fp4_code(y);
    u8 code = 0;
    E::torch(v_float(y), q, &code);
    return code;
}
// Byte `j` of the quantized elements (float4: elements 2j and 2j + 1).
template <class I, class E>
DEV void encode_byte(const u8* src, const float* factors, const ScaleMap& m, EncodeRules r, Quirks q, u64 j, u8* dst) {
    if (E::BITS == 4) {
        dst[j] = (u8)(encode_element<I, E>(src, factors, m, r, q, 2 * j) |
                      (encode_element<I, E>(src, factors, m, r, q, 2 * j + 1) << 4));
    } else {
        dst[j] = (u8)encode_element<I, E>(src, factors, m, r, q, j);
    }
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DTCAST_GRID_LOOP(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

// Elements of `rows * cols` of EBITS-bit codes to the output lane O (quirks: the float32 -> output
// cast's): dtcast_dequant (every scheme but gpt-oss) and dtcast_gpt_oss.
#define DTCAST_DEQUANT(EBITS, O, ...)                                                                          \
    extern "C" __global__ void dtcast_dequant(const u8* elements, const float* values, const float* factors,  \
                                              const u8* scales, u32 by_byte, u32 kind, u64 a, u64 b, u64 rows, \
                                              u64 cols, u8* dst) {                                            \
        Quirks q = {__VA_ARGS__};                                                                            \
        ScaleMap m = scale_map(kind, a, b, cols);                                                            \
        DTCAST_GRID_LOOP(i, rows * cols) dequant_element<EBITS, O>(elements, values, factors, scales, by_byte != 0, m, q, i, dst); \
    }                                                                                                        \
    extern "C" __global__ void dtcast_gpt_oss(const u8* elements, const float* values, const u8* scales,      \
                                              u32 kind, u64 a, u64 b, u64 rows, u64 cols, u64 per_expert,     \
                                              u8* dst) {                                                      \
        Quirks q = {__VA_ARGS__};                                                                            \
        ScaleMap m = scale_map(kind, a, b, cols);                                                            \
        DTCAST_GRID_LOOP(i, rows * cols) gpt_oss_element<EBITS, O>(elements, values, scales, m, per_expert, q, i, dst); \
    }

// Inputs of the lane I (float32, bfloat16, float16) to codes of the element lane E (quirks: the
// float32 -> element cast's): dtcast_amax (each thread a run of AMAX_RUN elements),
// dtcast_amax_value, dtcast_encode.
#define DTCAST_AMAX_RUN 16
#define DTCAST_QUANTIZE(I, E, ...)                                                                      \
    extern "C" __global__ void dtcast_amax(const u8* src, u32 kind, u64 a, u64 b, u64 rows, u64 cols,       \
                                           u32* magnitude, u64* nan_key) {                                    \
        ScaleMap m = scale_map(kind, a, b, cols);                                                            \
        u64 n = rows * cols;                                                                                 \
        DTCAST_GRID_LOOP(t, (n + DTCAST_AMAX_RUN - 1) / DTCAST_AMAX_RUN) {                                   \
            u64 first = t * DTCAST_AMAX_RUN, end = first + DTCAST_AMAX_RUN < n ? first + DTCAST_AMAX_RUN : n; \
            amax_elements<I>(src, m, first, end, magnitude, nan_key);                                        \
        }                                                                                                    \
    }                                                                                                        \
    extern "C" __global__ void dtcast_amax_value(const u8* src, const u32* magnitude, const u64* nan_key,   \
                                                 u64 count, u32 default_nan, float* amax) {                   \
        DTCAST_GRID_LOOP(s, count) amax[s] = amax_value<I>(src, magnitude[s], nan_key[s], default_nan != 0);  \
    }                                                                                                        \
    extern "C" __global__ void dtcast_encode(const u8* src, const float* factors, u32 kind, u64 a, u64 b,   \
                                             u64 rows, u64 cols, u32 divide, u32 arithmetic,                  \
                                             u32 canonical_nan, u32 ct_float4, float limit, u8* dst) {        \
        Quirks q = {__VA_ARGS__};                                                                            \
        ScaleMap m = scale_map(kind, a, b, cols);                                                            \
        EncodeRules r = {divide != 0, arithmetic, canonical_nan != 0, ct_float4 != 0, limit};               \
        DTCAST_GRID_LOOP(j, rows * cols * E::BITS / 8) encode_byte<I, E>(src, factors, m, r, q, j, dst);      \
    }
#endif
