//! ml_dtypes 0.7's own `common_dtype` for its DTypes (`NPyCustomFloat_CommonDType`,
//! `NPyIntN_CommonDType`, `NPyCustomComplex_CommonDType` in its `floats.cc`, `ints.cc`,
//! `complex.cc`), which NumPy asks whenever one of them is the first of a pair. `None` is
//! `NotImplemented`: NumPy then asks the other side, or (in a reduction) moves on.

use dtcast_dtype::{DType, FloatFormat};

use super::{common_both, entry, Entry, Kind, Node, Origin};

use DType as D;

/// `cls.__common_dtype__(other)` for one of ml_dtypes' dtypes `cls`.
pub(super) fn common(cls: &Entry, other: Node) -> Option<Node> {
    use Node::{PyComplex, PyFloat, PyInt};
    let me = Node::DType(cls.dtype);
    let dt = |d: DType| Some(Node::DType(d));
    // NumPy's own promotion of `with` and a builtin dtype.
    let builtin = |with: DType, b: &Entry| common_both(Node::DType(with), Node::DType(b.dtype));
    let o = match other {
        Node::DType(o) if o == cls.dtype => return Some(me),
        Node::DType(o) => entry(o),
        PyInt | PyFloat | PyComplex => {
            return match (cls.origin, other) {
                // A float takes Python ints and floats; a Python complex makes complex64.
                (Origin::MlFloat, PyComplex) => dt(D::Complex64),
                // An integer keeps ints and leaves a float or complex abstract, so that concrete
                // operands decide its precision (alone: float64, complex128).
                (Origin::MlInt, PyFloat | PyComplex) => Some(other),
                _ => Some(me),
            };
        }
    };
    let byte_integer =
        o.origin == Origin::Builtin && matches!(o.kind, Kind::Int | Kind::UInt) && o.itemsize == 1;
    match cls.origin {
        Origin::MlFloat => match (o.origin, o.kind) {
            // The legacy safe-cast table, lossy byte integers included.
            (Origin::Builtin, Kind::Bool) => Some(me),
            (Origin::Builtin, Kind::Int | Kind::UInt) if byte_integer => Some(me),
            // Every ml_dtypes float fits float32: float32's integer promotion.
            (Origin::Builtin, Kind::Int | Kind::UInt) => builtin(D::Float32, o),
            (Origin::Builtin, _) if o.dtype == D::Float16 => dt(D::Float32),
            (Origin::Builtin, _) => Some(other),
            (Origin::MlFloat, _) => {
                // The lower-priority format defers; the type number breaks ties.
                let (mine, theirs) = (key(cls.dtype), key(o.dtype));
                if mine < theirs || (mine == theirs && cls.num < o.num) {
                    return None;
                }
                if cls.dtype.holds_every_value_of(o.dtype) {
                    Some(me)
                } else if o.dtype.holds_every_value_of(cls.dtype) {
                    Some(other)
                } else {
                    dt(D::Float32)
                }
            }
            // Keep the float only where it holds every value of the integer.
            (Origin::MlInt, _) if cls.dtype.holds_every_value_of(o.dtype) => Some(me),
            (Origin::MlInt, _) => dt(D::Float32),
            (Origin::MlComplex, _) => None,
        },
        Origin::MlInt => match (o.origin, o.kind) {
            (Origin::Builtin, Kind::Bool) => Some(me),
            (Origin::Builtin, Kind::UInt) if cls.dtype.is_signed() => builtin(D::Int8, o),
            // Smaller than every NumPy number but bool.
            (Origin::Builtin, _) => Some(other),
            // Between two of them the type number picks who answers; int8 holds every one.
            (Origin::MlInt, _) if cls.num < o.num => None,
            (Origin::MlInt, _) if !cls.dtype.is_signed() && !o.dtype.is_signed() => dt(D::UInt8),
            (Origin::MlInt, _) => dt(D::Int8),
            (Origin::MlFloat | Origin::MlComplex, _) => None,
        },
        Origin::MlComplex => {
            let part = cls.dtype.to_real();
            match (o.origin, o.kind) {
                (Origin::Builtin, Kind::Bool) => Some(me),
                (Origin::Builtin, Kind::Int | Kind::UInt) if byte_integer => Some(me),
                (Origin::Builtin, Kind::Int | Kind::UInt) => builtin(D::Complex64, o),
                (Origin::Builtin, _) => match o.dtype {
                    D::Float16 if part.holds_every_value_of(D::Float16) => Some(me),
                    D::Float16 | D::Float32 => dt(D::Complex64),
                    D::Float64 => dt(D::Complex128),
                    _ => Some(other),
                },
                // Complex when its part holds the float, else complex64.
                (Origin::MlFloat, _) if part.holds_every_value_of(o.dtype) => Some(me),
                (Origin::MlFloat, _) => dt(D::Complex64),
                (Origin::MlInt, _) => Some(me),
                // bfloat16 and float16 hold neither the other.
                (Origin::MlComplex, _) => dt(D::Complex64),
            }
        }
        Origin::Builtin => None, // never: `cls` is ml_dtypes'
    }
}

/// `CustomFloatPromotionKey`: `numeric_limits`' max_exponent, digits, -min_exponent, infinity,
/// quiet NaN and sign, compared in that order — who answers a pair of floats, not the answer.
fn key(dtype: DType) -> (i32, u32, i32, bool, bool, bool) {
    let Some(f) = dtype.float_format() else {
        return (0, 0, 0, false, false, false);
    };
    let exponent = |x: f64| ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let FloatFormat {
        mantissa_bits,
        max_finite,
        min_normal,
        has_inf,
        signed,
        ..
    } = f;
    (
        exponent(max_finite) + 1,
        mantissa_bits + 1,
        -(exponent(min_normal) + 1),
        has_inf,
        f.nan != dtcast_dtype::NanEncoding::None,
        signed,
    )
}
