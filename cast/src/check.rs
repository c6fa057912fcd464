//! Checked and Exact modes: which elements a destination cannot take.

use dtcast_dtype::{Category, DType, NanEncoding};

use crate::error::ValueErrorKind;
use crate::rules::Val;

/// A number, exactly: integers as `i128`, floats as `f64`.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num(v: Val) -> Num {
    match v {
        Val::Bool(b) => Num::Int(i128::from(b)),
        Val::Int(i) => Num::Int(i128::from(i)),
        Val::UInt(u) => Num::Int(i128::from(u)),
        Val::Float(x) => Num::Float(f64::from(x)),
        Val::Double(x) => Num::Float(x),
        Val::CFloat(re, _) => Num::Float(f64::from(re)),
        Val::CDouble(re, _) => Num::Float(re),
    }
}

/// Numeric equality where NaN equals NaN and -0 equals +0.
fn same(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(a), Num::Int(b)) => a == b,
        (Num::Float(a), Num::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
        (Num::Int(i), Num::Float(x)) | (Num::Float(x), Num::Int(i)) => {
            // f64 holds integers up to 2^1023 exactly; i128 values are all below 2^127.
            x.is_finite() && x.trunc() == x && x.abs() < 1.8e38 && x as i128 == i
        }
    }
}

/// Exact mode: `true` if `result` (the destination's value) is `v` (NaN equals NaN, -0 equals +0).
#[inline]
pub(crate) fn same_value(v: Val, result: Val) -> bool {
    same(num(v.real()), num(result.real())) && same(num(v.imag()), num(result.imag()))
}

/// What a destination can hold, worked out once per cast (not once per element).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// A complex destination: both parts are checked against `real`, and no imaginary part is lost.
    complex: bool,
    real: RealLimits,
}

#[derive(Clone, Copy, Debug)]
enum RealLimits {
    /// bool: anything but NaN.
    Bool,
    /// An integer type's closed range, and (for float values) the same range as f64 bounds:
    /// `lo` and `hi + 1` are powers of two or 0, so exact in f64, where `hi` may not be.
    Int {
        lo: i128,
        hi: i128,
        lo_f: f64,
        hi_excl_f: f64,
    },
    /// A floating type: magnitudes from `threshold` on overflow (the tie itself when
    /// `tie_overflows`); unsigned formats (e8m0) hold only positive values.
    Float {
        threshold: f64,
        tie_overflows: bool,
        has_inf: bool,
        has_nan: bool,
        signed: bool,
        has_zero: bool,
    },
}

impl Limits {
    pub(crate) fn of(to: DType) -> Limits {
        let part = to.to_real();
        let real = match part.category() {
            Category::SignedInt | Category::UnsignedInt => {
                let (lo, hi) = int_range(part);
                RealLimits::Int {
                    lo,
                    hi,
                    lo_f: lo as f64,
                    hi_excl_f: (hi + 1) as f64,
                }
            }
            Category::Floating => match part.float_format() {
                Some(f) => {
                    let (threshold, tie_overflows) = f.overflow_threshold();
                    RealLimits::Float {
                        threshold,
                        tie_overflows,
                        has_inf: f.has_inf,
                        has_nan: f.nan != NanEncoding::None,
                        signed: f.signed,
                        has_zero: f.has_zero,
                    }
                }
                None => RealLimits::Bool,
            },
            Category::Bool | Category::Complex => RealLimits::Bool,
        };
        Limits {
            complex: to.is_complex(),
            real,
        }
    }
}

/// Checked mode: `Some(kind)` if a destination with `limits` cannot represent `v` (rounding allowed).
#[inline]
pub(crate) fn checked_problem(v: Val, limits: &Limits) -> Option<ValueErrorKind> {
    if limits.complex {
        return real_problem(num(v.real()), &limits.real)
            .or_else(|| real_problem(num(v.imag()), &limits.real));
    }
    if !is_zero(num(v.imag())) {
        return Some(ValueErrorKind::ImaginaryPart);
    }
    real_problem(num(v.real()), &limits.real)
}

/// An integer of at most 64 bits as f64, without the software `i128 -> f64` conversion that LLVM
/// would otherwise speculate on every element.
#[inline]
fn int_to_f64(i: i128) -> f64 {
    match i64::try_from(i) {
        Ok(v) => v as f64,
        Err(_) => i as u64 as f64,
    }
}

fn is_zero(n: Num) -> bool {
    match n {
        Num::Int(i) => i == 0,
        Num::Float(x) => x == 0.0,
    }
}

/// The closed range of an integer dtype (the dtype table's fact).
pub(crate) fn int_range(to: DType) -> (i128, i128) {
    to.integer_range().unwrap_or((0, 1))
}

