//! x86-64 AVX2 + F16C kernels for the hot pairs, for CPUs without AVX-512.
//!
//! Same structure and rules as `x86_avx512.rs`, eight 32-bit lanes at a time; the property tests
//! compare them with the scalar rules whenever the CPU has AVX2 and F16C.

#[cfg(not(target_arch = "x86_64"))]
compile_error!("x86_avx2.rs is for x86-64 only");

use core::arch::x86_64::*;
use std::sync::OnceLock;

use dtcast_dtype::DType;

use crate::dispatch::Kernel;
use crate::lanes::{Bool, E4M3Fn, BF16, E5M2, F16};

/// Whether this CPU has AVX2 and F16C (detected once).
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"))
}

/// The shared kernel skeleton (`simd_kernel!` in `kernels.rs`), compiled for AVX2 + F16C.
macro_rules! kernel {
    ($($t:tt)*) => {
        simd_kernel!("avx2,f16c", $($t)*);
    };
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn splat(x: u32) -> __m256i {
    _mm256_set1_epi32(x as i32)
}

/// f32 bits → bfloat16 codes (low halves), round to nearest-even; NaN lanes get `nan`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn bf16_round(b: __m256i, nan: __m256i) -> __m256i {
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(b), splat(1));
    let r = _mm256_srli_epi32::<16>(_mm256_add_epi32(_mm256_add_epi32(b, splat(0x7FFF)), lsb));
    let is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, splat(0x7FFF_FFFF)), splat(0x7F80_0000));
    _mm256_blendv_epi8(r, nan, is_nan)
}

/// Sixteen 32-bit lanes (values below 2^16) → sixteen u16, in order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn pack16(a: __m256i, b: __m256i) -> __m256i {
    _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(a, b))
}

/// Two 16-byte halves as one 32-byte vector.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn join(lo: __m128i, hi: __m128i) -> __m256i {
    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
}

kernel!(f32_to_bf16_torch: f32 => BF16, saturate = false, lanes = 16, |s| {
    let (a, b) = (_mm256_loadu_si256(s.cast()), _mm256_loadu_si256(s.add(32).cast()));
    pack16(bf16_round(a, splat(0xFFFF)), bf16_round(b, splat(0xFFFF)))
});

kernel!(f32_to_bf16_saturate: f32 => BF16, saturate = true, lanes = 16, |s| {
    let (a, b) = (_mm256_loadu_si256(s.cast()), _mm256_loadu_si256(s.add(32).cast()));
    let nan = |x: __m256i| _mm256_or_si256(_mm256_srli_epi32::<16>(x), splat(0x40));
    pack16(bf16_round(a, nan(a)), bf16_round(b, nan(b)))
});

kernel!(bf16_to_f32: BF16 => f32, saturate = false, lanes = 8, |s| {
    _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(s.cast())))
});

kernel!(bf16_to_f32_saturate: BF16 => f32, saturate = true, lanes = 8, |s| {
    _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(s.cast())))
});

kernel!(f32_to_f16: f32 => F16, saturate = false, lanes = 16, |s| {
    let h = |p: *const u8| _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(p.cast()));
    join(h(s), h(s.add(32)))
});

kernel!(f32_to_f16_saturate: f32 => F16, saturate = true, lanes = 16, |s| {
    let h = |p: *const u8| _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(p.cast()));
    join(h(s), h(s.add(32)))
});

kernel!(f16_to_f32_torch: F16 => f32, saturate = false, lanes = 8, |s| {
    // torch writes 0x7FFFFFFF for every float16 NaN on this path.
    let x = _mm256_cvtph_ps(_mm_loadu_si128(s.cast()));
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
    _mm256_blendv_epi8(_mm256_castps_si256(x), splat(0x7FFF_FFFF), nan)
});

kernel!(f16_to_f32_saturate: F16 => f32, saturate = true, lanes = 8, |s| {
    _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(s.cast())))
});

kernel!(f16_to_bf16_torch: F16 => BF16, saturate = false, lanes = 16, |s| {
    let f = |p: *const u8| bf16_round(_mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(p.cast()))), splat(0x7FC0));
    pack16(f(s), f(s.add(16)))
});

kernel!(f16_to_bf16_saturate: F16 => BF16, saturate = true, lanes = 16, |s| {
    let f = |p: *const u8| {
        let x = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(p.cast())));
        bf16_round(x, _mm256_or_si256(_mm256_srli_epi32::<16>(x), splat(0x40)))
    };
    pack16(f(s), f(s.add(16)))
});

kernel!(bf16_to_f16: BF16 => F16, saturate = false, lanes = 16, |s| {
    let h = |p: *const u8| {
        let x = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()))));
        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)
    };
    join(h(s), h(s.add(16)))
});

