//! SIMD casts between the formats torch cannot cast and float32/bfloat16/float16, by ml_dtypes'
//! rules (`ml.rs`): into float8_e4m3, float8_e3m4, float8_e5m3fnu, float6 and float4 and back, and float32 into
//! int4 and uint4; and torch's float8 formats into float32, bfloat16 and float16. Packed sides
//! (float6, float4, int4, uint4) are read and written packed, as the buffers store them — no
//! unpacked copy.

use crate::lanes::{E4M3Fn, Lane, BF16, E5M2, F16};
use crate::lowp_lanes::{ml_float, I4, U4};

use dtcast_dtype::DType;

use crate::formats::Narrow;

use super::steps::{
    is_nan, narrow_constants, narrow_magnitude, step, widened, FromBf16, FromF16, FromF32, Step,
    Widened,
};
use super::vector::Vector;
use super::{pick, Pick};

type E4M3 = ml_float!(Float8E4M3);
type E3M4 = ml_float!(Float8E3M4);
type E2M3Fn = ml_float!(Float6E2M3Fn);
type E3M2Fn = ml_float!(Float6E3M2Fn);
type E2M1Fn = ml_float!(Float4E2M1Fn);
type E5M3Fnu = ml_float!(Float8E5M3Fnu);

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
/// finite magnitude code is `MAX` and whose sign bit is `SIGN` (f32's sign moved right by
/// `TO_SIGN`); `IEEE`: `MAX + 1` is inf and `MAX + 1 + 2^(MAN-1)` the quiet NaN; `!SIGNED`: an
/// unsigned format without inf whose NaN is `MAX + 1` (float8_e5m3fnu), where a negative value
/// but -0 is past the range.
#[inline(always)]
unsafe fn ml_code<
    V: Vector,
    const MAN: u32,
    const BIAS: u32,
    const SHIFT: i32,
    const MAX: u32,
    const SIGN: u32,
    const TO_SIGN: i32,
    const IEEE: bool,
    const SIGNED: bool,
    const SATURATE: bool,
>(
    b: V,
) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let a = b.and(V::splat(0x7FFF_FFFF));
        let code = narrow_magnitude::<V, MAN, BIAS, SHIFT>(a);
        let sign = b.shr::<TO_SIGN>().and(V::splat(SIGN));
        let nan = a.gt_i32(V::splat(0x7F80_0000));
        if !SIGNED {
            // Torch (ml_dtypes): overflow, inf, NaN and negative values are the NaN `MAX + 1`.
            // Saturate: overflow and inf give the max, negative values the lowest value 0, NaN
            // stays NaN.
            let negative = V::splat(0).gt_i32(b); // -0 too: its code is 0 either way
            let nan_code = V::splat(MAX + 1);
            return if SATURATE {
                let code = V::select(negative, V::splat(0), code.min_i32(V::splat(MAX)));
                V::select(nan, nan_code, code)
            } else {
                let below = V::select(a.gt_i32(V::splat(0)), nan_code, V::splat(0));
                V::select(negative, below, code.min_i32(nan_code))
            };
        }
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
            // opposite sign (SIGN - sign); Saturate writes +0.
            let code = code.min_i32(V::splat(MAX)).or(sign);
            let nan_code = if SATURATE {
                V::splat(0)
            } else {
                V::splat(SIGN).sub(sign)
            };
            V::select(nan, nan_code, code)
        }
    }
}

/// A format of the table whose codes the SIMD rules compute: `$name` stands for `$dtype`.
macro_rules! ml_format {
    ($name:ident: $dtype:ident) => {
        pub(crate) struct $name;
        impl MlFormat for $name {
            #[inline(always)]
            unsafe fn code<V: Vector, const SATURATE: bool>(b: V) -> V {
                narrow_constants!(Narrow::of(DType::$dtype));
                // SAFETY: the caller's contract.
                unsafe {
                    ml_code::<V, MAN, BIAS, SHIFT, MAX, SIGN, TO_SIGN, IEEE, SIGNED, SATURATE>(b)
                }
            }
        }
        impl MlValue for $name {
            #[inline(always)]
            unsafe fn value<V: Vector>(c: V) -> V {
                narrow_constants!(Narrow::of(DType::$dtype));
                // SAFETY: the caller's contract.
                unsafe { ml_value::<V, SHIFT, BIAS, SIGN, TO_SIGN, MAX, IEEE, SIGNED>(c) }
            }
        }
    };
}

