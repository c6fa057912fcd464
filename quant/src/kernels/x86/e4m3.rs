//! float8_e4m3fn dequantized in one pass on AVX-512 (decoded, scaled, rounded to bfloat16,
//! float16 or float32 in registers, whole cache lines streamed) and on AVX2 with F16C; the
//! definition, the portable tables and the NaN rules are in [`crate::e4m3`].

use core::arch::x86_64::*;

use dtcast_dtype::DType;

use crate::arith::mul;
use crate::x86::lines::Lines;

/// 16 codes at `s` as float32 lanes: the magnitude's 7 bits moved to float32's exponent and
/// mantissa are the value times 2^-120, exactly (subnormals included), so one product by
/// 2^120 rebiases; code 0x7F (and 0xFF) is NaN.
#[inline(always)]
unsafe fn decode(s: *const u8) -> __m512 {
    // SAFETY: the caller's contract: 16 bytes at `s`; AVX-512 F.
    unsafe {
        let codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast()));
        let magnitude = _mm512_and_si512(codes, _mm512_set1_epi32(0x7F));
        let moved = _mm512_castsi512_ps(_mm512_slli_epi32::<20>(magnitude));
        let value = _mm512_mul_ps(moved, _mm512_set1_ps(f32::from_bits(0x7B80_0000))); // 2^120
        let sign = _mm512_slli_epi32::<24>(_mm512_and_si512(codes, _mm512_set1_epi32(0x80)));
        let signed = _mm512_or_si512(_mm512_castps_si512(value), sign);
        let nan = _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7F));
        _mm512_castsi512_ps(_mm512_mask_mov_epi32(
            signed,
            nan,
            _mm512_set1_epi32(0x7FC0_0000),
        ))
    }
}

/// Products to bfloat16 (nearest-even; every NaN 0xFFFF) in the low 16 bits of each lane.
#[inline(always)]
unsafe fn round(products: __m512) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let bits = _mm512_castps_si512(products);
        let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
        let bias = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF));
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(bits, bias));
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(products, products);
        _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0xFFFF))
    }
}

/// The odd 16-bit lanes of two vectors side by side: the top halves of 32 float32 lanes.
const TOP_HALVES: [u16; 32] = {
    let mut t = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        t[i] = (2 * i + 1) as u16;
        i += 1;
    }
    t
};

/// The 32 codes at `s`, and the products of the first and last 16 with `f` (finite, below
/// 2^119 in magnitude) by way of float16 (see [`step_half`]; NaN codes give numbers here).
#[inline(always)]
unsafe fn products(s: *const u8, f: f32) -> (__m256i, __m512, __m512) {
    // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
    unsafe {
        let codes = _mm256_loadu_si256(s.cast());
        let wide = _mm512_cvtepu8_epi16(codes);
        // Sign to bit 14 and magnitude to bits 7..14, then bit 14 doubled into bit 15.
        let moved = _mm512_slli_epi16::<7>(wide);
        let half = _mm512_add_epi16(moved, _mm512_and_si512(moved, _mm512_set1_epi16(0x4000)));
        let factor = _mm512_set1_ps(f * 256.0);
        let low = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), factor);
        let high = _mm512_mul_ps(
            _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(half)),
            factor,
        );
        (codes, low, high)
    }
}

/// 32 codes at `s` times `f` (finite, below 2^119 in magnitude) to bfloat16, one vector:
/// each code's bits moved into a float16 (exactly its value times 2^-8, subnormals included)
/// and converted by the hardware, then multiplied by `f * 2^8` — the same real product as the
/// value's by `f`, so the same rounding — and rounded to nearest-even (by AVX512_BF16's
/// instruction where `CPU_BF16`, for factors [`crate::e4m3::products_normal`] takes); NaN codes
/// 0xFFFF.
#[inline(always)]
unsafe fn step_half<const CPU_BF16: bool>(s: *const u8, f: f32) -> __m512i {
    // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
    unsafe {
        let (codes, low, high) = products(s, f);
        let rounded = if CPU_BF16 {
            // The first 16 elements from the second operand.
            core::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(high, low))
        } else {
            let round = |p: __m512| {
                let bits = _mm512_castps_si512(p);
                let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)))
            };
            let top = _mm512_loadu_si512(TOP_HALVES.as_ptr().cast());
            _mm512_permutex2var_epi16(round(low), top, round(high))
        };
        let nan = _mm256_cmpeq_epi8_mask(
            _mm256_and_si256(codes, _mm256_set1_epi8(0x7F)),
            _mm256_set1_epi8(0x7F),
        );
        _mm512_mask_mov_epi16(rounded, nan, _mm512_set1_epi16(-1))
    }
}

