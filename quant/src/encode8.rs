//! float8_e4m3fn elements (FP8 per tensor, per channel, in 128×128 blocks; MXFP8) quantized in
//! one pass: a run of elements that share a factor is read (bfloat16, float32 or float16),
//! divided or multiplied by it, rounded to the weight's dtype where the reference computes there
//! (compressed-tensors' bfloat16 and float16 weights), clamped to 448 and rounded to float8
//! (nearest-even: three mantissa bits kept from 2^-6, steps of 2^-9 below) — instead of a
//! float32 buffer written and read back by the SIMD cast. On AVX-512 16 elements per step in
//! registers (`narrow::code`), or 32 where the products are rounded to bfloat16 or float16
//! (compressed-tensors' arithmetic on bfloat16 and float16 weights): the float8 rounding then
//! runs on 16-bit lanes (`x86::words`, with AVX512_BF16's rounding instruction where the CPU has
//! it, on AVX2 `x86::words_avx2`, 16 a step; `x86::halves_words`, float16 read by `vcvtph2ps`
//! and rounded by `vcvtps2ph`, on AVX2 with F16C `x86::halves_words_avx2`, 16 a step);
//! elsewhere the same steps on one element, a loop LLVM
//! vectorises for the chosen instruction set ([`by_lanes`], [`by_halves`]). MX groups of
//! bfloat16 and float16, whose factors are powers of two, skip the float32 lanes: an exponent
//! shift (a subnormal shifted up normalised first) and the rounding on 16-bit lanes, 32 elements
//! a step on AVX-512 ([`pow2_groups`]). inf and NaN are
//! reported for the general path (`quantize::encode_general`, the definition the tests there
//! hold this to).

use dtcast_dtype::DType;

use crate::arith::{f16_value, half_value, round_f16};
use crate::encode4::Rules;

/// Whether the one-pass form serves: float8_e4m3fn elements, clamped.
pub(crate) fn supports(element: dtcast_dtype::DType, clamp: bool) -> bool {
    element == dtcast_dtype::DType::Float8E4M3Fn && clamp
}

/// A run's kernel, picked once for its input dtype and rules ([`kernel`]).
pub(crate) type Kernel = unsafe fn(&[u8], f32, &mut [u8]) -> bool;

/// The kernel for `input` elements (float32, bfloat16 or float16) under `rules` (its
/// `unsigned_zero` is compressed-tensors' float4 rule, not float8's: unused). Call it only where
/// [`supports`] said so, with a finite nonzero factor: `kernel(src, f, out)` quantizes `src`
/// (one element per byte of `out`) and returns false, with `out` unspecified, where an element
/// is inf or NaN, or its scaled value is (a float16 quotient from 65520 up rounds to inf).
pub(crate) fn kernel(input: DType, rules: Rules) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if let Some(kernel) = x86_kernel(input, rules) {
        return kernel;
    }
    loop_kernel(input, rules)
}

/// [`kernel`]'s x86 forms, where this CPU runs one for `input` and `rules`.
#[cfg(target_arch = "x86_64")]
fn x86_kernel(input: DType, rules: Rules) -> Option<Kernel> {
    let avx512 = crate::lookup4::avx512();
    if input == DType::Float16 {
        // compressed-tensors' arithmetic on float16 weights: the quotient rounded to float16.
        let round = rules.arithmetic == DType::Float16;
        if avx512 {
            return Some(match (rules.divide, round) {
                // The products rounded to float16 are rounded to float8 on 16-bit lanes.
                (true, true) => x86::halves_words::<true>,
                (true, false) => x86::run::<false, true, true, false>,
                (false, true) => x86::halves_words::<false>,
                (false, false) => x86::run::<false, true, false, false>,
            });
        }
        return crate::lookup4::avx2().then_some(x86_halves_avx2(rules.divide, round));
    }
    let bf16 = input == DType::BFloat16;
    if avx512 {
        return Some(match (bf16, rules.divide, rules.rounds_bf16()) {
            // The products rounded to bfloat16 are rounded to float8 on 16-bit lanes.
            (true, true, true) if crate::lookup4::avx512_bf16() => x86::words_bf16::<true>,
            (true, false, true) if crate::lookup4::avx512_bf16() => x86::words_bf16::<false>,
            (true, true, true) => x86::words::<true>,
            (true, false, true) => x86::words::<false>,
            (true, true, false) => x86::run::<true, false, true, false>,
            (true, false, false) => x86::run::<true, false, false, false>,
            (false, true, true) => x86::run::<false, false, true, true>,
            (false, true, false) => x86::run::<false, false, true, false>,
            (false, false, true) => x86::run::<false, false, false, true>,
            (false, false, false) => x86::run::<false, false, false, false>,
        });
    }
    // The same 16-bit lanes on AVX2, 16 elements a step.
    let words = crate::lookup4::avx2() && bf16 && rules.rounds_bf16();
    words.then_some(if rules.divide {
        x86::words_avx2::<true>
    } else {
        x86::words_avx2::<false>
    })
}

