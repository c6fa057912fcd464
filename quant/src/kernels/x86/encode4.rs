//! Float4 groups quantized in one pass on AVX-512: scaled, rounded (to bfloat16 where the
//! reference computes there), encoded and packed in registers, MX factors as exponent shifts;
//! the definition and the rules are in [`crate::encode4`].

use core::arch::x86_64::*;

use crate::encode4::Rules;
use crate::x86::narrow;

/// 16 elements at `s` as float32 bits.
#[inline(always)]
unsafe fn load<const BF16: bool>(s: *const u8) -> __m512i {
    // SAFETY: the caller gives 32 (bfloat16) or 64 bytes at `s`; AVX-512 F.
    unsafe {
        if BF16 {
            _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s.cast())))
        } else {
            _mm512_loadu_si512(s.cast())
        }
    }
}

/// The float4 codes (one per 32-bit lane) of 16 elements (`x`: float32 bits) scaled by `f`,
/// rounded to bfloat16 first when `ROUND`; lanes whose result is inf or NaN (an input inf or
/// NaN among them) are added to `bad`. `unsigned_zero`: -0 is code 0.
#[inline(always)]
unsafe fn codes<const DIVIDE: bool, const ROUND: bool>(
    x: __m512i,
    f: __m512,
    unsigned_zero: bool,
    bad: &mut __mmask16,
) -> __m512i {
    // SAFETY: AVX-512 F and DQ by the caller's contract.
    unsafe {
        let xf = _mm512_castsi512_ps(x);
        let y = if DIVIDE {
            _mm512_div_ps(xf, f)
        } else {
            _mm512_mul_ps(xf, f)
        };
        let mut y = _mm512_castps_si512(y);
        if ROUND {
            // NaN is reported below, whatever its bits become.
            y = narrow::round_bf16(y);
        }
        if unsigned_zero {
            // -0 + 0 is +0, and nothing else changes: compressed-tensors' unsigned zero.
            y = _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(y), _mm512_setzero_ps()));
        }
        let a = _mm512_and_si512(y, _mm512_set1_epi32(0x7FFF_FFFF));
        *bad |= _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7F80_0000));
        // Saturating at 6 (code 7), which is what both references' encoders do above it.
        narrow::code(y, a, &narrow::FLOAT4)
    }
}

/// Two vectors of 16 codes packed into 16 bytes, the first of each pair in the low nibble.
#[inline(always)]
unsafe fn pack(a: __m512i, b: __m512i) -> __m128i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        // In each 64-bit lane, the odd element's code (bits 32..36) moves to bits 4..8.
        let a = _mm512_cvtepi64_epi8(_mm512_or_si512(a, _mm512_srli_epi64::<28>(a)));
        let b = _mm512_cvtepi64_epi8(_mm512_or_si512(b, _mm512_srli_epi64::<28>(b)));
        _mm_unpacklo_epi64(a, b)
    }
}

/// Four 16-byte pieces as one vector, the first at the lowest address.
#[inline(always)]
unsafe fn join(r0: __m128i, r1: __m128i, r2: __m128i, r3: __m128i) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let low = _mm512_castsi256_si512(_mm256_set_m128i(r1, r0));
        _mm512_inserti64x4::<1>(low, _mm256_set_m128i(r3, r2))
    }
}