ml_format!(E4M3Format: Float8E4M3);
ml_format!(E3M4Format: Float8E3M4);
ml_format!(E2M3Format: Float6E2M3Fn);
ml_format!(E3M2Format: Float6E3M2Fn);
ml_format!(E2M1Format: Float4E2M1Fn);
ml_format!(E5M3FnuFormat: Float8E5M3Fnu);

/// Writes four vectors of codes at `d` as dtype `D` stores them: one byte each, or packed
/// (4 or 6 bits each).
#[inline(always)]
unsafe fn put<V: Vector, D: Lane, const STREAM: bool>(codes: [V; 4], d: *mut u8) {
    let [a, b, c, e] = codes;
    // SAFETY: the caller's contract: room for the codes as `D` stores them at `d`.
    unsafe {
        match D::BITS {
            4 => V::store_u4::<STREAM>(a, b, c, e, d),
            6 => V::store_u6(a, b, c, e, d),
            _ => V::store_u8::<STREAM>(a, b, c, e, d),
        }
    }
}

/// Writes four vectors of f32 bits at `d`, one after another (a loop, not a closure: see
/// [`four`]).
#[inline(always)]
unsafe fn store4<V: Vector, const STREAM: bool>(values: [V; 4], d: *mut u8) {
    // SAFETY: the caller's contract: room for four vectors of f32 at `d`.
    unsafe {
        for (k, v) in values.into_iter().enumerate() {
            v.store::<STREAM>(d.add(4 * V::LANES * k));
        }
    }
}

/// Four vectors of codes of dtype `S` (one byte each, or packed) at `s`, in element order.
#[inline(always)]
unsafe fn get<V: Vector, S: Lane>(s: *const u8) -> [V; 4] {
    let w = V::LANES;
    // SAFETY: the caller's contract: four vectors of codes at `s` as `S` stores them.
    unsafe {
        match S::BITS {
            4 => {
                let [a, b] = V::load_u4(s);
                let [c, d] = V::load_u4(s.add(w));
                [a, b, c, d]
            }
            6 => V::load_u6(s),
            _ => [
                V::load_u8(s),
                V::load_u8(s.add(w)),
                V::load_u8(s.add(2 * w)),
                V::load_u8(s.add(3 * w)),
            ],
        }
    }
}

/// Four vectors of the step's source at `s`, read as f32 bits by `L`, → codes of `F`, written
/// as `D` stores them. (No closures here or below: one that does not inline into the
/// `#[target_feature]` loop has none of its instruction set, and its intrinsics become calls —
/// `steps::Widened`.)
#[inline(always)]
unsafe fn four<
    V: Vector,
    F: MlFormat,
    L: Widened,
    D: Lane,
    const SATURATE: bool,
    const STREAM: bool,
>(
    s: *const u8,
    d: *mut u8,
) {
    // SAFETY: the caller's contract: four vectors at `s`, room for their codes at `d`.
    unsafe {
        let codes = [
            F::code::<V, SATURATE>(widened::<V, L>(s, 0)),
            F::code::<V, SATURATE>(widened::<V, L>(s, 1)),
            F::code::<V, SATURATE>(widened::<V, L>(s, 2)),
            F::code::<V, SATURATE>(widened::<V, L>(s, 3)),
        ];
        put::<V, D, STREAM>(codes, d)
    }
}

