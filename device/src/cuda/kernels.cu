// dtcast cast kernels for CUDA (compiled at run time by NVRTC).
//
// A line-by-line port of dtcast-cast's scalar rules (cast/src/formats.rs, rules.rs, lanes.rs): every
// rounding, NaN pattern and out-of-range rule is written out explicitly, never left to what the
// hardware conversion instructions do, so that a cast gives the same bytes on the GPU as on the CPU.
// The same file compiles as plain C++ (without __CUDACC__) so the test suite can run it on the host
// and compare it with the Rust kernels byte for byte.
//
// The per-dtype parts are generated from dtcast-dtype's table and dtcast-cast's rule numbers
// (dtcast-device's `cuda/source.rs`): `formats.cuh` (each narrow float format's layout) and
// `lanes.cuh` (which lane type each dtype is), included below. For NVRTC the host pastes them in;
// the copies in this directory are what the host-side tests compile, checked against the
// generator by a test.
//
// The host appends one line naming the pair, its mode and the pair's quirks, e.g.
//   DTCAST_KERNEL(Lane_float32, Lane_bfloat16, 0, false, true, false, false, false)
// which defines  extern "C" __global__ void dtcast_cast(const u8* src, u8* dst, u64 n), one tile of
// elements per thread (see `convert_tile`).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DEV __device__ __forceinline__
#define MEM __device__ __forceinline__
#else
#define DEV static inline
#define MEM inline
#include <cmath>
#include <cstring>
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;

// ---- bits

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
DEV u32 f2u(float x) { return __float_as_uint(x); }
DEV float u2f(u32 x) { return __uint_as_float(x); }
DEV u64 d2u(double x) { return (u64)__double_as_longlong(x); }
DEV double u2d(u64 x) { return __longlong_as_double((i64)x); }
DEV double rint_even(double x) { return rint(x); }
DEV float rint_even_f(float x) { return rintf(x); }
DEV double trunc_(double x) { return trunc(x); }
#else
DEV u32 f2u(float x) { u32 u; memcpy(&u, &x, 4); return u; }
DEV float u2f(u32 x) { float f; memcpy(&f, &x, 4); return f; }
DEV u64 d2u(double x) { u64 u; memcpy(&u, &x, 8); return u; }
DEV double u2d(u64 x) { double d; memcpy(&d, &x, 8); return d; }
DEV double rint_even(double x) { return std::nearbyint(x); }
DEV float rint_even_f(float x) { return std::nearbyint(x); }
DEV double trunc_(double x) { return std::trunc(x); }
#endif

DEV bool isnan_f(float x) { return (f2u(x) & 0x7FFFFFFFu) > 0x7F800000u; }
DEV bool isnan_d(double x) { return (d2u(x) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull; }
DEV bool isinf_d(double x) { return (d2u(x) & 0x7FFFFFFFFFFFFFFFull) == 0x7FF0000000000000ull; }
DEV double pow2(int e) { return u2d((u64)(e + 1023) << 52); }

// ---- narrow formats (formats.rs)

enum Out { OUT_INF = 0, OUT_NAN = 1, OUT_MAX = 2 };

// dtcast_cast::layout::FormatLayout, field for field.
struct Narrow {
    u32 exp_bits, man_bits;
    i32 bias;
    u32 max_mag;
    i32 inf_mag;  // -1: no infinity
    bool has_nan;
    u32 nan_code;  // a format without NaN: the code its NaN rule writes (-0)
    bool nan_signed, neg_zero;
    bool is_signed;  // false: an unsigned format (float8_e5m3fnu); negative values are past its range
};

// Fmt_<dtype>() for every narrow float format (ml_dtypes' NaN byte), TorchFmt_<dtype>() for
// torch's float8 formats (torch's NaN byte).
#include "formats.cuh"

DEV u32 sign_bit(const Narrow& f) { return 1u << (f.exp_bits + f.man_bits); }
// A negative NaN flips the sign bit (a format without NaN: NaN -> -0, -NaN -> +0, as ml_dtypes).
DEV u32 nan_code(const Narrow& f, bool negative) {
    return (negative && f.nan_signed) ? (f.nan_code ^ sign_bit(f)) : f.nan_code;
}
DEV u32 special(const Narrow& f, int out, bool negative) {
    u32 sign = negative ? sign_bit(f) : 0;
    if (out == OUT_INF && f.inf_mag >= 0) return (u32)f.inf_mag | sign;
    // An unsigned format's "max" below zero is its lowest value, 0.
    if (out == OUT_MAX) return (negative && !f.is_signed) ? 0u : (f.max_mag | sign);
    return nan_code(f, negative);
}
DEV u64 round_magnitude(const Narrow& f, double a) {
    if (a == 0.0) return 0;
    int e = (int)((d2u(a) >> 52) & 0x7FF) - 1023;
    int emin = 1 - f.bias;
    if (e < emin - (int)f.man_bits - 2) return 0;
    int quantum = (e > emin ? e : emin) - (int)f.man_bits;
    u64 n = (u64)rint_even(a * pow2(-quantum));
    if (e < emin) return n;
    return ((u64)(e + f.bias) << f.man_bits) + n - (1ull << f.man_bits);
}
DEV u32 encode(const Narrow& f, double x, int overflow, int inf) {
    bool negative = (d2u(x) >> 63) != 0;
    double a = u2d(d2u(x) & 0x7FFFFFFFFFFFFFFFull);
    if (isinf_d(a)) return special(f, inf, negative);
    if (negative && !f.is_signed && a != 0.0) return special(f, overflow, true);
    u64 mag = round_magnitude(f, a);
    if (mag > (u64)f.max_mag) return special(f, overflow, negative);
    if (mag == 0 && !f.neg_zero) return 0;
    return (u32)mag | (negative ? sign_bit(f) : 0);
}
// `encode` for a float32 value, in float32 and integer arithmetic (double-precision work is the
// bottleneck of a memory-speed kernel): the same code for every non-NaN x, as the host test that
// compares the two over the float32 patterns checks. Every narrow format's emin is >= -126, so a
// float32 that is normal in the target is a normal float32, rounded here on its bits (nearest,
// ties to even, the carry running into the exponent); one below the target's emin is scaled by a
// power of two (exact) and rounded to an integer count of the target's subnormal quantum.
DEV u32 encode_f32(const Narrow& f, float x, int overflow, int inf) {
    u32 b = f2u(x);
    bool negative = (b >> 31) != 0;
    u32 a = b & 0x7FFFFFFFu;
    if (a == 0x7F800000u) return special(f, inf, negative);
    if (negative && !f.is_signed && a != 0) return special(f, overflow, true);
    int emin = 1 - f.bias;
    u32 mag;
    if ((int)(a >> 23) - 127 >= emin) {
        u32 shift = 23 - f.man_bits;
        u32 rounded = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1);
        mag = (rounded >> shift) - ((u32)(127 - f.bias) << f.man_bits);
    } else {
        // |x| * 2^(man_bits - emin) < 2^man_bits: exact, in steps that stay within float32.
        float scaled = u2f(a);
        int k = (int)f.man_bits - emin;
        for (; k > 60; k -= 60) scaled *= 1152921504606846976.0f;  // 2^60
        scaled *= u2f((u32)(k + 127) << 23);
        mag = (u32)rint_even_f(scaled);
    }
    if (mag > f.max_mag) return special(f, overflow, negative);
    if (mag == 0 && !f.neg_zero) return 0;
    return mag | (negative ? sign_bit(f) : 0);
}
DEV bool is_nan_code(const Narrow& f, u32 code) {
    if (!f.has_nan) return false;
    u32 mag = code & (sign_bit(f) - 1);
    if (f.inf_mag >= 0) return mag > (u32)f.inf_mag;
    if (f.neg_zero) return mag == f.nan_code;
    return code == f.nan_code;
}
DEV bool is_inf_code(const Narrow& f, u32 code) {
    return f.inf_mag >= 0 && (code & (sign_bit(f) - 1)) == (u32)f.inf_mag;
}
// `decode` in float32 (every narrow format's values are float32 values): for codes that are not NaN.
DEV float decode_f32(const Narrow& f, u32 code) {
    u32 mag = code & (sign_bit(f) - 1);
    u32 sign = (code & sign_bit(f)) ? 0x80000000u : 0;
    if (is_inf_code(f, code)) return u2f(sign | 0x7F800000u);
    u32 e = mag >> f.man_bits, m = mag & ((1u << f.man_bits) - 1);
    if (e == 0) {
        // m * 2^k, k = 1 - bias - man_bits, in steps of normal powers of two (bfloat16's k is
        // -133; its subnormals are float32 subnormals, reached exactly by the last step).
        float v = (float)m;
        int k = 1 - f.bias - (int)f.man_bits;
        for (; k < -100; k += 100) v *= 7.888609052210118e-31f;  // 2^-100
        v *= u2f((u32)(k + 127) << 23);
        return u2f(f2u(v) | sign);
    }
    return u2f(sign | ((e - (u32)f.bias + 127) << 23) | (m << (23 - f.man_bits)));
}
DEV double decode(const Narrow& f, u32 code) {
    u32 mag = code & (sign_bit(f) - 1);
    double v;
    if (is_inf_code(f, code)) {
        v = u2d(0x7FF0000000000000ull);
    } else {
        int e = (int)(mag >> f.man_bits);
        double m = (double)(mag & ((1u << f.man_bits) - 1));
        v = e == 0 ? m * pow2(1 - f.bias - (int)f.man_bits)
                   : (m + (double)(1u << f.man_bits)) * pow2(e - f.bias - (int)f.man_bits);
    }
    return (code & sign_bit(f)) ? -v : v;
}

