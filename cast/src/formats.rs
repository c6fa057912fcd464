//! Scalar encoders and decoders for the floating formats narrower than f64.
//!
//! One generic round-to-nearest-even encoder serves float16, bfloat16 and the four float8 formats
//! with exponent and mantissa; `float8_e8m0fnu` (an exponent only) has its own. NaN bits are
//! chosen by the callers, because PyTorch's differ from path to path (see `rules.rs`).

use dtcast_dtype::{DType, FloatFormat, NanEncoding};

/// What an encoder produces for a value it cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Out {
    /// ±infinity (formats that have it).
    Inf,
    /// The format's NaN.
    Nan,
    /// ±the largest finite value.
    Max,
}

/// What a rounding into a narrow format writes where a value has no finite code of its own: the
/// one statement of each rule family's choice (`ml::ending`, `rules::Float8::ending`), which the
/// scalar encoders and the SIMD kernels that restate a rule (`kernels/x86/avx512_words.rs`) both
/// read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ending {
    /// A finite value past the largest finite one.
    pub(crate) overflow: Out,
    /// ±infinity.
    pub(crate) inf: Out,
    /// NaN: the format's NaN ([`Narrow::nan`]; the zero of the opposite sign where it has none),
    /// or `false`: +0.
    pub(crate) nan_is_nan: bool,
}

/// The layout of a narrow floating format, derived from its [`FloatFormat`] in `dtcast-dtype`
/// (the one description of each format). An unsigned format (`float8_e5m3fnu`) has no sign bit:
/// [`Narrow::sign_bit`] lies just above its code, and a negative value is past its range on the
/// low side.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Narrow {
    /// `false` for an unsigned format.
    pub(crate) signed: bool,
    pub(crate) exp_bits: u32,
    pub(crate) man_bits: u32,
    pub(crate) bias: i32,
    /// The largest finite magnitude code.
    pub(crate) max_mag: u32,
    /// The magnitude code of infinity, if the format has one.
    pub(crate) inf_mag: Option<u32>,
    /// Whether the format has a NaN (the MX float6/float4 formats have none).
    pub(crate) has_nan: bool,
    /// The code written for a positive NaN; `nan_signed` says whether a negative NaN flips the
    /// sign bit of it.
    pub(crate) nan_code: u32,
    pub(crate) nan_signed: bool,
    /// `false` for the fnuz formats: -0 is their NaN, so a negative zero encodes as +0.
    pub(crate) neg_zero: bool,
}

/// The format of a floating dtype, at compile time.
const fn format_of(dtype: DType) -> FloatFormat {
    match dtype.float_format() {
        Some(f) => f,
        None => panic!("not a floating dtype"),
    }
}

impl Narrow {
    /// The layout of `dtype`'s format. NaN is written as ml_dtypes writes it: the quiet NaN of an
    /// IEEE-like format and the all-ones code of float8_e4m3fn with the value's sign, `0x80` for
    /// the fnuz formats, and — for formats without NaN — the zero of the *opposite* sign (what
    /// ml_dtypes produces: NaN → -0.0, -NaN → +0.0).
    pub(crate) const fn of(dtype: DType) -> Narrow {
        let f = format_of(dtype);
        let (e, m) = (f.exponent_bits, f.mantissa_bits);
        let sign = 1 << (e + m);
        let all = sign - 1;
        let exp_ones = ((1 << e) - 1) << m;
        let (max_mag, nan_code, nan_signed) = match f.nan {
            NanEncoding::Ieee => (exp_ones - 1, exp_ones | 1 << (m - 1), true),
            NanEncoding::AllOnes => (all - 1, all, true),
            NanEncoding::NegativeZero => (all, sign, false),
            // Unsigned, so `all` is the whole code (e8m0 has its own encoder; this is e5m3fnu).
            NanEncoding::AllOnesUnsigned => (all - 1, all, false),
            NanEncoding::None => (all, sign, true),
        };
        Narrow {
            signed: f.signed,
            exp_bits: e,
            man_bits: m,
            bias: f.bias,
            max_mag,
            inf_mag: if f.has_inf { Some(exp_ones) } else { None },
            has_nan: !matches!(f.nan, NanEncoding::None),
            nan_code,
            nan_signed,
            neg_zero: f.has_negative_zero,
        }
    }

