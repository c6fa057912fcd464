//! One storage type per dtype ("lane"), with how it reads, writes and converts.
//!
//! The generic kernels are written once over [`Lane`]; `dispatch.rs` instantiates them for every
//! (source, destination) pair.

use dtcast_dtype::{DType, TorchSupport};

use crate::formats::{self, Narrow};
use crate::ml;
use crate::rules::{self, Float8, Val};

/// Bytes of one element as the kernels see it: its storage size, and one byte for the packed
/// dtypes (unpacked a block at a time, code in the low bits).
#[inline]
pub(crate) const fn unit(dtype: DType) -> usize {
    match dtype.byte_size() {
        Some(size) => size,
        None => 1,
    }
}

/// Path-dependent bits of torch 2.15 that one pair of dtypes shows and others do not: data, read
/// by the CPU kernels here and written into the CUDA kernels' source by `dtcast-device`.
///
/// ```
/// use dtcast_cast::Quirks;
/// use dtcast_dtype::DType;
/// assert!(Quirks::of(DType::Complex32, DType::Float16).part_bits);
/// assert!(!Quirks::of(DType::Float16, DType::Complex32).part_bits); // torch goes through complex64
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    /// float16 → float32 writes `0x7FFFFFFF` for every NaN.
    pub f16_to_f32_nan: bool,
    /// float32 → bfloat16 writes `0xFFFF` for every NaN (ATen's AVX-512 conversion).
    pub f32_to_bf16_nan: bool,
    /// The NaN of the fnuz and e8m0 formats becomes integer 0 (not x86's "integer indefinite").
    pub float8_nan_to_int_zero: bool,
    /// The real part's bits are copied unchanged, NaN payloads and signalling NaNs included:
    /// a complex dtype to its own part type (`c10::convert` takes `.real()`, a no-op cast), and a
    /// part type to its complex dtype (the imaginary part +0) — except float16 → complex32, which
    /// torch routes through complex64. dtcast's values carry float16 and bfloat16 as float32,
    /// which quiets or canonicalises a NaN on the way back, so these pairs copy bytes.
    pub part_bits: bool,
    /// torch cannot cast the pair (a dtype it lacks or only stores is on one side): ml_dtypes'
    /// rules apply instead (see the crate docs).
    pub ml: bool,
}

impl Quirks {
    pub(crate) const NONE: Quirks = Quirks {
        f16_to_f32_nan: false,
        f32_to_bf16_nan: false,
        float8_nan_to_int_zero: false,
        part_bits: false,
        ml: false,
    };

    /// The quirks of the pair `from` → `to` (recorded in `torch_cast.json`, and read from
    /// `c10/util/TypeCast.h` for `part_bits`).
    #[inline(always)]
    pub fn of(from: DType, to: DType) -> Quirks {
        Quirks {
            f16_to_f32_nan: from == DType::Float16 && to == DType::Float32,
            f32_to_bf16_nan: from == DType::Float32 && to == DType::BFloat16,
            float8_nan_to_int_zero: matches!(
                from,
                DType::Float8E4M3Fnuz | DType::Float8E5M2Fnuz | DType::Float8E8M0Fnu
            ),
            part_bits: (from.is_complex() && to == from.to_real())
                || (to.is_complex() && from == to.to_real() && from != DType::Float16),
            ml: from.torch_support() != TorchSupport::Casts
                || to.torch_support() != TorchSupport::Casts,
        }
    }
}

/// A dtype's storage and conversion rules.
pub(crate) trait Lane: Copy + Send + Sync + 'static {
    /// The dtype this lane stores.
    const DTYPE: DType;
    /// Bytes per element.
    const SIZE: usize;
    /// Bits per element ([`DType::bits`]), a constant of the lane: the kernels' step arithmetic
    /// in bits folds at compile time (a call reads the dtype table at run time, every step).
    const BITS: usize = Self::DTYPE.bits();
    /// Reads one element from exactly `SIZE` little-endian bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Writes one element to exactly `SIZE` bytes, little-endian.
    fn write(self, bytes: &mut [u8]);
    /// The value torch's conversion sees.
    fn val(self) -> Val;
    /// The value ml_dtypes' conversion sees (the same but for the NaN of some float8 formats).
    #[inline(always)]
    fn val_ml(self) -> Val {
        self.val()
    }
    /// Torch mode: the element torch 2.15's CPU cast produces from `v`.
    fn torch(v: Val, q: Quirks) -> Self;
    /// Saturate mode: clamping float → int (as XLA), one rounding, saturating overflow.
    fn saturate(v: Val) -> Self;
}