kernel!(bf16_to_f16_saturate: BF16 => F16, saturate = true, lanes = 16, |s| {
    let h = |p: *const u8| {
        let x = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()))));
        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)
    };
    join(h(s), h(s.add(16)))
});

kernel!(f64_to_f32: f64 => f32, saturate = false, lanes = 8, |s| {
    // vcvtpd2ps: nearest-even; NaN quieted with its top payload bits, as cvtsd2ss.
    let lo = _mm256_cvtpd_ps(_mm256_loadu_pd(s.cast()));
    let hi = _mm256_cvtpd_ps(_mm256_loadu_pd(s.add(32).cast()));
    _mm256_castps_si256(_mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lo), hi))
});

kernel!(f64_to_f32_saturate: f64 => f32, saturate = true, lanes = 8, |s| {
    let lo = _mm256_cvtpd_ps(_mm256_loadu_pd(s.cast()));
    let hi = _mm256_cvtpd_ps(_mm256_loadu_pd(s.add(32).cast()));
    _mm256_castps_si256(_mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lo), hi))
});

kernel!(f32_to_f64: f32 => f64, saturate = false, lanes = 4, |s| {
    _mm256_castpd_si256(_mm256_cvtps_pd(_mm_loadu_ps(s.cast())))
});

kernel!(f32_to_f64_saturate: f32 => f64, saturate = true, lanes = 4, |s| {
    _mm256_castpd_si256(_mm256_cvtps_pd(_mm_loadu_ps(s.cast())))
});

kernel!(f32_to_i32_torch: f32 => i32, saturate = false, lanes = 8, |s| {
    _mm256_cvttps_epi32(_mm256_loadu_ps(s.cast()))
});

kernel!(f32_to_i32_saturate: f32 => i32, saturate = true, lanes = 8, |s| {
    let x = _mm256_loadu_ps(s.cast());
    let t = _mm256_cvttps_epi32(x);
    let big = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(2_147_483_648.0)));
    let t = _mm256_blendv_epi8(t, splat(0x7FFF_FFFF), big);
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
    _mm256_andnot_si256(nan, t)
});

kernel!(i32_to_f32: i32 => f32, saturate = false, lanes = 8, |s| {
    _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_loadu_si256(s.cast())))
});

kernel!(i32_to_f32_saturate: i32 => f32, saturate = true, lanes = 8, |s| {
    _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_loadu_si256(s.cast())))
});

kernel!(u8_to_f32: u8 => f32, saturate = false, lanes = 8, |s| {
    _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(s.cast()))))
});

kernel!(u8_to_f32_saturate: u8 => f32, saturate = true, lanes = 8, |s| {
    _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(s.cast()))))
});

/// Thirty-two 32-bit lanes (values below 256) → thirty-two bytes, in order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn pack32(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
    let bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
    _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

kernel!(f32_to_u8_torch: f32 => u8, saturate = false, lanes = 32, |s| {
    // The low byte of a 32-bit truncation, as in the AVX-512 kernel (and torch's uint8(int64(x))).
    let b = |p: *const u8| _mm256_and_si256(_mm256_cvttps_epi32(_mm256_loadu_ps(p.cast())), splat(0xFF));
    pack32(b(s), b(s.add(32)), b(s.add(64)), b(s.add(96)))
});

kernel!(f32_to_u8_saturate: f32 => u8, saturate = true, lanes = 32, |s| {
    // vmaxps returns its second operand when the first is NaN: NaN -> 0.
    let b = |p: *const u8| {
        let x = _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(p.cast()), _mm256_setzero_ps()), _mm256_set1_ps(255.0));
        _mm256_cvttps_epi32(x)
    };
    pack32(b(s), b(s.add(32)), b(s.add(64)), b(s.add(96)))
});

kernel!(bool_to_f32: Bool => f32, saturate = false, lanes = 8, |s| {
    let zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(s.cast())), _mm256_setzero_si256());
    _mm256_andnot_si256(zero, splat(0x3F80_0000))
});

kernel!(bool_to_f32_saturate: Bool => f32, saturate = true, lanes = 8, |s| {
    let zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(s.cast())), _mm256_setzero_si256());
    _mm256_andnot_si256(zero, splat(0x3F80_0000))
});

kernel!(i32_to_i64: i32 => i64, saturate = false, lanes = 4, |s| {
    _mm256_cvtepi32_epi64(_mm_loadu_si128(s.cast()))
});

kernel!(i32_to_i64_saturate: i32 => i64, saturate = true, lanes = 4, |s| {
    _mm256_cvtepi32_epi64(_mm_loadu_si128(s.cast()))
});

