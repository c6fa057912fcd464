//! bfloat16/float16 → the signed narrow floats (float8_e4m3fn, float8_e5m2, float8_e4m3,
//! float8_e3m4, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn, ...) on 16-bit lanes (and float32
//! folded into 16 bits, [`fold32`], where the portable set uses it), written once over [`Words`]
//! and instantiated for AVX-512 (`x86/avx512_words.rs`, 32 lanes), AVX2 (`x86/avx2_words.rs`, 16
//! lanes) and portable Rust (`portable_words.rs`, 16 lanes). The shared algorithm
//! (`steps::float8`, `ml_steps::ml_code`) works on 32-bit lanes; on 16-bit lanes each instruction
//! does twice the elements and the rounding below the target's smallest normal is an integer one
//! (the shared algorithm adds a float there).
//!
//! The rule is the scalar lanes' own: the format and its endings (overflow, inf, NaN) come from
//! `ml::destination`, which the scalar rules read too, every other number from the two formats'
//! rows of the dtype table; the property tests hold every pair to the scalar rules on every
//! 16-bit pattern, on each instruction set.

use dtcast_dtype::DType;

use super::steps::Step;
use crate::formats::Narrow;
use crate::lanes::Lane;
use crate::ml;

/// Marks every method `#[inline(always)]`, so that it inlines into the `#[target_feature]` loop
/// (for the [`Words`] implementations).
macro_rules! inline_all {
    ($($item:item)*) => {
        $(
            #[inline(always)]
            $item
        )*
    };
}
pub(crate) use inline_all;

/// A vector of 16-bit lanes: what the rounding needs of an instruction set. Every method is
/// `unsafe` (the CPU must have the set) and `#[inline(always)]`, the provided ones here included,
/// so that it compiles into the one `#[target_feature]` loop: a provided method without it was
/// compiled once for the baseline, where no AVX-512 intrinsic inlines, and bfloat16/float16 →
/// float6 on AVX-512 ran at a tenth of AVX2's speed (a call per intrinsic).
pub(crate) trait Words: Copy {
    /// Lanes per vector.
    const LANES: usize;
    /// The result of a lane-wise compare.
    type Mask: Copy;
    /// `LANES` little-endian 16-bit elements at `p`.
    unsafe fn load(p: *const u8) -> Self;
    /// Writes the codes of two vectors (`2 * LANES` elements in lane order, each below `2^bits`)
    /// at `p` as `bits`-bit codes: bytes, or packed (6 and 4 bits, as `dtcast_dtype::packing`
    /// lays them out); 8- and 4-bit codes as streaming stores when `STREAM` (`p` then aligned to
    /// their size).
    unsafe fn put<const STREAM: bool>(low: Self, high: Self, bits: usize, p: *mut u8);
    /// Writes the 6-bit codes of eight vectors (`8 * LANES` elements in lane order) at `p`, packed
    /// (`6 * LANES` bytes): by default four [`put`](Words::put)s; an instantiation whose pairs'
    /// bytes do not fill whole vectors may join them into whole (streamed, when `STREAM`)
    /// vectors instead (`p` then aligned to `2 * LANES` bytes, the vector's size: [`run`] steps
    /// `6 * LANES` bytes from a 64-byte boundary).
    #[inline(always)]
    unsafe fn put6<const STREAM: bool>(codes: [Self; 8], p: *mut u8) {
        for pair in 0..4 {
            // SAFETY: the caller's contract; each pair's `2 * LANES * 6 / 8` bytes follow the
            // last.
            unsafe {
                let at = p.add(3 * Self::LANES / 2 * pair);
                Self::put::<false>(codes[2 * pair], codes[2 * pair + 1], 6, at)
            }
        }
    }
    /// `v` in every lane.
    unsafe fn splat(v: u16) -> Self;
    unsafe fn and(self, o: Self) -> Self;
    unsafe fn or(self, o: Self) -> Self;
    unsafe fn xor(self, o: Self) -> Self;
    /// Wrapping.
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn min(self, o: Self) -> Self;
    unsafe fn max(self, o: Self) -> Self;
    /// Every lane shifted right by `k` (one count for all: a constant of the rule).
    unsafe fn shr(self, k: u16) -> Self;
    /// The source magnitudes `self` counted in the target's quanta below its smallest normal,
    /// rounded to nearest-even: exact for magnitudes below that normal; from it up to inf, as
    /// [`Rule`]'s `by_min` says (the float32 addition: the exact count, saturating at 2^15 - 1
    /// or above, so never below the normal code, which is below 2^15); NaN lanes any value (the caller replaces
    /// them). [`shifted_quanta`] on sets with variable 16-bit shifts, [`Quanta::float_bits`]'
    /// addition where float arithmetic is cheaper.
    unsafe fn quanta(self, q: Quanta) -> Self;
    /// `self < o`, for lanes below 2^15 (magnitudes and the rule's constants).
    unsafe fn below(self, o: Self) -> Self::Mask;
    /// `self > o`, for lanes below 2^15.
    unsafe fn above(self, o: Self) -> Self::Mask;
    unsafe fn eq(self, o: Self) -> Self::Mask;
    /// `yes` where `m` holds, else `no`.
    unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self;
    /// `self + 1` where `m` holds, else `self`.
    #[inline(always)]
    unsafe fn count(self, m: Self::Mask) -> Self {
        // SAFETY: the caller's contract.
        unsafe { Self::select(m, self.add(Self::splat(1)), self) }
    }
    /// The codes of magnitudes `self` by `r`'s thresholds ([`Rule::thresholds`], `r.steps` of
    /// them): by default a compare and a count per threshold ([`count_thresholds`]); a set that
    /// looks 16-bit lanes up in 64 entries at once may use [`Rule::buckets`] instead.
    #[inline(always)]
    unsafe fn counted(self, r: Rule) -> Self {
        // SAFETY: the caller's contract.
        unsafe { count_thresholds(self, r) }
    }
    /// Whether `m` holds in no lane.
    unsafe fn none(m: Self::Mask) -> bool;
    /// Whether every lane is in `lo..=hi` (both below 2^15, as the lanes): by default two
    /// compares, each tested on its own.
    #[inline(always)]
    unsafe fn within(self, lo: u16, hi: u16) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            Self::none(self.below(Self::splat(lo))) && Self::none(self.above(Self::splat(hi)))
        }
    }
    /// Whether [`codes`] skips the work of the rare lanes for a vector without them: the
    /// rounding below the target's smallest normal, and infinity and NaN. Where that work was
    /// measured to cost more than a branch (the portable lanes), not where it is a few
    /// instructions.
    const SKIPS_RARE_LANES: bool;
}

