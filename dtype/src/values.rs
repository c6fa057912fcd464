//! What values a dtype holds: an integer type's range, and whether one dtype holds every value
//! of another — the one statement of "a lossless cast", which the cast modes (nothing to check)
//! and NumPy's promotion with ml_dtypes 0.7 (its safe casts between its own dtypes) both use.

use crate::{Category, DType, NanEncoding};

impl DType {
    /// The closed range of an integer dtype (bool counts as `0..=1`); `None` for the others.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Int4.integer_range(), Some((-8, 7)));
    /// assert_eq!(DType::UInt64.integer_range(), Some((0, u64::MAX.into())));
    /// assert_eq!(DType::Float32.integer_range(), None);
    /// ```
    pub fn integer_range(self) -> Option<(i128, i128)> {
        let bits = self.bits() as u32;
        match self.category() {
            Category::Bool => Some((0, 1)),
            Category::SignedInt => Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)),
            Category::UnsignedInt => Some((0, (1i128 << bits) - 1)),
            Category::Floating | Category::Complex => None,
        }
    }

    /// `true` when every value of `from` is a value of `self`: each number (the sign of a zero
    /// not counted: -0 and +0 are one value), ±inf and NaN. A complex dtype holds what its real
    /// part holds; `float4_e2m1fn_x2` (a byte of two values) holds nothing but itself.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert!(DType::Float32.holds_every_value_of(DType::BFloat16));
    /// assert!(!DType::Float16.holds_every_value_of(DType::BFloat16));
    /// assert!(DType::Float8E5M3Fnu.holds_every_value_of(DType::UInt4));
    /// assert!(!DType::Float8E5M3Fnu.holds_every_value_of(DType::Int1)); // -1
    /// assert!(!DType::Float8E8M0Fnu.holds_every_value_of(DType::UInt1)); // 0
    /// assert!(DType::Float8E4M3Fnuz.holds_every_value_of(DType::Float6E2M3Fn)); // -0 is 0
    /// ```
    pub fn holds_every_value_of(self, from: DType) -> bool {
        let to = self;
        if from == to {
            return true;
        }
        match (from.category(), to.category()) {
            (_, Category::Complex) => to.to_real().holds_every_value_of(from.to_real()),
            (Category::Complex, _) => false,
            (Category::Bool | Category::SignedInt | Category::UnsignedInt, _) => {
                let Some((lo, hi)) = from.integer_range() else {
                    return false;
                };
                match (to.integer_range(), to.float_format()) {
                    (Some((tlo, thi)), _) => tlo <= lo && hi <= thi,
                    (None, Some(f)) => {
                        // Every integer up to the largest magnitude needs that many digits.
                        let needed = 128 - (hi.max(-lo - 1) as u128).leading_zeros();
                        f.has_zero
                            && (f.signed || lo >= 0)
                            && hi.max(-lo) as f64 <= f.max_finite
                            && needed <= f.mantissa_bits + 1
                    }
                    (None, None) => false,
                }
            }
            (Category::Floating, Category::Floating) => {
                match (from.float_format(), to.float_format()) {
                    (Some(a), Some(b)) => {
                        b.mantissa_bits >= a.mantissa_bits
                            && b.max_finite >= a.max_finite
                            && b.min_subnormal.unwrap_or(b.min_normal)
                                <= a.min_subnormal.unwrap_or(a.min_normal)
                            && (!a.has_inf || b.has_inf)
                            && (!a.signed || b.signed)
                            && (!a.has_zero || b.has_zero)
                            && (a.nan == NanEncoding::None || b.nan != NanEncoding::None)
                    }
                    _ => false,
                }
            }
            (Category::Floating, _) => false,
        }
    }
}
