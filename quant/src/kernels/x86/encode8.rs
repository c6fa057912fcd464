//! float8_e4m3fn runs quantized in one pass on AVX-512 and AVX2: the products rounded to the
//! weight's 16-bit format where the reference computes there, then clamped and rounded to
//! float8 on 16-bit lanes (`words`, `halves_words`, and their AVX2 forms); MX float8 of 16-bit
//! weights as exponent shifts (`pow2_groups`). The definition is [`crate::encode8`]'s loop form.

use core::arch::x86_64::*;

use crate::encode8::{Word, BFLOAT16, FLOAT16};
use crate::x86::narrow;

/// The float8_e4m3fn codes (one per 32-bit lane) of 16 elements (`x`: float32 bits) scaled
/// by `f`, rounded to bfloat16 first when `ROUND`, clamped to 448; lanes whose result is inf
/// or NaN are added to `bad`. (float16 products rounded to float16 take [`halves_words`].)
#[inline(always)]
unsafe fn codes<const F16: bool, const DIVIDE: bool, const ROUND: bool>(
    x: __m512i,
    f: __m512,
    bad: &mut __mmask16,
) -> __m512i {
    const { assert!(!(F16 && ROUND), "float16 rounding is halves_words'") };
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let mut y = product::<DIVIDE>(x, f);
        if ROUND {
            // NaN is reported below, whatever its bits become.
            y = narrow::round_bf16(y);
        }
        let a = _mm512_and_si512(y, _mm512_set1_epi32(0x7FFF_FFFF));
        *bad |= _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7F80_0000));
        // Clamped to 448, as the references clamp before encoding.
        narrow::code(y, a, &narrow::FLOAT8_E4M3FN)
    }
}

/// `count` (at most 16) elements at `s` (bfloat16 where `BF16`, float16 where `F16`, else
/// float32) as float32 bits (a float16 converted exactly by `vcvtph2ps`), the rest of the
/// lanes 0.
#[inline(always)]
unsafe fn load<const BF16: bool, const F16: bool>(s: *const u8, count: usize) -> __m512i {
    // SAFETY: the caller gives `count` elements at `s`; AVX-512 F, BW and VL.
    unsafe {
        let mask = (1u32 << count).wrapping_sub(1) as u16;
        if F16 {
            let half = if count == 16 {
                _mm256_loadu_si256(s.cast())
            } else {
                _mm256_maskz_loadu_epi16(mask, s.cast())
            };
            _mm512_castps_si512(_mm512_cvtph_ps(half))
        } else if BF16 {
            let half = if count == 16 {
                _mm256_loadu_si256(s.cast())
            } else {
                _mm256_maskz_loadu_epi16(mask, s.cast())
            };
            _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(half))
        } else if count == 16 {
            _mm512_loadu_si512(s.cast())
        } else {
            _mm512_maskz_loadu_epi32(mask, s.cast())
        }
    }
}

/// [`crate::encode8::kernel`]'s run on AVX-512 (bfloat16 input where `BF16`, float16 where `F16`,
/// else float32; float16 products are not rounded here).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn run<
    const BF16: bool,
    const F16: bool,
    const DIVIDE: bool,
    const ROUND: bool,
>(
    src: &[u8],
    f: f32,
    out: &mut [u8],
) -> bool {
    let size = if BF16 || F16 { 2 } else { 4 };
    debug_assert_eq!(src.len(), out.len() * size);
    let f = _mm512_set1_ps(f);
    let mut bad: __mmask16 = 0;
    let mut i = 0;
    while i < out.len() {
        let count = (out.len() - i).min(16);
        // SAFETY: elements i..i + count of `src` and bytes i..i + count of `out` are inside
        // both; AVX-512 by this function's contract.
        unsafe {
            let x = load::<BF16, F16>(src.as_ptr().add(i * size), count);
            let bytes = _mm512_cvtepi32_epi8(codes::<F16, DIVIDE, ROUND>(x, f, &mut bad));
            let at = out.as_mut_ptr().add(i);
            if count == 16 {
                _mm_storeu_si128(at.cast(), bytes);
            } else {
                _mm_mask_storeu_epi8(at.cast(), (1u32 << count).wrapping_sub(1) as u16, bytes);
            }
        }
        i += count;
    }
    bad == 0
}