/// Outputs of the forms below, as their const parameter: bfloat16, float16, float32.
pub(crate) const TO_BF16: u8 = 0;
pub(crate) const TO_F16: u8 = 1;
pub(crate) const TO_F32: u8 = 2;

/// The same 32 codes to float16: the same moves and products, each rounded by `vcvtps2ph`
/// (nearest-even, the cast's rule), NaN codes given `nan`'s outputs.
#[inline(always)]
unsafe fn step_f16(s: *const u8, f: f32, nan: [u32; 2]) -> __m512i {
    // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
    unsafe {
        let (codes, low, high) = products(s, f);
        nan_codes(to_f16(low, high), codes, nan)
    }
}

/// Two vectors of products rounded to float16 by `vcvtps2ph`, side by side.
#[inline(always)]
unsafe fn to_f16(low: __m512, high: __m512) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm512_cvtps_ph::<NEAREST>(low)),
            _mm512_cvtps_ph::<NEAREST>(high),
        )
    }
}

/// Which of 32 codes are NaN (0x7F, 0xFF), and which negative.
#[inline(always)]
unsafe fn nan_and_sign(codes: __m256i) -> (__mmask32, __mmask32) {
    // SAFETY: AVX-512 BW and VL by the caller's contract.
    unsafe {
        let is_nan = _mm256_cmpeq_epi8_mask(
            _mm256_and_si256(codes, _mm256_set1_epi8(0x7F)),
            _mm256_set1_epi8(0x7F),
        );
        (is_nan, _mm256_movepi8_mask(codes))
    }
}

/// `v` (32 float16 outputs of `codes`) with each NaN code's lane set to `nan[0]` (code
/// 0x7F's output) or `nan[1]` (0xFF's).
#[inline(always)]
unsafe fn nan_codes(v: __m512i, codes: __m256i, nan: [u32; 2]) -> __m512i {
    // SAFETY: AVX-512 F, BW and VL by the caller's contract.
    unsafe {
        let (is_nan, negative) = nan_and_sign(codes);
        let nans = _mm512_mask_mov_epi16(
            _mm512_set1_epi16(nan[0] as i16),
            negative,
            _mm512_set1_epi16(nan[1] as i16),
        );
        _mm512_mask_mov_epi16(v, is_nan, nans)
    }
}

/// The float32 products of 32 codes (the first 16 in `low`) with each NaN code's lane set
/// to `nan[0]` (code 0x7F's output) or `nan[1]` (0xFF's).
#[inline(always)]
unsafe fn nan_codes32(low: __m512, high: __m512, codes: __m256i, nan: [u32; 2]) -> [__m512i; 2] {
    // SAFETY: AVX-512 F, BW and VL by the caller's contract.
    unsafe {
        let (is_nan, negative) = nan_and_sign(codes);
        let nans = |negative: __mmask16| {
            let positive = _mm512_set1_epi32(nan[0] as i32);
            _mm512_mask_mov_epi32(positive, negative, _mm512_set1_epi32(nan[1] as i32))
        };
        let fix = |p: __m512, half: u32| {
            let (is_nan, negative) = ((is_nan >> half) as u16, (negative >> half) as u16);
            _mm512_mask_mov_epi32(_mm512_castps_si512(p), is_nan, nans(negative))
        };
        [fix(low, 0), fix(high, 16)]
    }
}