DEV double f32_to_f64(float x) {
    if (isnan_f(x)) {
        u64 b = f2u(x);
        return u2d(((b >> 31) << 63) | 0x7FF8000000000000ull | ((b & 0x7FFFFFull) << 29));
    }
    return (double)x;
}
DEV float f64_to_f32(double x) {
    if (isnan_d(x)) {
        u64 b = d2u(x);
        return u2f(((u32)(b >> 63) << 31) | 0x7FC00000u | ((u32)(b >> 29) & 0x3FFFFFu));
    }
    return (float)x;
}
// ---- the GPU's conversion instructions, where they give the rules' bytes
//
// For inputs that are not NaN (NaNs keep dtcast's rules: payloads and signs), cvt between float32
// and float16 is IEEE's exact widening and round-to-nearest-even narrowing with overflow to
// infinity (no flush to zero), and from sm_89 cvt.rn.satfinite to float8 e4m3 / e5m2 rounds to
// nearest-even and saturates at the largest finite value: one instruction each instead of the
// rounding written out, which is what keeps these casts at memory speed. The host build (and so
// the host harness) runs the written-out rules; the GPU tests compare the two over every float16
// and every float32 bit pattern.
#if defined(__CUDA_ARCH__)
#define DTCAST_HW_F16 1
DEV u16 hw_f32_to_f16(float x) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
DEV float hw_f16_to_f32(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
#if __CUDA_ARCH__ >= 890
#define DTCAST_HW_F8 1
// Both halves of the pair get x, so the byte taken is x's whichever half is which.
DEV u8 hw_f32_to_e4m3_sat(float x) { u16 r; asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(r) : "f"(x)); return (u8)r; }
DEV u8 hw_f32_to_e5m2_sat(float x) { u16 r; asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(r) : "f"(x)); return (u8)r; }
#endif
#endif