/// Eight int64 → eight int32 (the low halves: wrap-around, as every mode does for int → int).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn low_halves(s: *const u8) -> __m256i {
    let low = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    // SAFETY: the caller's contract: 64 readable bytes at `s`.
    let (a, b) = unsafe {
        (
            _mm256_loadu_si256(s.cast()),
            _mm256_loadu_si256(s.add(32).cast()),
        )
    };
    let (a, b) = (
        _mm256_permutevar8x32_epi32(a, low),
        _mm256_permutevar8x32_epi32(b, low),
    );
    _mm256_permute2x128_si256::<0x20>(a, b)
}

kernel!(i64_to_i32: i64 => i32, saturate = false, lanes = 8, |s| {
    low_halves(s)
});

kernel!(i64_to_i32_saturate: i64 => i32, saturate = true, lanes = 8, |s| {
    low_halves(s)
});

kernel!(f64_to_bf16_torch: f64 => BF16, saturate = false, lanes = 16, |s| {
    // c10::BFloat16(double) goes through float (two roundings); NaN -> 0x7FC0.
    let f = |p: *const u8| {
        let lo = _mm256_cvtpd_ps(_mm256_loadu_pd(p.cast()));
        let hi = _mm256_cvtpd_ps(_mm256_loadu_pd(p.add(32).cast()));
        bf16_round(_mm256_castps_si256(_mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lo), hi)), splat(0x7FC0))
    };
    pack16(f(s), f(s.add(64)))
});

/// Four f64 → f32 rounded to odd (truncate, then set the last bit where inexact): one more
/// rounding to bfloat16 from this is a correct single rounding from the f64. AVX2 has no
/// truncating conversion, so the nearest-even one is undone where it rounded away from zero:
/// the bits step back one ulp towards zero (inf back to the largest finite value).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f64x4_to_f32_odd(x: __m256d) -> __m128i {
    let t = _mm256_cvtpd_ps(x);
    let back = _mm256_cvtps_pd(t);
    let abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFF_FFFF_FFFF_FFFF));
    // Ordered compares: false for NaN, which converts as it is.
    let away = _mm256_cmp_pd::<_CMP_GT_OQ>(_mm256_and_pd(back, abs), _mm256_and_pd(x, abs));
    let inexact = _mm256_cmp_pd::<_CMP_NEQ_OQ>(back, x);
    // The low dword of each 64-bit mask lane (all ones or zero), in order.
    let narrow = |m: __m256d| {
        let even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), even))
    };
    let truncated = _mm_add_epi32(_mm_castps_si128(t), narrow(away)); // all ones = -1
    _mm_or_si128(truncated, _mm_and_si128(narrow(inexact), _mm_set1_epi32(1)))
}

kernel!(f64_to_bf16_saturate: f64 => BF16, saturate = true, lanes = 16, |s| {
    // One correct rounding: to odd in f32, then to nearest-even in bfloat16. NaN keeps its sign
    // and top payload bits, quieted, as in the float32 Saturate kernel.
    let f = |p: *const u8| {
        let lo = f64x4_to_f32_odd(_mm256_loadu_pd(p.cast()));
        let hi = f64x4_to_f32_odd(_mm256_loadu_pd(p.add(32).cast()));
        let b = join(lo, hi);
        bf16_round(b, _mm256_or_si256(_mm256_srli_epi32::<16>(b), splat(0x40)))
    };
    pack16(f(s), f(s.add(64)))
});

/// f32 magnitude bits → float8 codes by torch's rounding, without blends: the minimum of the
/// normal path (given at least the smallest normal) and the subnormal path (a float add), as in
/// the AVX-512 kernel, where the reasons are spelled out. Overflow, inf and NaN come out above
/// every finite code.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn float8_magnitude<const MAN: u32, const BIAS: u32, const SHIFT: i32>(a: __m256i) -> __m256i {
    debug_assert_eq!(SHIFT as u32, 23 - MAN);
    let normal = _mm256_max_epu32(a, splat((128 - BIAS) << 23));
    let odd = _mm256_and_si256(_mm256_srli_epi32::<SHIFT>(normal), splat(1));
    let rebias = BIAS.wrapping_sub(127) << 23;
    let half = (1u32 << (22 - MAN)) - 1;
    let norm = _mm256_add_epi32(
        _mm256_add_epi32(normal, splat(rebias.wrapping_add(half))),
        odd,
    );
    let norm = _mm256_srli_epi32::<SHIFT>(norm);
    let magic = (151 - BIAS - MAN) << 23;
    let sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(
            _mm256_castsi256_ps(a),
            _mm256_castsi256_ps(splat(magic)),
        )),
        splat(magic),
    );
    _mm256_min_epu32(norm, sub)
}