/// Word lanes that round by a variable shift ([`shifted_quanta`]).
// Only AVX-512's instantiation rounds by a variable shift (the others add in float32).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) trait ShiftRounding: Words {
    /// `self - o`, 0 where `o` is larger.
    unsafe fn sub_or_zero(self, o: Self) -> Self;
    /// Each lane (below 2^12) divided by `2^(s1 + 1)` (its `s1` at most 14), rounded to
    /// nearest-even.
    unsafe fn shr_round(self, s1: Self) -> Self;
}

/// The numbers of a pair's rounding below the target's smallest normal ([`Words::quanta`]), from
/// the two formats' rows of the dtype table.
#[derive(Clone, Copy)]
pub(crate) struct Quanta {
    /// The source's mantissa bits ([`shifted_quanta`]'s, like `c1`).
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    man: u16,
    /// `s - 1` for the right shift `s` that turns a significand of exponent `E` into a count of
    /// the target's quanta is `c1 - E`.
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    c1: u16,
    /// `23 - man`: a source magnitude's bits shifted left by it are a float32's, of the source
    /// value times `2^(bias - 127)` (its exponent field and mantissa in float32's places; a
    /// source subnormal a float32 subnormal of the same scale).
    pub(crate) widen: u32,
    /// The float32 bits of `2^23` target quanta at that scale: adding it to a widened magnitude
    /// below it rounds the sum to a whole number of quanta (float32's own rounding, to
    /// nearest-even), and the sum's bits less these are that number.
    pub(crate) float_bits: u32,
    /// The count as a lookup ([`Buckets`]: the counts below the smallest normal by the
    /// thresholds between them, `0x7FFF` from the smallest normal up), where the thresholds
    /// allow one. (Only AVX-512's instantiation looks up.)
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    pub(crate) buckets: Option<Buckets>,
}