    /// The same layout writing `code` for a positive NaN (torch's float8_e5m2 NaN is `0x7F`).
    const fn with_nan_code(self, code: u32) -> Narrow {
        Narrow {
            nan_code: code,
            ..self
        }
    }
}

pub(crate) const F16: Narrow = Narrow::of(DType::Float16);
pub(crate) const BF16: Narrow = Narrow::of(DType::BFloat16);
pub(crate) const E4M3FN: Narrow = Narrow::of(DType::Float8E4M3Fn);
/// torch writes `0x7F` for a float8_e5m2 NaN (ml_dtypes: the quiet `0x7E`).
pub(crate) const E5M2: Narrow = Narrow::of(DType::Float8E5M2).with_nan_code(0x7F);
pub(crate) const E4M3FNUZ: Narrow = Narrow::of(DType::Float8E4M3Fnuz);
pub(crate) const E5M2FNUZ: Narrow = Narrow::of(DType::Float8E5M2Fnuz);

/// `2^e` as an f64, exactly (for -1022 <= e <= 1023).
#[inline(always)]
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

impl Narrow {
    #[inline(always)]
    pub(crate) const fn sign_bit(&self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    /// The code written for a NaN with the given sign.
    #[inline(always)]
    pub(crate) const fn nan(&self, negative: bool) -> u32 {
        if negative && self.nan_signed {
            self.nan_code ^ self.sign_bit()
        } else {
            self.nan_code
        }
    }

    /// The code written for a value that `out` says becomes ±inf, ±max or NaN. In an unsigned
    /// format a negative value's `Max` is the format's lowest value, 0.
    #[inline(always)]
    pub(crate) const fn special(&self, out: Out, negative: bool) -> u32 {
        let sign = if negative { self.sign_bit() } else { 0 };
        match (out, self.inf_mag) {
            (Out::Inf, Some(inf)) => inf | sign,
            (Out::Max, _) if negative && !self.signed => 0,
            (Out::Max, _) => self.max_mag | sign,
            _ => self.nan(negative),
        }
    }

    /// The code of `x` by `ending`'s rules past the finite range and for NaN.
    #[inline(always)]
    pub(crate) fn encode_ending(&self, x: f64, ending: Ending) -> u32 {
        match (x.is_nan(), ending.nan_is_nan) {
            (true, true) => self.nan(x.is_sign_negative()),
            (true, false) => 0,
            (false, _) => self.encode(x, ending.overflow, ending.inf),
        }
    }

    /// Rounds `x` (not NaN) to nearest-even. A finite value past the largest finite one gives
    /// `overflow`; an infinite one gives `inf`. In an unsigned format every negative value but -0
    /// is past the range (ml_dtypes: even one that rounds to zero), and gets the same rules.
    #[inline(always)]
    pub(crate) fn encode(&self, x: f64, overflow: Out, inf: Out) -> u32 {
        let negative = x.is_sign_negative();
        let a = x.abs();
        if a == f64::INFINITY {
            return self.special(inf, negative);
        }
        if negative && !self.signed && a != 0.0 {
            return self.special(overflow, true);
        }
        let mag = self.round_magnitude(a);
        if mag > u64::from(self.max_mag) {
            return self.special(overflow, negative);
        }
        if mag == 0 && !self.neg_zero {
            return 0;
        }
        mag as u32 | if negative { self.sign_bit() } else { 0 }
    }

    /// The magnitude code of finite `a >= 0`, rounded to nearest-even; past `max_mag` on overflow.
    #[inline(always)]
    fn round_magnitude(&self, a: f64) -> u64 {
        if a == 0.0 {
            return 0;
        }
        let e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let emin = 1 - self.bias;
        if e < emin - self.man_bits as i32 - 2 {
            // Below half the smallest subnormal (f64 subnormals included): rounds to zero.
            return 0;
        }
        let quantum = e.max(emin) - self.man_bits as i32;
        // Scaling by a power of two is exact, so this is the one rounding.
        let n = round_ties_even(a * pow2(-quantum), self.man_bits) as u64;
        if e < emin {
            n // a subnormal; n == 2^m is the smallest normal, which has the same code
        } else {
            (((e + self.bias) as u64) << self.man_bits) + n - (1 << self.man_bits)
        }
    }

    /// `true` if `code` is a NaN of this format.
    #[inline(always)]
    pub(crate) fn is_nan(&self, code: u32) -> bool {
        let mag = code & (self.sign_bit() - 1);
        if !self.has_nan {
            return false;
        }
        match self.inf_mag {
            Some(inf) => mag > inf,
            None if self.neg_zero => mag == self.nan_code,
            None => code == self.nan_code,
        }
    }

    /// `true` if `code` is ±infinity.
    #[inline(always)]
    pub(crate) fn is_inf(&self, code: u32) -> bool {
        self.inf_mag == Some(code & (self.sign_bit() - 1))
    }

    /// The value of `code` (not NaN).
    #[inline(always)]
    pub(crate) fn decode(&self, code: u32) -> f64 {
        let mag = code & (self.sign_bit() - 1);
        let v = if self.is_inf(code) {
            f64::INFINITY
        } else {
            let (e, f) = (
                (mag >> self.man_bits) as i32,
                f64::from(mag & ((1 << self.man_bits) - 1)),
            );
            if e == 0 {
                f * pow2(1 - self.bias - self.man_bits as i32)
            } else {
                (f + f64::from(1u32 << self.man_bits)) * pow2(e - self.bias - self.man_bits as i32)
            }
        };
        if code & self.sign_bit() != 0 {
            -v
        } else {
            v
        }
    }
}

/// `y.round_ties_even()` for `0 <= y < 2^(man_bits + 1)`. Below 2^52 (every format with fewer
/// than 52 mantissa bits), adding 2^52 leaves no bit for a fraction, so the sum is `y` rounded to
/// nearest-even (the only rounding mode Rust code runs in) plus 2^52, and subtracting 2^52 is
/// exact. `f64::round_ties_even` is a call to libm's `rint` on x86-64's baseline (which has no
/// `roundsd`): a call per element, which made the scalar rules far slower.
#[inline(always)]
fn round_ties_even(y: f64, man_bits: u32) -> f64 {
    const TWO_52: f64 = (1u64 << 52) as f64;
    if man_bits < 52 {
        (y + TWO_52) - TWO_52
    } else {
        y.round_ties_even()
    }
}

// ---- IEEE NaN handling as x86 conversion instructions do it: quiet the NaN, keep sign and payload.

/// f32 → f64 (`cvtss2sd`): exact; a NaN is quieted with its payload kept.
#[inline(always)]
pub(crate) fn f32_to_f64(x: f32) -> f64 {
    if x.is_nan() {
        let b = u64::from(x.to_bits());
        f64::from_bits((b >> 31) << 63 | 0x7FF8_0000_0000_0000 | (b & 0x7F_FFFF) << 29)
    } else {
        f64::from(x)
    }
}

/// f64 → f32 (`cvtsd2ss`): round to nearest-even; a NaN is quieted and keeps its top payload bits.
#[inline(always)]
pub(crate) fn f64_to_f32(x: f64) -> f32 {
    if x.is_nan() {
        let b = x.to_bits();
        f32::from_bits(((b >> 63) as u32) << 31 | 0x7FC0_0000 | ((b >> 29) as u32 & 0x3F_FFFF))
    } else {
        x as f32
    }
}

/// float16 → f32 (`vcvtph2ps`): exact; a NaN is quieted with its payload kept.
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let h = u32::from(h);
    if F16.is_nan(h) {
        f32::from_bits((h >> 15) << 31 | 0x7FC0_0000 | (h & 0x3FF) << 13)
    } else {
        F16.decode(h) as f32
    }
}