macro_rules! ml_steps {
    ($format:ty: $f32:ident => $lane:ty, $bf16:ident, $f16:ident) => {
        step!($f32<SATURATE>: f32 => $lane, vectors = 4, |s, d, w| {
            four::<V, $format, FromF32, $lane, SATURATE, STREAM>(s, d)
        });
        step!($bf16<SATURATE>: BF16 => $lane, vectors = 4, |s, d, w| {
            // bfloat16 → f32 is exact: the same codes as from f32.
            four::<V, $format, FromBf16, $lane, SATURATE, STREAM>(s, d)
        });
        step!($f16<SATURATE>: F16 => $lane, vectors = 4, |s, d, w| {
            // float16 → f32 is exact (NaN payloads do not matter: every NaN gives one code).
            four::<V, $format, FromF16, $lane, SATURATE, STREAM>(s, d)
        });
    };
}

ml_steps!(E4M3Format: F32ToE4M3 => E4M3, Bf16ToE4M3, F16ToE4M3);
ml_steps!(E3M4Format: F32ToE3M4 => E3M4, Bf16ToE3M4, F16ToE3M4);
ml_steps!(E2M3Format: F32ToE2M3Fn => E2M3Fn, Bf16ToE2M3Fn, F16ToE2M3Fn);
ml_steps!(E3M2Format: F32ToE3M2Fn => E3M2Fn, Bf16ToE3M2Fn, F16ToE3M2Fn);
ml_steps!(E2M1Format: F32ToE2M1Fn => E2M1Fn, Bf16ToE2M1Fn, F16ToE2M1Fn);
ml_steps!(E5M3FnuFormat: F32ToE5M3Fnu => E5M3Fnu, Bf16ToE5M3Fnu, F16ToE5M3Fnu);

// ---- widening: a narrow format's codes → f32 bits, exactly (`ml::decode`)

/// The f32 bits of the codes `c` of a format with `23 - SHIFT` mantissa bits, bias `BIAS`, sign
/// bit `SIGN` (moved up by `TO_SIGN`) and largest finite magnitude code `MAX`; `IEEE`: `MAX + 1`
/// is inf and the codes above it NaN (a NaN reads as the quiet NaN of its sign, as ml_dtypes reads
/// it); `!SIGNED`: `MAX + 1` is the (positive) NaN. Normal codes: the bits moved up to f32's positions, the exponent rebiased by an integer
/// add. Subnormal codes: the mantissa as an integer times the format's quantum — exact, and no
/// float operation ever sees a subnormal (which costs a microcode assist on x86).
#[inline(always)]
unsafe fn ml_value<
    V: Vector,
    const SHIFT: i32,
    const BIAS: u32,
    const SIGN: u32,
    const TO_SIGN: i32,
    const MAX: u32,
    const IEEE: bool,
    const SIGNED: bool,
>(
    c: V,
) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let magnitude = c.and(V::splat(SIGN - 1));
        let man = 23 - SHIFT as u32;
        let normal = magnitude.shl::<SHIFT>().add(V::splat((127 - BIAS) << 23));
        let quantum = V::splat((128 - BIAS - man) << 23); // 2^(1 - BIAS - man)
        let subnormal = magnitude.i32_to_f32().f32_mul(quantum);
        let is_normal = magnitude.gt_i32(V::splat((1 << man) - 1));
        let value = V::select(is_normal, normal, subnormal);
        let value = if IEEE {
            let special = V::select(
                magnitude.gt_i32(V::splat(MAX + 1)),
                V::splat(0x7FC0_0000),
                V::splat(0x7F80_0000),
            );
            V::select(magnitude.gt_i32(V::splat(MAX)), special, value)
        } else if !SIGNED {
            V::select(
                magnitude.eq(V::splat(MAX + 1)),
                V::splat(0x7FC0_0000),
                value,
            )
        } else {
            value
        };
        value.or(c.and(V::splat(SIGN)).shl::<TO_SIGN>())
    }
}

/// A narrow format's codes → f32 bits.
pub(crate) trait MlValue {
    /// The f32 bits of codes `c`.
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set.
    unsafe fn value<V: Vector>(c: V) -> V;
}

