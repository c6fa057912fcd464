//! x86-64 AVX-512 (F, BW, VL, DQ) kernels for the hot pairs.
//!
//! Each kernel converts whole vectors with AVX-512 and leaves the last few elements to the scalar
//! kernel of the same pair, so the two must — and do, by the property tests — agree bit for bit.
//! The rules each kernel implements are the scalar ones in `lanes.rs` / `formats.rs`; comments say
//! which instruction gives which rule.

#[cfg(not(target_arch = "x86_64"))]
compile_error!("x86_avx512.rs is for x86-64 only");

use core::arch::x86_64::*;
use std::sync::OnceLock;

use dtcast_dtype::DType;

use crate::dispatch::Kernel;
use crate::lanes::{Bool, E4M3Fn, BF16, E5M2, F16};

/// Whether this CPU has the AVX-512 subsets the kernels use (detected once).
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq")
    })
}

/// The shared kernel skeleton (`simd_kernel!` in `kernels.rs`), compiled for AVX-512.
macro_rules! kernel {
    ($($t:tt)*) => {
        simd_kernel!("avx512f,avx512bw,avx512vl,avx512dq", $($t)*);
    };
}

/// Two 32-byte halves as one 64-byte vector, so that narrow results are stored a cache line at a time.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn join2(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// Four 16-byte quarters as one 64-byte vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn join4(a: __m128i, b: __m128i, c: __m128i, d: __m128i) -> __m512i {
    join2(
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(a), b),
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(c), d),
    )
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn splat(x: u32) -> __m512i {
    _mm512_set1_epi32(x as i32)
}

/// f32 bits → bfloat16 codes in the low halves of the lanes, round to nearest-even (NaN: caller).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn bf16_round(b: __m512i) -> __m512i {
    let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(b), splat(1));
    _mm512_srli_epi32::<16>(_mm512_add_epi32(_mm512_add_epi32(b, splat(0x7FFF)), lsb))
}

/// The lanes of `b` (f32 bits) that are NaN.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn nan_lanes(b: __m512i) -> __mmask16 {
    _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, splat(0x7FFF_FFFF)), splat(0x7F80_0000))
}

/// f32 bits → bfloat16 as torch: NaN → `nan` (0xFFFF for float32 sources, 0x7FC0 otherwise).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn bf16_torch(b: __m512i, nan: u32) -> __m512i {
    _mm512_mask_mov_epi32(bf16_round(b), nan_lanes(b), splat(nan))
}

/// f32 bits → bfloat16 in Saturate mode: NaN keeps sign and payload, quieted.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn bf16_saturate(b: __m512i) -> __m512i {
    let nan = _mm512_or_si512(_mm512_srli_epi32::<16>(b), splat(0x40));
    _mm512_mask_mov_epi32(bf16_round(b), nan_lanes(b), nan)
}

/// Sixteen f64 → sixteen f32 (round to nearest-even; NaN quieted with payload, as `cvtsd2ss`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
/// # Safety
/// `s` must be valid for 128 bytes of reads.
unsafe fn load_f64x16_as_f32(s: *const u8) -> __m512 {
    // SAFETY: the caller's contract.
    let (lo, hi) = unsafe { (_mm512_loadu_pd(s.cast()), _mm512_loadu_pd(s.add(64).cast())) };
    _mm512_insertf32x8::<1>(
        _mm512_castps256_ps512(_mm512_cvtpd_ps(lo)),
        _mm512_cvtpd_ps(hi),
    )
}