DEV float f16_to_f32(u16 h) {
    u32 c = h;
    if (is_nan_code(Fmt_float16(), c)) return u2f(((c >> 15) << 31) | 0x7FC00000u | ((c & 0x3FF) << 13));
#if defined(DTCAST_HW_F16)
    return hw_f16_to_f32(h);
#else
    return decode_f32(Fmt_float16(), c);
#endif
}
DEV u16 f32_to_f16(float x) {
    if (isnan_f(x)) {
        u32 b = f2u(x);
        return (u16)(((b >> 31) << 15) | 0x7E00 | ((b >> 13) & 0x3FF));
    }
#if defined(DTCAST_HW_F16)
    return hw_f32_to_f16(x);
#else
    return (u16)encode_f32(Fmt_float16(), x, OUT_INF, OUT_INF);
#endif
}
DEV u16 f64_to_f16_once(double x) {
    if (isnan_d(x)) return f32_to_f16(f64_to_f32(x));
    return (u16)encode(Fmt_float16(), x, OUT_INF, OUT_INF);
}
DEV float bf16_to_f32(u16 b) { return u2f((u32)b << 16); }
DEV u16 f32_to_bf16(float x) {
    if (isnan_f(x)) return 0x7FC0;
    u32 b = f2u(x);
    return (u16)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
DEV u16 f64_to_bf16_once(double x) {
    if (isnan_d(x)) return (u16)((f2u(f64_to_f32(x)) >> 16) | 0x40);
    return (u16)encode(Fmt_bfloat16(), x, OUT_INF, OUT_INF);
}
DEV u8 f32_to_e8m0(float x) {
    u32 b = f2u(x);
    u32 exponent = (b >> 23) & 0xFF;
    if (exponent == 0xFF) return 0xFF;
    bool guard = (b & 0x400000u) != 0, round = (b & 0x200000u) != 0, sticky = (b & 0x1FFFFFu) != 0;
    bool lsb = exponent > 0;
    bool up = guard && (round || sticky || lsb);
    return (u8)(exponent + (up ? 1 : 0));
}
DEV float e8m0_to_f32(u8 c) {
    if (c == 0xFF) return u2f(0x7F800001u);
    if (c == 0) return u2f(0x00400000u);
    return u2f((u32)c << 23);
}
DEV u8 f64_to_e8m0_saturating(double x) {
    if (isnan_d(x)) return 0xFF;
    if (x <= 0.0) return 0;
    if (isinf_d(x)) return 0xFE;
    int e = (int)((d2u(x) >> 52) & 0x7FF) - 1023;
    u64 man = d2u(x) & ((1ull << 52) - 1);
    if (man >= (1ull << 51)) e += 1;
    e += 127;
    return (u8)(e < 0 ? 0 : (e > 254 ? 254 : e));
}
DEV double odd_fixup(double f, bool exact, bool above) {
    // `exact`: f is the integer; `above`: the integer is above f (in value).
    if (exact || (d2u(f) & 1)) return f;
    bool negative = (d2u(f) >> 63) != 0;
    i64 toward = above ? 1 : -1;
    i64 step = negative ? -toward : toward;
    return u2d((u64)((i64)d2u(f) + step));
}
DEV double i64_to_f64_odd(i64 i) {
    double f = (double)i;
    // Compare in the integers: f is within 2^11 of i, and |f| <= 2^63.
    bool exact, above;
    if (f >= 9223372036854775808.0) { exact = false; above = false; }
    else { i64 back = (i64)f; exact = back == i; above = i > back; }
    return odd_fixup(f, exact, above);
}
DEV double u64_to_f64_odd(u64 u) {
    double f = (double)u;
    bool exact, above;
    if (f >= 18446744073709551616.0) { exact = false; above = false; }
    else { u64 back = (u64)f; exact = back == u; above = u > back; }
    return odd_fixup(f, exact, above);
}

// ---- values (rules.rs)

enum Kind { K_BOOL, K_INT, K_UINT, K_FLOAT, K_DOUBLE, K_CFLOAT, K_CDOUBLE };

struct Val {
    int kind;
    i64 i;
    u64 u;
    float f, fi;
    double d, di;
};

DEV Val v_bool(bool b) { Val v = {K_BOOL, b ? 1 : 0, 0, 0, 0, 0, 0}; return v; }
DEV Val v_int(i64 i) { Val v = {K_INT, i, 0, 0, 0, 0, 0}; return v; }
DEV Val v_uint(u64 u) { Val v = {K_UINT, 0, u, 0, 0, 0, 0}; return v; }
DEV Val v_float(float f) { Val v = {K_FLOAT, 0, 0, f, 0, 0, 0}; return v; }
DEV Val v_double(double d) { Val v = {K_DOUBLE, 0, 0, 0, 0, d, 0}; return v; }
DEV Val v_cfloat(float re, float im) { Val v = {K_CFLOAT, 0, 0, re, im, 0, 0}; return v; }
DEV Val v_cdouble(double re, double im) { Val v = {K_CDOUBLE, 0, 0, 0, 0, re, im}; return v; }

DEV Val real(Val v) {
    if (v.kind == K_CFLOAT) return v_float(v.f);
    if (v.kind == K_CDOUBLE) return v_double(v.d);
    return v;
}
DEV Val imag(Val v) {
    if (v.kind == K_CFLOAT) return v_float(v.fi);
    if (v.kind == K_CDOUBLE) return v_double(v.di);
    if (v.kind == K_DOUBLE) return v_double(0.0);
    return v_float(0.0f);
}
DEV bool to_bool(Val v) {
    switch (v.kind) {
        case K_BOOL: case K_INT: return v.i != 0;
        case K_UINT: return v.u != 0;
        case K_FLOAT: return v.f != 0.0f || isnan_f(v.f);
        case K_DOUBLE: return v.d != 0.0 || isnan_d(v.d);
        case K_CFLOAT: return v.f != 0.0f || isnan_f(v.f) || v.fi != 0.0f || isnan_f(v.fi);
        default: return v.d != 0.0 || isnan_d(v.d) || v.di != 0.0 || isnan_d(v.di);
    }
}
DEV i32 cvtt32(double x) {
    if (x > -2147483649.0 && x < 2147483648.0) return (i32)x;
    return (i32)0x80000000u;
}
// cvtt32 for a float32 value, compared in float32: -2147483649.0 < x holds for a float32 exactly
// when x >= -2^31 (the float32 below -2^31 is -2^31 - 256), NaN failing both tests as there.
DEV i32 cvtt32_f(float x) {
    if (x >= -2147483648.0f && x < 2147483648.0f) return (i32)x;
    return (i32)0x80000000u;
}
DEV i64 cvtt64(double x) {
    if (x >= -9223372036854775808.0 && x < 9223372036854775808.0) return (i64)x;
    return (i64)0x8000000000000000ull;
}
DEV u64 cvtt_u64(double x) {
    const double TWO63 = 9223372036854775808.0;
    if (x >= TWO63) return ((u64)cvtt64(x - TWO63)) ^ (1ull << 63);
    return (u64)cvtt64(x);
}
// Rust's saturating float -> int `as` (NaN -> 0), for Saturate mode.
DEV i64 sat_i(double x, double lo, double hi_excl, i64 lo_i, i64 hi_i) {
    if (isnan_d(x)) return 0;
    if (x <= lo) return lo_i;
    if (x >= hi_excl) return hi_i;
    return (i64)x;
}
DEV u64 sat_u(double x, double hi_excl, u64 hi_u) {
    if (isnan_d(x) || x <= 0.0) return 0;
    if (x >= hi_excl) return hi_u;
    return (u64)x;
}
DEV float to_f32(Val v, bool f16_quirk) {
    v = real(v);
    switch (v.kind) {
        case K_BOOL: return (float)v.i;
        case K_INT: return (float)v.i;
        case K_UINT: return (float)v.u;
        case K_FLOAT: return (f16_quirk && isnan_f(v.f)) ? u2f(0x7FFFFFFFu) : v.f;
        default: return f64_to_f32(v.d);
    }
}
DEV double as_f64(Val v) {
    v = real(v);
    switch (v.kind) {
        case K_BOOL: case K_INT: return (double)v.i;
        case K_UINT: return (double)v.u;
        case K_FLOAT: return (double)v.f;
        default: return v.d;
    }
}
DEV double to_f64(Val v) {
    v = real(v);
    if (v.kind == K_FLOAT) return f32_to_f64(v.f);
    return as_f64(v);
}
DEV double to_f64_for_rounding(Val v) {
    v = real(v);
    if (v.kind == K_INT) return i64_to_f64_odd(v.i);
    if (v.kind == K_UINT) return u64_to_f64_odd(v.u);
    return to_f64(v);
}

// ---- torch's float8 formats (rules.rs `Float8`) and ml_dtypes' rules (ml.rs)
//
// `lanes.cuh` describes each torch float8 format as a struct T8_<dtype>: format() (torch's NaN
// byte), ml() (ml_dtypes'), OVERFLOW / INF / SAT_INF (what torch writes past the largest value and
// for ±inf, and Saturate for ±inf), NAN_F32 / NAN_SIGNED (the float32 bits torch decodes a NaN
// to; NAN_F32 0: through float16), HW (1: the layout of the GPU's e4m3 instructions, saturating;
// 2: e5m2's, overflowing to inf; 0: none).

template <class F> DEV u8 f8_torch(Val v) {
    float x = to_f32(v, false);
    Narrow f = F::format();
    if (isnan_f(x)) return (u8)nan_code(f, (f2u(x) >> 31) != 0);
#if defined(DTCAST_HW_F8)
    // e4m3fn: overflow and infinity give the largest finite value, as satfinite does. e5m2:
    // they give infinity; from 61440 = 0x47700000 (halfway between the largest finite value,
    // 57344, and 2^16) round-to-nearest-even goes to 2^16, which is past the format: infinity.
    if (F::HW == 1) return hw_f32_to_e4m3_sat(x);
    if (F::HW == 2) return (f2u(x) & 0x7FFFFFFFu) >= 0x47700000u ? (u8)((f2u(x) >> 24 & 0x80) | 0x7C) : hw_f32_to_e5m2_sat(x);
#endif
    return (u8)encode_f32(f, x, F::OVERFLOW, F::INF);
}
template <class F> DEV u8 f8_saturate(Val v) {
    double x = to_f64_for_rounding(v);
    Narrow f = F::format();
    if (isnan_d(x)) return (u8)nan_code(f, (d2u(x) >> 63) != 0);
    return (u8)encode(f, x, OUT_MAX, F::SAT_INF);
}
template <class F> DEV float f8_decode(u8 code) {
    Narrow f = F::format();
    u32 c = code;
    if (is_nan_code(f, c)) {
        if (F::NAN_F32 == 0) return f16_to_f32((u16)(c << 8));
        return u2f((F::NAN_SIGNED ? (c >> 7) << 31 : 0u) | F::NAN_F32);
    }
    return decode_f32(f, c);
}

// ml_dtypes' conversion to a narrow format: through float32; past the largest finite value and
// for ±inf, ±inf where the format has it, else its NaN, else ±max; NaN: the format's NaN (-0 / +0
// where it has none).
DEV u32 ml_encode(const Narrow& f, Val v) {
    int beyond = f.inf_mag >= 0 ? OUT_INF : f.has_nan ? OUT_NAN : OUT_MAX;
    Val r = real(v);
    if (r.kind == K_DOUBLE) {
        // ml_dtypes 0.7: one rounding from float64.
        if (isnan_d(r.d)) return nan_code(f, (d2u(r.d) >> 63) != 0);
        return encode(f, r.d, beyond, beyond);
    }
    float x = to_f32(v, false);
    if (isnan_f(x)) return nan_code(f, (f2u(x) >> 31) != 0);
    return encode_f32(f, x, beyond, beyond);
}
// Saturate for ml_dtypes' formats: one rounding; finite overflow -> ±max, ±inf -> ±inf where the
// format has it (else ±max), NaN -> the format's NaN, or +0 where it has none.
DEV u32 ml_saturate(const Narrow& f, Val v) {
    double x = to_f64_for_rounding(v);
    if (isnan_d(x)) return f.has_nan ? nan_code(f, (d2u(x) >> 63) != 0) : 0u;
    return encode(f, x, OUT_MAX, f.inf_mag >= 0 ? OUT_INF : OUT_MAX);
}
// A code's value, exactly; a NaN is the quiet float32 NaN of the code's sign.
DEV float ml_decode(const Narrow& f, u32 code) {
    if (is_nan_code(f, code)) return u2f((code & sign_bit(f)) ? 0xFFC00000u : 0x7FC00000u);
    return decode_f32(f, code);
}
// float -> int8..int64 / uint8..uint64 for ml_dtypes' sources: NaN -> 0, ±inf -> the bounds,
// else the low bits of the truncated 64-bit value.
DEV i64 ml_float_to_int(double x, i64 lo, i64 hi) {
    if (isnan_d(x)) return 0;
    if (isinf_d(x)) return x > 0 ? hi : lo;
    return cvtt64(x);
}
// float -> int4/2/1, uint4/2/1 (before the low bits are kept): the truncated value, 0 for NaN,
// ±inf and |x| >= 2^31.
DEV i64 ml_float_to_narrow_int(double x) {
    if (x > -2147483648.0 && x < 2147483648.0) return (i64)x;
    return 0;
}

// ---- quirks and lanes (lanes.rs)

// dtcast_cast::Quirks, field for field (the host writes them into each kernel's line).
struct Quirks {
    bool f16_to_f32_nan, f32_to_bf16_nan, float8_nan_to_int_zero, part_bits, ml;
};
#define NO_QUIRKS {false, false, false, false, false}

// Element loads and stores. On the GPU (little-endian, every element at a multiple of its size
// from a 256-byte aligned allocation, tiles in 16-byte aligned registers) one typed access; on the
// host, bytes, so the harness is independent of the host's alignment rules.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
template <class T> DEV T load_le(const u8* p) { return *(const T*)p; }
template <class T> DEV void store_le(u8* p, T x) { *(T*)p = x; }
#else
template <class T> DEV T load_le(const u8* p) {
    T x = 0;
    for (int k = 0; k < (int)sizeof(T); ++k) x |= (T)((T)p[k] << (8 * k));
    return x;
}
template <class T> DEV void store_le(u8* p, T x) {
    for (int k = 0; k < (int)sizeof(T); ++k) p[k] = (u8)(x >> (8 * k));
}
#endif

// Every lane: SIZE (bytes as the kernels hold an element: one for the packed dtypes, code in the
// low bits), BITS (in storage), load (the value torch's conversion sees), load_ml (ml_dtypes'),
// torch and saturate (the two kernel modes' rules). `lanes.cuh` names one lane per dtype.
#define PLAIN_LOAD_ML MEM static Val load_ml(const u8* p) { return load(p); }

// Integer lanes: TORCH_FLOAT is how torch's scalar path turns a double into this type,
// TORCH_F32 the same for a float32 value (which may skip the double).
template <int BITS, bool SIGNED> struct IntLane;
#define INT_LANE(NBITS, NSIGNED, T, UT, IS_U64, TORCH_FLOAT, TORCH_F32, SAT_FLOAT)                  \
    template <> struct IntLane<NBITS, NSIGNED> {                                                   \
        static const int SIZE = sizeof(T);                                                         \
        static const int BITS = NBITS;                                                             \
        MEM static Val load(const u8* p) {                                                         \
            T x = (T)load_le<UT>(p);                                                               \
            return IS_U64 ? v_uint((u64)x) : v_int((i64)x);                                        \
        }                                                                                          \
        PLAIN_LOAD_ML                                                                              \
        MEM static T from_float(double x) { return TORCH_FLOAT; }                                 \
        MEM static T from_f32(float x) { return TORCH_F32; }                                      \
        MEM static T sat_float(double x) { return SAT_FLOAT; }                                    \
        MEM static void torch(Val v, Quirks q, u8* p) {                                            \
            v = real(v);                                                                           \
            const T lo = NSIGNED ? (T)((UT)1 << (NBITS - 1)) : (T)0;                               \
            T r;                                                                                   \
            switch (v.kind) {                                                                      \
                case K_BOOL: case K_INT: r = (T)v.i; break;                                        \
                case K_UINT: r = (T)v.u; break;                                                    \
                case K_FLOAT:                                                                      \
                    if (q.ml) r = (T)ml_float_to_int((double)v.f, (i64)lo, (i64)(T)~(UT)lo);         \
                    else r = (q.float8_nan_to_int_zero && isnan_f(v.f)) ? (T)0 : from_f32(v.f);     \
                    break;                                                                         \
                default: r = from_float(v.d); break;                                               \
            }                                                                                      \
            store_le<UT>(p, (UT)r);                                                                \
        }                                                                                          \
        MEM static void saturate(Val v, u8* p) {                                                   \
            v = real(v);                                                                           \
            if (v.kind == K_FLOAT || v.kind == K_DOUBLE) {                                         \
                store_le<UT>(p, (UT)sat_float(v.kind == K_FLOAT ? (double)v.f : v.d));              \
            } else {                                                                               \
                Quirks none = NO_QUIRKS;                                                           \
                torch(v, none, p);                                                                 \
            }                                                                                      \
        }                                                                                          \
    };

// torch's scalar path: int8/int16/uint16 through a 32-bit truncation, uint8/uint32 through a
// 64-bit one, uint64 with the 2^63 shift (lanes.rs).
INT_LANE(8, false, u8, u8, false, (u8)cvtt64(x), (u8)cvtt64((double)x), (u8)sat_u(x, 256.0, 255))
INT_LANE(8, true, i8, u8, false, (i8)cvtt32(x), (i8)cvtt32_f(x), (i8)sat_i(x, -128.0, 128.0, -128, 127))
INT_LANE(16, true, i16, u16, false, (i16)cvtt32(x), (i16)cvtt32_f(x), (i16)sat_i(x, -32768.0, 32768.0, -32768, 32767))
INT_LANE(32, true, i32, u32, false, cvtt32(x), cvtt32_f(x), (i32)sat_i(x, -2147483648.0, 2147483648.0, -2147483647 - 1, 2147483647))
INT_LANE(64, true, i64, u64, false, cvtt64(x), cvtt64((double)x), sat_i(x, -9223372036854775808.0, 9223372036854775808.0, (i64)0x8000000000000000ull, 0x7FFFFFFFFFFFFFFFll))
INT_LANE(16, false, u16, u16, false, (u16)cvtt32(x), (u16)cvtt32_f(x), (u16)sat_u(x, 65536.0, 65535))
INT_LANE(32, false, u32, u32, false, (u32)cvtt64(x), (u32)cvtt64((double)x), (u32)sat_u(x, 4294967296.0, 4294967295u))
INT_LANE(64, false, u64, u64, true, cvtt_u64(x), cvtt_u64((double)x), sat_u(x, 18446744073709551616.0, 0xFFFFFFFFFFFFFFFFull))

// int4/2/1, uint4/2/1 (lowp_lanes.rs): the code in the low bits of a byte; values wrap to the
// low bits, floats by ml_dtypes' rule; Saturate clamps.
template <int NBITS, bool SIGNED> struct NarrowIntLane {
    static const int SIZE = 1;
    static const int BITS = NBITS;
    MEM static i64 mask() { return (1 << NBITS) - 1; }
    MEM static i64 lo() { return SIGNED ? -(1 << (NBITS - 1)) : 0; }
    MEM static i64 hi() { return SIGNED ? (1 << (NBITS - 1)) - 1 : mask(); }
    MEM static void wrap(i64 i, u8* p) { p[0] = (u8)(i & mask()); }
    MEM static Val load(const u8* p) {
        i64 code = p[0] & mask();
        return v_int(SIGNED && code > hi() ? code - (1 << NBITS) : code);
    }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks, u8* p) {
        v = real(v);
        switch (v.kind) {
            case K_BOOL: p[0] = (u8)v.i; break;
            case K_INT: wrap(v.i, p); break;
            case K_UINT: wrap((i64)v.u, p); break;
            case K_FLOAT: wrap(ml_float_to_narrow_int((double)v.f), p); break;
            default: wrap(ml_float_to_narrow_int(v.d), p); break;
        }
    }
    MEM static void saturate(Val v, u8* p) {
        v = real(v);
        if (v.kind == K_FLOAT || v.kind == K_DOUBLE) {
            double x = v.kind == K_FLOAT ? (double)v.f : v.d;
            // Rust's saturating `as i64` (NaN -> 0), then the type's range.
            i64 i = sat_i(x, -9223372036854775808.0, 9223372036854775808.0, (i64)0x8000000000000000ull, 0x7FFFFFFFFFFFFFFFll);
            wrap(i < lo() ? lo() : i > hi() ? hi() : i, p);
        } else {
            Quirks none = NO_QUIRKS;
            torch(v, none, p);
        }
    }
};