/// [`Words::quanta`] by a variable shift: the significand shifted right by s = c1 + 1 - E (at
/// least `drop + 1` below the smallest normal), clamped to 15 (past it, every significand of at
/// most 11 bits counts 0 quanta).
///
/// # Safety
/// The CPU must have `W`'s instruction set.
#[inline(always)]
// Only AVX-512's instantiation rounds by a variable shift (the others add in float32).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) unsafe fn shifted_quanta<W: ShiftRounding>(a: W, q: Quanta) -> W {
    // SAFETY: the caller's contract.
    unsafe {
        let e = a.shr(q.man);
        let s1 = W::splat(q.c1).sub_or_zero(e).min(W::splat(14));
        let sig = a.and(W::splat((1 << q.man) - 1)).or(W::splat(1 << q.man));
        sig.shr_round(s1)
    }
}

/// A pair's numbers, every one derived from the two formats' rows of the dtype table and the
/// destination's endings: source bits `a` (magnitude) are `E << man | mantissa`; the target keeps
/// `man - drop` mantissa bits.
#[derive(Clone, Copy)]
pub(crate) struct Rule {
    drop: u16,
    /// The source bits of the target's smallest normal value, and of the exponent below it.
    min_normal: u16,
    rebias: u16,
    /// Below the smallest normal.
    quanta: Quanta,
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
    /// Whether the smaller of the two roundings is the code (no compare and select needed): from
    /// the smallest normal up, the count of quanta is never below the normal code, and where the
    /// shift's clamp to at least 1 cuts it short, it is still `2^(man - 1)` or more — enough where
    /// that reaches `clamp` (every pair from float16; from bfloat16, the float6 and float4
    /// formats).
    by_min: bool,
    sign: u16,
    sign_shift: u16,
    /// Where the target has at most [`MAX_STEPS`] magnitude codes below `clamp` (float4): the
    /// source magnitude bits past which the code is more than `k`, for `k` below `steps`, so
    /// that the code is a count of compares instead of the two roundings (about 15 instructions
    /// per vector instead of 30; the property tests hold both to the scalar rules). `steps` 0:
    /// the roundings.
    thresholds: [u16; MAX_STEPS],
    steps: u16,
    /// The same counts as a lookup ([`Buckets`]), where the thresholds allow one.
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    buckets: Option<Buckets>,
    /// Whether the two formats share their exponent bias (float16 → float8_e5m2): then a source
    /// subnormal's bits, rounded like a normal's (no rebias), are the target subnormal's code
    /// (the target's quantum is `2^drop` of the source's on both sides of the smallest normal),
    /// and there is no rounding below the smallest normal of its own.
    aligned: bool,
}

/// The most magnitude codes the compares of [`Rule::thresholds`] serve: float4's eight.
const MAX_STEPS: usize = 8;

/// A step function of the source magnitude — [`Rule::thresholds`]' counts, or
/// [`Quanta::buckets`]' — by magnitude buckets of `2^shift` from `base`: within a bucket every
/// magnitude has one value, but the bucket's first may have the one before (a tie there rounds
/// down to the even code: the threshold is the tie itself, so the next code starts one
/// magnitude later). So a value is two lookups by `min((m - base) >> shift, 63)` (`m - base`
/// saturating at 0), picked by whether `m` is its bucket's first — where a set looks 64 16-bit
/// entries up in one instruction (AVX-512's `vpermi2w`): about half the instructions of seven
/// compares and counts, or of a rounding by variable shifts.
#[derive(Clone, Copy)]
// Only AVX-512's instantiation looks buckets up.
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) struct Buckets {
    /// Subtracted from a magnitude (saturating at 0): one below the first step.
    pub(crate) base: u16,
    /// Bucket width `2^shift` (at least 2).
    pub(crate) shift: u16,
    /// The value of a bucket's magnitudes after its first.
    pub(crate) rest: [u16; 64],
    /// The value of a bucket's first magnitude.
    pub(crate) first: [u16; 64],
}

/// The most steps a [`Buckets`] is built from: float8_e3m4's 16 codes below its smallest
/// normal, and the smallest normal.
const MAX_RISES: usize = 17;