/// [`crate::e4m3::groups`] on AVX-512, for groups of a multiple of 32 codes: to float16 or
/// float32, or to bfloat16 with AVX512_BF16's rounding where the CPU has it. Call it only
/// where `isa()` names AVX-512.
pub(crate) fn groups_avx512(
    src: &[u8],
    group: usize,
    factors: &[f32],
    codes: crate::e4m3::Codes,
    dst: &mut [u8],
) {
    // The caller checked that `isa()` names AVX-512 (F, BW, VL, DQ).
    let plain = match codes.out {
        DType::Float16 => groups_plain::<TO_F16>,
        DType::Float32 => groups_plain::<TO_F32>,
        _ if crate::lookup4::avx512_bf16() => {
            // SAFETY: `avx512_bf16()` says this CPU runs AVX-512 F, BW, VL, DQ and BF16.
            unsafe { groups_bf16(src, group, factors, codes, dst) };
            return;
        }
        _ => groups_plain::<TO_BF16>,
    };
    // SAFETY: `isa()` names AVX-512 (F, BW, VL, DQ): the caller's check.
    unsafe { plain(src, group, factors, codes, dst) }
}

/// [`groups`] into `OUT`'s dtype (bfloat16 without AVX512_BF16): compiled for the AVX-512
/// subsets it needs, as [`groups_bf16`] is for its own (inlined into `groups_avx512`, which
/// has no target features, every intrinsic of the loop was a call).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn groups_plain<const OUT: u8>(
    src: &[u8],
    group: usize,
    factors: &[f32],
    codes: crate::e4m3::Codes,
    dst: &mut [u8],
) {
    // SAFETY: this function's contract covers `groups`'.
    unsafe { groups::<false, OUT>(src, group, factors, codes, dst) }
}

/// [`groups`] into bfloat16 where the CPU runs AVX512_BF16.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL, DQ and BF16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
unsafe fn groups_bf16(
    src: &[u8],
    group: usize,
    factors: &[f32],
    codes: crate::e4m3::Codes,
    dst: &mut [u8],
) {
    // SAFETY: this function's contract covers `groups`'.
    unsafe { groups::<true, TO_BF16>(src, group, factors, codes, dst) }
}

/// [`crate::e4m3::groups`] on AVX-512, for groups of a multiple of 32 codes, into `OUT`'s dtype
/// (`codes.out`); into bfloat16 rounding by AVX512_BF16's instruction where `CPU_BF16` (for
/// the factors that allow it).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ, and BF16 where `CPU_BF16`.
#[inline(always)]
pub(crate) unsafe fn groups<const CPU_BF16: bool, const OUT: u8>(
    src: &[u8],
    group: usize,
    factors: &[f32],
    codes: crate::e4m3::Codes,
    dst: &mut [u8],
) {
    // SAFETY: the writer gets each step's output bytes (64 or 128), in order, inside `dst`.
    let mut lines = unsafe { Lines::new(dst.as_mut_ptr()) };
    // Group by group, each a whole number of steps of 32 codes.
    let per_group = group / 32;
    // The NaN codes' outputs under any factor that is not NaN (their own bits: a NaN times a
    // number is that NaN), worked out once rather than per group.
    let nan_codes_out = [codes.output(0x7F, 1.0), codes.output(0xFF, 1.0)];
    for (g, &f) in factors.iter().enumerate() {
        // Finite and below 2^119 (times 2^8 still finite): by way of float16. Otherwise a
        // NaN factor gives the whole group `mul(0, f)` (a NaN: 0xFFFF in bfloat16), and the
        // rest x86's product.
        let fast = crate::e4m3::by_float16(f);
        let instruction = CPU_BF16 && crate::e4m3::products_normal(f);
        // float16 and float32: the NaN codes' outputs, and a NaN factor's one output.
        let nan = if f.is_nan() {
            [codes.output(0x7F, f), codes.output(0xFF, f)]
        } else {
            nan_codes_out
        };
        // SAFETY: AVX-512 F by this function's contract.
        let factor = unsafe { _mm512_set1_ps(if f.is_nan() { mul(0.0, f) } else { f }) };
        for k in g * per_group..(g + 1) * per_group {
            // SAFETY: step `k` reads bytes 32k..32k+32 of `src` and writes its 32 outputs
            // next, inside both (`src` holds `group` bytes per factor, `dst` an output per
            // byte of `src`).
            unsafe {
                let s = src.as_ptr().add(32 * k);
                // x86's products of the decoded codes (the factors the float16 route
                // cannot take).
                let decoded = || {
                    let low = _mm512_mul_ps(decode(s), factor);
                    (low, _mm512_mul_ps(decode(s.add(16)), factor))
                };
                if OUT == TO_F32 {
                    if f.is_nan() {
                        lines.push(_mm512_set1_epi32(nan[0] as i32));
                        lines.push(_mm512_set1_epi32(nan[0] as i32));
                        continue;
                    }
                    let (codes, low, high) = if fast {
                        products(s, f)
                    } else {
                        let (low, high) = decoded();
                        (_mm256_loadu_si256(s.cast()), low, high)
                    };
                    let [low, high] = nan_codes32(low, high, codes, nan);
                    lines.push(low);
                    lines.push(high);
                    continue;
                }
                if OUT == TO_F16 {
                    lines.push(if fast {
                        step_f16(s, f, nan)
                    } else if f.is_nan() {
                        _mm512_set1_epi16(nan[0] as i16)
                    } else {
                        let (low, high) = decoded();
                        nan_codes(to_f16(low, high), _mm256_loadu_si256(s.cast()), nan)
                    });
                    continue;
                }
                if fast {
                    lines.push(if instruction {
                        step_half::<CPU_BF16>(s, f)
                    } else {
                        step_half::<false>(s, f)
                    });
                    continue;
                }
                let (low, high) = decoded();
                let (low, high) = (round(low), round(high));
                lines.push(_mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm512_cvtepi32_epi16(low)),
                    _mm512_cvtepi32_epi16(high),
                ));
            }
        }
    }
    // SAFETY: as above. No fence here: a run can be 32 elements; the caller fences once
    // per piece (`lookup4::store_fence`).
    unsafe { lines.finish() };
}