struct BoolLane {
    static const int SIZE = 1;
    static const int BITS = 8;
    MEM static Val load(const u8* p) { return v_bool(p[0] != 0); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks, u8* p) { p[0] = to_bool(v) ? 1 : 0; }
    MEM static void saturate(Val v, u8* p) { p[0] = to_bool(v) ? 1 : 0; }
};
struct F32Lane {
    static const int SIZE = 4;
    static const int BITS = 32;
    MEM static Val load(const u8* p) { return v_float(u2f(load_le<u32>(p))); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks q, u8* p) { store_le<u32>(p, f2u(to_f32(v, q.f16_to_f32_nan))); }
    MEM static void saturate(Val v, u8* p) { store_le<u32>(p, f2u(to_f32(v, false))); }
};
struct F64Lane {
    static const int SIZE = 8;
    static const int BITS = 64;
    MEM static Val load(const u8* p) { return v_double(u2d(load_le<u64>(p))); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks, u8* p) { store_le<u64>(p, d2u(to_f64(v))); }
    MEM static void saturate(Val v, u8* p) { store_le<u64>(p, d2u(to_f64(v))); }
};
struct F16Lane {
    static const int SIZE = 2;
    static const int BITS = 16;
    MEM static Val load(const u8* p) { return v_float(f16_to_f32(load_le<u16>(p))); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks, u8* p) { store_le<u16>(p, f32_to_f16(to_f32(v, false))); }
    MEM static void saturate(Val v, u8* p) { store_le<u16>(p, f64_to_f16_once(to_f64_for_rounding(v))); }
};
struct BF16Lane {
    static const int SIZE = 2;
    static const int BITS = 16;
    MEM static Val load(const u8* p) { return v_float(bf16_to_f32(load_le<u16>(p))); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks q, u8* p) {
        float x = to_f32(v, false);
        u16 r;
        if (q.f32_to_bf16_nan && isnan_f(x)) r = 0xFFFF;
        else if (q.ml && isnan_f(x)) r = (u16)nan_code(Fmt_bfloat16(), (f2u(x) >> 31) != 0);  // ml_dtypes keeps the sign
        else r = f32_to_bf16(x);
        store_le<u16>(p, r);
    }
    MEM static void saturate(Val v, u8* p) { store_le<u16>(p, f64_to_bf16_once(to_f64_for_rounding(v))); }
};
// torch's float8 formats: torch's rules, ml_dtypes' where the pair is one torch cannot cast.
template <class F> struct TorchF8Lane {
    static const int SIZE = 1;
    static const int BITS = 8;
    MEM static Val load(const u8* p) { return v_float(f8_decode<F>(p[0])); }
    MEM static Val load_ml(const u8* p) { return v_float(ml_decode(F::ml(), p[0])); }
    MEM static void torch(Val v, Quirks q, u8* p) { p[0] = q.ml ? (u8)ml_encode(F::ml(), v) : f8_torch<F>(v); }
    MEM static void saturate(Val v, u8* p) { p[0] = f8_saturate<F>(v); }
};
// The narrow floats torch lacks (ml_dtypes' float8 variants, float6, float4): ml_dtypes' rules.
template <class F> struct MlFloatLane {
    static const int SIZE = 1;
    static const int BITS = F::BITS;
    MEM static Val load(const u8* p) { return v_float(ml_decode(F::ml(), p[0])); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks, u8* p) { p[0] = (u8)ml_encode(F::ml(), v); }
    MEM static void saturate(Val v, u8* p) { p[0] = (u8)ml_saturate(F::ml(), v); }
};
struct E8M0Lane {
    static const int SIZE = 1;
    static const int BITS = 8;
    MEM static Val load(const u8* p) { return v_float(e8m0_to_f32(p[0])); }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks q, u8* p) {
        float x = to_f32(v, false);
        // ml_dtypes 0.7 (a source torch cannot cast): zero and negative values are the NaN.
        p[0] = (q.ml && !(x > 0.0f)) ? (u8)0xFF : f32_to_e8m0(x);
    }
    MEM static void saturate(Val v, u8* p) { p[0] = f64_to_e8m0_saturating(to_f64_for_rounding(v)); }
};
template <class Part, int KIND> struct ComplexLane {
    static const int SIZE = 2 * Part::SIZE;
    static const int BITS = 2 * Part::BITS;
    MEM static Val load(const u8* p) {
        Val re = Part::load(p), im = Part::load(p + Part::SIZE);
        if (KIND == K_CDOUBLE) return v_cdouble(re.d, im.d);
        return v_cfloat(re.f, im.f);
    }
    PLAIN_LOAD_ML
    MEM static void torch(Val v, Quirks q, u8* p) {
        Quirks part = NO_QUIRKS;
        part.ml = q.ml;
        Part::torch(real(v), part, p);
        Part::torch(imag(v), part, p + Part::SIZE);
    }
    MEM static void saturate(Val v, u8* p) {
        Part::saturate(real(v), p);
        Part::saturate(imag(v), p + Part::SIZE);
    }
};

