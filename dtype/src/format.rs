//! The bit-level encoding of floating-point dtypes.

/// How a floating-point format encodes NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NanEncoding {
    /// IEEE 754: all-ones exponent with a nonzero mantissa (many patterns, both signs).
    Ieee,
    /// Only the all-ones pattern below the sign bit is NaN (`S.1111.111` for `float8_e4m3fn`):
    /// two patterns, `0x7F` and `0xFF`. The format has no infinity.
    AllOnes,
    /// The "negative zero" pattern `0x80` is the single NaN (the `fnuz` formats); they have no -0.
    NegativeZero,
    /// The unsigned all-ones pattern `0xFF` is the single NaN (`float8_e8m0fnu`,
    /// `float8_e5m3fnu`).
    AllOnesUnsigned,
    /// No NaN at all (the MX float6 and float4 formats): every code is a number.
    None,
}

/// The exact encoding of a floating-point dtype.
///
/// Values are the real ones of each format (the `float8` crate's constants are not: its E4M3
/// `INFINITY` is really 448). Checked against ml_dtypes' `finfo` and PyTorch's `Float8_*.h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatFormat {
    /// Exponent bits.
    pub exponent_bits: u32,
    /// Explicitly stored mantissa (fraction) bits.
    pub mantissa_bits: u32,
    /// Exponent bias: a normal value is `2^(e - bias) * 1.m`.
    pub bias: i32,
    /// Whether the format has a sign bit (`float8_e8m0fnu` has none).
    pub signed: bool,
    /// Whether ±infinity can be encoded.
    pub has_inf: bool,
    /// Whether -0 exists as a value distinct from NaN.
    pub has_negative_zero: bool,
    /// Whether zero can be encoded at all (`float8_e8m0fnu` cannot).
    pub has_zero: bool,
    /// How NaN is encoded.
    pub nan: NanEncoding,
    /// The largest finite value.
    pub max_finite: f64,
    /// The smallest positive normal value.
    pub min_normal: f64,
    /// The smallest positive subnormal value, or `None` when the format has no subnormals.
    pub min_subnormal: Option<f64>,
}

impl FloatFormat {
    /// Total bits of the encoding.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::BFloat16.float_format().unwrap().total_bits(), 16);
    /// assert_eq!(DType::Float8E8M0Fnu.float_format().unwrap().total_bits(), 8);
    /// ```
    pub const fn total_bits(&self) -> u32 {
        self.signed as u32 + self.exponent_bits + self.mantissa_bits
    }

