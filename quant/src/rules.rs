//! The references' scale rules: from each scale's amax (and the tensor's, where a global scale
//! needs it), the bytes a reference stores, the factor each element is divided or multiplied by,
//! and the arithmetic around it ([`Plan`]) — compressed-tensors (FP8, MX, NVFP4), torchao (MX in
//! its four roundings, NVFP4), DeepSeek-V3 and gpt-oss — with the one-loop forms of the hot
//! rules where every amax is finite (`compressed_tensors_mx_finite`, `compressed_tensors_nvfp4_finite`) and NVFP4's scale bytes
//! by maximum ([`ScaleCodes`]). `quantize.rs` picks the rule and applies the plan.

use dtcast_dtype::DType;

use crate::arith::{
    bytes, clamp, cvtt, div, f16_bits, f16_value, f32s, half_inf_bits, half_value, in_dtype, mul,
    pow2, round_in, torch_cast,
};
use crate::scheme::{MxRounding, Scheme};
use crate::simd::with_best_isa;
use crate::{encode4, thresholds};

/// `values` rounded to `dtype` by torch's arithmetic on tensors of that dtype ([`round_in`]: on
/// bfloat16 a NaN result is the positive default NaN `0x7FC0`, not the `0xFFFF` of the copy
/// kernel; float16 arithmetic keeps a NaN's sign and top payload bits).
fn in_arithmetic(values: &[f32], dtype: DType) -> Vec<f32> {
    values.iter().map(|&v| round_in(v, dtype)).collect()
}

/// Values already exact in `w` (float32, bfloat16 or float16), as stored bytes: a bfloat16 is
/// the top half of its float32 (NaN bits kept), a float16 its exact conversion.
fn store(values: &[f32], w: DType) -> Vec<u8> {
    if w == DType::BFloat16 {
        values
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    } else if w == DType::Float16 {
        values
            .iter()
            .flat_map(|&v| f16_bits(v).to_le_bytes())
            .collect()
    } else {
        bytes(values)
    }
}

/// `torch.finfo(w)`'s `eps` and `tiny` (the smallest normal) for a floating weight dtype, from
/// the dtype table: compressed-tensors' replacement for a zero FP8 scale, and the least amax
/// its global scale divides by.
fn finfo(w: DType) -> (f32, f32) {
    w.float_format()
        .map_or((pow2(-23), f32::MIN_POSITIVE), |f| {
            (pow2(-(f.mantissa_bits as i32)), f.min_normal as f32)
        })
}

/// How elements are scaled.
pub(crate) enum Apply {
    Divide,
    Multiply,
}

/// A reference's scales for a tensor: stored bytes, the factor each element is divided or
/// multiplied by, the dtype that arithmetic rounds to, and whether the result is clamped first.
pub(crate) struct Plan {
    pub(crate) scales: Vec<u8>,
    pub(crate) global: Option<f32>,
    pub(crate) factors: Vec<f32>,
    pub(crate) apply: Apply,
    pub(crate) arithmetic: DType,
    pub(crate) clamp: bool,
    /// Where every factor is picked by its scale's byte (one-byte scales): the factor of each
    /// byte, so that `factors[g] == byte_factors[scales[g]]` for every group `g`.
    pub(crate) byte_factors: Option<Box<[f32; 256]>>,
    /// Every element of the run is finite, every factor finite and positive, and every
    /// group's amax divided by its factor finite: no element can scale to inf or NaN.
    pub(crate) bounded: bool,
}

/// compressed-tensors FP8: `scale = amax / 448` in the weight's dtype (0 becomes its eps:
/// 2^-7, 2^-10, 2^-23 for bfloat16, float16, float32), stored in that dtype; `x / scale` in
/// that dtype.
pub(crate) fn compressed_tensors_fp8(amax: &[f32], w: DType) -> Plan {
    let (eps, _) = finfo(w);
    let scales: Vec<f32> =
        in_arithmetic(&amax.iter().map(|&a| div(a, 448.0)).collect::<Vec<_>>(), w)
            .into_iter()
            .map(|s| if s == 0.0 { eps } else { s })
            .collect();
    Plan {
        scales: store(&scales, w),
        global: None,
        factors: scales,
        apply: Apply::Divide,
        arithmetic: w,
        clamp: true,
        byte_factors: None,
        bounded: false,
    }
}