/// Converts a step's `4 * LANES` codes into bfloat16/float16 by looking them up
/// (`lookup::codes`: the scalar rule's bits, which [`MlValue::value`] computes) where `V` looks
/// codes of the source's width up in registers ([`Vector::LOOKUP_BITS`]: AVX-512 8, by permutes
/// over a 64-entry table, or over the 128 entries of float8 codes (`lookup_u8_codes`); AVX2 8,
/// by byte shuffles of the table's rows of 16, the row picked by byte blends, a float8 code's
/// magnitude looked up and its sign set) — faster than the computation on both sets; `false`,
/// with nothing written, elsewhere.
///
/// # Safety
/// As [`Step::step`].
#[inline(always)]
unsafe fn looked_up<V: Vector, K: Step, const STREAM: bool>(s: *const u8, d: *mut u8) -> bool {
    let bits = K::S::BITS;
    // The tables hold a signed format's magnitudes (`lookup::codes`); an unsigned one computes.
    if bits > V::LOOKUP_BITS || !K::S::DTYPE.is_signed() {
        return false;
    }
    let table = super::lookup::codes::<K>();
    // SAFETY: the caller's contract: the step's codes at `s`, room for their u16 at `d`.
    unsafe {
        if bits == 8 {
            V::lookup_u16::<8, STREAM>(s, d, table)
        } else if bits == 6 {
            V::lookup_u16::<6, STREAM>(s, d, table)
        } else {
            V::lookup_u16::<4, STREAM>(s, d, table)
        }
    }
    true
}

macro_rules! ml_widen {
    ($format:ty: $lane:ty => $f32:ident, $bf16:ident, $f16:ident) => {
        step!($f32<SATURATE>: $lane => f32, vectors = 4, |s, d, w| {
            // Exact: both modes agree.
            let [a, b, c, e] = get::<V, $lane>(s);
            let values = [
                <$format>::value(a),
                <$format>::value(b),
                <$format>::value(c),
                <$format>::value(e),
            ];
            store4::<V, STREAM>(values, d);
        });
        step!($bf16<SATURATE>: $lane => BF16, vectors = 4, |s, d, w| {
            if !looked_up::<V, Self, STREAM>(s, d) {
                let [a, b, c, e] = get::<V, $lane>(s);
                // Exact in bfloat16 too (at most 4 mantissa bits, exponents well inside); a NaN
                // is 0x7FC0 with its sign, as ml_dtypes writes it.
                V::store_u16::<STREAM>(
                    <$format>::value(a).shr::<16>(),
                    <$format>::value(b).shr::<16>(),
                    d,
                );
                V::store_u16::<STREAM>(
                    <$format>::value(c).shr::<16>(),
                    <$format>::value(e).shr::<16>(),
                    d.add(4 * w),
                );
            }
        });
        step!($f16<SATURATE>: $lane => F16, vectors = 4, |s, d, w| {
            if !looked_up::<V, Self, STREAM>(s, d) {
                let [a, b, c, e] = get::<V, $lane>(s);
                V::store_f16::<STREAM>(<$format>::value(a), <$format>::value(b), d);
                V::store_f16::<STREAM>(<$format>::value(c), <$format>::value(e), d.add(4 * w));
            }
        });
    };
}

ml_widen!(E4M3Format: E4M3 => E4M3ToF32, E4M3ToBf16, E4M3ToF16);
ml_widen!(E3M4Format: E3M4 => E3M4ToF32, E3M4ToBf16, E3M4ToF16);
ml_widen!(E2M3Format: E2M3Fn => E2M3FnToF32, E2M3FnToBf16, E2M3FnToF16);
ml_widen!(E3M2Format: E3M2Fn => E3M2FnToF32, E3M2FnToBf16, E3M2FnToF16);
ml_widen!(E2M1Format: E2M1Fn => E2M1FnToF32, E2M1FnToBf16, E2M1FnToF16);
ml_widen!(E5M3FnuFormat: E5M3Fnu => E5M3FnuToF32, E5M3FnuToBf16, E5M3FnuToF16);