/// [`crate::encode8::kernel`]'s run on AVX-512 for bfloat16 input whose products are rounded to
/// bfloat16 (compressed-tensors' arithmetic), 32 elements a step: the products on two
/// vectors of 32-bit lanes (each bfloat16 is the top half of its float32, so both come from
/// one load by a shift and a mask), rounded to bfloat16 and merged back into element order
/// on 16-bit lanes, where the clamp and the float8 rounding do 32 at once ([`e4m3_codes16`]:
/// the code `encode8::codes` gives the same bfloat16 value).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` bfloat16 elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn words<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    // SAFETY: this function's contract is `words_with`'s.
    unsafe { words_with::<DIVIDE, false>(src, f, out) }
}

/// [`words`] where the CPU rounds float32 to bfloat16 itself (AVX512_BF16's
/// `vcvtne2ps2bf16`: nearest-even, two vectors into one; it reads a float32 subnormal as
/// zero of its sign, which is the code of the subnormal's bfloat16 rounding too).
///
/// # Safety
/// As [`words`], and the CPU runs AVX512_BF16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
pub(crate) unsafe fn words_bf16<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    // SAFETY: this function's contract is `words_with`'s.
    unsafe { words_with::<DIVIDE, true>(src, f, out) }
}

/// [`words`]' loop, the rounding to bfloat16 by `vcvtne2ps2bf16` where `CPU_BF16`, else on
/// the bits.
///
/// # Safety
/// As [`words`], and the CPU runs AVX512_BF16 where `CPU_BF16`.
#[inline(always)]
unsafe fn words_with<const DIVIDE: bool, const CPU_BF16: bool>(
    src: &[u8],
    f: f32,
    out: &mut [u8],
) -> bool {
    // SAFETY: AVX-512 F by the caller's contract.
    let f = unsafe { _mm512_set1_ps(f) };
    let rounded = |x: __m512i| {
        // SAFETY: AVX-512 F and BW, and BF16 where `CPU_BF16`, by the caller's contract.
        unsafe {
            if CPU_BF16 {
                // Elements 0..16 into the top halves of 32-bit lanes, 16..32 into the
                // bottom halves, so that the two products come back in element order.
                let order = _mm512_set_epi16(
                    15, 31, 14, 30, 13, 29, 12, 28, 11, 27, 10, 26, 9, 25, 8, 24, 7, 23, 6, 22, 5,
                    21, 4, 20, 3, 19, 2, 18, 1, 17, 0, 16,
                );
                let x = _mm512_permutexvar_epi16(order, x);
                let first = _mm512_and_si512(x, _mm512_set1_epi32(0xFFFF_0000u32 as i32));
                let second = _mm512_slli_epi32::<16>(x);
                let (first, second) = (product::<DIVIDE>(first, f), product::<DIVIDE>(second, f));
                let rounded =
                    _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(second), _mm512_castsi512_ps(first));
                core::mem::transmute::<__m512bh, __m512i>(rounded)
            } else {
                let even = narrow::round_bf16(product::<DIVIDE>(_mm512_slli_epi32::<16>(x), f));
                let high = _mm512_and_si512(x, _mm512_set1_epi32(0xFFFF_0000u32 as i32));
                let odd = narrow::round_bf16(product::<DIVIDE>(high, f));
                // Each product's bfloat16 bits back in its element's 16-bit lane.
                _mm512_mask_blend_epi16(0xAAAA_AAAA, _mm512_srli_epi32::<16>(even), odd)
            }
        }
    };
    // SAFETY: the caller's contract is `words_loop`'s.
    unsafe { words_loop(src, out, &BFLOAT16, rounded) }
}