    /// The magnitude from which rounding to nearest-even leaves the finite range — the largest
    /// finite value plus half its ulp — and whether that tie itself overflows (it does when the
    /// largest finite value's last mantissa bit is odd, as in every IEEE format, and for e8m0,
    /// whose ties round up; float8_e4m3fn's 464 rounds down to 448).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Float16.float_format().unwrap().overflow_threshold(), (65520.0, true));
    /// assert_eq!(DType::Float8E4M3Fn.float_format().unwrap().overflow_threshold(), (464.0, false));
    /// ```
    pub fn overflow_threshold(&self) -> (f64, bool) {
        let max = self.max_finite;
        let exp = ((max.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let half_ulp = pow2(exp - self.mantissa_bits as i32 - 1);
        let last_bit_odd =
            self.mantissa_bits == 0 || (max / pow2(exp - self.mantissa_bits as i32)) % 2.0 == 1.0;
        (max + half_ulp, last_bit_odd)
    }

    /// The value `-max_finite`; for an unsigned format its smallest value (0, or e8m0's 2^-127,
    /// which has no zero).
    pub fn lowest(&self) -> f64 {
        if self.signed {
            -self.max_finite
        } else if self.has_zero {
            0.0
        } else {
            self.min_subnormal.unwrap_or(self.min_normal)
        }
    }
}

/// `2^e` for the exponents the formats use, exactly (powers of two are exact in f64).
const fn pow2(e: i32) -> f64 {
    // f64::powi is not const; build the bits directly. Valid for -1022 <= e <= 1023.
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// A format with a sign bit, IEEE-style layout, and the max finite value given by its top encoding.
pub(crate) const fn ieee(exponent_bits: u32, mantissa_bits: u32) -> FloatFormat {
    let bias = (1 << (exponent_bits - 1)) - 1;
    let max_exp = bias; // all-ones exponent is reserved for inf/NaN
    FloatFormat {
        exponent_bits,
        mantissa_bits,
        bias,
        signed: true,
        has_inf: true,
        has_negative_zero: true,
        has_zero: true,
        nan: NanEncoding::Ieee,
        max_finite: (2.0 - pow2(-(mantissa_bits as i32))) * pow2(max_exp),
        min_normal: pow2(1 - bias),
        min_subnormal: Some(pow2(1 - bias - mantissa_bits as i32)),
    }
}

pub(crate) const FLOAT16: FloatFormat = ieee(5, 10);
pub(crate) const BFLOAT16: FloatFormat = ieee(8, 7);
pub(crate) const FLOAT32: FloatFormat = ieee(8, 23);
pub(crate) const FLOAT64: FloatFormat = ieee(11, 52);
pub(crate) const FLOAT8_E5M2: FloatFormat = ieee(5, 2);
pub(crate) const FLOAT8_E4M3FN: FloatFormat = FloatFormat {
    has_inf: false,
    nan: NanEncoding::AllOnes,
    // The all-ones exponent holds normal values except S.1111.111: max is 1.75 * 2^8.
    max_finite: 448.0,
    ..ieee(4, 3)
};
pub(crate) const FLOAT8_E4M3FNUZ: FloatFormat = fnuz(4, 3, 8);
pub(crate) const FLOAT8_E5M2FNUZ: FloatFormat = fnuz(5, 2, 16);
pub(crate) const FLOAT8_E8M0FNU: FloatFormat = FloatFormat {
    exponent_bits: 8,
    mantissa_bits: 0,
    bias: 127,
    signed: false,
    has_inf: false,
    has_negative_zero: false,
    has_zero: false,
    nan: NanEncoding::AllOnesUnsigned,
    max_finite: pow2(127),
    min_normal: pow2(-127),
    min_subnormal: None,
};

/// An "fnuz" format (Graphcore's): no infinity, no negative zero, NaN is the negative-zero code
/// `0x80`, so the all-ones exponent holds normal values; the bias is the format's own.
pub(crate) const fn fnuz(exponent_bits: u32, mantissa_bits: u32, bias: i32) -> FloatFormat {
    let max_exp = (1 << exponent_bits) - 1 - bias;
    FloatFormat {
        exponent_bits,
        mantissa_bits,
        bias,
        signed: true,
        has_inf: false,
        has_negative_zero: false,
        has_zero: true,
        nan: NanEncoding::NegativeZero,
        max_finite: (2.0 - pow2(-(mantissa_bits as i32))) * pow2(max_exp),
        min_normal: pow2(1 - bias),
        min_subnormal: Some(pow2(1 - bias - mantissa_bits as i32)),
    }
}

/// An unsigned format with zero and subnormals, no infinity, and the all-ones code as its only NaN
/// (ml_dtypes' `float8_e5m3fnu`): the all-ones exponent holds normal values up to the code below.
pub(crate) const fn unsigned_finite(
    exponent_bits: u32,
    mantissa_bits: u32,
    bias: i32,
) -> FloatFormat {
    let max_exp = (1 << exponent_bits) - 1 - bias;
    FloatFormat {
        exponent_bits,
        mantissa_bits,
        bias,
        signed: false,
        has_inf: false,
        has_negative_zero: false,
        has_zero: true,
        nan: NanEncoding::AllOnesUnsigned,
        // The all-ones mantissa of the top exponent is the NaN: max is (2 - 2·2^-m) · 2^max_exp.
        max_finite: (2.0 - 2.0 * pow2(-(mantissa_bits as i32))) * pow2(max_exp),
        min_normal: pow2(1 - bias),
        min_subnormal: Some(pow2(1 - bias - mantissa_bits as i32)),
    }
}

/// An MX "fn" format: no infinity and no NaN, so the all-ones exponent holds normal values.
pub(crate) const fn finite_only(exponent_bits: u32, mantissa_bits: u32) -> FloatFormat {
    let bias = (1 << (exponent_bits - 1)) - 1;
    let max_exp = (1 << exponent_bits) - 1 - bias;
    FloatFormat {
        has_inf: false,
        nan: NanEncoding::None,
        max_finite: (2.0 - pow2(-(mantissa_bits as i32))) * pow2(max_exp),
        ..ieee(exponent_bits, mantissa_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ieee_formats_match_rust_constants() {
        assert_eq!(FLOAT32.max_finite, f32::MAX as f64);
        assert_eq!(FLOAT32.min_normal, f32::MIN_POSITIVE as f64);
        assert_eq!(FLOAT64.max_finite, f64::MAX);
        assert_eq!(FLOAT64.min_normal, f64::MIN_POSITIVE);
        assert_eq!(FLOAT16.max_finite, 65504.0);
        assert_eq!(FLOAT16.min_subnormal, Some(2f64.powi(-24)));
        assert_eq!(BFLOAT16.max_finite, half::bf16::MAX.to_f64());
        assert_eq!(BFLOAT16.min_subnormal, Some(2f64.powi(-133)));
    }

    #[test]
    fn float8_formats_match_the_published_tables() {
        // ml_dtypes README / finfo (shared reference §5).
        assert_eq!(FLOAT8_E5M2.max_finite, 57344.0);
        assert_eq!(FLOAT8_E5M2.min_normal, 2f64.powi(-14));
        assert_eq!(FLOAT8_E5M2.min_subnormal, Some(2f64.powi(-16)));
        assert_eq!(FLOAT8_E4M3FN.min_normal, 2f64.powi(-6));
        assert_eq!(FLOAT8_E4M3FN.min_subnormal, Some(2f64.powi(-9)));
        assert_eq!(FLOAT8_E4M3FNUZ.min_subnormal, Some(2f64.powi(-10)));
        assert_eq!(FLOAT8_E5M2FNUZ.min_normal, 2f64.powi(-15));
        assert_eq!(FLOAT8_E8M0FNU.max_finite, 2f64.powi(127));
        assert_eq!(FLOAT8_E8M0FNU.min_normal, 2f64.powi(-127));
        assert_eq!(FLOAT8_E8M0FNU.total_bits(), 8);
        assert_eq!(FLOAT8_E4M3FN.total_bits(), 8);
        assert_eq!(FLOAT8_E8M0FNU.lowest(), 2f64.powi(-127));
    }

    #[test]
    fn low_precision_formats_match_the_ml_dtypes_table() {
        // ml_dtypes 0.7 finfo (tests/fixtures/lowp/formats.json): max, min normal, min subnormal.
        use crate::DType::*;
        let rows = [
            (Float8E4M3, 240.0, -6, -9),
            (Float8E3M4, 15.5, -2, -6),
            (Float8E4M3B11Fnuz, 30.0, -10, -13),
            (Float8E5M3Fnu, 114688.0, -14, -17),
            (Float6E2M3Fn, 7.5, 0, -3),
            (Float6E3M2Fn, 28.0, -2, -4),
            (Float4E2M1Fn, 6.0, 0, -1),
        ];
        for (dtype, max, normal, sub) in rows {
            let f = dtype.float_format().unwrap();
            assert_eq!(f.max_finite, max);
            assert_eq!(f.min_normal, 2f64.powi(normal));
            assert_eq!(f.min_subnormal, Some(2f64.powi(sub)));
        }
        let format = |d: crate::DType| d.float_format().unwrap();
        assert_eq!(format(Float6E2M3Fn).bias, 1);
        assert_eq!(format(Float6E3M2Fn).total_bits(), 6);
        assert_eq!(format(Float4E2M1Fn).total_bits(), 4);
        assert_eq!(format(Float8E3M4).bias, 3);
    }
}
