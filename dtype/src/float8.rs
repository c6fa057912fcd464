//! Storage newtypes for the float8 formats (and torch's float4 pair byte).
//!
//! They hold the raw byte; value conversions live in `dtcast-cast`, which is bit-exact with PyTorch.
//! Each is named as its [`DType`](crate::DType) variant, and is that dtype's
//! [`Element`](crate::Element): one `float8!` line per dtype, nothing elsewhere.

use bytemuck::{Pod, Zeroable};

macro_rules! float8 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name(pub u8);

        impl crate::element::sealed::Sealed for $name {}
        impl crate::Element for $name {
            const DTYPE: crate::DType = crate::DType::$name;
        }

        impl $name {
            /// Wraps a raw encoding.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }

            /// The raw encoding.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
        }
    };
}

float8!(
    /// One `float8_e4m3fn` value (bias 7, max 448, no infinity, NaN `0x7F`/`0xFF`).
    Float8E4M3Fn
);
float8!(
    /// One `float8_e5m2` value (bias 15, max 57344, ±inf `0x7C`/`0xFC`).
    Float8E5M2
);
float8!(
    /// One `float8_e4m3fnuz` value (bias 8, max 240, NaN `0x80`, no -0).
    Float8E4M3Fnuz
);
float8!(
    /// One `float8_e5m2fnuz` value (bias 16, max 57344, NaN `0x80`, no -0).
    Float8E5M2Fnuz
);
float8!(
    /// One `float8_e8m0fnu` value: the power of two `2^(bits - 127)`; `0xFF` is NaN.
    Float8E8M0Fnu
);
float8!(
    /// One `float8_e4m3` value (bias 7, max 240, ±inf `0x78`/`0xF8`).
    Float8E4M3
);
float8!(
    /// One `float8_e3m4` value (bias 3, max 15.5, ±inf `0x70`/`0xF0`).
    Float8E3M4
);
float8!(
    /// One `float8_e4m3b11fnuz` value (bias 11, max 30, NaN `0x80`, no -0).
    Float8E4M3B11Fnuz
);
float8!(
    /// One `float8_e5m3fnu` value (unsigned, bias 15, max 114688, NaN `0xFF`).
    Float8E5M3Fnu
);
float8!(
    /// One `float4_e2m1fn_x2` byte: two float4 values, the first in the low nibble.
    Float4E2M1FnX2
);