/// The loop of the 16-bit lane forms ([`words`], [`halves_words`]): 32 elements of `src`
/// (16-bit floats of the format `w`) a step, `rounded` giving their scaled values rounded
/// to that format (in element order), which are clamped to 448, rounded to float8 and
/// stored; false where a scaled value is inf or NaN.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ, and what `rounded` needs; `src` holds
/// `out.len()` elements.
#[inline(always)]
unsafe fn words_loop(
    src: &[u8],
    out: &mut [u8],
    w: &Word,
    rounded: impl Fn(__m512i) -> __m512i,
) -> bool {
    debug_assert_eq!(src.len(), out.len() * 2);
    let mut bad: __mmask32 = 0;
    let mut i = 0;
    while i < out.len() {
        let count = (out.len() - i).min(32);
        let mask = (1u64 << count).wrapping_sub(1) as u32;
        // SAFETY: elements i..i + count of `src` and bytes i..i + count of `out` are inside
        // both (the masked forms touch no others); the instruction sets by the contract.
        unsafe {
            let at = src.as_ptr().add(2 * i);
            let x = if count == 32 {
                _mm512_loadu_si512(at.cast())
            } else {
                _mm512_maskz_loadu_epi16(mask, at.cast())
            };
            let y = rounded(x);
            // (No closures here: outside a `#[target_feature]` function one may be compiled
            // for the baseline.)
            let set = _mm512_set1_epi16;
            let a = _mm512_and_si512(y, set(0x7FFF));
            bad |= _mm512_cmpge_epu16_mask(a, set(w.inf() as i16));
            // Clamped to 448, as the references clamp before encoding.
            let codes = e4m3_codes16(_mm512_min_epu16(a, set(w.e4m3_max() as i16)), w);
            // The sign bit to the code's top bit.
            let signed =
                _mm512_ternarylogic_epi32::<0xF8>(codes, _mm512_srli_epi16::<8>(y), set(0x80));
            let bytes = _mm512_cvtepi16_epi8(signed);
            let to = out.as_mut_ptr().add(i);
            if count == 32 {
                _mm256_storeu_si256(to.cast(), bytes);
            } else {
                _mm256_mask_storeu_epi8(to.cast(), mask, bytes);
            }
        }
        i += count;
    }
    bad == 0
}

/// [`crate::encode8::kernel`]'s run on AVX-512 for float16 input whose products are rounded to
/// float16 (compressed-tensors' arithmetic on float16 weights), 32 elements a step: each
/// half of the step read by `vcvtph2ps`, scaled, and rounded back to float16 by
/// `vcvtps2ph` (nearest-even, as torch's float16 arithmetic rounds), the halves joined on
/// 16-bit lanes, where the clamp and the float8 rounding do 32 at once ([`e4m3_codes16`]
/// over float16 bits).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` float16 elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn halves_words<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    // NaN and inf are reported, whatever their bits become.
    const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    let f = _mm512_set1_ps(f);
    let half = |h: __m256i| {
        // SAFETY: AVX-512 F by this function's contract.
        unsafe {
            let y = product::<DIVIDE>(_mm512_castps_si512(_mm512_cvtph_ps(h)), f);
            _mm512_cvtps_ph::<NEAREST>(_mm512_castsi512_ps(y))
        }
    };
    let rounded = |x: __m512i| {
        let low = half(_mm512_castsi512_si256(x));
        let high = half(_mm512_extracti64x4_epi64::<1>(x));
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high)
    };
    // SAFETY: this function's contract is `words_loop`'s.
    unsafe { words_loop(src, out, &FLOAT16, rounded) }
}

/// [`crate::encode8::kernel`]'s run for float16 input on AVX2 (with F16C, which dtcast's AVX2 set
/// implies) whose products are not rounded to float16 ([`halves_words_avx2`] takes those),
/// 8 elements a step on 32-bit lanes: each element read by `vcvtph2ps`, scaled, then
/// `narrow::code`'s steps for float8_e4m3fn (clamped to 448; from 2^-6 three mantissa bits
/// kept by one addition on the bits, below a multiple of 2^-9 by the conversion to an
/// integer, nearest-even); the last partial step by the loop form ([`crate::encode8::by_halves`]).
///
/// # Safety
/// The CPU runs AVX2 and F16C; `src` holds `out.len()` float16 elements.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn halves_avx2<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    debug_assert_eq!(src.len(), out.len() * 2);
    let factor = _mm256_set1_ps(f);
    let set = |v: u32| _mm256_set1_epi32(v as i32);
    // Byte 0 of each 32-bit lane to the low four bytes of each 128-bit half.
    let low_bytes = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let mut bad = _mm256_setzero_si256();
    let steps = out.len() / 8;
    for k in 0..steps {
        // SAFETY: step `k` reads bytes 16k..16k + 16 of `src` (8 float16 elements) and
        // writes bytes 8k..8k + 8 of `out`, inside both; AVX2 and F16C by this function's
        // contract.
        unsafe {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().add(16 * k).cast()));
            let y = if DIVIDE {
                _mm256_div_ps(x, factor)
            } else {
                _mm256_mul_ps(x, factor)
            };
            let y = _mm256_castps_si256(y);
            // (Magnitudes are below 0x8000_0000: signed compares serve.) inf and NaN are
            // reported, whatever their codes.
            let a = _mm256_and_si256(y, set(0x7FFF_FFFF));
            bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(a, set(0x7F7F_FFFF)));
            let a = _mm256_min_epi32(a, set(0x43E0_0000));
            let odd = _mm256_and_si256(_mm256_srli_epi32::<20>(a), set(1));
            let rounded = _mm256_add_epi32(a, _mm256_add_epi32(odd, set(0x7_FFFF)));
            let normal = _mm256_sub_epi32(_mm256_srli_epi32::<20>(rounded), set(120 << 3));
            let steps = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(512.0));
            let small = _mm256_cvtps_epi32(steps);
            let below = _mm256_cmpgt_epi32(set(0x3C80_0000), a);
            let code = _mm256_blendv_epi8(normal, small, below);
            let sign = _mm256_and_si256(_mm256_srli_epi32::<24>(y), set(0x80));
            let picked = _mm256_shuffle_epi8(_mm256_or_si256(code, sign), low_bytes);
            let bytes = _mm_unpacklo_epi32(
                _mm256_castsi256_si128(picked),
                _mm256_extracti128_si256::<1>(picked),
            );
            _mm_storel_epi64(out.as_mut_ptr().add(8 * k).cast(), bytes);
        }
    }
    let done = 8 * steps;
    let tail = crate::encode8::by_halves::<DIVIDE, false>(&src[2 * done..], f, &mut out[done..]);
    tail && _mm256_testz_si256(bad, bad) == 1
}