/// compressed-tensors MX: `amax` rounded to a power of two at float4's mantissa width (up from
/// 1.75, on the weight dtype's bits), `E = 127 + log2 - offset` clamped to a byte; `x /
/// 2^(E-127)` in the weight's dtype. The stored byte is `127 + floor(log2(scale))` as int32 —
/// for a non-finite block (scale inf) x86 makes that 127. In float16, `2^(E-127)` is 0 below
/// 2^-24 and inf above 65504: a 0 scale becomes 1 (the eps of the uint8 scale dtype), stored as
/// 127.
pub(crate) fn compressed_tensors_mx(amax: &[f32], w: DType, scheme: &Scheme) -> Plan {
    let offset = if scheme.element == DType::Float8E4M3Fn {
        8
    } else {
        2
    };
    // `2^(e-127)` in the weight's dtype for every byte `e`, rounded once, and the byte stored
    // for it.
    let powers: Vec<f32> = (0..=255).map(|e| pow2(e - 127)).collect();
    let rounded: Vec<f32> = (in_dtype(&powers, w).into_iter())
        .map(|f| if f == 0.0 { 1.0 } else { f })
        .collect();
    let byte_of: Vec<u8> = (rounded.iter())
        .map(|&scale| 127i32.wrapping_add(cvtt(floor_log2(scale))) as u8)
        .collect();
    let mut stored = Vec::with_capacity(amax.len());
    let mut factors = Vec::with_capacity(amax.len());
    for &a in amax {
        let p2 = if w == DType::Float16 {
            // `round_to_power_2` on the float16 bits (a float16 subnormal below 0.75 * 2^-14
            // rounds to 0).
            f16_value(f16_bits(a).wrapping_add(1 << 8) & 0xFC00)
        } else {
            f32::from_bits(a.to_bits().wrapping_add(1 << 21) & 0xFF80_0000)
        };
        let b = p2.to_bits();
        let exponent = (b >> 23) as i32;
        let e = if b & 0x807F_FFFF == 0 && (1..=254).contains(&exponent) {
            // A positive normal power of two (nearly every block): `127 + log2 - offset` is an
            // integer, which the rounding leaves.
            (exponent - offset).clamp(0, 255) as u8
        } else {
            let e = clamp(127.0 + floor_log2(p2) - offset as f32, 0.0, 255.0).round_ties_even();
            // `.to(uint8)`: NaN converts as x86 does (0).
            cvtt(e) as u8
        };
        factors.push(rounded[usize::from(e)]);
        stored.push(byte_of[usize::from(e)]);
    }
    // Each finite factor is a power of two, and its byte `127 + log2` names it: the factors
    // are picked by the stored byte (a byte no finite factor has reads NaN: every element of
    // its groups reported). Checked, since an infinite factor (a power past float16's range)
    // is stored as byte 127 too.
    let mut by_byte = Box::new([f32::NAN; 256]);
    for (&f, &b) in rounded.iter().zip(&byte_of) {
        if f.is_finite() {
            by_byte[usize::from(b)] = f;
        }
    }
    let picked = (factors.iter().zip(&stored))
        .all(|(f, &b)| f.to_bits() == by_byte[usize::from(b)].to_bits());
    Plan {
        scales: stored,
        global: None,
        factors,
        apply: Apply::Divide,
        arithmetic: w,
        clamp: true,
        byte_factors: picked.then_some(by_byte),
        bounded: false,
    }
}