/// torch's float8_e4m3fn → f32 (c10's `fp8e4m3fn_to_fp32_value`): exact; a NaN code (either
/// sign) reads as what torch's bit formula gives it — the normal path's bits with the all-ones
/// exponent OR'ed in (`0x7FF00000` and its sign). Both modes agree (widening is exact).
#[inline(always)]
unsafe fn e4m3fn_value<V: Vector>(c: V) -> V {
    narrow_constants!(crate::formats::E4M3FN);
    // SAFETY: the caller's contract.
    unsafe {
        let value = ml_value::<V, SHIFT, BIAS, SIGN, TO_SIGN, MAX, false, true>(c);
        let nan = c.and(V::splat(SIGN - 1)).eq(V::splat(N.nan_code));
        value.or(V::select(nan, V::splat(0x7F80_0000), V::splat(0)))
    }
}

step!(E5M2ToF32<SATURATE>: E5M2 => f32, vectors = 4, |s, d, w| {
    // Exact (both modes agree). Without it, Exact float32 → float8_e5m2 checked its round trip
    // by the scalar rules, at a third of the other float8 formats' speed.
    let values = [
        V::load_e5m2_as_f32(s),
        V::load_e5m2_as_f32(s.add(w)),
        V::load_e5m2_as_f32(s.add(2 * w)),
        V::load_e5m2_as_f32(s.add(3 * w)),
    ];
    store4::<V, STREAM>(values, d);
});

step!(E4M3FnToF32<SATURATE>: E4M3Fn => f32, vectors = 4, |s, d, w| {
    let [a, b, c, e] = get::<V, E4M3Fn>(s);
    let values = [e4m3fn_value(a), e4m3fn_value(b), e4m3fn_value(c), e4m3fn_value(e)];
    store4::<V, STREAM>(values, d);
});

/// torch's float8_e4m3fn and float8_e5m2 → bfloat16/float16, looked up (`lookup::codes`: the
/// scalar rules' bits, torch's NaN rules included — every NaN into bfloat16 is `0x7FC0`, the one
/// sign-set entry `Codes::recode` replaces), in registers where `V` looks 8-bit codes up (AVX2),
/// else by the plain loop over the 128 entries (AVX-512; the portable set looks float8 codes up
/// in its own tables, `lookup.rs`). Before, these pairs had no kernel, and ran the scalar rules
/// at a fraction of memory speed.
macro_rules! float8_into_16 {
    ($($name:ident: $lane:ty => $to:ty;)*) => {
        $(
            step!($name<SATURATE>: $lane => $to, vectors = 4, |s, d, w| {
                V::lookup_u16::<8, STREAM>(s, d, super::lookup::codes::<Self>());
            });
        )*
    };
}

float8_into_16! {
    E4M3FnToBf16: E4M3Fn => BF16;
    E4M3FnToF16: E4M3Fn => F16;
    E5M2ToBf16: E5M2 => BF16;
    E5M2ToF16: E5M2 => F16;
}

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
    let codes = [
        int4::<V, -8, 7, SATURATE>(widened::<V, FromF32>(s, 0)),
        int4::<V, -8, 7, SATURATE>(widened::<V, FromF32>(s, 1)),
        int4::<V, -8, 7, SATURATE>(widened::<V, FromF32>(s, 2)),
        int4::<V, -8, 7, SATURATE>(widened::<V, FromF32>(s, 3)),
    ];
    put::<V, I4, STREAM>(codes, d)
});

step!(F32ToU4<SATURATE>: f32 => U4, vectors = 4, |s, d, w| {
    let codes = [
        int4::<V, 0, 15, SATURATE>(widened::<V, FromF32>(s, 0)),
        int4::<V, 0, 15, SATURATE>(widened::<V, FromF32>(s, 1)),
        int4::<V, 0, 15, SATURATE>(widened::<V, FromF32>(s, 2)),
        int4::<V, 0, 15, SATURATE>(widened::<V, FromF32>(s, 3)),
    ];
    put::<V, U4, STREAM>(codes, d)
});

