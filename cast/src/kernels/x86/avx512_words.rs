//! AVX-512's kernels from bfloat16 and float16 into the byte-wide and narrower signed floats
//! (float8_e4m3fn, float8_e5m2, float8_e4m3, float8_e3m4, float6_e2m3fn, float6_e3m2fn,
//! float4_e2m1fn, ...), on 32 16-bit lanes per vector. The shared algorithm (`ml_steps::ml_code`,
//! `steps::float8` over 32-bit lanes) left these pairs compute-bound at about 0.65–0.8 of memcpy
//! on 2 cores; on 16-bit lanes each instruction does twice the elements, and AVX-512BW's variable
//! word shifts make the rounding below the target's smallest normal an integer one (the shared
//! algorithm adds a float there). The rule is the scalar lanes' own: the format and its endings
//! (overflow, inf, NaN) come from `ml::destination`, which the scalar rules read too, and the
//! property tests hold every pair to the scalar rules on every 16-bit pattern.

use core::arch::x86_64::*;

use dtcast_dtype::DType;

use super::super::steps::Step;
use super::avx512::{join2, put_u4, put_u6};
use crate::formats::Narrow;
use crate::lanes::Lane;
use crate::ml;

/// A pair's numbers, every one derived from the two formats' rows of the dtype table and the
/// destination's endings: source bits `a` (magnitude) are `E << man | mantissa`; the target keeps
/// `man - drop` mantissa bits.
#[derive(Clone, Copy)]
struct Rule {
    man: u16,
    drop: u16,
    /// The source bits of the target's smallest normal value, and of the exponent below it.
    min_normal: u16,
    rebias: u16,
    /// `s - 1` for the right shift `s` that turns a significand of exponent `E` into a count of
    /// the target's quanta is `c1 - E`.
    c1: u16,
    /// The source magnitude bits of infinity (NaN above).
    inf: u16,
    /// The magnitude code of a finite overflow: the largest finite code, or the one above it
    /// (inf, or the NaN of float8_e4m3fn and the fnuz formats), so that every larger computed code
    /// becomes it by a minimum.
    clamp: u16,
    /// The magnitude code of infinity.
    inf_code: u16,
    /// NaN's code for a positive sign, and what a negative sign flips in it (0 or the sign bit).
    nan: u16,
    nan_flip: u16,
    /// Whether the format has -0 (the fnuz formats write +0 for a negative value rounding to 0).
    neg_zero: bool,
    sign: u16,
    sign_shift: u16,
}

impl Rule {
    /// The rule of `from` → `to` in Torch rounding (`saturate`: Saturate), if AVX-512 narrows that
    /// pair on 16-bit lanes: a 16-bit float source into a signed format of fewer mantissa bits
    /// whose endings a minimum and two selects express, where no source subnormal can round to
    /// anything but zero (float16 → float8_e5m2 has them round to its subnormals: `None`).
    const fn of(from: DType, to: DType, saturate: bool) -> Option<Rule> {
        let (Some(f), Some((dst, ending))) = (from.float_format(), ml::destination(to, saturate))
        else {
            return None;
        };
        if from.bits() != 16 || dst.man_bits >= f.mantissa_bits {
            return None;
        }
        let src = Narrow::of(from);
        let man = src.man_bits;
        // A normal target value 2^(E - bias) * 1.m has exponent field E = e - bias_t + bias_s
        // in the source; its quanta below the smallest normal are 2^(1 - bias_t - man_t).
        let min_e = 1 - dst.bias + src.bias;
        let c = 1 - dst.bias - dst.man_bits as i32 + src.bias + man as i32;
        // Source subnormals (E = 0, no implicit bit) must lie 16 binades or more below the
        // target's quantum (so every one rounds to 0 whatever the shift's clamp), and the
        // smallest normal's exponent above 1 (so that rebiasing never wraps).
        if min_e < 2 || c < 16 {
            return None;
        }
        let (max, sign) = (dst.max_mag, dst.sign_bit());
        let clamp = dst.special(ending.overflow, false);
        let inf_code = dst.special(ending.inf, false);
        // Each ending must be its positive code with the value's sign or'ed in.
        let (nan, nan_negative) = if ending.nan_is_nan {
            (dst.nan(false), dst.nan(true))
        } else {
            (0, 0)
        };
        if !(clamp == max || clamp == max + 1)
            || dst.special(ending.overflow, true) != clamp | sign
            || dst.special(ending.inf, true) != inf_code | sign
            || !(nan ^ nan_negative == 0 || nan ^ nan_negative == sign)
        {
            return None;
        }
        let width = dst.exp_bits + dst.man_bits;
        Some(Rule {
            man: man as u16,
            drop: (man - dst.man_bits) as u16,
            min_normal: (min_e as u16) << man,
            rebias: ((min_e - 1) as u16) << man,
            c1: (c - 1) as u16,
            inf: (((1u32 << src.exp_bits) - 1) << man) as u16,
            clamp: clamp as u16,
            inf_code: inf_code as u16,
            nan: nan as u16,
            nan_flip: (nan ^ nan_negative) as u16,
            neg_zero: dst.neg_zero,
            sign: sign as u16,
            sign_shift: (15 - width) as u16,
        })
    }
}

/// Whether AVX-512 has a word-lane kernel for `from` → `to` (in both roundings).
pub(super) const fn applies(from: DType, to: DType) -> bool {
    Rule::of(from, to, false).is_some() && Rule::of(from, to, true).is_some()
}