impl Buckets {
    /// The buckets of the step function that is 0 below `starts[0]` and `values[k]` from
    /// `starts[k]` (the first `count`, increasing), with the widest buckets that serve; `None`
    /// where none does.
    const fn of(
        starts: &[u16; MAX_RISES],
        values: &[u16; MAX_RISES],
        count: usize,
    ) -> Option<Buckets> {
        if count == 0 || starts[0] == 0 {
            return None;
        }
        // The first start one past `base`, so that magnitudes at or below `base` (saturated to
        // bucket 0's first) are 0.
        let base = starts[0] - 1;
        let mut shift = 14;
        while shift >= 1 {
            let mut fits = true;
            let mut last = 0u16;
            let mut k = 0;
            while k < count {
                let offset = starts[k] - base;
                let (bucket, at) = (offset >> shift, offset & ((1 << shift) - 1));
                // At a bucket's first or second magnitude, one code start per bucket, and the
                // last bucket (63, where larger magnitudes are clamped) past them all.
                if at > 1 || (k > 0 && bucket <= last) || bucket > 62 {
                    fits = false;
                }
                last = bucket;
                k += 1;
            }
            if fits {
                let mut b = Buckets {
                    base,
                    shift,
                    rest: [0; 64],
                    first: [0; 64],
                };
                let mut k = 0;
                while k < count {
                    let offset = starts[k] - base;
                    let (bucket, at) = ((offset >> shift) as usize, offset & ((1 << shift) - 1));
                    let mut i = bucket;
                    while i < 64 {
                        b.rest[i] = values[k];
                        if i > bucket || at == 0 {
                            b.first[i] = values[k];
                        }
                        i += 1;
                    }
                    k += 1;
                }
                return Some(b);
            }
            shift -= 1;
        }
        None
    }
}

/// The source magnitude bits (`man` mantissa bits, exponent bias `src_bias`) of the point
/// halfway between target codes `k` and `k + 1` (target: `man_t` mantissa bits, bias
/// `dst_bias`), less one where `k` is odd — a tie rounds to the even code, so the code passes `k`
/// at source bits above it. A normal code's value is its bits shifted and rebiased (`drop` bits
/// more, `rebias` added), the halfway point half a target quantum more; below the smallest
/// normal, codes count quanta `2^(1 - dst_bias - man_t)` and the halfway point is
/// `(2k + 1) * 2^(-dst_bias - man_t)`, a source normal (the rule's `c >= 16` says so).
const fn threshold(k: u16, man: u16, man_t: u16, src_bias: i32, dst_bias: i32, rebias: u16) -> u16 {
    let drop = man - man_t;
    let mid = if k >= 1 << man_t {
        (k << drop) + rebias + (1 << (drop - 1))
    } else {
        let n = 2 * k + 1;
        let length = 16 - n.leading_zeros() as u16;
        let e = -dst_bias - man_t as i32 + length as i32 - 1 + src_bias;
        ((e as u16) << man) | ((n - (1 << (length - 1))) << (man - (length - 1)))
    };
    if k % 2 == 1 {
        mid - 1
    } else {
        mid
    }
}

impl Rule {
    /// [`Rule::buckets`].
    #[inline(always)]
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    pub(crate) fn buckets(&self) -> Option<&Buckets> {
        self.buckets.as_ref()
    }