/// Sixteen f64 → f32 rounded to odd: truncate, then set the last bit where inexact. One more
/// rounding to bfloat16 from this is a correct single rounding from the f64.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
/// # Safety
/// `s` must be valid for 128 bytes of reads.
unsafe fn load_f64x16_as_f32_odd(s: *const u8) -> __m512i {
    // SAFETY: the caller's contract.
    let (lo, hi) = unsafe { (_mm512_loadu_pd(s.cast()), _mm512_loadu_pd(s.add(64).cast())) };
    let half = |x: __m512d| {
        let t = _mm512_cvt_roundpd_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x);
        let inexact = _mm512_cmp_pd_mask::<_CMP_NEQ_OQ>(_mm512_cvtps_pd(t), x);
        let t = _mm512_castsi512_si256(_mm512_castps_si512(_mm512_castps256_ps512(t)));
        _mm256_mask_or_epi32(t, inexact, t, _mm256_set1_epi32(1))
    };
    _mm512_inserti32x8::<1>(_mm512_castsi256_si512(half(lo)), half(hi))
}

kernel!(f32_to_bf16_torch: f32 => BF16, saturate = false, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_torch(_mm512_loadu_si512(p.cast()), 0xFFFF));
    join2(part(s), part(s.add(64)))
});

kernel!(f32_to_bf16_saturate: f32 => BF16, saturate = true, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_saturate(_mm512_loadu_si512(p.cast())));
    join2(part(s), part(s.add(64)))
});

kernel!(bf16_to_f32: BF16 => f32, saturate = false, lanes = 16, |s| {
    let h = _mm256_loadu_si256(s.cast());
    _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h))
});

kernel!(bf16_to_f32_saturate: BF16 => f32, saturate = true, lanes = 16, |s| {
    let h = _mm256_loadu_si256(s.cast());
    _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h))
});

kernel!(f32_to_f16: f32 => F16, saturate = false, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_loadu_ps(p.cast()));
    join2(part(s), part(s.add(64)))
});

kernel!(f32_to_f16_saturate: f32 => F16, saturate = true, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_loadu_ps(p.cast()));
    join2(part(s), part(s.add(64)))
});

kernel!(f16_to_f32_torch: F16 => f32, saturate = false, lanes = 16, |s| {
    // vcvtph2ps is exact; torch writes 0x7FFFFFFF for every float16 NaN on this path.
    let x = _mm512_cvtph_ps(_mm256_loadu_si256(s.cast()));
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
    _mm512_mask_mov_epi32(_mm512_castps_si512(x), nan, splat(0x7FFF_FFFF))
});

kernel!(f16_to_f32_saturate: F16 => f32, saturate = true, lanes = 16, |s| {
    _mm512_cvtph_ps(_mm256_loadu_si256(s.cast()))
});

kernel!(f64_to_f32: f64 => f32, saturate = false, lanes = 16, |s| {
    load_f64x16_as_f32(s)
});

kernel!(f64_to_f32_saturate: f64 => f32, saturate = true, lanes = 16, |s| {
    load_f64x16_as_f32(s)
});

kernel!(f32_to_f64: f32 => f64, saturate = false, lanes = 8, |s| {
    _mm512_cvtps_pd(_mm256_loadu_ps(s.cast()))
});

kernel!(f32_to_f64_saturate: f32 => f64, saturate = true, lanes = 8, |s| {
    _mm512_cvtps_pd(_mm256_loadu_ps(s.cast()))
});

kernel!(f64_to_bf16_torch: f64 => BF16, saturate = false, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_torch(_mm512_castps_si512(load_f64x16_as_f32(p)), 0x7FC0));
    join2(part(s), part(s.add(128)))
});

kernel!(f64_to_bf16_saturate: f64 => BF16, saturate = true, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_saturate(load_f64x16_as_f32_odd(p)));
    join2(part(s), part(s.add(128)))
});

kernel!(f32_to_i32_torch: f32 => i32, saturate = false, lanes = 16, |s| {
    // vcvttps2dq: truncation; NaN and out-of-range give 0x80000000, as torch's scalar path.
    _mm512_cvttps_epi32(_mm512_loadu_ps(s.cast()))
});