/// [`compressed_tensors_mx`] where every amax rounds to a finite power of two in the weight's dtype (float32 and
/// bfloat16: below `0x7F60_0000`; float16: below 1.75 * 2^15): `E = exponent - offset` clamped
/// at 0 (0 for an amax that rounds to 0), stored as it is — `2^(E-127)` is exact in float32 and
/// bfloat16 alike, so `floor(log2)` of it is `E - 127` — and the factor `2^(E-127)`. A float16
/// amax rounds on float16's bits: the same power of two where it is normal there; a subnormal
/// one (its `+ 0x100` counted in units of 2^-24) to 2^-14 from 0.75 * 2^-14 up and to 0 below,
/// whose factor `2^-127` rounds to 0 in float16 and is replaced by 1 (byte 127); every other
/// `2^(E-127)` lies in 2^-22 ..= 2^13, exact in float16.
#[inline(always)]
pub(crate) fn compressed_tensors_mx_finite(amax: &[f32], offset: i32, w: DType) -> Plan {
    let mut stored = vec![0u8; amax.len()];
    let mut factors = vec![0f32; amax.len()];
    let half = w == DType::Float16;
    for ((&a, s), f) in amax.iter().zip(&mut stored).zip(&mut factors) {
        let exponent = (a.to_bits().wrapping_add(1 << 21) >> 23) as i32;
        // (0.75 * 2^-14 is 0x3840_0000; 2^-14's exponent is 113.)
        let (rounds_to_zero, exponent) = if half {
            (a.to_bits() < 0x3840_0000, exponent.max(113))
        } else {
            (exponent == 0, exponent)
        };
        let e = if rounds_to_zero {
            0
        } else {
            (exponent - offset).max(0)
        };
        // (float16: `2^-127` is 0 there, replaced by 1.)
        let e = if half && rounds_to_zero { 127 } else { e };
        *s = e as u8;
        *f = e8m0_factor(e as u32);
    }
    Plan {
        scales: stored,
        global: None,
        factors,
        apply: Apply::Divide,
        arithmetic: w,
        clamp: true,
        byte_factors: Some(Box::new(core::array::from_fn(|e| e8m0_factor(e as u32)))),
        bounded: false,
    }
}

/// E8M0 byte `e`'s value, 2^(e-127): 0 is the subnormal 2^-127 (255, inf here, is never
/// stored by [`compressed_tensors_mx_finite`]).
#[inline(always)]
pub(crate) fn e8m0_factor(e: u32) -> f32 {
    f32::from_bits(if e == 0 { 0x0040_0000 } else { e << 23 })
}

/// [`compressed_tensors_nvfp4`]'s block scales where every amax is finite and the global scale `g` is known:
/// `amax / 6` rounded in the weight's dtype, times `g`, clamped to 448, rounded to
/// float8_e4m3fn (nearest-even: on the float32 bits above 2^-6, in steps of 2^-9 below), 0
/// replaced by 0.125; the factor `s / g`.
#[inline(always)]
pub(crate) fn compressed_tensors_nvfp4_finite(amax: &[f32], g: f32, w: DType) -> Plan {
    let mut stored = vec![0u8; amax.len()];
    let mut factors = vec![0f32; amax.len()];
    let mut bounded = true;
    for ((&a, code), f) in amax.iter().zip(&mut stored).zip(&mut factors) {
        let p = round_in(a / 6.0, w);
        let (c, v) = e4m3fn_nearest((p * g).min(448.0));
        let (c, v) = if v == 0.0 { (0x20, 0.125) } else { (c, v) };
        *code = c as u8;
        *f = v / g;
        bounded &= f.is_finite() & (*f > 0.0) & (a / *f).is_finite();
    }
    Plan {
        scales: stored,
        global: Some(g),
        factors,
        apply: Apply::Divide,
        arithmetic: DType::Float32,
        clamp: true,
        // The same quotient of each byte's value (`e4m3fn_nearest`'s value is the cast's).
        byte_factors: Some(Box::new(e4m3fn_values().map(|v| v / g))),
        bounded,
    }
}

/// compressed-tensors' NVFP4 block scales of 16-bit float groups (bfloat16 or float16) by their
/// largest magnitude (a band's maxima): [`compressed_tensors_nvfp4_finite`] run once on every magnitude of the
/// weight's dtype up to the tensor's amax, so that a band needs no plan — no float32 amax, no
/// arithmetic per group (two divisions and float8 rounding): the float4 comparisons look each
/// group's scale byte up as they encode it (`thresholds::ScaleBytes::ByMaxima`).
pub(crate) struct ScaleCodes {
    /// The scale byte of each magnitude's bits (`0..=top`; zero above, never used).
    codes: Box<[u8; 0x8000]>,
    top: u16,
    /// Each scale byte's factor (its value over the global scale).
    byte_factors: Box<[f32; 256]>,
    /// The weight's dtype.
    w: DType,
}

