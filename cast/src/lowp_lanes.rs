//! The lanes of the dtypes that torch cannot cast (see `ml.rs` for their rules): ml_dtypes' float8
//! variants, float6, float4 and the sub-byte integers. A sub-byte element is one byte here, its
//! code in the low bits — the kernels see packed buffers unpacked a block at a time (`packed.rs`).

use dtcast_dtype::DType;

use crate::formats::Narrow;
use crate::lanes::{one_byte_storage, Lane, Quirks};
use crate::ml;
use crate::rules::Val;

/// A code of the float format that torch cannot cast at index `I` of [`DType::ALL`] (ml_dtypes'
/// float8 variants, float6, float4), by ml_dtypes' rules: one lane type for all of them, its
/// format read from the dtype table — a new format of this kind is a row there and an entry in
/// `dispatch.rs`'s `with_lanes!` (`MlFloat<{ DType::X.index() }>`), nothing here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MlFloat<const I: usize>(pub(crate) u8);

impl<const I: usize> MlFloat<I> {
    const FORMAT: Narrow = Narrow::of(DType::ALL[I]);
}

impl<const I: usize> Lane for MlFloat<I> {
    const DTYPE: DType = DType::ALL[I];
    one_byte_storage!(MlFloat);
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(ml::decode(&Self::FORMAT, u32::from(self.0)))
    }
    #[inline(always)]
    fn torch(v: Val, _: Quirks) -> Self {
        MlFloat(ml::encode(&Self::FORMAT, v) as u8)
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        MlFloat(ml::saturate(&Self::FORMAT, v) as u8)
    }
}

/// The [`MlFloat`] lane of a dtype, by its variant name.
macro_rules! ml_float {
    ($dtype:ident) => {
        $crate::lowp_lanes::MlFloat<{ dtcast_dtype::DType::$dtype.index() }>
    };
}
pub(crate) use ml_float;

macro_rules! narrow_int_lane {
    ($name:ident, $dtype:ident, $bits:literal, $signed:literal) => {
        #[doc = concat!("`", stringify!($dtype), "` code (", $bits, " low bits).")]
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $name(pub(crate) u8);

        impl $name {
            const MASK: i64 = (1 << $bits) - 1;
            const MIN: i64 = if $signed { -(1 << ($bits - 1)) } else { 0 };
            const MAX: i64 = if $signed {
                (1 << ($bits - 1)) - 1
            } else {
                Self::MASK
            };

            #[inline(always)]
            fn wrap(i: i64) -> Self {
                $name((i & Self::MASK) as u8)
            }
        }

        impl Lane for $name {
            const DTYPE: DType = DType::$dtype;
            one_byte_storage!($name);
            #[inline(always)]
            fn val(self) -> Val {
                let code = i64::from(self.0) & Self::MASK;
                // Sign-extend the top bit of a signed code.
                let negative = $signed && code > Self::MAX;
                Val::Int(if negative { code - (1 << $bits) } else { code })
            }
            #[inline(always)]
            fn torch(v: Val, _: Quirks) -> Self {
                match v.real() {
                    Val::Bool(b) => $name(u8::from(b)),
                    Val::Int(i) => Self::wrap(i),
                    Val::UInt(u) => Self::wrap(u as i64),
                    Val::Float(x) => Self::wrap(ml::float_to_narrow_int(f64::from(x))),
                    Val::Double(x) => Self::wrap(ml::float_to_narrow_int(x)),
                    Val::CFloat(..) | Val::CDouble(..) => $name(0),
                }
            }
            #[inline(always)]
            fn saturate(v: Val) -> Self {
                let clamp = |x: f64| (x as i64).clamp(Self::MIN, Self::MAX); // NaN -> 0
                match v.real() {
                    Val::Float(x) => Self::wrap(clamp(f64::from(x))),
                    Val::Double(x) => Self::wrap(clamp(x)),
                    _ => Self::torch(v, Quirks::NONE),
                }
            }
        }
    };
}

narrow_int_lane!(I4, Int4, 4, true);
narrow_int_lane!(U4, UInt4, 4, false);
narrow_int_lane!(I2, Int2, 2, true);
narrow_int_lane!(U2, UInt2, 2, false);
narrow_int_lane!(I1, Int1, 1, true);
narrow_int_lane!(U1, UInt1, 1, false);