/// Writes `step(0)`, `step(1)`, ... `step(steps - 1)` (16 bytes each) to `out` in order:
/// four steps fill a 64-byte vector, written as whole cache lines with streaming stores
/// (`lines.rs`), so the packed output skips the read-for-ownership that ordinary stores cost
/// (from bfloat16, a sixth of a quantizing pass's memory traffic); the last steps are stored.
///
/// # Safety
/// The CPU runs AVX-512 F; `out` holds at least `16 * steps` bytes; the caller fences
/// (`_mm_sfence`) before the output is read elsewhere.
#[inline(always)]
pub(crate) unsafe fn write_steps(
    out: &mut [u8],
    steps: usize,
    mut step: impl FnMut(usize) -> __m128i,
) {
    let whole = steps / 4;
    // SAFETY: vector `q` holds bytes 64q..64q + 64 of `out`, inside it for `q < whole`; the
    // caller fences.
    unsafe {
        let mut lines = crate::x86::lines::Lines::new(out.as_mut_ptr());
        for q in 0..whole {
            let (r0, r1) = (step(4 * q), step(4 * q + 1));
            lines.push(join(r0, r1, step(4 * q + 2), step(4 * q + 3)));
        }
        lines.finish();
    }
    for k in 4 * whole..steps {
        // SAFETY: bytes 16k..16k + 16 of `out`, inside it.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().add(16 * k).cast(), step(k)) }
    }
}

/// [`crate::encode4::encode`] on AVX-512.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn encode<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    group: usize,
    factors: &[f32],
    rules: Rules,
    out: &mut [u8],
) -> bool {
    let size = if BF16 { 2 } else { 4 };
    let zero = rules.unsigned_zero;
    let mut bad: __mmask16 = 0;
    // 32 elements (16 bytes out) per step: one group of 32 or two of 16.
    let steps = out.len() / 16;
    let step = |k: usize| {
        let (g0, g1) = if group == 16 {
            (2 * k, 2 * k + 1)
        } else {
            (k, k)
        };
        // SAFETY: step `k` reads elements 32k..32k + 32 of `src`, inside it (`out` holds
        // half a byte per element, and `k < steps`).
        unsafe {
            let s = src.as_ptr().add(32 * k * size);
            crate::simd::prefetch_ahead(s);
            if !BF16 {
                crate::simd::prefetch_ahead(s.add(64));
            }
            let (f0, f1) = (_mm512_set1_ps(factors[g0]), _mm512_set1_ps(factors[g1]));
            let a = codes::<DIVIDE, ROUND>(load::<BF16>(s), f0, zero, &mut bad);
            let b = codes::<DIVIDE, ROUND>(load::<BF16>(s.add(16 * size)), f1, zero, &mut bad);
            pack(a, b)
        }
    };
    // SAFETY: `steps` 16-byte results, bytes 16k..16k + 16 of `out` each.
    unsafe { write_steps(out, steps, step) };
    if !out.len().is_multiple_of(16) {
        // A last group of 16: one vector, 8 bytes out.
        // SAFETY: as above, for elements 32k..32k + 16 and bytes 16k..16k + 8.
        unsafe {
            let s = src.as_ptr().add(32 * steps * size);
            let f = _mm512_set1_ps(factors[2 * steps]);
            let a = codes::<DIVIDE, ROUND>(load::<BF16>(s), f, zero, &mut bad);
            _mm_storel_epi64(out.as_mut_ptr().add(16 * steps).cast(), pack(a, a));
        }
    }
    // (Through the safe helper: under Rust 1.89, the declared minimum, the intrinsic is an
    // unsafe call here.)
    crate::lookup4::store_fence();
    bad == 0
}