// Lane_<dtype> for every dtype that has values, and DTCAST_LANES(X): X(index, lane) for each.
#include "lanes.cuh"

// ---- the element loop

// The value a conversion reads: ml_dtypes' reading where torch cannot cast the pair.
template <class S> DEV Val value(const u8* p, Quirks q) { return q.ml ? S::load_ml(p) : S::load(p); }

// Element `i` of a tile buffer (lanes' SIZE bytes each) into element `i` of another.
template <class S, class D, int SATURATE>
DEV void convert_one(const u8* src, u8* dst, int i, Quirks q) {
    if (!SATURATE && q.part_bits) {
        // The real part's bytes as they are; a complex destination's imaginary part is +0.
        const int part = S::SIZE < D::SIZE ? S::SIZE : D::SIZE;
        for (int k = 0; k < D::SIZE; ++k) dst[i * D::SIZE + k] = k < part ? src[i * S::SIZE + k] : 0;
        return;
    }
    Val v = value<S>(src + i * S::SIZE, q);
    if (SATURATE) D::saturate(v, dst + i * D::SIZE);
    else D::torch(v, q, dst + i * D::SIZE);
}

// ---- tiles: what one GPU thread does per step
//
// A tile is the run of elements whose source and destination both fit in 16 bytes
// (16 / max(S::SIZE, D::SIZE) elements; every lane size divides 16), or 8 elements where a side is
// packed (8 elements of any width are whole bytes). It is read with one load and written with one
// store, each as wide as its bytes (16 on the wider side), so a warp moves up to 512 contiguous
// bytes per instruction: enough bytes in flight to run at memory speed. Packed elements are
// unpacked into one byte each (the code in the low bits, as the lanes hold them) after the load and
// packed before the store — the CPU's layout: element i in bits i*BITS.. of a little-endian bit
// stream. The last tile of a tensor whose length is not a multiple of the tile goes through the same
// buffers a byte at a time. The host harness runs these same functions.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ALIGN16 __align__(16)
struct __align__(16) Chunk16 { u64 a, b; };
template <int N> DEV void copy_bytes(u8* to, const u8* from) {
    // N is a power of two times the widest access both ends are aligned to (see store widths).
    if (N % 16 == 0) {
        for (int k = 0; k < N; k += 16) *(Chunk16*)(to + k) = *(const Chunk16*)(from + k);
    } else if (N % 8 == 0) {
        for (int k = 0; k < N; k += 8) *(u64*)(to + k) = *(const u64*)(from + k);
    } else if (N % 4 == 0) {
        for (int k = 0; k < N; k += 4) *(u32*)(to + k) = *(const u32*)(from + k);
    } else if (N % 2 == 0) {
        for (int k = 0; k < N; k += 2) *(u16*)(to + k) = *(const u16*)(from + k);
    } else {
        for (int k = 0; k < N; ++k) to[k] = from[k];
    }
}
#else
#define ALIGN16 alignas(16)
template <int N> DEV void copy_bytes(u8* to, const u8* from) { memcpy(to, from, N); }
#endif