/// 4-bit integer codes (one per 32-bit lane) → f32 bits: int4 sign-extended from bit 3. Exact,
/// so both modes agree.
#[inline(always)]
unsafe fn int4_value<V: Vector, const SIGNED: bool>(c: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let value = if SIGNED { c.shl::<28>().sra::<28>() } else { c };
        value.i32_to_f32()
    }
}

/// int4/uint4 → float32 (without them, Exact float32 → int4/uint4 checked its round trip by the
/// scalar rules).
macro_rules! int4_widen {
    ($($name:ident: $lane:ty, $signed:literal;)*) => {
        $(
            step!($name<SATURATE>: $lane => f32, vectors = 4, |s, d, w| {
                let [a, b, c, e] = get::<V, $lane>(s);
                let values = [
                    int4_value::<V, $signed>(a),
                    int4_value::<V, $signed>(b),
                    int4_value::<V, $signed>(c),
                    int4_value::<V, $signed>(e),
                ];
                store4::<V, STREAM>(values, d);
            });
        )*
    };
}

int4_widen! {
    I4ToF32: I4, true;
    U4ToF32: U4, false;
}

/// The pairs with kernels here (after `kernels::BASIC` in the hot pairs), with their steps in
/// Torch and Saturate rounding.
pub(crate) const ML_FAST: [(DType, DType, Pick); 46] = {
    use DType::*;
    [
        (
            Float8E4M3Fn,
            Float32,
            pick::<E4M3FnToF32<false>, E4M3FnToF32<true>>,
        ),
        (
            Float8E4M3Fn,
            BFloat16,
            pick::<E4M3FnToBf16<false>, E4M3FnToBf16<true>>,
        ),
        (
            Float8E4M3Fn,
            Float16,
            pick::<E4M3FnToF16<false>, E4M3FnToF16<true>>,
        ),
        (
            Float8E5M2,
            Float32,
            pick::<E5M2ToF32<false>, E5M2ToF32<true>>,
        ),
        (
            Float8E5M2,
            BFloat16,
            pick::<E5M2ToBf16<false>, E5M2ToBf16<true>>,
        ),
        (
            Float8E5M2,
            Float16,
            pick::<E5M2ToF16<false>, E5M2ToF16<true>>,
        ),
        (
            Float32,
            Float8E4M3,
            pick::<F32ToE4M3<false>, F32ToE4M3<true>>,
        ),
        (
            BFloat16,
            Float8E4M3,
            pick::<Bf16ToE4M3<false>, Bf16ToE4M3<true>>,
        ),
        (
            Float16,
            Float8E4M3,
            pick::<F16ToE4M3<false>, F16ToE4M3<true>>,
        ),
        (
            Float32,
            Float8E3M4,
            pick::<F32ToE3M4<false>, F32ToE3M4<true>>,
        ),
        (
            BFloat16,
            Float8E3M4,
            pick::<Bf16ToE3M4<false>, Bf16ToE3M4<true>>,
        ),
        (
            Float16,
            Float8E3M4,
            pick::<F16ToE3M4<false>, F16ToE3M4<true>>,
        ),
        (
            Float32,
            Float6E2M3Fn,
            pick::<F32ToE2M3Fn<false>, F32ToE2M3Fn<true>>,
        ),
        (
            BFloat16,
            Float6E2M3Fn,
            pick::<Bf16ToE2M3Fn<false>, Bf16ToE2M3Fn<true>>,
        ),
        (
            Float16,
            Float6E2M3Fn,
            pick::<F16ToE2M3Fn<false>, F16ToE2M3Fn<true>>,
        ),
        (
            Float32,
            Float6E3M2Fn,
            pick::<F32ToE3M2Fn<false>, F32ToE3M2Fn<true>>,
        ),
        (
            BFloat16,
            Float6E3M2Fn,
            pick::<Bf16ToE3M2Fn<false>, Bf16ToE3M2Fn<true>>,
        ),
        (
            Float16,
            Float6E3M2Fn,
            pick::<F16ToE3M2Fn<false>, F16ToE3M2Fn<true>>,
        ),
        (
            Float32,
            Float4E2M1Fn,
            pick::<F32ToE2M1Fn<false>, F32ToE2M1Fn<true>>,
        ),
        (
            BFloat16,
            Float4E2M1Fn,
            pick::<Bf16ToE2M1Fn<false>, Bf16ToE2M1Fn<true>>,
        ),
        (
            Float16,
            Float4E2M1Fn,
            pick::<F16ToE2M1Fn<false>, F16ToE2M1Fn<true>>,
        ),
        (
            Float32,
            Float8E5M3Fnu,
            pick::<F32ToE5M3Fnu<false>, F32ToE5M3Fnu<true>>,
        ),
        (
            BFloat16,
            Float8E5M3Fnu,
            pick::<Bf16ToE5M3Fnu<false>, Bf16ToE5M3Fnu<true>>,
        ),
        (
            Float16,
            Float8E5M3Fnu,
            pick::<F16ToE5M3Fnu<false>, F16ToE5M3Fnu<true>>,
        ),
        (Float32, Int4, pick::<F32ToI4<false>, F32ToI4<true>>),
        (Float32, UInt4, pick::<F32ToU4<false>, F32ToU4<true>>),
        (Int4, Float32, pick::<I4ToF32<false>, I4ToF32<true>>),
        (UInt4, Float32, pick::<U4ToF32<false>, U4ToF32<true>>),
        (
            Float8E4M3,
            Float32,
            pick::<E4M3ToF32<false>, E4M3ToF32<true>>,
        ),
        (
            Float8E4M3,
            BFloat16,
            pick::<E4M3ToBf16<false>, E4M3ToBf16<true>>,
        ),
        (
            Float8E4M3,
            Float16,
            pick::<E4M3ToF16<false>, E4M3ToF16<true>>,
        ),
        (
            Float8E3M4,
            Float32,
            pick::<E3M4ToF32<false>, E3M4ToF32<true>>,
        ),
        (
            Float8E3M4,
            BFloat16,
            pick::<E3M4ToBf16<false>, E3M4ToBf16<true>>,
        ),
        (
            Float8E3M4,
            Float16,
            pick::<E3M4ToF16<false>, E3M4ToF16<true>>,
        ),
        (
            Float6E2M3Fn,
            Float32,
            pick::<E2M3FnToF32<false>, E2M3FnToF32<true>>,
        ),
        (
            Float6E2M3Fn,
            BFloat16,
            pick::<E2M3FnToBf16<false>, E2M3FnToBf16<true>>,
        ),
        (
            Float6E2M3Fn,
            Float16,
            pick::<E2M3FnToF16<false>, E2M3FnToF16<true>>,
        ),
        (
            Float6E3M2Fn,
            Float32,
            pick::<E3M2FnToF32<false>, E3M2FnToF32<true>>,
        ),
        (
            Float6E3M2Fn,
            BFloat16,
            pick::<E3M2FnToBf16<false>, E3M2FnToBf16<true>>,
        ),
        (
            Float6E3M2Fn,
            Float16,
            pick::<E3M2FnToF16<false>, E3M2FnToF16<true>>,
        ),
        (
            Float4E2M1Fn,
            Float32,
            pick::<E2M1FnToF32<false>, E2M1FnToF32<true>>,
        ),
        (
            Float4E2M1Fn,
            BFloat16,
            pick::<E2M1FnToBf16<false>, E2M1FnToBf16<true>>,
        ),
        (
            Float4E2M1Fn,
            Float16,
            pick::<E2M1FnToF16<false>, E2M1FnToF16<true>>,
        ),
        (
            Float8E5M3Fnu,
            Float32,
            pick::<E5M3FnuToF32<false>, E5M3FnuToF32<true>>,
        ),
        (
            Float8E5M3Fnu,
            BFloat16,
            pick::<E5M3FnuToBf16<false>, E5M3FnuToBf16<true>>,
        ),
        (
            Float8E5M3Fnu,
            Float16,
            pick::<E5M3FnuToF16<false>, E5M3FnuToF16<true>>,
        ),
    ]
};
