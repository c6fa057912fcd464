//! AVX-512's kernels from bfloat16 and float16 into the MX formats (no inf, no NaN:
//! float6_e2m3fn, float6_e3m2fn, float4_e2m1fn), on 32 16-bit lanes per vector. The shared
//! algorithm (`ml_steps::ml_code` over 32-bit lanes) left these pairs compute-bound at about
//! 0.65–0.8 of memcpy on 2 cores; on 16-bit lanes each instruction does twice the elements, and
//! AVX-512BW's variable word shifts make the rounding below the target's smallest normal an
//! integer one (the shared algorithm adds a float there). The rule is the same — ml_dtypes'
//! rounding (Torch) or dtcast's (Saturate, which differ only in NaN) — and the property tests
//! hold both to the scalar rules.

use core::arch::x86_64::*;

use dtcast_dtype::{DType, NanEncoding};

use super::super::steps::Step;
use super::avx512::{join2, put_u4, put_u6};
use crate::formats::Narrow;
use crate::lanes::Lane;

/// A pair's numbers, every one derived from the two formats' rows of the dtype table: source
/// bits `a` (magnitude) are `E << man | mantissa`; the target keeps `man - drop` mantissa bits.
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
    max: u16,
    sign: u16,
    sign_shift: u16,
}

impl Rule {
    /// The rule of `from` → `to`, if AVX-512 narrows that pair on 16-bit lanes: a 16-bit float
    /// source into a signed format without inf and NaN, with fewer mantissa bits.
    const fn of(from: DType, to: DType) -> Option<Rule> {
        let (Some(f), Some(t)) = (from.float_format(), to.float_format()) else {
            return None;
        };
        let mx = matches!(t.nan, NanEncoding::None) && !t.has_inf && t.signed;
        if from.bits() != 16 || !mx || t.mantissa_bits >= f.mantissa_bits {
            return None;
        }
        let (src, dst) = (Narrow::of(from), Narrow::of(to));
        let man = src.man_bits;
        // A normal target value 2^(E - bias) * 1.m has exponent field E = e - bias_t + bias_s
        // in the source; its quanta below the smallest normal are 2^(1 - bias_t - man_t).
        let min_e = 1 - dst.bias + src.bias;
        let c = 1 - dst.bias - dst.man_bits as i32 + src.bias + man as i32;
        let width = dst.exp_bits + dst.man_bits;
        Some(Rule {
            man: man as u16,
            drop: (man - dst.man_bits) as u16,
            min_normal: (min_e as u16) << man,
            rebias: ((min_e - 1) as u16) << man,
            c1: (c - 1) as u16,
            inf: (((1u32 << src.exp_bits) - 1) << man) as u16,
            max: dst.max_mag as u16,
            sign: 1 << width,
            sign_shift: (15 - width) as u16,
        })
    }
}

/// Whether AVX-512 has a word-lane kernel for `from` → `to`.
pub(super) const fn applies(from: DType, to: DType) -> bool {
    Rule::of(from, to).is_some()
}

/// The target codes of 32 source elements `h` (16 bits each), one per 16-bit lane.
///
/// # Safety
/// AVX-512 (F, BW).
#[inline(always)]
unsafe fn codes(h: __m512i, r: Rule, saturate: bool) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        let set = |v: u16| _mm512_set1_epi16(v as i16);
        let (add, sub) = (_mm512_add_epi16, _mm512_sub_epi16);
        let a = _mm512_and_si512(h, set(0x7FFF));
        // From the smallest normal up: the exponent rebiased, the mantissa rounded to nearest-even
        // (a carry moves into the exponent); below it, the smallest normal's code.
        let normal = _mm512_max_epu16(a, set(r.min_normal));
        let odd = _mm512_and_si512(_mm512_srlv_epi16(normal, set(r.drop)), set(1));
        let half = set((1 << (r.drop - 1)) - 1);
        let norm = _mm512_srlv_epi16(add(add(sub(normal, set(r.rebias)), half), odd), set(r.drop));
        // Counted in the target's quanta, to nearest-even: the significand shifted right by
        // s = c1 + 1 - E, clamped to 1..=15 (above, the normal code is the smaller; below, every
        // significand of at most 11 bits counts 0 quanta).
        let e = _mm512_srlv_epi16(a, set(r.man));
        let s1 = _mm512_min_epu16(_mm512_subs_epu16(set(r.c1), e), set(14));
        let s = add(s1, set(1));
        let sig = _mm512_or_si512(_mm512_and_si512(a, set((1 << r.man) - 1)), set(1 << r.man));
        let half = sub(_mm512_sllv_epi16(set(1), s1), set(1));
        let odd = _mm512_and_si512(_mm512_srlv_epi16(sig, s), set(1));
        let quanta = _mm512_srlv_epi16(add(add(sig, half), odd), s);
        // The smaller of the two is the code; overflow and inf saturate.
        let code = _mm512_min_epu16(_mm512_min_epu16(norm, quanta), set(r.max));
        let sign = _mm512_and_si512(_mm512_srlv_epi16(h, set(r.sign_shift)), set(r.sign));
        // NaN: ml_dtypes writes the zero of the opposite sign; Saturate writes +0.
        let nan = _mm512_cmpgt_epu16_mask(a, set(r.inf));
        let nan_code = if saturate {
            _mm512_setzero_si512()
        } else {
            sub(set(r.sign), sign)
        };
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
    let Some(rule) = (const { Rule::of(K::S::DTYPE, K::D::DTYPE) }) else {
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
            let low = codes(_mm512_loadu_si512(sp.cast()), rule, K::SATURATE);
            let high = codes(_mm512_loadu_si512(sp.add(64).cast()), rule, K::SATURATE);
            let bytes = join2(_mm512_cvtepi16_epi8(low), _mm512_cvtepi16_epi8(high));
            if bits == 6 {
                put_u6(bytes, d.add(48 * i / 64))
            } else {
                put_u4::<STREAM>(bytes, d.add(32 * i / 64))
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