template <class S, class D> struct Tile {
    static const int WIDER = S::SIZE > D::SIZE ? S::SIZE : D::SIZE;
    static const bool PACKED = S::BITS < 8 || D::BITS < 8;
    static const int ELEMS = PACKED ? 8 : 16 / WIDER;
    // Bytes of a tile buffer: the elements as the lanes hold them (at least 16).
    static const int BUF = ELEMS * WIDER < 16 ? 16 : ELEMS * WIDER;
};

// `count` codes of BITS < 8 bits from a bit stream into a byte each, and back (`packed` zeroed
// first by the caller). A float6 code may straddle two bytes.
template <int BITS> DEV void unpack(const u8* packed, u8* codes, int count) {
    for (int k = 0; k < count; ++k) {
        int bit = k * BITS, at = bit >> 3, shift = bit & 7;
        u32 w = packed[at];
        if (shift + BITS > 8) w |= (u32)packed[at + 1] << 8;
        codes[k] = (u8)((w >> shift) & ((1u << BITS) - 1));
    }
}
template <int BITS> DEV void pack(const u8* codes, u8* packed, int count) {
    for (int k = 0; k < count; ++k) {
        int bit = k * BITS, at = bit >> 3, shift = bit & 7;
        u32 w = (u32)(codes[k] & ((1u << BITS) - 1)) << shift;
        packed[at] |= (u8)w;
        if (shift + BITS > 8) packed[at + 1] |= (u8)(w >> 8);
    }
}

