//! SIMD narrowings into the formats torch cannot cast, by ml_dtypes' rules (`ml.rs`): float32,
//! bfloat16 and float16 into float8_e4m3, float8_e3m4, float6 and float4, float32 into int4 and
//! uint4. They write one byte per element (the kernels' unit form); `packed.rs` packs the blocks.

use crate::lanes::{BF16, F16};
use crate::lowp_lanes::{E2M1Fn, E2M3Fn, E3M2Fn, E3M4, E4M3, I4, U4};

use super::steps::{is_nan, narrow_magnitude, step, Step};
use super::vector::Vector;

/// A narrow format as ml_dtypes encodes it: `MAN` mantissa bits, bias `BIAS`, `SHIFT` = 23 - MAN,
/// the largest finite magnitude code, and whether the all-ones exponent is inf/NaN (IEEE-like) or
/// holds numbers (the MX formats, which have neither).
pub(crate) trait MlFormat {
    /// The code of f32 bits `b` (Torch rounding: ml_dtypes'; Saturate: dtcast's).
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set.
    unsafe fn code<V: Vector, const SATURATE: bool>(b: V) -> V;
}

/// The code of f32 bits `b` in a format of `MAN` mantissa bits and bias `BIAS` whose largest
/// finite magnitude code is `MAX` and whose sign bit is `SIGN`; `IEEE`: `MAX + 1` is inf and
/// `MAX + 1 + 2^(MAN-1)` the quiet NaN.
#[inline(always)]
unsafe fn ml_code<
    V: Vector,
    const MAN: u32,
    const BIAS: u32,
    const SHIFT: i32,
    const MAX: u32,
    const SIGN: u32,
    const IEEE: bool,
    const SATURATE: bool,
>(
    b: V,
) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let a = b.and(V::splat(0x7FFF_FFFF));
        let code = narrow_magnitude::<V, MAN, BIAS, SHIFT>(a);
        let sign = b.shr::<31>().and(V::splat(1));
        let sign = V::select(sign.eq(V::splat(1)), V::splat(SIGN), V::splat(0));
        let nan = is_nan(b);
        if IEEE {
            let inf = MAX + 1;
            // Torch: overflow and inf → inf. Saturate: finite overflow → max, inf stays inf.
            let code = if SATURATE {
                let infinite = a.gt_i32(V::splat(0x7F7F_FFFF));
                V::select(infinite, V::splat(inf), code.min_i32(V::splat(MAX)))
            } else {
                code.min_i32(V::splat(inf))
            };
            let code = V::select(nan, V::splat(inf | 1 << (MAN - 1)), code);
            code.or(sign)
        } else {
            // No inf, no NaN: overflow and inf saturate. NaN: ml_dtypes writes the zero of the
            // opposite sign; Saturate writes +0.
            let code = code.min_i32(V::splat(MAX)).or(sign);
            let nan_code = if SATURATE {
                V::splat(0)
            } else {
                sign.and(V::splat(SIGN))
                    .add(V::splat(SIGN))
                    .and(V::splat(SIGN))
            };
            V::select(nan, nan_code, code)
        }
    }
}

macro_rules! ml_format {
    ($name:ident: man $man:literal, bias $bias:literal, shift $shift:literal, max $max:literal, sign $sign:literal, ieee $ieee:literal) => {
        pub(crate) struct $name;
        impl MlFormat for $name {
            #[inline(always)]
            unsafe fn code<V: Vector, const SATURATE: bool>(b: V) -> V {
                // SAFETY: the caller's contract.
                unsafe { ml_code::<V, $man, $bias, $shift, $max, $sign, $ieee, SATURATE>(b) }
            }
        }
    };
}

ml_format!(E4M3Format: man 3, bias 7, shift 20, max 0x77, sign 0x80, ieee true);
ml_format!(E3M4Format: man 4, bias 3, shift 19, max 0x6F, sign 0x80, ieee true);
ml_format!(E2M3Format: man 3, bias 1, shift 20, max 0x1F, sign 0x20, ieee false);
ml_format!(E3M2Format: man 2, bias 3, shift 21, max 0x1F, sign 0x20, ieee false);
ml_format!(E2M1Format: man 1, bias 1, shift 22, max 0x7, sign 0x8, ieee false);