#[inline(always)]
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&bytes[..N]);
    a
}

/// The storage items of a lane that is one byte holding a code (`$name(u8)`).
macro_rules! one_byte_storage {
    ($name:ident) => {
        const SIZE: usize = 1;
        #[inline(always)]
        fn read(bytes: &[u8]) -> Self {
            $name(bytes[0])
        }
        #[inline(always)]
        fn write(self, bytes: &mut [u8]) {
            bytes[0] = self.0;
        }
    };
}
pub(crate) use one_byte_storage;

// ---- integers

macro_rules! int_lane {
    ($ty:ty, $dtype:ident, $val:ident as $repr:ty, |$x:ident| $torch_float:expr) => {
        impl Lane for $ty {
            const DTYPE: DType = DType::$dtype;
            const SIZE: usize = core::mem::size_of::<$ty>();
            #[inline(always)]
            fn read(bytes: &[u8]) -> Self {
                <$ty>::from_le_bytes(array(bytes))
            }
            #[inline(always)]
            fn write(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_le_bytes());
            }
            #[inline(always)]
            fn val(self) -> Val {
                Val::$val(self as $repr)
            }
            #[inline(always)]
            fn torch(v: Val, q: Quirks) -> Self {
                match v.real() {
                    Val::Float(f) if q.ml => {
                        ml::float_to_int(f64::from(f), <$ty>::MIN.into(), <$ty>::MAX.into()) as $ty
                    }
                    Val::Float(f) if q.float8_nan_to_int_zero && f.is_nan() => 0,
                    Val::Bool(b) => b as $ty,
                    Val::Int(i) => i as $ty,
                    Val::UInt(u) => u as $ty,
                    Val::Float(f) => {
                        let $x = f64::from(f);
                        $torch_float
                    }
                    Val::Double($x) => $torch_float,
                    Val::CFloat(..) | Val::CDouble(..) => 0,
                }
            }
            #[inline(always)]
            fn saturate(v: Val) -> Self {
                match v.real() {
                    // Rust's float -> int `as` is XLA's convert: NaN -> 0, clamped, truncated.
                    Val::Float(f) => f as $ty,
                    Val::Double(x) => x as $ty,
                    _ => Self::torch(v, Quirks::NONE),
                }
            }
        }
    };
}

// torch's scalar path (torch-semantics.md §5): int8/int16/uint16 through a 32-bit truncation,
// uint8/uint32 through a 64-bit one, uint64 with the 2^63 shift.
int_lane!(u8, UInt8, Int as i64, |x| rules::cvtt64(x) as u8);
int_lane!(i8, Int8, Int as i64, |x| rules::cvtt32(x) as i8);
int_lane!(i16, Int16, Int as i64, |x| rules::cvtt32(x) as i16);
int_lane!(i32, Int32, Int as i64, |x| rules::cvtt32(x));
int_lane!(i64, Int64, Int as i64, |x| rules::cvtt64(x));
int_lane!(u16, UInt16, Int as i64, |x| rules::cvtt32(x) as u16);
int_lane!(u32, UInt32, Int as i64, |x| rules::cvtt64(x) as u32);
int_lane!(u64, UInt64, UInt as u64, |x| rules::cvtt_u64(x));

// ---- bool

/// `bool`: one byte; any nonzero byte reads as true, and only 0 or 1 is written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bool(pub(crate) u8);