/// 16 codes at `s` (as loaded) and their products with `factor / 2^8` by way of float16, as
/// [`products`] makes them, eight lanes at a time (AVX2 + F16C).
#[inline(always)]
unsafe fn products_avx2(s: *const u8, factor: __m256) -> (__m128i, __m256, __m256) {
    // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
    unsafe {
        let codes = _mm_loadu_si128(s.cast());
        let moved = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(codes));
        let half = _mm256_add_epi16(moved, _mm256_and_si256(moved, _mm256_set1_epi16(0x4000)));
        let products = |h: __m128i| _mm256_mul_ps(_mm256_cvtph_ps(h), factor);
        (
            codes,
            products(_mm256_castsi256_si128(half)),
            products(_mm256_extracti128_si256::<1>(half)),
        )
    }
}

/// Which of 16 codes are NaN (0x7F, 0xFF): all ones in their bytes.
#[inline(always)]
unsafe fn nan_bytes(codes: __m128i) -> __m128i {
    // SAFETY: SSE2, part of x86-64.
    unsafe {
        _mm_cmpeq_epi8(
            _mm_and_si128(codes, _mm_set1_epi8(0x7F)),
            _mm_set1_epi8(0x7F),
        )
    }
}

/// [`step_half`] on AVX2 (+ F16C), 16 codes: the same float16 moves, conversions and
/// products, eight lanes at a time, rounded to float16 by `vcvtps2ph` where `F16` (NaN codes
/// given `nan`'s outputs: code 0x7F's, 0xFF's), else to bfloat16.
#[inline(always)]
unsafe fn step_half_avx2<const F16: bool>(
    s: *const u8,
    factor: __m256,
    nan: [__m256i; 2],
) -> __m256i {
    // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
    unsafe {
        let (codes, low, high) = products_avx2(s, factor);
        let is_nan = _mm256_cvtepi8_epi16(nan_bytes(codes));
        if F16 {
            let rounded = _mm256_set_m128i(
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(high),
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(low),
            );
            let negative = _mm256_srai_epi16::<15>(_mm256_cvtepi8_epi16(codes));
            let nans = _mm256_blendv_epi8(nan[0], nan[1], negative);
            return _mm256_blendv_epi8(rounded, nans, is_nan);
        }
        let round = |p: __m256| {
            let bits = _mm256_castps_si256(p);
            let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
            let bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF));
            _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, bias))
        };
        // Packing works per 128-bit lane: elements 0-3, 8-11, 4-7, 12-15, put back in order.
        let rounded =
            _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(round(low), round(high)));
        _mm256_or_si256(rounded, is_nan)
    }
}