/// Eight float8 codes from f32 bits `b`: `magnitude(|b|)` (at most 0x7E) with NaN lanes set to
/// 0x7F and the sign bit put back.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn float8_8(b: __m256i, magnitude: impl Fn(__m256i) -> __m256i) -> __m256i {
    let a = _mm256_and_si256(b, splat(0x7FFF_FFFF));
    // All ones in NaN lanes (|b| above inf's bits), else zero.
    let nan = _mm256_srai_epi32::<31>(_mm256_sub_epi32(splat(0x7F80_0000), a));
    let code = _mm256_and_si256(_mm256_or_si256(magnitude(a), nan), splat(0x7F));
    let sign = _mm256_and_si256(_mm256_srli_epi32::<24>(b), splat(0x80));
    _mm256_or_si256(code, sign)
}

/// torch 2.15's float8_e4m3fn magnitude: past 448 and inf saturate to 0x7E (NaN: caller).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn e4m3fn_magnitude(a: __m256i) -> __m256i {
    _mm256_min_epu32(float8_magnitude::<3, 7, 20>(a), splat(0x7E))
}

/// float8_e5m2 magnitude. Torch: overflow and inf give inf (0x7C). Saturate: finite overflow
/// gives 0x7B, inf stays inf (NaN: caller).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn e5m2_magnitude<const SATURATE: bool>(a: __m256i) -> __m256i {
    let code = float8_magnitude::<2, 15, 21>(a);
    if SATURATE {
        let inf = _mm256_srli_epi32::<31>(_mm256_sub_epi32(splat(0x7F7F_FFFF), a));
        _mm256_add_epi32(_mm256_min_epu32(code, splat(0x7B)), inf)
    } else {
        _mm256_min_epu32(code, splat(0x7C))
    }
}

kernel!(f32_to_e4m3fn: f32 => E4M3Fn, saturate = false, lanes = 32, |s| {
    let f = |p: *const u8| float8_8(_mm256_loadu_si256(p.cast()), |a| e4m3fn_magnitude(a));
    pack32(f(s), f(s.add(32)), f(s.add(64)), f(s.add(96)))
});

kernel!(f32_to_e4m3fn_saturate: f32 => E4M3Fn, saturate = true, lanes = 32, |s| {
    let f = |p: *const u8| float8_8(_mm256_loadu_si256(p.cast()), |a| e4m3fn_magnitude(a));
    pack32(f(s), f(s.add(32)), f(s.add(64)), f(s.add(96)))
});

kernel!(f32_to_e5m2_torch: f32 => E5M2, saturate = false, lanes = 32, |s| {
    let f = |p: *const u8| float8_8(_mm256_loadu_si256(p.cast()), |a| e5m2_magnitude::<false>(a));
    pack32(f(s), f(s.add(32)), f(s.add(64)), f(s.add(96)))
});

kernel!(f32_to_e5m2_saturate: f32 => E5M2, saturate = true, lanes = 32, |s| {
    let f = |p: *const u8| float8_8(_mm256_loadu_si256(p.cast()), |a| e5m2_magnitude::<true>(a));
    pack32(f(s), f(s.add(32)), f(s.add(64)), f(s.add(96)))
});

/// The AVX2 kernel for a pair, if there is one.
pub(super) fn select(from: DType, to: DType, saturate: bool) -> Option<Kernel> {
    use DType::*;
    let (torch, sat): (Kernel, Kernel) = match (from, to) {
        (Float32, BFloat16) => (f32_to_bf16_torch, f32_to_bf16_saturate),
        (BFloat16, Float32) => (bf16_to_f32, bf16_to_f32_saturate),
        (Float32, Float16) => (f32_to_f16, f32_to_f16_saturate),
        (Float16, Float32) => (f16_to_f32_torch, f16_to_f32_saturate),
        (Float16, BFloat16) => (f16_to_bf16_torch, f16_to_bf16_saturate),
        (BFloat16, Float16) => (bf16_to_f16, bf16_to_f16_saturate),
        (Float64, Float32) => (f64_to_f32, f64_to_f32_saturate),
        (Float32, Float64) => (f32_to_f64, f32_to_f64_saturate),
        (Float32, Int32) => (f32_to_i32_torch, f32_to_i32_saturate),
        (Int32, Float32) => (i32_to_f32, i32_to_f32_saturate),
        (UInt8, Float32) => (u8_to_f32, u8_to_f32_saturate),
        (Float32, UInt8) => (f32_to_u8_torch, f32_to_u8_saturate),
        (Bool, Float32) => (bool_to_f32, bool_to_f32_saturate),
        (Int32, Int64) => (i32_to_i64, i32_to_i64_saturate),
        (Int64, Int32) => (i64_to_i32, i64_to_i32_saturate),
        (Float32, Float8E4M3Fn) => (f32_to_e4m3fn, f32_to_e4m3fn_saturate),
        (Float32, Float8E5M2) => (f32_to_e5m2_torch, f32_to_e5m2_saturate),
        (Float64, BFloat16) => (f64_to_bf16_torch, f64_to_bf16_saturate),
        _ => return None,
    };
    Some(if saturate { sat } else { torch })
}