/// f32 → float16 (`vcvtps2ph`, round to nearest-even): overflow gives ±inf; a NaN is quieted
/// and keeps its top payload bits.
#[inline(always)]
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        let b = x.to_bits();
        ((b >> 31) << 15 | 0x7E00 | (b >> 13) & 0x3FF) as u16
    } else {
        F16.encode(f64::from(x), Out::Inf, Out::Inf) as u16
    }
}

/// f64 → float16 in one rounding (no trip through f32); NaN as `f32_to_f16` of `f64_to_f32`.
#[inline(always)]
pub(crate) fn f64_to_f16_once(x: f64) -> u16 {
    if x.is_nan() {
        f32_to_f16(f64_to_f32(x))
    } else {
        F16.encode(x, Out::Inf, Out::Inf) as u16
    }
}

/// bfloat16 → f32: the top half of the f32 bits, exactly (NaN payloads untouched).
#[inline(always)]
pub(crate) fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// f32 → bfloat16, round to nearest-even, as `c10::BFloat16(float)`: any NaN becomes `0x7FC0`.
#[inline(always)]
pub(crate) fn f32_to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        0x7FC0
    } else {
        let b = x.to_bits();
        // Adding 0x7FFF plus the lowest kept bit rounds to nearest-even; overflow carries into inf.
        ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// f64 → bfloat16 in one rounding; NaN keeps its sign and top payload bits (quieted).
#[inline(always)]
pub(crate) fn f64_to_bf16_once(x: f64) -> u16 {
    if x.is_nan() {
        let b = f64_to_f32(x).to_bits();
        (b >> 16) as u16 | 0x0040
    } else {
        BF16.encode(x, Out::Inf, Out::Inf) as u16
    }
}

// ---- float8_e8m0fnu: an unsigned power of two.

/// f32 → float8_e8m0fnu as PyTorch 2.15 does it: the sign is dropped, NaN and ±inf give `0xFF`,
/// and the exponent rounds up when the guard bit is set and any lower bit (or the implicit one of
/// a normal number) is set.
#[inline(always)]
pub(crate) fn f32_to_e8m0(x: f32) -> u8 {
    let b = x.to_bits();
    let exponent = (b >> 23) & 0xFF;
    if exponent == 0xFF {
        return 0xFF;
    }
    let guard = b & 0x40_0000 != 0;
    let round = b & 0x20_0000 != 0;
    let sticky = b & 0x1F_FFFF != 0;
    let lsb = exponent > 0;
    let up = guard && (round || sticky || lsb);
    (exponent + u32::from(up)) as u8
}

/// float8_e8m0fnu → f32: `2^(code - 127)`; `0xFF` is NaN (`0x7F800001`, as PyTorch decodes it).
#[inline(always)]
pub(crate) fn e8m0_to_f32(code: u8) -> f32 {
    if code == 0xFF {
        f32::from_bits(0x7F80_0001)
    } else if code == 0 {
        f32::from_bits(0x0040_0000) // 2^-127 is an f32 subnormal
    } else {
        f32::from_bits(u32::from(code) << 23)
    }
}

/// Largest power of two <= 2^127 nearest to positive finite `x` in one rounding from f64, ties up
/// (the saturating e8m0 encoder: values below 2^-127 give 2^-127, above 2^127 give 2^127).
#[inline(always)]
pub(crate) fn f64_to_e8m0_saturating(x: f64) -> u8 {
    if x.is_nan() {
        return 0xFF;
    }
    if x <= 0.0 {
        return 0; // no zero and no sign: the smallest value
    }
    if x == f64::INFINITY {
        return 0xFE;
    }
    let e = ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let man = x.to_bits() & ((1 << 52) - 1);
    // Ties (exactly 1.5 * 2^e) round up, as the e8m0 formats do.
    let e = if man >= 1 << 51 { e + 1 } else { e };
    (e + 127).clamp(0, 254) as u8
}

// ---- Exact integer → f64 rounding to odd, so that a second rounding to a narrower format is
// correct (round-to-odd to 53 bits, then nearest-even to at most 24 bits, is a single rounding).

/// `i` as f64, rounded to odd when inexact.
#[inline(always)]
pub(crate) fn i64_to_f64_odd(i: i64) -> f64 {
    let f = i as f64;
    odd_fixup(f, i128::from(i))
}

/// `u` as f64, rounded to odd when inexact.
#[inline(always)]
pub(crate) fn u64_to_f64_odd(u: u64) -> f64 {
    let f = u as f64;
    odd_fixup(f, i128::from(u))
}

#[inline(always)]
fn odd_fixup(f: f64, exact: i128) -> f64 {
    let back = f as i128; // f64 values of 64-bit integers fit i128 (2^64 included)
    if back == exact || f.to_bits() & 1 == 1 {
        return f;
    }
    // Inexact and even: the odd neighbour on the side of the exact value.
    let toward = if exact > back { 1i64 } else { -1 };
    let step = if f.is_sign_negative() {
        -toward
    } else {
        toward
    };
    f64::from_bits((f.to_bits() as i64 + step) as u64)
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    fn every_narrow_code_decodes_and_encodes_back() {
        let new = [
            DType::Float8E4M3,
            DType::Float8E3M4,
            DType::Float8E4M3B11Fnuz,
            DType::Float8E5M3Fnu,
            DType::Float6E2M3Fn,
            DType::Float6E3M2Fn,
            DType::Float4E2M1Fn,
        ]
        .map(Narrow::of);
        for fmt in [F16, BF16, E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ]
            .into_iter()
            .chain(new)
        {
            let total = 1u32 << (u32::from(fmt.signed) + fmt.exp_bits + fmt.man_bits);
            for code in 0..total {
                if fmt.is_nan(code) {
                    continue;
                }
                let v = fmt.decode(code);
                let back = fmt.encode(v, Out::Nan, Out::Inf);
                if !fmt.neg_zero && code == fmt.sign_bit() {
                    continue; // the fnuz NaN pattern
                }
                assert_eq!(back, code, "{fmt:?} code {code:#x} value {v}");
            }
        }
    }

    fn float16_rounding_from_the_reference() {
        // torch-semantics.md §5: 65519.99 -> 65504, 65520 -> inf, 2^-25 -> 0 (tie to even),
        // 1.5 * 2^-24 -> 2^-23.
        assert_eq!(f32_to_f16(65519.99), 0x7BFF);
        assert_eq!(f32_to_f16(65520.0), 0x7C00);
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0);
        assert_eq!(f32_to_f16(1.5 * 2f32.powi(-24)), 2);
        assert_eq!(f32_to_f16(f32::from_bits(0xFFC0_0000)), 0xFE00);
    }

    fn bfloat16_rounding_from_the_reference() {
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3F80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80);
        assert_eq!(
            f64_to_bf16_once(1.0 + 2f64.powi(-8) + 2f64.powi(-30)),
            0x3F81
        );
    }

    fn e8m0_examples_from_the_reference() {
        for (x, want) in [
            (1.5f32, 2.0f32),
            (3.0, 4.0),
            (6.0, 8.0),
            (1.4999, 1.0),
            (5.99, 4.0),
            (0.75, 1.0),
            (-1.0, 1.0),
            (-500.0, 512.0),
        ] {
            assert_eq!(e8m0_to_f32(f32_to_e8m0(x)), want, "{x}");
        }
        assert_eq!(f32_to_e8m0(0.0), 0);
        assert_eq!(f32_to_e8m0(f32::NAN), 0xFF);
        assert_eq!(f32_to_e8m0(f32::NEG_INFINITY), 0xFF);
    }

    fn round_to_odd_makes_double_rounding_single() {
        // 2^40 + 2^32 + 1 -> bfloat16 is 2^40 + 2^33 when rounded once (torch-semantics.md §5).
        let i = (1i64 << 40) + (1 << 32) + 1;
        assert_eq!(
            BF16.decode(BF16.encode(i64_to_f64_odd(i), Out::Inf, Out::Inf)),
            2f64.powi(40) + 2f64.powi(33)
        );
        // Large values that f64 rounds: the odd neighbour keeps the sticky information.
        let j = (1i64 << 60) + 1;
        assert!(i64_to_f64_odd(j) > 2f64.powi(60));
        assert!(i64_to_f64_odd(-j) < -(2f64.powi(60)));
        // u64::MAX truncates to 2^64 - 2^11, whose last mantissa bit is already odd.
        assert_eq!(u64_to_f64_odd(u64::MAX), 2f64.powi(64) - 2048.0);
    }

    crate::self_test::list!(
        every_narrow_code_decodes_and_encodes_back,
        float16_rounding_from_the_reference,
        bfloat16_rounding_from_the_reference,
        e8m0_examples_from_the_reference,
        round_to_odd_makes_double_rounding_single,
    );
}