/// `x86::halves_words_avx2` or `x86::halves_avx2` for these rules.
#[cfg(target_arch = "x86_64")]
fn x86_halves_avx2(divide: bool, round: bool) -> Kernel {
    match (divide, round) {
        // The products rounded to float16 are rounded to float8 on 16-bit lanes.
        (true, true) => x86::halves_words_avx2::<true>,
        (true, false) => x86::halves_avx2::<true>,
        (false, true) => x86::halves_words_avx2::<false>,
        (false, false) => x86::halves_avx2::<false>,
    }
}

/// [`kernel`]'s loop form ([`by_lanes`], [`by_halves`]), whatever the CPU.
fn loop_kernel(input: DType, rules: Rules) -> Kernel {
    if input == DType::Float16 {
        return match (rules.divide, rules.arithmetic == DType::Float16) {
            (true, true) => by_halves::<true, true>,
            (true, false) => by_halves::<true, false>,
            (false, true) => by_halves::<false, true>,
            (false, false) => by_halves::<false, false>,
        };
    }
    let bf16 = input == DType::BFloat16;
    match (bf16, rules.divide, rules.rounds_bf16()) {
        (true, true, true) => by_lanes::<true, true, true>,
        (true, true, false) => by_lanes::<true, true, false>,
        (true, false, true) => by_lanes::<true, false, true>,
        (true, false, false) => by_lanes::<true, false, false>,
        (false, true, true) => by_lanes::<false, true, true>,
        (false, true, false) => by_lanes::<false, true, false>,
        (false, false, true) => by_lanes::<false, false, true>,
        (false, false, false) => by_lanes::<false, false, false>,
    }
}

/// A 16-bit float input (bfloat16, float16) as the float8_e4m3fn rounding on its bits needs
/// it: its dtype, mantissa bits and bias, from the dtype table.
struct Word {
    dtype: DType,
    mantissa: u16,
    bias: u16,
}

impl Word {
    const fn of(dtype: DType) -> Word {
        match dtype.float_format() {
            Some(f) => Word {
                dtype,
                mantissa: f.mantissa_bits as u16,
                bias: f.bias as u16,
            },
            None => panic!("a 16-bit float dtype"),
        }
    }

    /// The bits of `2^e` (normal in this format).
    const fn pow2(&self, e: i16) -> u16 {
        ((self.bias as i16 + e) as u16) << self.mantissa
    }

    /// The mantissa bits float8_e4m3fn lacks (it keeps 3).
    const fn dropped(&self) -> u16 {
        self.mantissa - 3
    }

    /// What rounds a normal magnitude to float8 when added with the lowest kept bit: half
    /// a unit of that bit, less one.
    const fn half_less_one(&self) -> u16 {
        (1 << (self.dropped() - 1)) - 1
    }

    /// A normal magnitude's bits, shifted right by [`dropped`](Word::dropped), less this
    /// are its float8 code (float8's exponent bias is 7).
    const fn rebias(&self) -> u16 {
        (self.bias - 7) << 3
    }

    /// float8_e4m3fn's largest value, 448 = 1.75 · 2^8, the clamp.
    const fn e4m3_max(&self) -> u16 {
        self.pow2(8) | (3 << (self.mantissa - 2))
    }

    /// Infinity's magnitude (the exponent field all ones; NaN above).
    const fn inf(&self) -> u16 {
        0x7FFF & !((1 << self.mantissa) - 1)
    }

    /// The smallest normal magnitude (below it, subnormals).
    const fn min_normal(&self) -> u16 {
        1 << self.mantissa
    }

    /// Whether [`pow2_groups`] takes a shift by `k`: -127 ..= 127, and `|k|` moved into the
    /// exponent field fits 16 bits (bfloat16: every such `k`; float16: -63 ..= 63).
    const fn takes_shift(&self, k: i32) -> bool {
        k.unsigned_abs() <= 127 && k.unsigned_abs() << self.mantissa <= 0xFFFF
    }

    /// The exponent field's part of a shift by `|k|` (which [`takes_shift`](Word::takes_shift)).
    const fn field(&self, k: i32) -> u16 {
        (k.unsigned_abs() << self.mantissa) as u16
    }