impl Lane for Bool {
    const DTYPE: DType = DType::Bool;
    const SIZE: usize = 1;
    #[inline(always)]
    fn read(bytes: &[u8]) -> Self {
        Bool(bytes[0])
    }
    #[inline(always)]
    fn write(self, bytes: &mut [u8]) {
        bytes[0] = self.0;
    }
    #[inline(always)]
    fn val(self) -> Val {
        Val::Bool(self.0 != 0)
    }
    #[inline(always)]
    fn torch(v: Val, _: Quirks) -> Self {
        Bool(u8::from(rules::to_bool(v)))
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        Self::torch(v, Quirks::NONE)
    }
}

// ---- float32 and float64

impl Lane for f32 {
    const DTYPE: DType = DType::Float32;
    const SIZE: usize = 4;
    #[inline(always)]
    fn read(bytes: &[u8]) -> Self {
        f32::from_le_bytes(array(bytes))
    }
    #[inline(always)]
    fn write(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.to_bits().to_le_bytes());
    }
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(self)
    }
    #[inline(always)]
    fn torch(v: Val, q: Quirks) -> Self {
        rules::to_f32(v, q.f16_to_f32_nan)
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        rules::to_f32(v, false)
    }
}

impl Lane for f64 {
    const DTYPE: DType = DType::Float64;
    const SIZE: usize = 8;
    #[inline(always)]
    fn read(bytes: &[u8]) -> Self {
        f64::from_le_bytes(array(bytes))
    }
    #[inline(always)]
    fn write(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.to_bits().to_le_bytes());
    }
    #[inline(always)]
    fn val(self) -> Val {
        Val::Double(self)
    }
    #[inline(always)]
    fn torch(v: Val, _: Quirks) -> Self {
        rules::to_f64(v)
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        rules::to_f64(v)
    }
}

// ---- float16 and bfloat16

/// `float16` bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F16(pub(crate) u16);

impl Lane for F16 {
    const DTYPE: DType = DType::Float16;
    const SIZE: usize = 2;
    #[inline(always)]
    fn read(bytes: &[u8]) -> Self {
        F16(u16::from_le_bytes(array(bytes)))
    }
    #[inline(always)]
    fn write(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.0.to_le_bytes());
    }
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(formats::f16_to_f32(self.0))
    }
    #[inline(always)]
    fn torch(v: Val, _: Quirks) -> Self {
        // c10::Half(float): everything goes through f32 (f64 and int64 round twice).
        F16(formats::f32_to_f16(rules::to_f32(v, false)))
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        let x = rules::to_f64_for_rounding(v);
        F16(formats::f64_to_f16_once(x))
    }
}

/// `bfloat16` bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BF16(pub(crate) u16);

impl Lane for BF16 {
    const DTYPE: DType = DType::BFloat16;
    const SIZE: usize = 2;
    #[inline(always)]
    fn read(bytes: &[u8]) -> Self {
        BF16(u16::from_le_bytes(array(bytes)))
    }
    #[inline(always)]
    fn write(self, bytes: &mut [u8]) {
        bytes.copy_from_slice(&self.0.to_le_bytes());
    }
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(formats::bf16_to_f32(self.0))
    }
    #[inline(always)]
    fn torch(v: Val, q: Quirks) -> Self {
        let x = rules::to_f32(v, false);
        if q.f32_to_bf16_nan && x.is_nan() {
            BF16(0xFFFF)
        } else if q.ml && x.is_nan() {
            BF16(formats::BF16.nan(x.is_sign_negative()) as u16) // ml_dtypes keeps the sign
        } else {
            BF16(formats::f32_to_bf16(x))
        }
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        BF16(formats::f64_to_bf16_once(rules::to_f64_for_rounding(v)))
    }
}

// ---- float8

macro_rules! float8_lane {
    ($name:ident, $dtype:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $name(pub(crate) u8);

        impl Lane for $name {
            const DTYPE: DType = DType::$dtype;
            one_byte_storage!($name);
            #[inline(always)]
            fn val(self) -> Val {
                const F: Float8 = Float8::of(DType::$dtype).unwrap();
                Val::Float(F.decode(self.0))
            }
            #[inline(always)]
            fn val_ml(self) -> Val {
                Val::Float(ml::decode(&Narrow::of(DType::$dtype), u32::from(self.0)))
            }
            #[inline(always)]
            fn torch(v: Val, q: Quirks) -> Self {
                const F: Float8 = Float8::of(DType::$dtype).unwrap();
                if q.ml {
                    $name(ml::encode(&Narrow::of(DType::$dtype), v) as u8)
                } else {
                    $name(F.torch(v))
                }
            }
            #[inline(always)]
            fn saturate(v: Val) -> Self {
                const F: Float8 = Float8::of(DType::$dtype).unwrap();
                $name(F.saturate(v))
            }
        }
    };
}