/// [`words`] on AVX2, 16 elements a step: the products on two vectors of 32-bit lanes,
/// rounded to bfloat16 on the bits and merged back into element order, then clamped and
/// rounded to float8 on 16-bit lanes ([`words_avx2_loop`]).
///
/// # Safety
/// The CPU runs AVX2; `src` holds `out.len()` bfloat16 elements.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn words_avx2<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    let factor = _mm256_set1_ps(f);
    let product = |x: __m256i| {
        let xf = _mm256_castsi256_ps(x);
        let y = _mm256_castps_si256(if DIVIDE {
            _mm256_div_ps(xf, factor)
        } else {
            _mm256_mul_ps(xf, factor)
        });
        // To bfloat16, nearest-even (a NaN is reported, whatever its bits become).
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(y), _mm256_set1_epi32(1));
        _mm256_add_epi32(y, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF)))
    };
    let rounded = |x: __m256i| {
        let even = product(_mm256_slli_epi32::<16>(x));
        let odd = product(_mm256_and_si256(
            x,
            _mm256_set1_epi32(0xFFFF_0000u32 as i32),
        ));
        // Each product's bfloat16 bits back in its element's 16-bit lane.
        _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(even), odd)
    };
    let by_loop =
        |src: &[u8], out: &mut [u8]| crate::encode8::by_lanes::<true, DIVIDE, true>(src, f, out);
    // SAFETY: this function's contract is `words_avx2_loop`'s.
    unsafe { words_avx2_loop(src, out, &BFLOAT16, rounded, by_loop) }
}

/// [`halves_words`] on AVX2 (with F16C, which dtcast's AVX2 set implies), 16 elements a
/// step: each half read by `vcvtph2ps`, scaled, rounded back to float16 by `vcvtps2ph`, the
/// halves joined on 16-bit lanes, then clamped and rounded to float8 there
/// ([`words_avx2_loop`]).
///
/// # Safety
/// The CPU runs AVX2 and F16C; `src` holds `out.len()` float16 elements.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn halves_words_avx2<const DIVIDE: bool>(
    src: &[u8],
    f: f32,
    out: &mut [u8],
) -> bool {
    // (F16C's immediate has no exception bit: nearest-even alone.)
    const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT;
    let factor = _mm256_set1_ps(f);
    let half = |h: __m128i| {
        let x = _mm256_cvtph_ps(h);
        let y = if DIVIDE {
            _mm256_div_ps(x, factor)
        } else {
            _mm256_mul_ps(x, factor)
        };
        _mm256_cvtps_ph::<NEAREST>(y)
    };
    let rounded = |x: __m256i| {
        let low = half(_mm256_castsi256_si128(x));
        _mm256_set_m128i(half(_mm256_extracti128_si256::<1>(x)), low)
    };
    let by_loop =
        |src: &[u8], out: &mut [u8]| crate::encode8::by_halves::<DIVIDE, true>(src, f, out);
    // SAFETY: this function's contract is `words_avx2_loop`'s.
    unsafe { words_avx2_loop(src, out, &FLOAT16, rounded, by_loop) }
}