/// Four vectors of f32 bits from `load` (at element offsets 0, w, 2w, 3w) → codes of `F`.
#[inline(always)]
unsafe fn four<V: Vector, F: MlFormat, const SATURATE: bool, const STREAM: bool>(
    load: impl Fn(usize) -> V,
    d: *mut u8,
) {
    let w = V::LANES;
    // SAFETY: the caller's contract: room for four vectors of codes at `d`.
    unsafe {
        V::store_u8::<STREAM>(
            F::code::<V, SATURATE>(load(0)),
            F::code::<V, SATURATE>(load(w)),
            F::code::<V, SATURATE>(load(2 * w)),
            F::code::<V, SATURATE>(load(3 * w)),
            d,
        )
    }
}

macro_rules! ml_steps {
    ($format:ty: $f32:ident => $lane:ty, $bf16:ident, $f16:ident) => {
        step!($f32<SATURATE>: f32 => $lane, vectors = 4, |s, d, w| {
            four::<V, $format, SATURATE, STREAM>(|i| V::load(s.add(4 * i)), d)
        });
        step!($bf16<SATURATE>: BF16 => $lane, vectors = 4, |s, d, w| {
            // bfloat16 → f32 is exact: the same codes as from f32.
            four::<V, $format, SATURATE, STREAM>(|i| V::load_u16(s.add(2 * i)).shl::<16>(), d)
        });
        step!($f16<SATURATE>: F16 => $lane, vectors = 4, |s, d, w| {
            // float16 → f32 is exact (NaN payloads do not matter: every NaN gives one code).
            four::<V, $format, SATURATE, STREAM>(|i| V::load_f16_as_f32(s.add(2 * i)), d)
        });
    };
}

ml_steps!(E4M3Format: F32ToE4M3 => E4M3, Bf16ToE4M3, F16ToE4M3);
ml_steps!(E3M4Format: F32ToE3M4 => E3M4, Bf16ToE3M4, F16ToE3M4);
ml_steps!(E2M3Format: F32ToE2M3Fn => E2M3Fn, Bf16ToE2M3Fn, F16ToE2M3Fn);
ml_steps!(E3M2Format: F32ToE3M2Fn => E3M2Fn, Bf16ToE3M2Fn, F16ToE3M2Fn);
ml_steps!(E2M1Format: F32ToE2M1Fn => E2M1Fn, Bf16ToE2M1Fn, F16ToE2M1Fn);

/// f32 → a 4-bit integer code: Torch (ml_dtypes) truncates and keeps the low bits, 0 for NaN,
/// ±inf and |x| ≥ 2^31 — which is what x86's truncation gives those lanes (`i32::MIN`, low bits
/// 0); Saturate clamps to [`LO`, `HI`] with NaN → 0.
#[inline(always)]
unsafe fn int4<V: Vector, const LO: i32, const HI: i32, const SATURATE: bool>(x: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let t = x.cvtt_f32_i32();
        let t = if SATURATE {
            // x >= 2^31 (+inf included) truncates to i32::MIN: the top of the range instead.
            let t = V::select(x.gt_i32(V::splat(0x4EFF_FFFF)), V::splat(HI as u32), t);
            let t = t.max_i32(V::splat(LO as u32)).min_i32(V::splat(HI as u32));
            V::select(is_nan(x), V::splat(0), t)
        } else {
            t
        };
        t.and(V::splat(0xF))
    }
}

step!(F32ToI4<SATURATE>: f32 => I4, vectors = 4, |s, d, w| {
    let f = |i: usize| int4::<V, -8, 7, SATURATE>(V::load(s.add(4 * i * w)));
    V::store_u8::<STREAM>(f(0), f(1), f(2), f(3), d)
});

step!(F32ToU4<SATURATE>: f32 => U4, vectors = 4, |s, d, w| {
    let f = |i: usize| int4::<V, 0, 15, SATURATE>(V::load(s.add(4 * i * w)));
    V::store_u8::<STREAM>(f(0), f(1), f(2), f(3), d)
});
