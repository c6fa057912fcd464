//! Rust element types and their dtypes.

use half::{bf16, f16};
use num_complex::Complex;

use crate::dtype::DType;

/// Implemented by the element types only (here, and the float8 newtypes in `float8.rs`).
pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A Rust type that stores one element of a [`DType`].
///
/// Sealed: implemented for `bool`, `u8`..`u64`, `i8`..`i64`, [`half::f16`], [`half::bf16`], `f32`,
/// `f64`, [`Complex`] of `f16` / `f32` / `f64` / `bf16`, and the float8 newtypes. The packed
/// dtypes (float6, float4, int4/2/1, uint4/2/1) have no element type: their buffers are bytes
/// (see [`crate::packing`]). Every element is
/// `NoUninit` (it can be viewed as bytes) and `CheckedBitPattern` (bytes can be checked and viewed
/// as it; only `bool` rejects some bit patterns, so every other element type is also `Pod`).
///
/// ```
/// use dtcast_dtype::{DType, Element};
/// use dtcast_dtype::half::bf16;
/// assert_eq!(<bf16 as Element>::DTYPE, DType::BFloat16);
/// assert_eq!(<u64 as Element>::DTYPE, DType::UInt64);
/// ```
pub trait Element:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + PartialEq
    + core::fmt::Debug
    + bytemuck::NoUninit
    + bytemuck::CheckedBitPattern
    + 'static
{
    /// The dtype this type stores.
    const DTYPE: DType;
}

macro_rules! element {
    ($($ty:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
        }
    )*};
}

element! {
    bool => Bool,
    u8 => UInt8,
    i8 => Int8,
    i16 => Int16,
    i32 => Int32,
    i64 => Int64,
    u16 => UInt16,
    u32 => UInt32,
    u64 => UInt64,
    f16 => Float16,
    bf16 => BFloat16,
    f32 => Float32,
    f64 => Float64,
    Complex<f16> => Complex32,
    Complex<f32> => Complex64,
    Complex<f64> => Complex128,
    Complex<bf16> => BComplex32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::float8::*;

    fn check<T: Element>() {
        assert_eq!(
            core::mem::size_of::<T>(),
            T::DTYPE.byte_size().unwrap(),
            "{}",
            T::DTYPE
        );
    }

    #[test]
    fn sizes_match_the_table() {
        check::<bool>();
        check::<u8>();
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<i64>();
        check::<u16>();
        check::<u32>();
        check::<u64>();
        check::<f16>();
        check::<bf16>();
        check::<f32>();
        check::<f64>();
        check::<Complex<f16>>();
        check::<Complex<f32>>();
        check::<Complex<f64>>();
        check::<Complex<bf16>>();
        check::<Float8E4M3Fn>();
        check::<Float8E5M2>();
        check::<Float8E4M3Fnuz>();
        check::<Float8E5M2Fnuz>();
        check::<Float8E8M0Fnu>();
        check::<Float8E4M3>();
        check::<Float8E3M4>();
        check::<Float8E4M3B11Fnuz>();
        check::<Float8E5M3Fnu>();
        check::<Float4E2M1FnX2>();
    }
}