/// The loop of the AVX2 16-bit lane forms ([`words_avx2`], [`halves_words_avx2`]): 16
/// elements of `src` (16-bit floats of the format `w`) a step, `rounded` giving their scaled
/// values rounded to that format (in element order), clamped to 448 and rounded to float8
/// ([`e4m3_codes_avx2`]). AVX2 has no variable 16-bit shifts: a step with an element between
/// 2^-10 and 2^-6 (a float8 subnormal other than 0; rare in scaled weights) takes the loop
/// form `by_loop` instead, as does the last partial step. False where a scaled value is inf
/// or NaN.
///
/// # Safety
/// The CPU runs AVX2, and what `rounded` needs; `src` holds `out.len()` elements.
#[inline(always)]
unsafe fn words_avx2_loop(
    src: &[u8],
    out: &mut [u8],
    w: &Word,
    rounded: impl Fn(__m256i) -> __m256i,
    by_loop: impl Fn(&[u8], &mut [u8]) -> bool,
) -> bool {
    debug_assert_eq!(src.len(), out.len() * 2);
    // (No closures here: outside a `#[target_feature]` function one may be compiled for the
    // baseline. `rounded` and `by_loop` are the caller's.)
    // SAFETY: AVX2 by the caller's contract.
    let mut bad = unsafe { _mm256_setzero_si256() };
    // Two steps an iteration, one 32-byte store (faster than a step and a 16-byte store
    // each; streaming stores were slower, even aligned).
    let mut ok = true;
    let pairs = out.len() / 32;
    for (s, o) in src.chunks_exact(64).zip(out.chunks_exact_mut(32)) {
        // SAFETY: `s` holds 64 bytes; AVX2 by the caller's contract.
        let (lo, hi) = unsafe {
            (
                step_avx2(&s[..32], &mut bad, w, &rounded),
                step_avx2(&s[32..], &mut bad, w, &rounded),
            )
        };
        match (lo, hi) {
            // SAFETY: `o` holds 32 bytes.
            (Some(lo), Some(hi)) => unsafe {
                _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm256_set_m128i(hi, lo));
            },
            _ => ok &= by_loop(s, o),
        }
    }
    // One step of 16 with an ordinary store, or by the loop form where a code needs it.
    let done = 32 * pairs;
    let last = done + (out.len() - done) / 16 * 16;
    if last > done {
        let (s, o) = (&src[2 * done..2 * last], &mut out[done..last]);
        // SAFETY: `s` holds 32 bytes; AVX2 by the caller's contract.
        match unsafe { step_avx2(s, &mut bad, w, &rounded) } {
            // SAFETY: `o` holds 16 bytes.
            Some(c) => unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), c) },
            None => ok &= by_loop(s, o),
        }
    }
    ok &= by_loop(&src[2 * last..], &mut out[last..]);
    // SAFETY: AVX2 by the caller's contract.
    ok && unsafe { _mm256_testz_si256(bad, bad) } == 1
}

/// One step of [`words_avx2_loop`]: the codes of the 16 elements at `s` (32 bytes), inf
/// and NaN results added to `bad`.
///
/// # Safety
/// The CPU runs AVX2, and what `rounded` needs; `s` holds 32 bytes.
#[inline(always)]
unsafe fn step_avx2(
    s: &[u8],
    bad: &mut __m256i,
    w: &Word,
    rounded: &impl Fn(__m256i) -> __m256i,
) -> Option<__m128i> {
    // SAFETY: by this function's contract.
    unsafe {
        let set = _mm256_set1_epi16;
        let y = rounded(_mm256_loadu_si256(s.as_ptr().cast()));
        let a = _mm256_and_si256(y, set(0x7FFF));
        // (Magnitudes are below 0x8000: signed compares serve.)
        *bad = _mm256_or_si256(*bad, _mm256_cmpgt_epi16(a, set(w.inf() as i16 - 1)));
        e4m3_codes_avx2(_mm256_min_epu16(a, set(w.e4m3_max() as i16)), y, w)
    }
}