    /// The magnitude bits of subnormal `a` times `2^k` (`k` from 1 up, taken by
    /// [`takes_shift`](Word::takes_shift)), exact where the product is normal; where it is not,
    /// 0 (its float8 code is zero either way: it is below the format's smallest normal, 2^-14
    /// at most). The subnormal is
    /// `a · 2^(1 - bias - mantissa)`, and `a` as a float32 is `a` normalised: its bits moved to
    /// this format's places are `a · 2^(127 - bias)`'s, so the exponent field takes
    /// `k + 1 - mantissa - 127`. (float16's largest, 9 significant bits shifted by 63, stays
    /// below 2^16.)
    #[inline(always)]
    fn lifted(&self, a: u16, k: i32) -> u16 {
        let moved = (f32::from(a).to_bits() >> (23 - self.mantissa)) as i32;
        let product = moved + ((k - 126 - i32::from(self.mantissa)) << self.mantissa);
        product.clamp(0, 0xFFFF) as u16
    }

    /// The value of magnitude bits `a` (exact).
    #[inline(always)]
    fn value(&self, a: u16) -> f32 {
        half_value(a, self.dtype)
    }
}

/// bfloat16 and float16, as the float8 rounding on 16-bit lanes reads them.
const BFLOAT16: Word = Word::of(DType::BFloat16);
const FLOAT16: Word = Word::of(DType::Float16);

/// MX float8 of bfloat16 or float16 (`input`) groups of 32 whose factors are powers of two:
/// group `g`'s elements times `2^shifts[g]`, clamped to 448 and rounded to float8_e4m3fn on
/// 16-bit lanes (AVX-512: 32 a step; AVX2: 16; elsewhere [`pow2_lanes`], a loop LLVM
/// vectorises). The product is an exponent shift, exact wherever it is normal, and where it is
/// not its code is zero whatever the arithmetic before it (rounding to the input's dtype or
/// not), the sign kept; a subnormal shifted up is normalised first ([`Word::lifted`]). False,
/// with `out` unspecified, where an element is inf or NaN (the per-run kernels' business), or
/// where `input` or a shift is not one this form takes (bfloat16: -127 ..= 127; float16:
/// -63 ..= 63).
pub(crate) fn pow2_groups(src: &[u8], input: DType, shifts: &[i32], out: &mut [u8]) -> bool {
    let Some(w) = [&BFLOAT16, &FLOAT16].into_iter().find(|w| w.dtype == input) else {
        return false;
    };
    if src.len() != out.len() * 2
        || out.len() != shifts.len() * 32
        || shifts.iter().any(|&k| !w.takes_shift(k))
    {
        return false;
    }
    let f16 = input == DType::Float16;
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx512() {
        // SAFETY: `avx512()` says this CPU runs AVX-512 F, BW, VL and DQ; the lengths match
        // and the format takes every shift (checked above).
        return unsafe {
            if f16 {
                x86::pow2_groups::<true>(src, shifts, out)
            } else {
                x86::pow2_groups::<false>(src, shifts, out)
            }
        };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx2() {
        // SAFETY: `avx2()` says this CPU runs AVX2; the lengths match and the format takes
        // every shift (checked above).
        return unsafe {
            if f16 {
                x86::pow2_groups_avx2::<true>(src, shifts, out)
            } else {
                x86::pow2_groups_avx2::<false>(src, shifts, out)
            }
        };
    }
    crate::simd::with_best_isa(
        #[inline(always)]
        || {
            if f16 {
                pow2_lanes(src, &FLOAT16, shifts, out)
            } else {
                pow2_lanes(src, &BFLOAT16, shifts, out)
            }
        },
    )
}

/// [`pow2_groups`] as a loop over each group's elements of the format `w` (shifts already
/// checked), the steps of the AVX-512 form on one element: the definition it is tested against.
/// A group holding a subnormal shifted up is done again, normalising it ([`Word::lifted`]): only
/// then, because the conversion it takes would cost every group a third of its speed.
#[inline(always)]
fn pow2_lanes(src: &[u8], w: &Word, shifts: &[i32], out: &mut [u8]) -> bool {
    let mut bad = false;
    let groups = src
        .as_chunks::<64>()
        .0
        .iter()
        .zip(out.as_chunks_mut::<32>().0);
    for ((group, codes), &k) in groups.zip(shifts) {
        let (ok, subnormal) = pow2_group::<false>(group, w, k, codes);
        bad |= !ok;
        if subnormal && k > 0 {
            pow2_group::<true>(group, w, k, codes);
        }
    }
    !bad
}

/// One group of [`pow2_lanes`] (`LIFT`: with its subnormals normalised): whether no element is
/// inf or NaN, and whether one is a subnormal other than zero. (Both as values returned, not
/// written through a reference, which LLVM compiles to a slightly faster loop.)
#[inline(always)]
fn pow2_group<const LIFT: bool>(
    group: &[u8; 64],
    w: &Word,
    k: i32,
    codes: &mut [u8; 32],
) -> (bool, bool) {
    let field = w.field(k);
    let (mut bad, mut subnormal) = (false, false);
    for (code, x) in codes.iter_mut().zip(group.as_chunks::<2>().0) {
        let x = u16::from_le_bytes(*x);
        let a = x & 0x7FFF;
        bad |= a >= w.inf();
        // (Zero wraps to the top: one compare.)
        subnormal |= a.wrapping_sub(1) < w.min_normal() - 1;
        // Below the smallest normal a difference saturates or is tiny: its code is zero either
        // way. Zeros stay zero.
        let scaled = if k < 0 {
            a.saturating_sub(field)
        } else if LIFT && a < w.min_normal() {
            w.lifted(a, k)
        } else if a == 0 {
            0
        } else {
            a.saturating_add(field)
        };
        *code = e4m3_code16(scaled.min(w.e4m3_max()), w) | ((x >> 8) & 0x80) as u8;
    }
    (!bad, subnormal)
}

/// The float8_e4m3fn code of a magnitude `a` of the format `w` at most 448: from float8's
/// smallest normal (2^-6) up, the mantissa bits float8 lacks dropped to nearest-even and the
/// exponent rebiased; below it a count of 2^-9, the value times 2^9 (exact: a power of two that
/// only raises it) rounded to an integer nearest-even by adding 2^23 in float32 — the float
/// addition instead of a variable shift of the significand, which targets without per-lane
/// shifts (the x86-64 baseline's SSE2) cannot vectorise.
#[inline(always)]
fn e4m3_code16(a: u16, w: &Word) -> u8 {
    let rounded = a + w.half_less_one() + ((a >> w.dropped()) & 1);
    let normal = (rounded >> w.dropped()).wrapping_sub(w.rebias());
    let quanta = w.value(a) * 512.0 + 8_388_608.0;
    let small = quanta.to_bits().wrapping_sub(0x4B00_0000) as u16;
    (if a < w.pow2(-6) { small } else { normal }) as u8
}

/// [`kernel`]'s run as a loop over the elements, compiled for the chosen instruction set: each
/// element through `narrow::code`'s steps for float8_e4m3fn, one lane's worth.
fn by_lanes<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    out: &mut [u8],
) -> bool {
    crate::simd::with_best_isa(
        #[inline(always)]
        || {
            if BF16 {
                let src = src.as_chunks::<2>().0;
                codes::<DIVIDE, ROUND, 2>(src, f, out, |b| u32::from(u16::from_le_bytes(*b)) << 16)
            } else {
                codes::<DIVIDE, ROUND, 4>(src.as_chunks::<4>().0, f, out, |b| {
                    u32::from_le_bytes(*b)
                })
            }
        },
    )
}