/// The same 16 codes' float32 products (AVX2 + F16C), NaN codes given `nan`'s outputs
/// (32-bit lanes: code 0x7F's, 0xFF's).
#[inline(always)]
unsafe fn step_f32_avx2(s: *const u8, factor: __m256, nan: [__m256i; 2]) -> [__m256i; 2] {
    // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
    unsafe {
        let (codes, low, high) = products_avx2(s, factor);
        let is_nan = nan_bytes(codes);
        // Eight products with the eight codes in the low bytes of `codes` and `is_nan`.
        let fix = |p: __m256, codes: __m128i, is_nan: __m128i| {
            let negative = _mm256_srai_epi32::<31>(_mm256_cvtepi8_epi32(codes));
            let nans = _mm256_blendv_epi8(nan[0], nan[1], negative);
            _mm256_blendv_epi8(_mm256_castps_si256(p), nans, _mm256_cvtepi8_epi32(is_nan))
        };
        [
            fix(low, codes, is_nan),
            fix(
                high,
                _mm_srli_si128::<8>(codes),
                _mm_srli_si128::<8>(is_nan),
            ),
        ]
    }
}

/// [`crate::e4m3::groups`] on AVX2 (+ F16C), for groups of a multiple of 16 codes: groups whose
/// factor the float16 route cannot take (NaN, inf, 2^119 or more) by the loop.
///
/// # Safety
/// The CPU runs AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn groups_avx2(
    src: &[u8],
    group: usize,
    factors: &[f32],
    codes: crate::e4m3::Codes,
    dst: &mut [u8],
) {
    // Streaming stores where the destination allows them (the caller fences).
    let stream = (dst.as_ptr() as usize).is_multiple_of(32);
    let size = codes.size();
    let store = |at: *mut u8, v: __m256i| {
        // SAFETY: the caller's 32 bytes at `at`, aligned to 32 where streaming.
        unsafe {
            if stream {
                _mm256_stream_si256(at.cast(), v);
            } else {
                _mm256_storeu_si256(at.cast(), v);
            }
        }
    };
    // The NaN codes' outputs: the NaN's own bits, whatever finite factor multiplies it (the
    // factors taken below are finite), worked out once rather than per group (MXFP8's groups
    // of 32 are short enough for two scalar products a group to show).
    let nan = [0x7F, 0xFF].map(|c| {
        let bits = codes.output(c, 1.0);
        if size == 4 {
            _mm256_set1_epi32(bits as i32)
        } else {
            _mm256_set1_epi16(bits as i16)
        }
    });
    for (g, &f) in factors.iter().enumerate() {
        let (s, d) = (
            &src[g * group..][..group],
            &mut dst[size * g * group..][..size * group],
        );
        if !crate::e4m3::by_float16(f) {
            crate::e4m3::portable(s, codes, f, d);
            continue;
        }
        let factor = _mm256_set1_ps(f * 256.0);
        for k in 0..group / 16 {
            // SAFETY: step `k` reads bytes 16k..16k+16 of the group's codes and writes its
            // 16 outputs at 16k * size of the group's output, inside both; AVX2 and F16C by
            // this function's contract.
            unsafe {
                let (s, at) = (s.as_ptr().add(16 * k), d.as_mut_ptr().add(16 * size * k));
                match codes.out {
                    DType::Float32 => {
                        let [low, high] = step_f32_avx2(s, factor, nan);
                        store(at, low);
                        store(at.add(32), high);
                    }
                    DType::Float16 => store(at, step_half_avx2::<true>(s, factor, nan)),
                    _ => store(at, step_half_avx2::<false>(s, factor, nan)),
                }
            }
        }
    }
}