/// The float8_e4m3fn codes (bytes) of 16 magnitudes `a` of the format `w` at most 448
/// (16-bit lanes, `encode8::e4m3_code16`), each with the sign bit of its lane of `y`; `None`
/// where a lane lies between 2^-10 and 2^-6, whose rounding needs the shifts AVX2 lacks (at
/// most 2^-10 rounds to 0).
///
/// # Safety
/// The CPU runs AVX2.
#[inline(always)]
unsafe fn e4m3_codes_avx2(a: __m256i, y: __m256i, w: &Word) -> Option<__m128i> {
    // SAFETY: AVX2 by the caller's contract.
    unsafe {
        let set = |v: u16| _mm256_set1_epi16(v as i16);
        // (Magnitudes are below 0x8000: signed compares serve.)
        let below = _mm256_cmpgt_epi16(set(w.pow2(-6)), a);
        let zero = _mm256_cmpgt_epi16(set(w.pow2(-10) + 1), a);
        if _mm256_movemask_epi8(_mm256_andnot_si256(zero, below)) != 0 {
            return None;
        }
        let dropped = _mm_cvtsi32_si128(i32::from(w.dropped()));
        let odd = _mm256_and_si256(_mm256_srl_epi16(a, dropped), set(1));
        let rounded = _mm256_add_epi16(_mm256_add_epi16(a, set(w.half_less_one())), odd);
        let normal = _mm256_sub_epi16(_mm256_srl_epi16(rounded, dropped), set(w.rebias()));
        let code = _mm256_andnot_si256(below, normal);
        let sign = _mm256_and_si256(_mm256_srli_epi16::<8>(y), set(0x80));
        // Codes to bytes (packing works per 128-bit lane: the two halves put side by side).
        let packed = _mm256_packus_epi16(_mm256_or_si256(code, sign), _mm256_setzero_si256());
        Some(_mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b1000>(
            packed,
        )))
    }
}

/// [`crate::encode8::pow2_groups`] on AVX2 for bfloat16 or float16 (`F16`): each half group an
/// exponent shift (a subnormal shifted up normalised first, [`lifted_avx2`]) and the float8
/// rounding on 16-bit lanes ([`e4m3_codes_avx2`]); a group with a float8 subnormal other
/// than 0 by the loop form ([`crate::encode8::pow2_lanes`]).
///
/// # Safety
/// The CPU runs AVX2; `src` holds 64 bytes and `out` 32 per shift, each shift one the
/// format takes ([`Word::takes_shift`]).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn pow2_groups_avx2<const F16: bool>(
    src: &[u8],
    shifts: &[i32],
    out: &mut [u8],
) -> bool {
    let w = if F16 { &FLOAT16 } else { &BFLOAT16 };
    let set = |v: u16| _mm256_set1_epi16(v as i16);
    let (mut bad, mut ok) = (_mm256_setzero_si256(), true);
    for (g, &k) in shifts.iter().enumerate() {
        let (s, o) = (&src[64 * g..64 * g + 64], &mut out[32 * g..32 * g + 32]);
        let field = set(w.field(k));
        let mut codes = [_mm_setzero_si128(); 2];
        let mut by_shifts = true;
        for (half, c) in codes.iter_mut().enumerate() {
            // SAFETY: `s` holds 64 bytes.
            let x = unsafe { _mm256_loadu_si256(s.as_ptr().add(32 * half).cast()) };
            let a = _mm256_and_si256(x, set(0x7FFF));
            // inf and NaN (signed compares serve: magnitudes are below 0x8000).
            bad = _mm256_or_si256(bad, _mm256_cmpgt_epi16(a, set(w.inf() - 1)));
            let scaled = if k >= 0 {
                let zero = _mm256_cmpeq_epi16(a, _mm256_setzero_si256());
                // Zeros stay zero; a sum past the top of the 16 bits saturates, and is
                // clamped below.
                let sum = _mm256_andnot_si256(zero, _mm256_adds_epu16(a, field));
                let subnormal =
                    _mm256_andnot_si256(zero, _mm256_cmpgt_epi16(set(w.min_normal()), a));
                if k > 0 && _mm256_movemask_epi8(subnormal) != 0 {
                    // SAFETY: AVX2 by this function's contract; the format takes `k`.
                    let lifted = unsafe { lifted_avx2(a, k, w) };
                    _mm256_blendv_epi8(sum, lifted, subnormal)
                } else {
                    sum
                }
            } else {
                // Below the smallest normal the difference is tiny or saturates at zero: its
                // code is zero either way.
                _mm256_subs_epu16(a, field)
            };
            // SAFETY: AVX2 by this function's contract.
            match unsafe { e4m3_codes_avx2(_mm256_min_epu16(scaled, set(w.e4m3_max())), x, w) } {
                Some(bytes) => *c = bytes,
                None => by_shifts = false,
            }
        }
        if by_shifts {
            // SAFETY: `o` holds 32 bytes.
            unsafe {
                _mm_storeu_si128(o.as_mut_ptr().cast(), codes[0]);
                _mm_storeu_si128(o.as_mut_ptr().add(16).cast(), codes[1]);
            }
        } else {
            ok &= crate::encode8::pow2_lanes(s, w, &[k], o);
        }
    }
    ok && _mm256_testz_si256(bad, bad) == 1
}