#[inline]
fn real_problem(n: Num, limits: &RealLimits) -> Option<ValueErrorKind> {
    match *limits {
        RealLimits::Bool => {
            matches!(n, Num::Float(x) if x.is_nan()).then_some(ValueErrorKind::NotFinite)
        }
        RealLimits::Int {
            lo,
            hi,
            lo_f,
            hi_excl_f,
        } => match n {
            Num::Int(i) => (i < lo || i > hi).then_some(ValueErrorKind::OutOfRange),
            Num::Float(x) if !x.is_finite() => Some(ValueErrorKind::NotFinite),
            Num::Float(x) => {
                let t = x.trunc();
                (t < lo_f || t >= hi_excl_f).then_some(ValueErrorKind::OutOfRange)
            }
        },
        RealLimits::Float {
            threshold,
            tie_overflows,
            has_inf,
            has_nan,
            signed,
            has_zero,
        } => {
            let x = match n {
                Num::Int(i) => int_to_f64(i),
                Num::Float(x) => x,
            };
            if x.is_nan() {
                (!has_nan).then_some(ValueErrorKind::NotFinite)
            } else if !signed && (x < 0.0 || (x == 0.0 && !has_zero)) {
                Some(ValueErrorKind::OutOfRange) // no sign (and e8m0: no zero)
            } else if x.is_infinite() {
                (!has_inf).then_some(ValueErrorKind::NotFinite)
            } else {
                let a = x.abs();
                (a > threshold || (a == threshold && tie_overflows))
                    .then_some(ValueErrorKind::Overflow)
            }
        }
    }
}

/// Python-style text of a value: `300`, `300.0`, `NaN`, `inf`, `(1.0+2.0j)`.
pub(crate) fn display(v: Val) -> String {
    fn real(x: f64) -> String {
        if x.is_nan() {
            "NaN".to_owned()
        } else {
            format!("{x:?}")
        }
    }
    match v {
        Val::Bool(b) => if b { "True" } else { "False" }.to_owned(),
        Val::Int(i) => i.to_string(),
        Val::UInt(u) => u.to_string(),
        Val::Float(x) => real(f64::from(x)),
        Val::Double(x) => real(x),
        Val::CFloat(re, im) => complex(f64::from(re), f64::from(im)),
        Val::CDouble(re, im) => complex(re, im),
    }
}

fn complex(re: f64, im: f64) -> String {
    let sign = if im.is_sign_negative() && !im.is_nan() {
        '-'
    } else {
        '+'
    };
    let im_text = if im.is_nan() {
        "NaN".to_owned()
    } else {
        format!("{:?}", im.abs())
    };
    let re_text = if re.is_nan() {
        "NaN".to_owned()
    } else {
        format!("{re:?}")
    };
    format!("({re_text}{sign}{im_text}j)")
}

/// `true` when every value of `from` is exactly a value of `to`, so Checked and Exact have
/// nothing to check (-0 into a format without it is +0, which Exact counts as the same value).
pub(crate) fn lossless(from: DType, to: DType) -> bool {
    to.holds_every_value_of(from)
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    fn thresholds() {
        let t = |d: DType| d.float_format().unwrap().overflow_threshold();
        assert_eq!(t(DType::Float16), (65520.0, true));
        assert_eq!(t(DType::Float8E4M3Fn), (464.0, false));
        assert_eq!(t(DType::Float8E4M3Fnuz), (248.0, true));
        assert_eq!(t(DType::Float8E8M0Fnu), (1.5 * 2f64.powi(127), true));
    }

    fn lossless_pairs() {
        assert!(lossless(DType::Float16, DType::Float32));
        assert!(lossless(DType::Float8E5M2, DType::Float16));
        assert!(lossless(DType::Float8E8M0Fnu, DType::Float32));
        assert!(!lossless(DType::Float8E8M0Fnu, DType::Float16));
        assert!(!lossless(DType::Float8E5M2, DType::Float8E4M3Fn));
        assert!(lossless(DType::Int16, DType::Float32));
        assert!(!lossless(DType::Int32, DType::Float32));
        assert!(lossless(DType::UInt8, DType::BFloat16));
        assert!(lossless(DType::UInt8, DType::Int16));
        assert!(!lossless(DType::Int8, DType::UInt8));
        assert!(!lossless(DType::Int8, DType::Float8E8M0Fnu));
        assert!(!lossless(DType::Bool, DType::Float8E8M0Fnu));
        assert!(lossless(DType::Bool, DType::Float8E4M3Fnuz));
        assert!(lossless(DType::Float32, DType::Complex64));
        assert!(!lossless(DType::Complex64, DType::Float64));
        assert!(!lossless(DType::Float16, DType::BFloat16));
        assert!(!lossless(DType::Float32, DType::Float8E4M3Fnuz));
        assert!(lossless(DType::Float4E2M1Fn, DType::Float6E2M3Fn));
        assert!(lossless(DType::Float6E3M2Fn, DType::Float8E4M3Fn));
        assert!(lossless(DType::Float8E4M3, DType::Float16));
        assert!(!lossless(DType::Float8E4M3, DType::Float8E4M3Fn)); // inf
        assert!(lossless(DType::Int1, DType::Float4E2M1Fn));
        assert!(!lossless(DType::Int4, DType::Float4E2M1Fn));
        assert!(lossless(DType::UInt2, DType::Int4));
        assert!(!lossless(DType::UInt4, DType::Float6E2M3Fn)); // 15 > 7.5
        assert!(!lossless(DType::Bool, DType::Int1)); // true is 1; int1 is -1..0
        assert!(lossless(DType::Bool, DType::UInt1));
    }

    fn display_is_python_like() {
        assert_eq!(display(Val::Float(300.0)), "300.0");
        assert_eq!(display(Val::Double(f64::NAN)), "NaN");
        assert_eq!(display(Val::Int(-3)), "-3");
        assert_eq!(display(Val::CFloat(1.0, -2.0)), "(1.0-2.0j)");
    }

    crate::self_test::list!(thresholds, lossless_pairs, display_is_python_like);
}