    /// The rule of `from` → `to` in Torch rounding (`saturate`: Saturate), if that pair narrows on
    /// 16-bit lanes: a 16-bit float source into a signed format of fewer mantissa bits whose
    /// endings a minimum and two selects express, where no source subnormal can round to anything
    /// but zero, or where the two formats share their exponent bias ([`Rule::aligned`]).
    pub(crate) const fn of(from: DType, to: DType, saturate: bool) -> Option<Rule> {
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
        // smallest normal's exponent above 1 (so that rebiasing never wraps) — or the exponent
        // fields must be the same (`min_e` 1: no rebias, and subnormals round as normals do).
        let aligned = min_e == 1;
        if !aligned && (min_e < 2 || c < 16) {
            return None;
        }
        let (max, sign) = (dst.max_mag, dst.sign_bit());
        let clamp = dst.special(ending.overflow, false);
        let inf_code = dst.special(ending.inf, false);
        let (nan, nan_negative) = if ending.nan_is_nan {
            (dst.nan(false), dst.nan(true))
        } else {
            (0, 0)
        };
        // Each ending must be its positive code with the value's sign or'ed in.
        if !(clamp == max || clamp == max + 1)
            || dst.special(ending.overflow, true) != clamp | sign
            || dst.special(ending.inf, true) != inf_code | sign
            || !(nan ^ nan_negative == 0 || nan ^ nan_negative == sign)
        {
            return None;
        }
        let width = dst.exp_bits + dst.man_bits;
        let rebias = ((min_e - 1) as u16) << man;
        // One threshold per magnitude code below `clamp`, where there are few enough (and the
        // halfway points below the smallest normal are source normals: not `aligned`).
        let steps = if clamp as usize <= MAX_STEPS && !aligned {
            clamp as usize
        } else {
            0
        };
        let mut thresholds = [0u16; MAX_STEPS];
        let mut k = 0;
        while k < steps {
            let (m, m_t) = (man as u16, dst.man_bits as u16);
            thresholds[k] = threshold(k as u16, m, m_t, src.bias, dst.bias, rebias);
            k += 1;
        }
        Some(Rule {
            drop: (man - dst.man_bits) as u16,
            min_normal: (min_e as u16) << man,
            rebias,
            quanta: Quanta {
                man: man as u16,
                c1: (c - 1) as u16,
                widen: 23 - man,
                // 2^23 quanta of 2^(1 - bias_t - man_t), times 2^(bias_s - 127): exponent field
                // 23 + 1 - bias_t - man_t + bias_s.
                float_bits: ((23 + 1 - dst.bias - dst.man_bits as i32 + src.bias) as u32) << 23,
                buckets: {
                    // Code k + 1 from the threshold between codes k and k + 1 below the smallest
                    // normal on; from the smallest normal on, more than any normal code.
                    let (m, m_t) = (man as u16, dst.man_bits as u16);
                    let below = 1usize << dst.man_bits;
                    let (mut starts, mut values) = ([0u16; MAX_RISES], [0u16; MAX_RISES]);
                    if aligned || below >= MAX_RISES {
                        None
                    } else {
                        let mut k = 0;
                        while k < below {
                            let t = threshold(k as u16, m, m_t, src.bias, dst.bias, rebias);
                            (starts[k], values[k]) = (t + 1, k as u16 + 1);
                            k += 1;
                        }
                        (starts[below], values[below]) = ((min_e as u16) << man, 0x7FFF);
                        Buckets::of(&starts, &values, below + 1)
                    }
                },
            },
            inf: (((1u32 << src.exp_bits) - 1) << man) as u16,
            clamp: clamp as u16,
            inf_code: inf_code as u16,
            nan: nan as u16,
            nan_flip: (nan ^ nan_negative) as u16,
            neg_zero: dst.neg_zero,
            by_min: 1 << (man - 1) >= clamp,
            sign: sign as u16,
            sign_shift: (15 - width) as u16,
            thresholds,
            steps: steps as u16,
            buckets: {
                // Code k + 1 from each threshold on.
                let (mut starts, mut values) = ([0u16; MAX_RISES], [0u16; MAX_RISES]);
                let mut k = 0;
                while k < steps {
                    (starts[k], values[k]) = (thresholds[k] + 1, k as u16 + 1);
                    k += 1;
                }
                Buckets::of(&starts, &values, steps)
            },
            aligned,
        })
    }
}

/// Whether `from` → `to` narrows on 16-bit lanes by counting thresholds (in both roundings):
/// a target of at most [`MAX_STEPS`] magnitude codes (float4).
pub(crate) const fn counts(from: DType, to: DType) -> bool {
    match (step_rule(from, to, false), step_rule(from, to, true)) {
        (Some(torch), Some(saturate)) => torch.steps > 0 && saturate.steps > 0,
        _ => false,
    }
}

/// Whether `from` → `to` narrows on 16-bit lanes (in both roundings).
pub(crate) const fn applies(from: DType, to: DType) -> bool {
    Rule::of(from, to, false).is_some() && Rule::of(from, to, true).is_some()
}

/// The rule by which a float32 source folded into 16 bits ([`fold32`]) narrows into `to`: the
/// bfloat16 rule, where `to` keeps at most 5 mantissa bits. Rounding to `k` of bfloat16's 7
/// mantissa bits looks at those `k`, the next (the guard bit) and whether anything below is set;
/// the fold keeps float32's sign, exponent and top 7 mantissa bits, the lowest or'ed with
/// "any of the other 16 set", so it keeps all three where the guard bit is not the lowest
/// (`k <= 5`), and the value's class (zero, subnormal, normal, inf, NaN) besides.
pub(crate) const fn folded32_rule(to: DType, saturate: bool) -> Option<Rule> {
    match (to.float_format(), Rule::of(DType::BFloat16, to, saturate)) {
        (Some(f), Some(rule)) if f.mantissa_bits <= 5 => Some(rule),
        _ => None,
    }
}