/// The target codes of 32 source elements `h` (16 bits each), one per 16-bit lane.
///
/// # Safety
/// AVX-512 (F, BW).
#[inline(always)]
unsafe fn codes(h: __m512i, r: Rule) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        let set = |v: u16| _mm512_set1_epi16(v as i16);
        let (add, sub) = (_mm512_add_epi16, _mm512_sub_epi16);
        let a = _mm512_and_si512(h, set(0x7FFF));
        // From the smallest normal up: the exponent rebiased, the mantissa rounded to nearest-even
        // (a carry moves into the exponent).
        let normal = _mm512_max_epu16(a, set(r.min_normal));
        let odd = _mm512_and_si512(_mm512_srlv_epi16(normal, set(r.drop)), set(1));
        let half = set((1 << (r.drop - 1)) - 1);
        let norm = _mm512_srlv_epi16(add(add(sub(normal, set(r.rebias)), half), odd), set(r.drop));
        // Below it, counted in the target's quanta, to nearest-even: the significand shifted right
        // by s = c1 + 1 - E (at least `drop + 1` there), clamped to 15 (past it, every significand
        // of at most 11 bits counts 0 quanta).
        let e = _mm512_srlv_epi16(a, set(r.man));
        let s1 = _mm512_min_epu16(_mm512_subs_epu16(set(r.c1), e), set(14));
        let s = add(s1, set(1));
        let sig = _mm512_or_si512(_mm512_and_si512(a, set((1 << r.man) - 1)), set(1 << r.man));
        let half = sub(_mm512_sllv_epi16(set(1), s1), set(1));
        let odd = _mm512_and_si512(_mm512_srlv_epi16(sig, s), set(1));
        let quanta = _mm512_srlv_epi16(add(add(sig, half), odd), s);
        let below = _mm512_cmplt_epu16_mask(a, set(r.min_normal));
        // Overflow (and inf, where it ends the same) clamps; NaN lanes are replaced below.
        let mut code = _mm512_min_epu16(_mm512_mask_blend_epi16(below, norm, quanta), set(r.clamp));
        if r.inf_code != r.clamp {
            let inf = _mm512_cmpeq_epu16_mask(a, set(r.inf));
            code = _mm512_mask_blend_epi16(inf, code, set(r.inf_code));
        }
        let mut sign = _mm512_and_si512(_mm512_srlv_epi16(h, set(r.sign_shift)), set(r.sign));
        if !r.neg_zero {
            sign = _mm512_maskz_mov_epi16(_mm512_test_epi16_mask(code, code), sign);
        }
        let nan = _mm512_cmpgt_epu16_mask(a, set(r.inf));
        let nan_code = _mm512_xor_si512(set(r.nan), _mm512_and_si512(sign, set(r.nan_flip)));
        _mm512_mask_blend_epi16(nan, _mm512_or_si512(code, sign), nan_code)
    }
}

/// Converts `n` elements (a multiple of 64) by step `K`'s pair.
///
/// # Safety
/// The CPU must have the AVX-512 subsets; `n` elements must fit both buffers; when `STREAM`, `d`
/// must be aligned to 64 bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    let Some(rule) = (const { Rule::of(K::S::DTYPE, K::D::DTYPE, K::SATURATE) }) else {
        unreachable!("a word-lane pair (`applies`)")
    };
    let bits = K::D::DTYPE.bits();
    let mut i = 0;
    while i < n {
        // SAFETY: i + 64 <= n: the 64 elements lie inside both buffers; a 4-bit output of 32
        // bytes at a 64-byte-aligned `d` plus a multiple of 32 is aligned for streaming.
        unsafe {
            let sp = s.add(2 * i);
            super::prefetch_ahead(sp, 2);
            let low = codes(_mm512_loadu_si512(sp.cast()), rule);
            let high = codes(_mm512_loadu_si512(sp.add(64).cast()), rule);
            let bytes = join2(_mm512_cvtepi16_epi8(low), _mm512_cvtepi16_epi8(high));
            match bits {
                8 if STREAM => _mm512_stream_si512(d.add(i).cast(), bytes),
                8 => _mm512_storeu_si512(d.add(i).cast(), bytes),
                6 => put_u6(bytes, d.add(48 * i / 64)),
                _ => put_u4::<STREAM>(bytes, d.add(32 * i / 64)),
            }
        }
        i += 64;
    }
    if STREAM {
        super::store_fence();
    }
}

/// The word-lane kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
pub(super) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    super::drive_loops::<K, ALWAYS_STREAM>(
        src,
        dst,
        64,
        super::avx512_available(),
        [run::<K, false>, run::<K, true>],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_16_bit_sources_narrow_on_word_lanes_where_no_source_subnormal_survives() {
        use DType::*;
        let narrow = [
            Float8E4M3Fn,
            Float8E5M2,
            Float8E4M3,
            Float8E3M4,
            Float6E2M3Fn,
            Float6E3M2Fn,
            Float4E2M1Fn,
        ];
        for from in [BFloat16, Float16] {
            for to in narrow {
                // float16 and float8_e5m2 share their exponent bias: float16's subnormals round to
                // float8_e5m2's, which the word lanes do not compute.
                let expected = !(from == Float16 && to == Float8E5M2);
                assert_eq!(applies(from, to), expected, "{from} -> {to}");
            }
        }
        // Not narrow floats, or not narrower: no word-lane rule.
        for (from, to) in [
            (BFloat16, Float8E8M0Fnu),
            (BFloat16, Float16),
            (Float32, Float8E4M3Fn),
            (BFloat16, Int8),
        ] {
            assert!(!applies(from, to), "{from} -> {to}");
        }
    }
}