// A whole tile of lane L starting at element `first` (a multiple of the tile) of `from`, into
// `codes`; and back.
template <class L, int E> DEV void load_tile(u8* codes, const u8* from, u64 first) {
    if (L::BITS >= 8) {
        copy_bytes<E * L::SIZE>(codes, from + first * L::SIZE);
    } else {
        ALIGN16 u8 raw[16];
        copy_bytes<E * L::BITS / 8>(raw, from + first * L::BITS / 8);
        unpack<L::BITS < 8 ? L::BITS : 1>(raw, codes, E);
    }
}
template <class L, int E> DEV void store_tile(u8* to, u64 first, const u8* codes) {
    if (L::BITS >= 8) {
        copy_bytes<E * L::SIZE>(to + first * L::SIZE, codes);
    } else {
        ALIGN16 u8 raw[16] = {0};
        pack<L::BITS < 8 ? L::BITS : 1>(codes, raw, E);
        copy_bytes<E * L::BITS / 8>(to + first * L::BITS / 8, raw);
    }
}
// The same for the `count` < tile elements at the end of a tensor, a byte at a time (the count
// of a packed dtype always ends on a byte: the host refuses other lengths).
template <class L> DEV void load_part(u8* codes, const u8* from, u64 first, int count) {
    if (L::BITS >= 8) {
        for (int k = 0; k < count * L::SIZE; ++k) codes[k] = from[first * L::SIZE + k];
    } else {
        ALIGN16 u8 raw[16];
        for (int k = 0; k < count * L::BITS / 8; ++k) raw[k] = from[first * L::BITS / 8 + k];
        unpack<L::BITS < 8 ? L::BITS : 1>(raw, codes, count);
    }
}
template <class L> DEV void store_part(u8* to, u64 first, const u8* codes, int count) {
    if (L::BITS >= 8) {
        for (int k = 0; k < count * L::SIZE; ++k) to[first * L::SIZE + k] = codes[k];
    } else {
        ALIGN16 u8 raw[16] = {0};
        pack<L::BITS < 8 ? L::BITS : 1>(codes, raw, count);
        for (int k = 0; k < count * L::BITS / 8; ++k) to[first * L::BITS / 8 + k] = raw[k];
    }
}

// Tile `t` of an `n`-element cast.
template <class S, class D, int SATURATE>
DEV void convert_tile(const u8* src, u8* dst, u64 t, u64 n, Quirks q) {
    typedef Tile<S, D> T;
    const int E = T::ELEMS;
    u64 first = t * E;
    ALIGN16 u8 in[T::BUF];
    ALIGN16 u8 out[T::BUF];
    if (first + E <= n) {
        load_tile<S, E>(in, src, first);
        for (int k = 0; k < E; ++k) convert_one<S, D, SATURATE>(in, out, k, q);
        store_tile<D, E>(dst, first, out);
    } else {
        int count = (int)(n - first);
        load_part<S>(in, src, first, count);
        for (int k = 0; k < count; ++k) convert_one<S, D, SATURATE>(in, out, k, q);
        store_part<D>(dst, first, out, count);
    }
}
// Tiles `a` and `b > a` of an `n`-element cast, both loads issued before either tile is
// converted: twice the bytes in flight per thread, which memory-bound casts need to keep up with
// the memory.
template <class S, class D, int SATURATE>
DEV void convert_tile_pair(const u8* src, u8* dst, u64 a, u64 b, u64 n, Quirks q) {
    typedef Tile<S, D> T;
    const int E = T::ELEMS;
    if ((b + 1) * E <= n) {
        ALIGN16 u8 in_a[T::BUF];
        ALIGN16 u8 in_b[T::BUF];
        ALIGN16 u8 out_a[T::BUF];
        ALIGN16 u8 out_b[T::BUF];
        load_tile<S, E>(in_a, src, a * E);
        load_tile<S, E>(in_b, src, b * E);
        for (int k = 0; k < E; ++k) convert_one<S, D, SATURATE>(in_a, out_a, k, q);
        for (int k = 0; k < E; ++k) convert_one<S, D, SATURATE>(in_b, out_b, k, q);
        store_tile<D, E>(dst, a * E, out_a);
        store_tile<D, E>(dst, b * E, out_b);
    } else {
        if (a * E < n) convert_tile<S, D, SATURATE>(src, dst, a, n, q);
        if (b * E < n) convert_tile<S, D, SATURATE>(src, dst, b, n, q);
    }
}
template <class S, class D> DEV u64 tiles(u64 n) { return (n + Tile<S, D>::ELEMS - 1) / Tile<S, D>::ELEMS; }

// ---- Checked and Exact (cast/src/check.rs)