/// Whether float32 → `to` narrows on 16-bit lanes through [`fold32`] (in both roundings).
pub(crate) const fn applies_folded32(to: DType) -> bool {
    folded32_rule(to, false).is_some() && folded32_rule(to, true).is_some()
}

/// Float32 bits `x` folded into 16 bits (see [`folded32_rule`]): the top half, its lowest bit
/// or'ed with whether any bit of the low half is set. The low half plus 0xFFFF carries into bit
/// 16 iff it is not zero (no compare, which targets without unsigned compares make several
/// instructions).
#[inline(always)]
pub(crate) fn fold32(x: u32) -> u16 {
    ((x | ((x & 0xFFFF) + 0xFFFF)) >> 16) as u16
}

/// The rule of step `K`: its own pair's, or for a float32 source the bfloat16 one of
/// [`folded32_rule`].
pub(crate) const fn step_rule(from: DType, to: DType, saturate: bool) -> Option<Rule> {
    if matches!(from, DType::Float32) {
        folded32_rule(to, saturate)
    } else {
        Rule::of(from, to, saturate)
    }
}

/// The target codes of the source elements `h` (16 bits each), one per 16-bit lane.
///
/// # Safety
/// The CPU must have `W`'s instruction set.
#[inline(always)]
pub(crate) unsafe fn codes<W: Words>(h: W, r: Rule) -> W {
    // SAFETY: the caller's contract.
    unsafe {
        let a = h.and(W::splat(0x7FFF));
        let sign = h.shr(r.sign_shift).and(W::splat(r.sign));
        // A vector of finite magnitudes from the smallest normal up: its codes are never 0 (a
        // normal's), so the sign is or'ed in as it is. (Not where the thresholds are counted, or
        // the exponent fields are `aligned`: there the branch cost more than it saved.)
        if W::SKIPS_RARE_LANES && r.steps == 0 && !r.aligned && a.within(r.min_normal, r.inf - 1) {
            return normal_code(a, r).min(W::splat(r.clamp)).or(sign);
        }
        let mut code = if r.steps > 0 {
            a.counted(r)
        } else {
            magnitude_code(a, r)
        };
        if r.inf_code != r.clamp {
            code = W::select(a.eq(W::splat(r.inf)), W::splat(r.inf_code), code);
        }
        let mut sign = sign;
        if !r.neg_zero {
            sign = W::select(code.eq(W::splat(0)), W::splat(0), sign);
        }
        let nan = a.above(W::splat(r.inf));
        let nan_code = W::splat(r.nan).xor(sign.and(W::splat(r.nan_flip)));
        W::select(nan, nan_code, code.or(sign))
    }
}

/// The magnitude codes of the finite source magnitudes `a` from the target's smallest normal up
/// (any, where `aligned`): by the thresholds where the rule counts them, else the exponent
/// rebiased and the mantissa rounded to nearest-even (a carry moves into the exponent); above the
/// largest finite code where they overflow.
///
/// # Safety
/// The CPU must have `W`'s instruction set.
#[inline(always)]
unsafe fn normal_code<W: Words>(a: W, r: Rule) -> W {
    // SAFETY: the caller's contract.
    unsafe {
        if r.steps > 0 {
            return a.counted(r);
        }
        // `half - rebias` wraps: the sum does not (with the exponent fields `aligned`, the rebias
        // is 0).
        let odd = a.shr(r.drop).and(W::splat(1));
        let half: u16 = (1 << (r.drop - 1)) - 1;
        a.add(W::splat(half.wrapping_sub(r.rebias)))
            .add(odd)
            .shr(r.drop)
    }
}

/// The magnitude codes of the source magnitudes `a` by the thresholds ([`Rule::thresholds`]): at
/// most `clamp` (overflow and inf included; NaN lanes are the caller's).
///
/// # Safety
/// The CPU must have `W`'s instruction set.
#[inline(always)]
pub(crate) unsafe fn count_thresholds<W: Words>(a: W, r: Rule) -> W {
    // SAFETY: the caller's contract.
    unsafe {
        let mut code = W::splat(0);
        let mut k = 0;
        while k < r.steps as usize {
            code = code.count(a.above(W::splat(r.thresholds[k])));
            k += 1;
        }
        code
    }
}