/// [`kernel`]'s run for float16 input as a loop over the elements, compiled for the chosen
/// instruction set: each element read exactly ([`f16_value`]), scaled, rounded to float16 when
/// `ROUND` ([`round_f16`]), then `narrow::code`'s steps.
fn by_halves<const DIVIDE: bool, const ROUND: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
    crate::simd::with_best_isa(
        #[inline(always)]
        || {
            let round = |y: f32| if ROUND { round_f16(y) } else { y };
            codes_with::<DIVIDE, 2>(src.as_chunks::<2>().0, f, out, round, |b| {
                f16_value(u16::from_le_bytes(*b)).to_bits()
            })
        },
    )
}

/// The codes of `src` (elements of `N` bytes, `bits` their float32 bits) scaled by `f` into
/// `out`, rounded to bfloat16 first when `ROUND`; false where an element or its scaled value is
/// inf or NaN.
#[inline(always)]
fn codes<const DIVIDE: bool, const ROUND: bool, const N: usize>(
    src: &[[u8; N]],
    f: f32,
    out: &mut [u8],
    bits: impl Fn(&[u8; N]) -> u32,
) -> bool {
    // To bfloat16, nearest-even (a NaN is reported, whatever its bits become).
    let round = |y: f32| {
        let y = y.to_bits();
        f32::from_bits(if ROUND {
            y.wrapping_add(0x7FFF + ((y >> 16) & 1)) & 0xFFFF_0000
        } else {
            y
        })
    };
    codes_with::<DIVIDE, N>(src, f, out, round, bits)
}