kernel!(f32_to_i32_saturate: f32 => i32, saturate = true, lanes = 16, |s| {
    let x = _mm512_loadu_ps(s.cast());
    let t = _mm512_cvttps_epi32(x);
    let t = _mm512_mask_mov_epi32(t, _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, _mm512_set1_ps(2_147_483_648.0)), splat(0x7FFF_FFFF));
    _mm512_mask_mov_epi32(t, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), splat(0))
});

kernel!(i32_to_f32: i32 => f32, saturate = false, lanes = 16, |s| {
    _mm512_cvtepi32_ps(_mm512_loadu_si512(s.cast()))
});

kernel!(i32_to_f32_saturate: i32 => f32, saturate = true, lanes = 16, |s| {
    _mm512_cvtepi32_ps(_mm512_loadu_si512(s.cast()))
});

kernel!(i64_to_i32: i64 => i32, saturate = false, lanes = 16, |s| {
    let lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512(s.cast()));
    let hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512(s.add(64).cast()));
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
});

kernel!(i64_to_i32_saturate: i64 => i32, saturate = true, lanes = 16, |s| {
    let lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512(s.cast()));
    let hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512(s.add(64).cast()));
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
});

kernel!(i32_to_i64: i32 => i64, saturate = false, lanes = 8, |s| {
    _mm512_cvtepi32_epi64(_mm256_loadu_si256(s.cast()))
});

kernel!(i32_to_i64_saturate: i32 => i64, saturate = true, lanes = 8, |s| {
    _mm512_cvtepi32_epi64(_mm256_loadu_si256(s.cast()))
});

kernel!(u8_to_f32: u8 => f32, saturate = false, lanes = 16, |s| {
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast())))
});

kernel!(u8_to_f32_saturate: u8 => f32, saturate = true, lanes = 16, |s| {
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast())))
});

kernel!(bool_to_f32: Bool => f32, saturate = false, lanes = 16, |s| {
    let nonzero = _mm512_test_epi32_mask(_mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast())), splat(0xFF));
    _mm512_maskz_mov_epi32(nonzero, splat(0x3F80_0000))
});

kernel!(bool_to_f32_saturate: Bool => f32, saturate = true, lanes = 16, |s| {
    let nonzero = _mm512_test_epi32_mask(_mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast())), splat(0xFF));
    _mm512_maskz_mov_epi32(nonzero, splat(0x3F80_0000))
});

kernel!(f32_to_u8_torch: f32 => u8, saturate = false, lanes = 64, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_loadu_ps(p.cast())));
    join4(part(s), part(s.add(64)), part(s.add(128)), part(s.add(192)))
});

kernel!(f32_to_u8_saturate: f32 => u8, saturate = true, lanes = 64, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_loadu_ps(p.cast()), _mm512_setzero_ps()), _mm512_set1_ps(255.0))));
    join4(part(s), part(s.add(64)), part(s.add(128)), part(s.add(192)))
});

/// f32 bits → float8 codes (sign not yet included) by torch's `fp8e4m3fn_from_fp32_value` /
/// `fp8e5m2_from_fp32_value` rounding, without lane masks (compares into mask registers compete
/// with the packing for one port). Normals: rebias the exponent, add just under half an ulp plus
/// the kept lsb, truncate. Subnormals: a float add of 2^(24 - BIAS - MAN), whose f32 ulp is the
/// format's subnormal quantum, rounds to nearest-even. Each path gives a number at least as large
/// as the right code where the other is the right one (below the smallest normal the normal path
/// is given the smallest normal; from it up the float-add count of quanta grows faster than the
/// code), so the unsigned minimum of the two is the code. Overflow, inf and NaN come out above
/// every finite code and are fixed by the caller.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn float8_magnitude<const MAN: u32, const BIAS: u32, const SHIFT: u32>(a: __m512i) -> __m512i {
    debug_assert_eq!(SHIFT, 23 - MAN);
    // Below the smallest normal the normal path sees the smallest normal, whose code (1 << MAN)
    // is at least the subnormal one.
    let normal = _mm512_max_epu32(a, splat((128 - BIAS) << 23));
    let odd = _mm512_and_si512(_mm512_srli_epi32::<SHIFT>(normal), splat(1));
    let rebias = (BIAS.wrapping_sub(127)) << 23;
    let half = (1 << (SHIFT - 1)) - 1;
    let norm = _mm512_add_epi32(
        _mm512_add_epi32(normal, splat(rebias.wrapping_add(half))),
        odd,
    );
    let norm = _mm512_srli_epi32::<SHIFT>(norm);
    let magic = (151 - BIAS - MAN) << 23;
    let sub = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(
            _mm512_castsi512_ps(a),
            _mm512_castsi512_ps(splat(magic)),
        )),
        splat(magic),
    );
    _mm512_min_epu32(norm, sub)
}