/// The magnitude codes of the source magnitudes `a` by the two roundings, clamped to `clamp`
/// (inf and NaN lanes are the caller's).
///
/// # Safety
/// The CPU must have `W`'s instruction set.
#[inline(always)]
unsafe fn magnitude_code<W: Words>(a: W, r: Rule) -> W {
    // SAFETY: the caller's contract.
    unsafe {
        // From the smallest normal up (every magnitude, where `aligned`: below it, the same
        // integer rounding counts the target's quanta).
        if r.aligned {
            return normal_code(a, r).min(W::splat(r.clamp));
        }
        let norm = normal_code(a.max(W::splat(r.min_normal)), r);
        // Below it, counted in the target's quanta, to nearest-even.
        let subnormal = a.below(W::splat(r.min_normal));
        let magnitude = if W::SKIPS_RARE_LANES && W::none(subnormal) {
            norm
        } else {
            let quanta = a.quanta(r.quanta);
            if r.by_min {
                quanta.min(norm)
            } else {
                W::select(subnormal, quanta, norm)
            }
        };
        // Overflow (and inf, where it ends the same) clamps; NaN lanes are replaced by the
        // caller.
        magnitude.min(W::splat(r.clamp))
    }
}

/// The elements [`run`] converts a step, for `bits`-bit codes: two vectors, or eight for 6-bit
/// codes (see [`Words::put6`]). `n` given to [`run`] is a multiple of it.
pub(crate) const fn step_elements<W: Words>(bits: usize) -> usize {
    if bits == 6 {
        8 * W::LANES
    } else {
        2 * W::LANES
    }
}

/// Converts `n` elements (a multiple of [`step_elements`]) by step `K`'s pair: the loop of every
/// instantiation, compiled into each one's `#[target_feature]` function.
///
/// # Safety
/// The CPU must have `W`'s instruction set; `n` elements must fit both buffers; when `STREAM`,
/// `d` must be aligned to 64 bytes.
#[inline(always)]
pub(crate) unsafe fn run<W: Words, K: Step, const STREAM: bool>(
    s: *const u8,
    d: *mut u8,
    n: usize,
) {
    // SAFETY: the caller's contract; `W::load` reads `W::LANES` 16-bit elements.
    unsafe { run_loading::<W, K, STREAM>(s, d, n, |p| W::load(p)) }
}