// What a destination can hold. The host writes the numbers (from dtcast_dtype's tables) into the
// DTCAST_CHECK line.
struct Limits {
    int kind;         // 0: bool (only NaN is refused), 1: integer, 2: floating
    bool complex_dst; // both parts are checked; no imaginary part is dropped
    bool dst_signed;  // integer destinations: signed range lo_i..=hi_i, else 0..=hi_u
    i64 lo_i, hi_i;
    u64 hi_u;
    double lo_f, hi_excl_f;  // the integer range for float values: trunc(x) in [lo_f, hi_excl_f)
    double threshold;        // floating destinations: magnitudes from here overflow...
    bool tie_overflows;      // ...the threshold itself too, if this is set
    bool has_inf, has_nan, fsigned, has_zero;
};

DEV bool is_int_kind(int k) { return k == K_BOOL || k == K_INT || k == K_UINT; }
DEV double num_f64(Val v) {
    switch (v.kind) {
        case K_BOOL: case K_INT: return (double)v.i;
        case K_UINT: return (double)v.u;
        case K_FLOAT: case K_CFLOAT: return (double)v.f;
        default: return v.d;
    }
}
DEV bool num_is_zero(Val v) {
    if (v.kind == K_UINT) return v.u == 0;
    if (is_int_kind(v.kind)) return v.i == 0;
    return num_f64(v) == 0.0;
}
// A real value (not complex) against the limits: true if it fits.
DEV bool real_ok(Val v, const Limits& l) {
    bool is_float = !is_int_kind(v.kind);
    double x = num_f64(v);
    if (l.kind == 0) return !(is_float && isnan_d(x));
    if (l.kind == 1) {
        if (is_float) {
            if (isnan_d(x) || isinf_d(x)) return false;
            double t = trunc_(x);
            return t >= l.lo_f && t < l.hi_excl_f;
        }
        if (v.kind == K_UINT) return v.u <= l.hi_u;
        if (l.dst_signed) return v.i >= l.lo_i && v.i <= l.hi_i;
        return v.i >= 0 && (u64)v.i <= l.hi_u;
    }
    if (isnan_d(x)) return l.has_nan;
    // An unsigned format holds no negative value (e8m0: no zero either).
    if (!l.fsigned && (x < 0.0 || (x == 0.0 && !l.has_zero))) return false;
    if (isinf_d(x)) return l.has_inf;
    double a = x < 0 ? -x : x;
    return !(a > l.threshold || (a == l.threshold && l.tie_overflows));
}
DEV bool checked_ok(Val v, const Limits& l) {
    if (l.complex_dst) return real_ok(real(v), l) && real_ok(imag(v), l);
    return num_is_zero(imag(v)) && real_ok(real(v), l);
}
// Numeric equality for Exact mode: NaN equals NaN, -0 equals +0, integers and floats compare by value.
DEV bool same_num(Val a, Val b) {
    bool ai = is_int_kind(a.kind), bi = is_int_kind(b.kind);
    if (ai && bi) {
        bool an = a.kind != K_UINT && a.i < 0, bn = b.kind != K_UINT && b.i < 0;
        if (an || bn) return an && bn && a.i == b.i;
        u64 am = a.kind == K_UINT ? a.u : (u64)a.i, bm = b.kind == K_UINT ? b.u : (u64)b.i;
        return am == bm;
    }
    if (!ai && !bi) {
        double x = num_f64(a), y = num_f64(b);
        return x == y || (isnan_d(x) && isnan_d(y));
    }
    Val iv = ai ? a : b;
    double x = num_f64(ai ? b : a);
    if (isnan_d(x) || isinf_d(x) || trunc_(x) != x) return false;
    if (iv.kind != K_UINT && iv.i < 0) return x >= -9223372036854775808.0 && x < 0.0 && (i64)x == iv.i;
    u64 m = iv.kind == K_UINT ? iv.u : (u64)iv.i;
    return x >= 0.0 && x < 18446744073709551616.0 && (u64)x == m;
}
DEV bool same_value(Val v, Val r) { return same_num(real(v), real(r)) && same_num(imag(v), imag(r)); }

template <class S, class D, int EXACT>
DEV bool check_one(const u8* src, int i, Quirks q, const Limits& l) {
    Val v = value<S>(src + i * S::SIZE, q);
    if (!EXACT) return checked_ok(v, l);
    ALIGN16 u8 out[16];
    D::torch(v, q, out);
    return same_value(v, D::load(out));
}

// The first element of tile `t` that the destination cannot take, or `n` when there is none.
template <class S, class D, int EXACT>
DEV u64 check_tile(const u8* src, u64 t, u64 n, Quirks q, const Limits& l) {
    typedef Tile<S, D> T;
    const int E = T::ELEMS;
    u64 first = t * E;
    ALIGN16 u8 in[T::BUF];
    int count = E;
    if (first + E <= n) {
        load_tile<S, E>(in, src, first);
    } else {
        count = (int)(n - first);
        load_part<S>(in, src, first, count);
    }
    for (int k = 0; k < count; ++k)
        if (!check_one<S, D, EXACT>(in, k, q, l)) return first + k;
    return n;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Both kernels run grid-stride loops over tiles<S, D>(n) tiles.
//
// extern "C" __global__ void dtcast_check(const u8* src, u64 n, u64* first_bad): the index of the
// first element the destination cannot take (as *first_bad starts at n, it stays n when none).
#define DTCAST_CHECK(S, D, EXACT, Q16, QBF, QF8, QPB, QML, ...)                                   \
    extern "C" __global__ void dtcast_check(const u8* src, u64 n, u64* first_bad) {              \
        Quirks q = {Q16, QBF, QF8, QPB, QML};                                                              \
        Limits l = {__VA_ARGS__};                                                                  \
        u64 count = tiles<S, D>(n);                                                                \
        for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < count; t += (u64)gridDim.x * blockDim.x) { \
            u64 bad = check_tile<S, D, EXACT>(src, t, n, q, l);                                   \
            if (bad < n) atomicMin(first_bad, bad);                                                \
        }                                                                                          \
    }
// The cast kernel: each block takes 2 * blockDim tiles per step, each thread two of them a block
// apart (so each load instruction of a warp still reads contiguous memory).
#define DTCAST_KERNEL(S, D, SATURATE, Q16, QBF, QF8, QPB, QML)                                    \
    extern "C" __global__ void dtcast_cast(const u8* src, u8* dst, u64 n) {                      \
        Quirks q = {Q16, QBF, QF8, QPB, QML};                                                              \
        u64 count = tiles<S, D>(n);                                                                \
        for (u64 t = (u64)blockIdx.x * blockDim.x * 2 + threadIdx.x; t < count; t += (u64)gridDim.x * blockDim.x * 2) \
            convert_tile_pair<S, D, SATURATE>(src, dst, t, t + blockDim.x, n, q);                 \
    }
#endif