/// The float4 codes (one per 16-bit lane) of 32 bfloat16 elements `x` times `2^k`
/// (`shift`: `k << 7` in every lane, wrapping): the exponent field moved by `k`. Lanes that
/// are nonzero but not normal, before or after, are added to `bad`.
#[inline(always)]
unsafe fn codes_pow2(
    x: __m512i,
    shift: __m512i,
    unsigned_zero: bool,
    bad: &mut __mmask32,
) -> __m512i {
    // SAFETY: AVX-512 BW by the caller's contract.
    unsafe {
        let set = |v: u16| _mm512_set1_epi16(v as i16);
        let m = _mm512_and_si512(x, set(0x7FFF));
        let nonzero = _mm512_test_epi16_mask(m, m);
        let y = _mm512_maskz_add_epi16(nonzero, m, shift);
        // Normal: 0x0080 ..= 0x7F7F, i.e. `v - 0x80 < 0x7F00` as unsigned.
        let normal =
            |v: __m512i| _mm512_cmplt_epu16_mask(_mm512_sub_epi16(v, set(0x80)), set(0x7F00));
        *bad |= nonzero & !(normal(m) & normal(y));
        // 1 and above: exponent and first mantissa bit, nearest-even, saturated at code 7.
        let odd = _mm512_and_si512(_mm512_srli_epi16::<6>(y), set(1));
        let biased = _mm512_add_epi16(
            _mm512_add_epi16(y, set(0x001F_u16.wrapping_sub(0x3F00))),
            odd,
        );
        let high = _mm512_min_epu16(_mm512_srli_epi16::<6>(biased), set(7));
        // Below 1: 1 (0.5) above 0.25, 2 (1.0) from 0.75.
        let half = _mm512_cmpgt_epu16_mask(y, set(0x3E80));
        let whole = _mm512_cmpge_epu16_mask(y, set(0x3F40));
        let small = _mm512_maskz_mov_epi16(half, set(1));
        let small = _mm512_mask_add_epi16(small, whole, small, set(1));
        let code = _mm512_mask_blend_epi16(_mm512_cmplt_epu16_mask(y, set(0x3F80)), high, small);
        // The element's sign (the product's); compressed-tensors drops it from a zero.
        let sign = _mm512_and_si512(_mm512_srli_epi16::<12>(x), set(8));
        let sign = if unsigned_zero {
            _mm512_maskz_mov_epi16(nonzero, sign)
        } else {
            sign
        };
        _mm512_or_si512(code, sign)
    }
}

/// [`crate::encode4::encode_pow2`] on AVX-512.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn encode_pow2(
    src: &[u8],
    group: usize,
    shifts: &[i32],
    unsigned_zero: bool,
    out: &mut [u8],
) -> bool {
    let mut bad: __mmask32 = 0;
    let shift = |k: i32| ((k << 7) as u16) as i16;
    let steps = out.len() / 16;
    for k in 0..steps {
        // SAFETY: step `k` reads bytes 64k..64k + 64 of `src` (32 bfloat16 elements) and
        // writes bytes 16k..16k + 16 of `out`, inside both.
        unsafe {
            let shifts = if group == 16 {
                let lo = _mm256_set1_epi16(shift(shifts[2 * k]));
                let hi = _mm256_set1_epi16(shift(shifts[2 * k + 1]));
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
            } else {
                _mm512_set1_epi16(shift(shifts[k]))
            };
            crate::simd::prefetch_ahead(src.as_ptr().add(64 * k));
            let x = _mm512_loadu_si512(src.as_ptr().add(64 * k).cast());
            let c = codes_pow2(x, shifts, unsigned_zero, &mut bad);
            // The odd element's code (bits 16..20 of a 32-bit lane) to bits 4..8.
            let pairs = _mm512_or_si512(c, _mm512_srli_epi32::<12>(c));
            _mm_storeu_si128(
                out.as_mut_ptr().add(16 * k).cast(),
                _mm512_cvtepi32_epi8(pairs),
            );
        }
    }
    if !out.len().is_multiple_of(16) {
        // A last group of 16: the low half of a vector, 8 bytes out.
        // SAFETY: as above, for bytes 64k..64k + 32 of `src` and 16k..16k + 8 of `out`.
        unsafe {
            // The upper half zero: no element, nothing to report.
            let x = _mm512_zextsi256_si512(_mm256_loadu_si256(src.as_ptr().add(64 * steps).cast()));
            let f = _mm512_set1_epi16(shift(shifts[2 * steps]));
            let c = codes_pow2(x, f, unsigned_zero, &mut bad);
            let pairs = _mm512_or_si512(c, _mm512_srli_epi32::<12>(c));
            _mm_storel_epi64(
                out.as_mut_ptr().add(16 * steps).cast(),
                _mm512_cvtepi32_epi8(pairs),
            );
        }
    }
    bad == 0
}