/// [`run`] with `load` reading `W::LANES` source elements at a pointer into the 16-bit values
/// the rule rounds: the elements themselves, or float32 ones folded ([`fold32`]).
///
/// # Safety
/// As [`run`]; `load` must read no more than `W::LANES` source elements.
#[inline(always)]
pub(crate) unsafe fn run_loading<W: Words, K: Step, const STREAM: bool>(
    s: *const u8,
    d: *mut u8,
    n: usize,
    load: impl Fn(*const u8) -> W,
) {
    let Some(rule) = (const { step_rule(K::S::DTYPE, K::D::DTYPE, K::SATURATE) }) else {
        unreachable!("a word-lane pair (`applies`, `applies_folded32`)")
    };
    let (size, bits) = const { (K::S::DTYPE.bits() / 8, K::D::DTYPE.bits()) };
    let step = step_elements::<W>(bits);
    let mut i = 0;
    while i < n {
        // SAFETY: i + step <= n: the elements lie inside both buffers; their output at a
        // 64-byte-aligned `d` plus a multiple of its size is aligned to that size (a step's
        // 6-bit output: `6 * LANES` bytes, a multiple of 64 for 32 lanes and more, of 32 for 16).
        unsafe {
            let sp = s.add(size * i);
            super::prefetch_ahead(sp, size * step / 64);
            let dp = d.add(i * bits / 8);
            if bits == 6 {
                // (Indexed, not `array::from_fn`: its closures do not inline into the
                // `#[target_feature]` loop, and each intrinsic would be a call.)
                let mut vectors = [W::splat(0); 8];
                for (k, v) in vectors.iter_mut().enumerate() {
                    *v = codes(load(sp.add(size * W::LANES * k)), rule);
                }
                W::put6::<STREAM>(vectors, dp);
            } else {
                let low = codes(load(sp), rule);
                let high = codes(load(sp.add(size * W::LANES)), rule);
                W::put::<STREAM>(low, high, bits, dp);
            }
        }
        i += step;
    }
    if STREAM {
        super::x86::store_fence();
    }
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    fn the_16_bit_sources_narrow_on_word_lanes() {
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
                assert!(applies(from, to), "{from} -> {to}");
                // float16 and float8_e5m2 share their exponent bias: float16's subnormals round to
                // float8_e5m2's, by the normals' integer rounding.
                let aligned = from == Float16 && to == Float8E5M2;
                let rule = Rule::of(from, to, false).unwrap();
                assert_eq!(rule.aligned, aligned, "{from} -> {to}");
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

    /// What a set that looks buckets up (AVX-512's `W512::look_up`) finds for magnitude `m`:
    /// `first` or `rest` of its bucket, by whether `m` is the bucket's first.
    fn looked_up(b: &Buckets, m: u16) -> u16 {
        let offset = m.saturating_sub(b.base);
        let bucket = usize::from((offset >> b.shift).min(63));
        if offset & ((1 << b.shift) - 1) == 0 {
            b.first[bucket]
        } else {
            b.rest[bucket]
        }
    }

    fn the_buckets_count_as_the_thresholds_do() {
        // Every magnitude of every pair with thresholds, both roundings: the two lookups picked
        // by "first of its bucket" give the count of thresholds it exceeds. float4's (the pairs
        // with thresholds) must have buckets, which AVX-512 looks up.
        use DType::*;
        let mut with_buckets = 0;
        for from in [BFloat16, Float16, Float32] {
            for to in DType::ALL {
                for saturate in [false, true] {
                    let Some(r) = step_rule(from, to, saturate).filter(|r| r.steps > 0) else {
                        continue;
                    };
                    let b = r
                        .buckets()
                        .unwrap_or_else(|| panic!("{from} -> {to}: no buckets"));
                    with_buckets += 1;
                    for m in 0..0x8000u16 {
                        let count = r.thresholds[..usize::from(r.steps)]
                            .iter()
                            .filter(|&&t| m > t)
                            .count() as u16;
                        let got = looked_up(b, m);
                        assert_eq!(got, count, "{from} -> {to} ({saturate}): {m:#06x}");
                    }
                }
            }
        }
        // float4_e2m1fn from bfloat16, float16 and float32 (folded), in both roundings.
        assert_eq!(with_buckets, 6);
    }

    fn the_quanta_buckets_count_below_the_smallest_normal() {
        // Every magnitude of every 16-bit pair that rounds below the smallest normal by its
        // own rule, both roundings: below the smallest normal the looked-up value is the count
        // of thresholds between the codes there that the magnitude exceeds (each threshold the
        // tie between two codes, `threshold`), from it on more than any code. Every such pair
        // of 16-bit sources into float8/float6 but float8_e3m4 (16 codes below its smallest
        // normal, too many for 64 buckets) has buckets.
        use DType::*;
        let mut pairs = 0;
        for from in [BFloat16, Float16] {
            for to in DType::ALL {
                for saturate in [false, true] {
                    let Some(r) = Rule::of(from, to, saturate).filter(|r| !r.aligned) else {
                        continue;
                    };
                    let (dst, src) = (to.float_format().unwrap(), from.float_format().unwrap());
                    let Some(b) = r.quanta.buckets.as_ref() else {
                        assert!(to == Float8E3M4, "{from} -> {to}: no buckets");
                        continue;
                    };
                    pairs += 1;
                    let (m_s, m_t) = (src.mantissa_bits as u16, dst.mantissa_bits as u16);
                    let ties: Vec<u16> = (0..1u16 << m_t)
                        .map(|k| threshold(k, m_s, m_t, src.bias, dst.bias, r.rebias))
                        .collect();
                    for m in 0..0x8000u16 {
                        let want = if m < r.min_normal {
                            ties.iter().filter(|&&t| m > t).count() as u16
                        } else {
                            0x7FFF
                        };
                        let got = looked_up(b, m);
                        assert_eq!(got, want, "{from} -> {to} ({saturate}): {m:#06x}");
                    }
                }
            }
        }
        // Both roundings of bfloat16 into float8_e4m3fn/e5m2/e4m3fnuz/e5m2fnuz/e4m3/e4m3b11fnuz,
        // the float6 formats and float4, and of float16 into float8_e4m3fn/e4m3, the float6
        // formats and float4.
        assert_eq!(pairs, 28);
    }

    crate::self_test::list!(
        the_16_bit_sources_narrow_on_word_lanes,
        the_buckets_count_as_the_thresholds_do,
        the_quanta_buckets_count_below_the_smallest_normal
    );
}