/// [`Word::lifted`] on 16 magnitudes `a` of the format `w` (16-bit lanes) at once: each
/// converted to float32 (normalised), its bits moved to the format's places and its
/// exponent raised by `k`; negative results (products below the format's normals) saturate
/// to 0 in the packing.
///
/// # Safety
/// The CPU runs AVX2; `w` takes the shift `k` (from 1 up).
#[inline(always)]
unsafe fn lifted_avx2(a: __m256i, k: i32, w: &Word) -> __m256i {
    // SAFETY: AVX2 by the caller's contract.
    unsafe {
        let moved = _mm_cvtsi32_si128(i32::from(23 - w.mantissa));
        let raise = _mm256_set1_epi32((k - 126 - i32::from(w.mantissa)) << w.mantissa);
        let low = lifted_eight(_mm256_castsi256_si128(a), moved, raise);
        let high = lifted_eight(_mm256_extracti128_si256::<1>(a), moved, raise);
        // The packing works per 128-bit half: low 0-3, high 0-3, low 4-7, high 4-7.
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(low, high))
    }
}

/// [`lifted_avx2`] on eight magnitudes, as 32-bit lanes.
///
/// # Safety
/// The CPU runs AVX2.
#[inline(always)]
unsafe fn lifted_eight(h: __m128i, moved: __m128i, raise: __m256i) -> __m256i {
    // SAFETY: AVX2 by the caller's contract.
    unsafe {
        let v = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(h)));
        _mm256_add_epi32(_mm256_srl_epi32(v, moved), raise)
    }
}

/// `x` (float32 bits) divided or multiplied by `f`, as float32 bits.
#[inline(always)]
unsafe fn product<const DIVIDE: bool>(x: __m512i, f: __m512) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let xf = _mm512_castsi512_ps(x);
        _mm512_castps_si512(if DIVIDE {
            _mm512_div_ps(xf, f)
        } else {
            _mm512_mul_ps(xf, f)
        })
    }
}

/// `encode8::e4m3_code16` on 32 magnitudes `a` of the format `w` (16-bit lanes) at once, at
/// most 448: from float8's smallest normal (2^-6) up, the mantissa bits float8 lacks
/// dropped to nearest-even and the exponent rebiased; below, the value as a multiple of
/// 2^-9 by a shift of the significand, nearest-even.
#[inline(always)]
unsafe fn e4m3_codes16(a: __m512i, w: &Word) -> __m512i {
    // SAFETY: AVX-512 F and BW by the caller's contract.
    unsafe {
        let set = |v: u16| _mm512_set1_epi16(v as i16);
        let dropped = _mm_cvtsi32_si128(i32::from(w.dropped()));
        let odd = _mm512_and_si512(_mm512_srl_epi16(a, dropped), set(1));
        let rounded = _mm512_add_epi16(_mm512_add_epi16(a, set(w.half_less_one())), odd);
        let normal = _mm512_sub_epi16(_mm512_srl_epi16(rounded, dropped), set(w.rebias()));
        let below = _mm512_cmplt_epu16_mask(a, set(w.pow2(-6)));
        // At most 2^-10 rounds to 0. Scaled weights rarely fall between that and 2^-6:
        // where no lane does, the shifts below are not needed.
        let zero = _mm512_cmple_epu16_mask(a, set(w.pow2(-10)));
        if below & !zero == 0 {
            return _mm512_maskz_mov_epi16(!below, normal);
        }
        // The value is significand · 2^(exponent - bias - mantissa): a multiple of 2^-9
        // once shifted right by bias + mantissa - 9 - exponent (at most 15: only zeros
        // come from further down).
        let exponent = _mm512_srl_epi16(a, _mm_cvtsi32_si128(i32::from(w.mantissa)));
        let top = set(w.bias + w.mantissa - 9);
        let shift = _mm512_min_epu16(_mm512_subs_epu16(top, exponent), set(15));
        let fraction = (1 << w.mantissa) - 1;
        let significand = _mm512_or_si512(_mm512_and_si512(a, set(fraction)), set(fraction + 1));
        let half = _mm512_sub_epi16(
            _mm512_sllv_epi16(set(1), _mm512_sub_epi16(shift, set(1))),
            set(1),
        );
        let kept_odd = _mm512_and_si512(_mm512_srlv_epi16(significand, shift), set(1));
        let sum = _mm512_add_epi16(_mm512_add_epi16(significand, half), kept_odd);
        let small = _mm512_srlv_epi16(sum, shift);
        _mm512_mask_blend_epi16(below, normal, small)
    }
}

