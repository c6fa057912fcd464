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
pub(crate) struct Word {
    dtype: DType,
    pub(crate) mantissa: u16,
    pub(crate) bias: u16,
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
    pub(crate) const fn pow2(&self, e: i16) -> u16 {
        ((self.bias as i16 + e) as u16) << self.mantissa
    }

    /// The mantissa bits float8_e4m3fn lacks (it keeps 3).
    pub(crate) const fn dropped(&self) -> u16 {
        self.mantissa - 3
    }

    /// What rounds a normal magnitude to float8 when added with the lowest kept bit: half
    /// a unit of that bit, less one.
    pub(crate) const fn half_less_one(&self) -> u16 {
        (1 << (self.dropped() - 1)) - 1
    }

    /// A normal magnitude's bits, shifted right by [`dropped`](Word::dropped), less this
    /// are its float8 code (float8's exponent bias is 7).
    pub(crate) const fn rebias(&self) -> u16 {
        (self.bias - 7) << 3
    }

    /// float8_e4m3fn's largest value, 448 = 1.75 · 2^8, the clamp.
    pub(crate) const fn e4m3_max(&self) -> u16 {
        self.pow2(8) | (3 << (self.mantissa - 2))
    }

    /// Infinity's magnitude (the exponent field all ones; NaN above).
    pub(crate) const fn inf(&self) -> u16 {
        0x7FFF & !((1 << self.mantissa) - 1)
    }

    /// The smallest normal magnitude (below it, subnormals).
    pub(crate) const fn min_normal(&self) -> u16 {
        1 << self.mantissa
    }

    /// Whether [`pow2_groups`] takes a shift by `k`: -127 ..= 127, and `|k|` moved into the
    /// exponent field fits 16 bits (bfloat16: every such `k`; float16: -63 ..= 63).
    pub(crate) const fn takes_shift(&self, k: i32) -> bool {
        k.unsigned_abs() <= 127 && k.unsigned_abs() << self.mantissa <= 0xFFFF
    }

    /// The exponent field's part of a shift by `|k|` (which [`takes_shift`](Word::takes_shift)).
    pub(crate) const fn field(&self, k: i32) -> u16 {
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
    pub(crate) fn lifted(&self, a: u16, k: i32) -> u16 {
        let moved = (f32::from(a).to_bits() >> (23 - self.mantissa)) as i32;
        let product = moved + ((k - 126 - i32::from(self.mantissa)) << self.mantissa);
        product.clamp(0, 0xFFFF) as u16
    }

    /// The value of magnitude bits `a` (exact).
    #[inline(always)]
    pub(crate) fn value(&self, a: u16) -> f32 {
        half_value(a, self.dtype)
    }
}

/// bfloat16 and float16, as the float8 rounding on 16-bit lanes reads them.
pub(crate) const BFLOAT16: Word = Word::of(DType::BFloat16);
pub(crate) const FLOAT16: Word = Word::of(DType::Float16);

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
pub(crate) fn pow2_lanes(src: &[u8], w: &Word, shifts: &[i32], out: &mut [u8]) -> bool {
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
pub(crate) fn by_lanes<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
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
pub(crate) fn by_halves<const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    out: &mut [u8],
) -> bool {
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
use crate::x86::encode8 as x86;

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