impl ScaleCodes {
    /// The magnitude bits of a `w` tensor's amax (a value of `w`), where a table can serve its
    /// groups: below the limit `plan_finite` keeps (bfloat16's largest magnitudes, inf and NaN
    /// are planned by `Job::plan`; float16's every finite one is below it).
    pub(crate) fn top(tensor_amax: f32, w: DType) -> Option<u16> {
        let (top, limit) = if w == DType::Float16 {
            (f16_bits(tensor_amax) & 0x7FFF, half_inf_bits(w))
        } else {
            (u16::try_from(tensor_amax.to_bits() >> 16).ok()?, 0x7F60)
        };
        (top < limit).then_some(top)
    }

    /// The table for `w` magnitudes up to `top` (from [`ScaleCodes::top`]) under the global
    /// scale `g`; `None` where some magnitude's plan is not bounded (an element could scale to
    /// inf), for the plan per band to handle.
    pub(crate) fn new(top: u16, g: f32, w: DType) -> Option<ScaleCodes> {
        let amax: Vec<f32> = (0..=top).map(|m| half_value(m, w)).collect();
        let plan = with_best_isa(
            #[inline(always)]
            || compressed_tensors_nvfp4_finite(&amax, g, w),
        );
        if !plan.bounded {
            return None;
        }
        let mut codes = Box::new([0u8; 0x8000]);
        codes[..plan.scales.len()].copy_from_slice(&plan.scales);
        Some(ScaleCodes {
            codes,
            top,
            byte_factors: plan.byte_factors?,
            w,
        })
    }

    /// Groups of 16 elements `src` (of the weight's dtype) with these maxima (magnitude bits)
    /// quantized by the float4 comparisons, their scale bytes into `stored`, if every maximum is
    /// in the table (false, with nothing meaningful written, where one is not). `src` is in the
    /// core's cache (its maxima were just found); `next`, what the caller quantizes after it,
    /// is prefetched as `src` is read.
    pub(crate) fn encode(
        &self,
        src: &[u8],
        maxima: &[u16],
        stored: &mut [u8],
        out: &mut [u8],
        next: &[u8],
    ) -> bool {
        // (A fold rather than `all`, so that the check is vectorised.)
        if maxima.iter().fold(0, |top, &m| top.max(m)) > self.top {
            return false;
        }
        let scales = thresholds::ScaleBytes::ByMaxima {
            maxima,
            codes: &self.codes,
            stored,
        };
        let rules = encode4::Rules {
            divide: true,
            arithmetic: DType::Float32,
            unsigned_zero: true,
        };
        // Every magnitude up to `top` was bounded when the table was built.
        thresholds::encode(
            src,
            self.w,
            16,
            scales,
            &self.byte_factors,
            rules,
            true,
            out,
            next,
        )
    }
}

/// float8_e4m3fn's value of each byte, as the cast gives it.
pub(crate) fn e4m3fn_values() -> &'static [f32; 256] {
    static VALUES: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    VALUES.get_or_init(|| {
        let codes: Vec<u8> = (0..=255).collect();
        let mut values = [0f32; 256];
        for (v, wide) in values.iter_mut().zip(f32s(&torch_cast(
            &codes,
            DType::Float8E4M3Fn,
            DType::Float32,
        ))) {
            *v = wide;
        }
        values
    })
}

/// `s` (0 ..= 448, not NaN) to float8_e4m3fn as torch rounds it: its code and value. Nearest
/// even: on the float32 bits from 2^-6 (three mantissa bits kept), in steps of 2^-9 below (the
/// subnormals; a step of 8 is 2^-6, whose code is 8 too).
#[inline(always)]
pub(crate) fn e4m3fn_nearest(s: f32) -> (u32, f32) {
    if s < f32::from_bits(0x3C80_0000) {
        let c = (s * 512.0).round_ties_even();
        // `c` (0 ..= 8) as an integer from the bits of `c + 2^23`, which LLVM vectorises (an
        // `as` conversion saturates, and is done one lane at a time).
        ((c + 8_388_608.0).to_bits() - 0x4B00_0000, c / 512.0)
    } else {
        let b = s.to_bits();
        let r = b + 0x7_FFFF + ((b >> 20) & 1);
        ((r >> 20) - 960, f32::from_bits(r & 0xFFF0_0000))
    }
}