float8_lane!(E4M3Fn, Float8E4M3Fn, "`float8_e4m3fn` bits.");
float8_lane!(E5M2, Float8E5M2, "`float8_e5m2` bits.");
float8_lane!(E4M3Fnuz, Float8E4M3Fnuz, "`float8_e4m3fnuz` bits.");
float8_lane!(E5M2Fnuz, Float8E5M2Fnuz, "`float8_e5m2fnuz` bits.");

/// `float8_e8m0fnu` bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct E8M0(pub(crate) u8);

impl Lane for E8M0 {
    const DTYPE: DType = DType::Float8E8M0Fnu;
    one_byte_storage!(E8M0);
    #[inline(always)]
    fn val(self) -> Val {
        Val::Float(formats::e8m0_to_f32(self.0))
    }
    #[inline(always)]
    fn torch(v: Val, q: Quirks) -> Self {
        let x = rules::to_f32(v, false);
        // ml_dtypes 0.7 (a source torch cannot cast): e8m0 has neither zero nor sign, so zero and
        // negative values become its NaN; torch drops the sign and writes 2^-127 for zero.
        if q.ml && (x <= 0.0 || x.is_nan()) {
            return E8M0(0xFF);
        }
        E8M0(formats::f32_to_e8m0(x))
    }
    #[inline(always)]
    fn saturate(v: Val) -> Self {
        E8M0(formats::f64_to_e8m0_saturating(rules::to_f64_for_rounding(
            v,
        )))
    }
}

// ---- complex: two components, each converted by the component type's rules.

macro_rules! complex_lane {
    ($name:ident, $dtype:ident, $part:ty, $val:ident, |$p:ident| $part_val:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $name(pub(crate) $part, pub(crate) $part);

        impl Lane for $name {
            const DTYPE: DType = DType::$dtype;
            const SIZE: usize = 2 * <$part as Lane>::SIZE;
            #[inline(always)]
            fn read(bytes: &[u8]) -> Self {
                let n = <$part as Lane>::SIZE;
                $name(<$part>::read(&bytes[..n]), <$part>::read(&bytes[n..2 * n]))
            }
            #[inline(always)]
            fn write(self, bytes: &mut [u8]) {
                let n = <$part as Lane>::SIZE;
                let (re, im) = bytes.split_at_mut(n);
                self.0.write(re);
                self.1.write(im);
            }
            #[inline(always)]
            fn val(self) -> Val {
                let part = |$p: $part| $part_val;
                Val::$val(part(self.0), part(self.1))
            }
            #[inline(always)]
            fn torch(v: Val, q: Quirks) -> Self {
                let part = Quirks {
                    ml: q.ml,
                    ..Quirks::NONE
                };
                $name(
                    <$part>::torch(v.real(), part),
                    <$part>::torch(v.imag(), part),
                )
            }
            #[inline(always)]
            fn saturate(v: Val) -> Self {
                $name(<$part>::saturate(v.real()), <$part>::saturate(v.imag()))
            }
        }
    };
}

complex_lane!(
    C32,
    Complex32,
    F16,
    CFloat,
    |p| formats::f16_to_f32(p.0),
    "`complex32`: two float16."
);
complex_lane!(
    C64,
    Complex64,
    f32,
    CFloat,
    |p| p,
    "`complex64`: two float32."
);
complex_lane!(
    C128,
    Complex128,
    f64,
    CDouble,
    |p| p,
    "`complex128`: two float64."
);
complex_lane!(
    BC32,
    BComplex32,
    BF16,
    CFloat,
    |p| formats::bf16_to_f32(p.0),
    "`bcomplex32`: two bfloat16."
);