/// [`crate::encode8::pow2_groups`] on AVX-512 for bfloat16 or float16 (`F16`).
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds 64 bytes and `out` 32 per shift, each
/// shift one the format takes ([`Word::takes_shift`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn pow2_groups<const F16: bool>(
    src: &[u8],
    shifts: &[i32],
    out: &mut [u8],
) -> bool {
    let w = if F16 { &FLOAT16 } else { &BFLOAT16 };
    let set = |v: u16| _mm512_set1_epi16(v as i16);
    let mut bad: __mmask32 = 0;
    for (g, &k) in shifts.iter().enumerate() {
        // SAFETY: group `g`'s 64 input bytes and 32 output bytes lie inside both.
        unsafe {
            let x = _mm512_loadu_si512(src.as_ptr().add(64 * g).cast());
            let a = _mm512_and_si512(x, set(0x7FFF));
            // inf and NaN.
            bad |= _mm512_cmpge_epu16_mask(a, set(w.inf()));
            let field = set(w.field(k));
            let scaled = if k >= 0 {
                let nonzero = _mm512_test_epi16_mask(a, a);
                // Zeros stay zero; a sum past the top of the 16 bits saturates, and is
                // clamped below.
                let sum = _mm512_maskz_adds_epu16(nonzero, a, field);
                let subnormal = _mm512_cmplt_epu16_mask(a, set(w.min_normal())) & nonzero;
                if k > 0 && subnormal != 0 {
                    // A subnormal shifted up is normalised first.
                    _mm512_mask_mov_epi16(sum, subnormal, lifted(a, k, w))
                } else {
                    sum
                }
            } else {
                // Below the smallest normal the difference is tiny or saturates at zero: its
                // code is zero either way.
                _mm512_subs_epu16(a, field)
            };
            let codes = e4m3_codes16(_mm512_min_epu16(scaled, set(w.e4m3_max())), w);
            // The sign bit to the code's top bit.
            let signed =
                _mm512_ternarylogic_epi32::<0xF8>(codes, _mm512_srli_epi16::<8>(x), set(0x80));
            _mm256_storeu_si256(
                out.as_mut_ptr().add(32 * g).cast(),
                _mm512_cvtepi16_epi8(signed),
            );
        }
    }
    bad == 0
}

/// [`Word::lifted`] on 32 magnitudes `a` of the format `w` (16-bit lanes) at once, as
/// [`lifted_avx2`] does it.
///
/// # Safety
/// The CPU runs AVX-512 F and BW; `w` takes the shift `k` (from 1 up).
#[inline(always)]
unsafe fn lifted(a: __m512i, k: i32, w: &Word) -> __m512i {
    // SAFETY: AVX-512 by the caller's contract.
    unsafe {
        let moved = _mm_cvtsi32_si128(i32::from(23 - w.mantissa));
        let raise = _mm512_set1_epi32((k - 126 - i32::from(w.mantissa)) << w.mantissa);
        let low = lifted_sixteen(_mm512_castsi512_si256(a), moved, raise);
        let high = lifted_sixteen(_mm512_extracti64x4_epi64::<1>(a), moved, raise);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high)
    }
}

/// [`lifted`] on sixteen magnitudes, as 32-bit lanes, saturated back to 16 bits.
///
/// # Safety
/// The CPU runs AVX-512 F and BW.
#[inline(always)]
unsafe fn lifted_sixteen(h: __m256i, moved: __m128i, raise: __m512i) -> __m256i {
    // SAFETY: AVX-512 by the caller's contract.
    unsafe {
        let v = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(h)));
        let product = _mm512_add_epi32(_mm512_srl_epi32(v, moved), raise);
        _mm512_cvtusepi32_epi16(_mm512_max_epi32(product, _mm512_setzero_si512()))
    }
}