/// Sixteen float8 codes from f32 bits `b`: `magnitude(|b|)` (at most 0x7E) with NaN lanes set to
/// 0x7F and the sign bit put back.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn float8_16(b: __m512i, magnitude: impl Fn(__m512i) -> __m512i) -> __m512i {
    let a = _mm512_and_si512(b, splat(0x7FFF_FFFF));
    // All ones in NaN lanes (|b| above inf's bits), else zero.
    let nan = _mm512_srai_epi32::<31>(_mm512_sub_epi32(splat(0x7F80_0000), a));
    // 0x7F in NaN lanes, and the sign in bit 7 (the top byte of b, shifted down): a bitwise
    // select, A ? B : C per bit with A = 0x7F (truth table 0xCA).
    let nan_sign = _mm512_ternarylogic_epi32::<0xCA>(splat(0x7F), nan, _mm512_srli_epi32::<24>(b));
    _mm512_or_si512(magnitude(a), nan_sign)
}

/// Four vectors of sixteen codes (each below 256) as 64 bytes in element order: two rounds of
/// packing (which interleave the 128-bit lanes), then one dword permutation to undo it.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn pack_bytes(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m512i {
    let packed = _mm512_packus_epi16(_mm512_packus_epi32(a, b), _mm512_packus_epi32(c, d));
    // Lane j of `packed` holds dwords [a_j, b_j, c_j, d_j] (4 elements each); dword 4v + j of the
    // result is the j-th dword of vector v.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_epi32(order, packed)
}

/// torch 2.15's float8_e4m3fn magnitude: past 448 and inf saturate to 0x7E (NaN: caller).
/// Torch and Saturate agree for float32 sources.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn e4m3fn_magnitude(a: __m512i) -> __m512i {
    _mm512_min_epu32(float8_magnitude::<3, 7, 20>(a), splat(0x7E))
}

/// float8_e5m2 magnitude. Torch: overflow and inf give inf (0x7C). Saturate: finite overflow
/// gives 0x7B (57344), inf stays inf (0x7B + 1 where |x| is inf's bits or above; NaN: caller).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
fn e5m2_magnitude<const SATURATE: bool>(a: __m512i) -> __m512i {
    let code = float8_magnitude::<2, 15, 21>(a);
    if SATURATE {
        let inf = _mm512_srli_epi32::<31>(_mm512_sub_epi32(splat(0x7F7F_FFFF), a));
        _mm512_add_epi32(_mm512_min_epu32(code, splat(0x7B)), inf)
    } else {
        _mm512_min_epu32(code, splat(0x7C))
    }
}

/// Sixty-four f32 at `s` → float8 codes by `magnitude`.
///
/// # Safety
/// `s` must be valid for 256 bytes of reads.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn float8_64(s: *const u8, magnitude: impl Fn(__m512i) -> __m512i + Copy) -> __m512i {
    let part = |k: usize| {
        // SAFETY: k < 4, so the 64 bytes lie inside the 256 the caller vouches for.
        let bits = unsafe { _mm512_loadu_si512(s.add(64 * k).cast()) };
        float8_16(bits, magnitude)
    };
    pack_bytes(part(0), part(1), part(2), part(3))
}