/// `x.log2().floor()`: a positive normal power of two (nearly every MX scale) by its exponent
/// bits, exactly what libm's `log2` gives it; anything else by libm.
pub(crate) fn floor_log2(x: f32) -> f32 {
    let b = x.to_bits();
    let exponent = (b >> 23) as i32;
    if b & 0x807F_FFFF == 0 && (1..=254).contains(&exponent) {
        (exponent - 127) as f32
    } else {
        x.log2().floor()
    }
}

/// compressed-tensors NVFP4: global scale `2688 / max(amax, tiny)` in the weight's dtype (NaN or
/// inf: 1), block scale `fp8(global * (amax_block / 6))` (0 becomes 0.125), `x / (s / global)`
/// in float32.
pub(crate) fn compressed_tensors_nvfp4(amax: &[f32], tensor_amax: f32, w: DType) -> Plan {
    // finfo(w).tiny: 2^-126 for float32 and bfloat16, 2^-14 for float16 (where `2688 / amax`
    // overflows to inf, so 1, for an amax below about 0.041). `2688 / tensor` is torch's
    // `__rtruediv__`: the tensor's reciprocal times 2688, each rounded in `w`.
    let (_, tiny) = finfo(w);
    let reciprocal = in_arithmetic(&[div(1.0, clamp(tensor_amax, tiny, f32::INFINITY))], w)[0];
    let g = in_arithmetic(&[mul(reciprocal, 2688.0)], w)[0];
    let g = if g.is_finite() { g } else { 1.0 };
    let per_block = in_arithmetic(&amax.iter().map(|&a| div(a, 6.0)).collect::<Vec<_>>(), w);
    let scaled: Vec<f32> = per_block
        .iter()
        .map(|&s| clamp(mul(s, g), -448.0, 448.0))
        .collect();
    let fp8 = torch_cast(&bytes(&scaled), DType::Float32, DType::Float8E4M3Fn);
    let scales: Vec<f32> = f32s(&torch_cast(&fp8, DType::Float8E4M3Fn, DType::Float32))
        .into_iter()
        .map(|s| if s == 0.0 { 0.125 } else { s })
        .collect();
    let stored = torch_cast(&bytes(&scales), DType::Float32, DType::Float8E4M3Fn);
    Plan {
        scales: stored,
        global: Some(g),
        factors: scales.iter().map(|&s| div(s, g)).collect(),
        apply: Apply::Divide,
        arithmetic: DType::Float32,
        clamp: true,
        byte_factors: None,
        bounded: false,
    }
}

/// torchao MX FLOOR / CEIL / EVEN: the exponent of `amax` (EVEN: rounded at the element's
/// mantissa width first, CEIL: plus one if not a power of two) minus the element's largest
/// exponent, clamped to [-127, 128]; NaN: 255. Elements `x / max(2^(E-127), 2^-126)` in float32;
/// float8 clamped, float4 saturated by its encoder.
pub(crate) fn torchao_mx(amax: &[f32], rounding: MxRounding, scheme: &Scheme) -> Plan {
    let fp8 = scheme.element == DType::Float8E4M3Fn;
    let (target, mbits) = if fp8 { (8, 3) } else { (2, 1) };
    let mut stored = Vec::with_capacity(amax.len());
    let mut factors = Vec::with_capacity(amax.len());
    for &a in amax {
        let mut bits = a.to_bits() as i32;
        if rounding == MxRounding::Even && !a.is_nan() {
            bits = bits.wrapping_add(1 << (23 - mbits - 1)) & (0x1FF << 23);
        }
        let mut pow = ((bits >> 23) & 0xFF) - 127;
        if rounding == MxRounding::Ceil && bits & 0x7F_FFFF > 0 {
            pow += 1;
        }
        let biased = if a.is_nan() {
            255
        } else {
            ((pow - target).clamp(-127, 128) + 127) as u8
        };
        stored.push(biased);
        let scale = f32::from_bits(u32::from(biased) << 23).max(f32::MIN_POSITIVE);
        factors.push(scale);
    }
    Plan {
        scales: stored,
        global: None,
        factors,
        apply: Apply::Divide,
        arithmetic: DType::Float32,
        clamp: fp8,
        byte_factors: None,
        bounded: false,
    }
}