/// [`codes`] with the rounding of the scaled value given (`round`).
#[inline(always)]
fn codes_with<const DIVIDE: bool, const N: usize>(
    src: &[[u8; N]],
    f: f32,
    out: &mut [u8],
    round: impl Fn(f32) -> f32,
    bits: impl Fn(&[u8; N]) -> u32,
) -> bool {
    let mut bad = 0u32;
    for (o, x) in out.iter_mut().zip(src) {
        let x = f32::from_bits(bits(x));
        let y = round(if DIVIDE { x / f } else { x * f }).to_bits();
        let a = y & 0x7FFF_FFFF;
        bad |= u32::from(a >= 0x7F80_0000);
        // Clamped to 448; from 2^-6 three mantissa bits kept, nearest-even, by one addition on
        // the bits; below, a multiple of 2^-9 rounded by the float addition of 2^23.
        let a = a.min(0x43E0_0000);
        let normal = ((a + 0x7_FFFF + ((a >> 20) & 1)) >> 20).wrapping_sub(120 << 3);
        let small = (f32::from_bits(a) * 512.0 + 8_388_608.0).to_bits() - 0x4B00_0000;
        let code = if a < 0x3C80_0000 { small } else { normal };
        *o = (code | ((y >> 24) & 0x80)) as u8;
    }
    bad == 0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use super::{Word, BFLOAT16, FLOAT16};
    use crate::narrow;

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

    /// [`super::kernel`]'s run on AVX-512 (bfloat16 input where `BF16`, float16 where `F16`,
    /// else float32; float16 products are not rounded here).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn run<
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

    /// [`super::kernel`]'s run on AVX-512 for bfloat16 input whose products are rounded to
    /// bfloat16 (compressed-tensors' arithmetic), 32 elements a step: the products on two
    /// vectors of 32-bit lanes (each bfloat16 is the top half of its float32, so both come from
    /// one load by a shift and a mask), rounded to bfloat16 and merged back into element order
    /// on 16-bit lanes, where the clamp and the float8 rounding do 32 at once ([`e4m3_codes16`]:
    /// the code [`super::codes`] gives the same bfloat16 value).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` bfloat16 elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn words<const DIVIDE: bool>(src: &[u8], f: f32, out: &mut [u8]) -> bool {
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
    pub(super) unsafe fn words_bf16<const DIVIDE: bool>(
        src: &[u8],
        f: f32,
        out: &mut [u8],
    ) -> bool {
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
                        15, 31, 14, 30, 13, 29, 12, 28, 11, 27, 10, 26, 9, 25, 8, 24, 7, 23, 6, 22,
                        5, 21, 4, 20, 3, 19, 2, 18, 1, 17, 0, 16,
                    );
                    let x = _mm512_permutexvar_epi16(order, x);
                    let first = _mm512_and_si512(x, _mm512_set1_epi32(0xFFFF_0000u32 as i32));
                    let second = _mm512_slli_epi32::<16>(x);
                    let (first, second) =
                        (product::<DIVIDE>(first, f), product::<DIVIDE>(second, f));
                    let rounded = _mm512_cvtne2ps_pbh(
                        _mm512_castsi512_ps(second),
                        _mm512_castsi512_ps(first),
                    );
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

    /// [`super::kernel`]'s run on AVX-512 for float16 input whose products are rounded to
    /// float16 (compressed-tensors' arithmetic on float16 weights), 32 elements a step: each
    /// half of the step read by `vcvtph2ps`, scaled, and rounded back to float16 by
    /// `vcvtps2ph` (nearest-even, as torch's float16 arithmetic rounds), the halves joined on
    /// 16-bit lanes, where the clamp and the float8 rounding do 32 at once ([`e4m3_codes16`]
    /// over float16 bits).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` float16 elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn halves_words<const DIVIDE: bool>(
        src: &[u8],
        f: f32,
        out: &mut [u8],
    ) -> bool {
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

    /// [`super::kernel`]'s run for float16 input on AVX2 (with F16C, which dtcast's AVX2 set
    /// implies) whose products are not rounded to float16 ([`halves_words_avx2`] takes those),
    /// 8 elements a step on 32-bit lanes: each element read by `vcvtph2ps`, scaled, then
    /// `narrow::code`'s steps for float8_e4m3fn (clamped to 448; from 2^-6 three mantissa bits
    /// kept by one addition on the bits, below a multiple of 2^-9 by the conversion to an
    /// integer, nearest-even); the last partial step by the loop form ([`super::by_halves`]).
    ///
    /// # Safety
    /// The CPU runs AVX2 and F16C; `src` holds `out.len()` float16 elements.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn halves_avx2<const DIVIDE: bool>(
        src: &[u8],
        f: f32,
        out: &mut [u8],
    ) -> bool {
        debug_assert_eq!(src.len(), out.len() * 2);
        let factor = _mm256_set1_ps(f);
        let set = |v: u32| _mm256_set1_epi32(v as i32);
        // Byte 0 of each 32-bit lane to the low four bytes of each 128-bit half.
        let low_bytes = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1,
            -1, -1, -1, -1, -1, -1, -1, -1, -1,
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
        let tail = super::by_halves::<DIVIDE, false>(&src[2 * done..], f, &mut out[done..]);
        tail && _mm256_testz_si256(bad, bad) == 1
    }

    /// [`words`] on AVX2, 16 elements a step: the products on two vectors of 32-bit lanes,
    /// rounded to bfloat16 on the bits and merged back into element order, then clamped and
    /// rounded to float8 on 16-bit lanes ([`words_avx2_loop`]).
    ///
    /// # Safety
    /// The CPU runs AVX2; `src` holds `out.len()` bfloat16 elements.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn words_avx2<const DIVIDE: bool>(
        src: &[u8],
        f: f32,
        out: &mut [u8],
    ) -> bool {
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
            |src: &[u8], out: &mut [u8]| super::by_lanes::<true, DIVIDE, true>(src, f, out);
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
    pub(super) unsafe fn halves_words_avx2<const DIVIDE: bool>(
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
        let by_loop = |src: &[u8], out: &mut [u8]| super::by_halves::<DIVIDE, true>(src, f, out);
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
    /// (16-bit lanes, [`super::e4m3_code16`]), each with the sign bit of its lane of `y`; `None`
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

    /// [`super::pow2_groups`] on AVX2 for bfloat16 or float16 (`F16`): each half group an
    /// exponent shift (a subnormal shifted up normalised first, [`lifted_avx2`]) and the float8
    /// rounding on 16-bit lanes ([`e4m3_codes_avx2`]); a group with a float8 subnormal other
    /// than 0 by the loop form ([`super::pow2_lanes`]).
    ///
    /// # Safety
    /// The CPU runs AVX2; `src` holds 64 bytes and `out` 32 per shift, each shift one the
    /// format takes ([`Word::takes_shift`]).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pow2_groups_avx2<const F16: bool>(
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
                match unsafe { e4m3_codes_avx2(_mm256_min_epu16(scaled, set(w.e4m3_max())), x, w) }
                {
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
                ok &= super::pow2_lanes(s, w, &[k], o);
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

    /// [`super::e4m3_code16`] on 32 magnitudes `a` of the format `w` (16-bit lanes) at once, at
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
            let significand =
                _mm512_or_si512(_mm512_and_si512(a, set(fraction)), set(fraction + 1));
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

    /// [`super::pow2_groups`] on AVX-512 for bfloat16 or float16 (`F16`).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds 64 bytes and `out` 32 per shift, each
    /// shift one the format takes ([`Word::takes_shift`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn pow2_groups<const F16: bool>(
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SIMD forms (the kernel this CPU gets, and AVX-512's and AVX2's 16-bit forms where
    /// the CPU has them) give the loop form's bytes and verdicts (the quantize tests hold the
    /// loop form to the references and the general path): random float32 and bfloat16 bits,
    /// values around float8's rounding points and 448, factors from tiny to huge, every rule,
    /// lengths that end inside a 16-element step.
    #[test]
    fn the_simd_forms_give_the_loops_bytes() {
        let mut next = crate::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut compared = 0;
        for round in 0..400 {
            let n = (next() % 70) as usize;
            let values: Vec<u32> = (0..n)
                .map(|_| {
                    let r = next();
                    // Every fifth round only values that scale into float8's normal range
                    // (for the factors that keep them there): runs of 32 without one
                    // subnormal.
                    match if round % 5 == 1 { 2 } else { r % 3 } {
                        0 => r as u32,
                        // float8's ties and their neighbours, times powers of two.
                        1 => {
                            let odd = ((r >> 8) % 16 * 2 + 1) as f32 / 32.0;
                            let x = (1.0 + odd) * 2f32.powi((r >> 16) as i32 % 20 - 10);
                            x.to_bits()
                                .wrapping_add((r >> 40) as u32 % 3)
                                .wrapping_sub(1)
                                | (r as u32 & 0x8000_0000)
                        }
                        _ => (f32::from_bits(0x3F00_0000 | (r as u32 & 0x807F_FFFF)) * 300.0)
                            .to_bits(),
                    }
                })
                .filter(|b| round % 4 == 0 || b & 0x7F80_0000 != 0x7F80_0000)
                .collect();
            let f = [1.0f32, 0.37, 448.0 / 3.1, 1e-30, 3e30, 2f32.powi(-9)][round % 6];
            for input in [DType::Float32, DType::BFloat16, DType::Float16] {
                let bf16 = input == DType::BFloat16;
                let src: Vec<u8> = if bf16 {
                    (values.iter())
                        .flat_map(|b| ((b >> 16) as u16).to_le_bytes())
                        .collect()
                } else if input == DType::Float16 {
                    (values.iter())
                        .flat_map(|&b| crate::arith::f16_bits(f32::from_bits(b)).to_le_bytes())
                        .collect()
                } else {
                    values.iter().flat_map(|b| b.to_le_bytes()).collect()
                };
                // (Each input's own 16-bit rounding: float32 weights round to bfloat16 in
                // none of the references, but the kernels have the form.)
                let narrow = if input == DType::Float16 {
                    DType::Float16
                } else {
                    DType::BFloat16
                };
                for (divide, round_narrow) in
                    [(true, true), (true, false), (false, true), (false, false)]
                {
                    let rules = Rules {
                        divide,
                        arithmetic: if round_narrow { narrow } else { DType::Float32 },
                        unsigned_zero: false,
                    };
                    let (mut wide, mut lanes) = (vec![0u8; values.len()], vec![0u8; values.len()]);
                    // SAFETY: the loop form needs nothing; `src` holds one element per byte of
                    // the output.
                    let lanes_ok = unsafe { loop_kernel(input, rules)(&src, f, &mut lanes) };
                    // (Mutable where x86-64's forms join it.)
                    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
                    let mut kernels = vec![("best", kernel(input, rules))];
                    #[cfg(target_arch = "x86_64")]
                    if input == DType::Float16
                        && std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("f16c")
                    {
                        kernels.push(("AVX2 halves", x86_halves_avx2(divide, round_narrow)));
                    }
                    #[cfg(target_arch = "x86_64")]
                    if input == DType::Float16 && crate::lookup4::avx512() {
                        let run: Kernel = match (divide, round_narrow) {
                            (true, true) => x86::halves_words::<true>,
                            (false, true) => x86::halves_words::<false>,
                            (true, false) => x86::run::<false, true, true, false>,
                            (false, false) => x86::run::<false, true, false, false>,
                        };
                        kernels.push(("AVX-512 halves", run));
                    }
                    #[cfg(target_arch = "x86_64")]
                    if bf16 && round_narrow {
                        if crate::lookup4::avx512() {
                            let words: Kernel = if divide {
                                x86::words::<true>
                            } else {
                                x86::words::<false>
                            };
                            kernels.push(("AVX-512 words", words));
                        }
                        if std::arch::is_x86_feature_detected!("avx2") {
                            let words: Kernel = if divide {
                                x86::words_avx2::<true>
                            } else {
                                x86::words_avx2::<false>
                            };
                            kernels.push(("AVX2 words", words));
                        }
                    }
                    for (name, wide_kernel) in kernels {
                        // SAFETY: the kernels are this CPU's (checked above); `src` holds one
                        // element per byte of the output.
                        let ok = unsafe { wide_kernel(&src, f, &mut wide) };
                        let at = format!(
                            "{name}: round {round}, {input}, {divide} {round_narrow}, f {f:e}"
                        );
                        assert_eq!(ok, lanes_ok, "{at}");
                        if ok {
                            assert_eq!(wide, lanes, "{at}");
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 1000, "{compared} comparisons");
    }

    /// A SIMD form of [`pow2_groups`] (`x86::pow2_groups`, `x86::pow2_groups_avx2`).
    #[cfg(target_arch = "x86_64")]
    type Pow2Form = unsafe fn(&[u8], &[i32], &mut [u8]) -> bool;

    /// The SIMD forms of [`pow2_groups`] for the format `w` that this CPU runs, with their
    /// instruction sets' names.
    #[cfg(target_arch = "x86_64")]
    fn pow2_forms(w: &Word) -> Vec<(&'static str, Pow2Form)> {
        let f16 = w.dtype == DType::Float16;
        let mut forms: Vec<(&'static str, Pow2Form)> = Vec::new();
        if crate::lookup4::avx512() {
            let form: Pow2Form = if f16 {
                x86::pow2_groups::<true>
            } else {
                x86::pow2_groups::<false>
            };
            forms.push(("AVX-512", form));
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            let form: Pow2Form = if f16 {
                x86::pow2_groups_avx2::<true>
            } else {
                x86::pow2_groups_avx2::<false>
            };
            forms.push(("AVX2", form));
        }
        forms
    }

    /// The exponent-shift forms (the loop, and AVX-512's and AVX2's where the CPU has them) give the
    /// multiplying kernel's bytes (by `2^k`, with rounding to the input's dtype and without: the
    /// product is exact where it matters) wherever that kernel does not report, and report
    /// alike: random bfloat16 and float16 bits (subnormals, zeros, inf and NaN among them), the
    /// formats' smallest magnitudes, and values each shift takes into float8's range; every
    /// shift the format takes; every group holding inf or NaN is reported, and only those.
    #[test]
    fn the_exponent_shift_gives_the_products_bytes() {
        let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for w in [&BFLOAT16, &FLOAT16] {
            let (m, bias) = (w.mantissa, i32::from(w.bias));
            let fraction = (1u16 << m) - 1;
            let top = 0x7FFF_i32 >> m; // the exponent field of inf and NaN
            let (mut reported, mut compared, mut lifted) = (0, 0, 0);
            for k in (-127i32..=127).filter(|&k| w.takes_shift(k)) {
                for round in 0..10 {
                    let values: Vec<u16> = (0..32)
                        .map(|_| {
                            let r = next();
                            match round % 5 {
                                0 => r as u16,
                                // Subnormals and the smallest normals.
                                1 => (r as u16) & (0x8000 | (fraction << 1 | 1)),
                                2 if r.is_multiple_of(11) => {
                                    let nan = w.inf() | 0x8000 | 1;
                                    [w.inf(), nan, 0x8000, 0x0001][(r >> 8) as usize % 4]
                                }
                                // Values the shift takes into float8's normal range (2^-6 and
                                // up, past 448 too), and zeros.
                                4 if !r.is_multiple_of(13) => {
                                    let e = bias - 6 + ((r >> 16) % 14) as i32 - k;
                                    ((r as u16) & (0x8000 | fraction))
                                        | (e.clamp(1, top - 1) as u16) << m
                                }
                                4 => (r as u16) & 0x8000,
                                _ => {
                                    ((r as u16) & (0x8000 | fraction))
                                        | (((r >> 16) % 3) as u16) << m
                                }
                            }
                        })
                        .collect();
                    let src: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let mut shifted = [0u8; 32];
                    let ok = pow2_lanes(&src, w, &[k], &mut shifted);
                    #[cfg(target_arch = "x86_64")]
                    for (set, form) in pow2_forms(w) {
                        let mut wide = [0u8; 32];
                        // SAFETY: `pow2_forms` gave the forms this CPU runs; 64 bytes in, 32
                        // out, and the format takes the shift.
                        let wide_ok = unsafe { form(&src, &[k], &mut wide) };
                        assert_eq!(wide_ok, ok, "{set}: {} k {k}, {values:04x?}", w.dtype);
                        if ok {
                            assert_eq!(wide, shifted, "{set}: {} k {k}, {values:04x?}", w.dtype);
                        }
                    }
                    let special = values.iter().any(|v| v & 0x7FFF >= w.inf());
                    assert_eq!(ok, !special, "{} k {k}: {values:04x?}", w.dtype);
                    if !ok {
                        reported += 1;
                        continue;
                    }
                    let subnormal = |v: &u16| (1..w.min_normal()).contains(&(v & 0x7FFF));
                    lifted += usize::from(k > 0 && values.iter().any(subnormal));
                    let f = f32::from_bits(if k >= -126 {
                        ((k + 127) as u32) << 23
                    } else {
                        0x0040_0000
                    });
                    for arithmetic in [w.dtype, DType::Float32] {
                        let rules = Rules {
                            divide: false,
                            arithmetic,
                            unsigned_zero: false,
                        };
                        let mut product = [0u8; 32];
                        // A product that overflows is reported there, and clamped by the general
                        // path (`quantize`'s tests hold both forms to it).
                        // SAFETY: `kernel` picked what this CPU runs; `src` holds one element
                        // per byte of the output.
                        if unsafe { kernel(w.dtype, rules)(&src, f, &mut product) } {
                            let what = format!("{} k {k}, round {round}, {arithmetic}", w.dtype);
                            assert_eq!(shifted, product, "{what}, {values:04x?}");
                            compared += 1;
                        }
                    }
                }
            }
            // Not everything was left to the other kernels, and subnormals were shifted up.
            assert!(
                compared >= 8 * 60 && lifted >= 60,
                "{}: {compared} comparisons, {lifted} groups with subnormals shifted up, \
                 {reported} groups reported",
                w.dtype
            );
        }
    }
}