kernel!(f32_to_e4m3fn: f32 => E4M3Fn, saturate = false, lanes = 64, |s| {
    float8_64(s, |a| e4m3fn_magnitude(a))
});

kernel!(f32_to_e4m3fn_saturate: f32 => E4M3Fn, saturate = true, lanes = 64, |s| {
    float8_64(s, |a| e4m3fn_magnitude(a))
});

kernel!(f32_to_e5m2_torch: f32 => E5M2, saturate = false, lanes = 64, |s| {
    float8_64(s, |a| e5m2_magnitude::<false>(a))
});

kernel!(f32_to_e5m2_saturate: f32 => E5M2, saturate = true, lanes = 64, |s| {
    float8_64(s, |a| e5m2_magnitude::<true>(a))
});

kernel!(f16_to_bf16_torch: F16 => BF16, saturate = false, lanes = 32, |s| {
    // float16 -> f32 is exact; c10::BFloat16(float) then rounds, NaN -> 0x7FC0.
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_torch(_mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))), 0x7FC0));
    join2(part(s), part(s.add(32)))
});

kernel!(f16_to_bf16_saturate: F16 => BF16, saturate = true, lanes = 32, |s| {
    let part = |p: *const u8| _mm512_cvtepi32_epi16(bf16_saturate(_mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(p.cast())))));
    join2(part(s), part(s.add(32)))
});

kernel!(bf16_to_f16: BF16 => F16, saturate = false, lanes = 32, |s| {
    // bfloat16 -> f32 is exact, so vcvtps2ph is the one rounding (Torch and Saturate agree).
    let part = |p: *const u8| {
        let x = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()))));
        _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x)
    };
    join2(part(s), part(s.add(32)))
});

kernel!(bf16_to_f16_saturate: BF16 => F16, saturate = true, lanes = 32, |s| {
    let part = |p: *const u8| {
        let x = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()))));
        _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x)
    };
    join2(part(s), part(s.add(32)))
});

/// The AVX-512 kernel for a pair, if there is one.
pub(super) fn select(from: DType, to: DType, saturate: bool) -> Option<Kernel> {
    use DType::*;
    let (torch, sat): (Kernel, Kernel) = match (from, to) {
        (Float32, BFloat16) => (f32_to_bf16_torch, f32_to_bf16_saturate),
        (BFloat16, Float32) => (bf16_to_f32, bf16_to_f32_saturate),
        (Float32, Float16) => (f32_to_f16, f32_to_f16_saturate),
        (Float16, Float32) => (f16_to_f32_torch, f16_to_f32_saturate),
        (Float64, Float32) => (f64_to_f32, f64_to_f32_saturate),
        (Float32, Float64) => (f32_to_f64, f32_to_f64_saturate),
        (Float64, BFloat16) => (f64_to_bf16_torch, f64_to_bf16_saturate),
        (Float32, Int32) => (f32_to_i32_torch, f32_to_i32_saturate),
        (Int32, Float32) => (i32_to_f32, i32_to_f32_saturate),
        (Int64, Int32) => (i64_to_i32, i64_to_i32_saturate),
        (Int32, Int64) => (i32_to_i64, i32_to_i64_saturate),
        (UInt8, Float32) => (u8_to_f32, u8_to_f32_saturate),
        (Bool, Float32) => (bool_to_f32, bool_to_f32_saturate),
        (Float32, UInt8) => (f32_to_u8_torch, f32_to_u8_saturate),
        (Float32, Float8E4M3Fn) => (f32_to_e4m3fn, f32_to_e4m3fn_saturate),
        (Float32, Float8E5M2) => (f32_to_e5m2_torch, f32_to_e5m2_saturate),
        (Float16, BFloat16) => (f16_to_bf16_torch, f16_to_bf16_saturate),
        (BFloat16, Float16) => (bf16_to_f16, bf16_to_f16_saturate),
        _ => return None,
    };
    Some(if saturate { sat } else { torch })
}