/// torchao MX RCEIL: `E = clamp(ceil(log2(amax / max)), -127, 127) + 127` (NaN: 255, inf: 254);
/// elements multiplied by `2^(127 - E)` (E = 0: 1, 254: 2^-127, 255: NaN) and clamped.
pub(crate) fn torchao_mx_rceil(amax: &[f32], element_max: f32) -> Plan {
    let mut stored = Vec::with_capacity(amax.len());
    let mut factors = Vec::with_capacity(amax.len());
    for &a in amax {
        let descale = div(a, element_max);
        let e: u8 = if descale.is_nan() {
            255
        } else if descale.is_infinite() {
            254
        } else {
            (descale.log2().ceil().clamp(-127.0, 127.0) + 127.0) as u8
        };
        stored.push(e);
        factors.push(match e {
            255 => descale,
            254 => pow2(-127),
            0 => 1.0,
            e => pow2(127 - i32::from(e)),
        });
    }
    Plan {
        scales: stored,
        global: None,
        factors,
        apply: Apply::Multiply,
        arithmetic: DType::Float32,
        clamp: true,
        byte_factors: None,
        bounded: false,
    }
}

/// torchao NVFP4: block scale `fp8(clamp(amax / 6 [/ per_tensor], 2^-6, 448))`; elements times
/// `1 / s` (two-level: `(1 / per_tensor) / s`), the per-tensor scale `amax / 2688` a multiplier.
pub(crate) fn torchao_nvfp4(amax: &[f32], tensor_amax: f32, scheme: &Scheme) -> Plan {
    let tiny = pow2(-6);
    let global = scheme.global_scale.then(|| div(tensor_amax, 2688.0));
    let block: Vec<f32> = amax
        .iter()
        .map(|&a| {
            let s = div(a, 6.0);
            let s = global.map_or(s, |g| div(s, g));
            clamp(s, tiny, 448.0)
        })
        .collect();
    let fp8 = torch_cast(&bytes(&block), DType::Float32, DType::Float8E4M3Fn);
    let scales = f32s(&torch_cast(&fp8, DType::Float8E4M3Fn, DType::Float32));
    let factors = scales
        .iter()
        .map(|&s| match global {
            Some(g) => div(div(1.0, g), s),
            None => div(1.0, s),
        })
        .collect();
    Plan {
        scales: fp8,
        global,
        factors,
        apply: Apply::Multiply,
        arithmetic: DType::Float32,
        clamp: true,
        byte_factors: None,
        bounded: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `e4m3fn_nearest` is torch's cast (dtcast_cast's Torch mode) on every exponent from 0 to
    /// 448, each mantissa's rounding points (bit 19 of the float32, and below 2^-6 the ties of
    /// steps of 2^-9) and their neighbours.
    #[test]
    fn e4m3fn_nearest_is_the_cast() {
        let mut xs = Vec::new();
        for top in 0..=(0x43E0_0000u32 >> 20) {
            for low in [
                0u32, 1, 0x7_FFFF, 0x8_0000, 0x8_0001, 0xF_FFFF, 0x4_0000, 0xC_0000,
            ] {
                xs.push(f32::from_bits(top << 20 | low));
            }
        }
        for k in 0..=16u32 {
            let tie = (k as f32 + 0.5) / 512.0;
            xs.extend([tie, tie.next_up(), tie.next_down(), k as f32 / 512.0]);
        }
        xs.retain(|x| *x <= 448.0);
        let narrow = torch_cast(&bytes(&xs), DType::Float32, DType::Float8E4M3Fn);
        let back = f32s(&torch_cast(&narrow, DType::Float8E4M3Fn, DType::Float32));
        for ((&x, &code), &value) in xs.iter().zip(&narrow).zip(&back) {
            let (c, v) = e4m3fn_nearest(x);
            assert_eq!(
                (c, v.to_bits()),
                (u32::from(code), value.to_bits()),
                "{x:e} ({:#x})",
                x.to_bits()
            );
        }
    }
}
