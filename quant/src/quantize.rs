//! Dense floats to scaled elements, as each reference quantizes.

use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{bytes, clamp, cvtt, div, f32s, in_dtype, mul, pow2, round_to, torch_cast};
use crate::dequant::{check_len, rows_cols, Quantized};
use crate::scheme::{Convention, MxRounding, ScaleRule, Scheme};
use crate::QuantError;

/// What [`quantize`] writes: the elements (float4: packed, low nibble first), the scales in the
/// scheme's layout and dtype, and the global scale where the scheme has one.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedTensor {
    /// The elements in storage.
    pub elements: Vec<u8>,
    /// The scales in storage.
    pub scales: Vec<u8>,
    /// The tensor's global scale (compressed-tensors' `weight_global_scale`, torchao's
    /// `per_tensor_scale`).
    pub global_scale: Option<f32>,
}

impl QuantizedTensor {
    /// The tensor as [`dequantize`](crate::dequantize) reads it.
    pub fn view<'a>(&'a self, shape: &'a [usize]) -> Quantized<'a> {
        Quantized {
            elements: &self.elements,
            shape,
            scales: &self.scales,
            global_scale: self.global_scale,
        }
    }
}

/// Quantizes `src` (elements of `dtype`, float32 or bfloat16, row-major in `shape`) with
/// `scheme`, bit for bit as the scheme's reference does — with its arithmetic in the weight's
/// dtype where it computes there (compressed-tensors divides bfloat16 by bfloat16, rounding twice).
/// Shapes the reference refuses are errors here too.
///
/// DeepSeek and gpt-oss publish no weight quantizer; their conventions quantize as their published
/// checkpoints were made: DeepSeek-V3 block FP8 is compressed-tensors' block rule computed in
/// float32 (`amax / 448` as a float32 scale, `x / scale`), gpt-oss MXFP4 is torchao's RCEIL rule
/// (OpenAI's `ROUND_UP`). gpt-oss's transposition to `[experts, rows, cols]` is the caller's: this
/// quantizes the rows it is given.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize, quantize, Scheme};
/// let x: Vec<u8> = [1.0f32, -2.0, 448.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let scheme = Scheme::named("ct_fp8_tensor", DType::Float32)?;
/// let q = quantize(&x, DType::Float32, &[1, 4], &scheme)?;
/// assert_eq!(q.scales, 1.0f32.to_le_bytes()); // amax 448 / 448
/// assert_eq!(q.elements, [0x38, 0xC0, 0x7E, 0x28]); // 1, -2, 448, 0.25 in float8_e4m3fn
/// let back = dequantize(&q.view(&[1, 4]), &scheme, DType::Float32)?;
/// assert_eq!(back, x);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn quantize(
    src: &[u8],
    dtype: DType,
    shape: &[usize],
    scheme: &Scheme,
) -> Result<QuantizedTensor, QuantError> {
    if !matches!(dtype, DType::Float32 | DType::BFloat16) {
        return Err(QuantError::InputDType { dtype });
    }
    scheme.check()?;
    let (rows, cols) = rows_cols(shape)?;
    let needed = (rows * cols)
        .checked_mul(dtype.byte_size().unwrap_or(4))
        .ok_or_else(|| QuantError::Shape {
            reason: format!("the shape {shape:?} has more bytes than memory can hold"),
        })?;
    check_len("input", needed, src.len())?;
    let count = scheme.scale_count(rows, cols)?;
    if scheme.element.is_packed() && cols % 2 != 0 {
        return Err(QuantError::Shape {
            reason: format!("columns {cols} are odd; float4 elements are stored two per byte"),
        });
    }
    let mut x = f32s(&torch_cast(src, dtype, DType::Float32));
    if dtype == DType::BFloat16 && scheme.convention == Convention::CompressedTensors {
        // compressed-tensors computes on bfloat16 tensors (torch: in float32, rounded back, a
        // NaN coming back as 0x7FC0); torchao converts them to float32 first, bits kept.
        for v in x.iter_mut().filter(|v| v.is_nan()) {
            *v = f32::from_bits(0x7FC0_0000);
        }
    }
    // The largest magnitude per scale, and of the whole tensor: a NaN in the group is the
    // result, as it is.
    let mut amax = vec![0f32; count];
    for (r, row) in x.chunks_exact(cols.max(1)).enumerate() {
        for (start, end, k) in scheme.runs(r, cols) {
            let a = &mut amax[k];
            for &v in &row[start..end] {
                if a.is_nan() {
                    break;
                }
                *a = if v.is_nan() { v } else { a.max(v.abs()) };
            }
        }
    }
    let tensor_amax = amax.iter().fold(0f32, |m, &a| {
        if m.is_nan() {
            m
        } else if a.is_nan() {
            a
        } else {
            m.max(a)
        }
    });
    let element_max = if scheme.element == DType::Float8E4M3Fn {
        448.0
    } else {
        6.0
    };
    let plan = match (scheme.convention, scheme.rule) {
        (Convention::CompressedTensors, ScaleRule::AbsMax) if scheme.global_scale => {
            ct_nvfp4(&amax, tensor_amax, dtype)
        }
        (Convention::CompressedTensors, ScaleRule::AbsMax) => ct_fp8(&amax, dtype),
        (Convention::CompressedTensors, ScaleRule::PowerOfTwo(_)) => ct_mx(&amax, dtype, scheme),
        (Convention::TorchAo, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
            ao_mx_rceil(&amax, element_max)
        }
        (Convention::TorchAo, ScaleRule::PowerOfTwo(rounding)) => ao_mx(&amax, rounding, scheme),
        (Convention::TorchAo, ScaleRule::AbsMax) => ao_nvfp4(&amax, tensor_amax, scheme),
        (Convention::DeepSeek, ScaleRule::AbsMax) if !scheme.global_scale => {
            ct_fp8(&amax, DType::Float32)
        }
        (Convention::GptOss, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
            ao_mx_rceil(&amax, element_max)
        }
        (convention, _) => {
            return Err(QuantError::Scheme {
                reason: format!("quantizing with the {convention:?} convention is not supported"),
            })
        }
    };
    // Each element: scaled by its group's factor in the plan's arithmetic, clamped, encoded —
    // elementwise, so whole rows at a time on the thread pool (an even count of elements per
    // piece, so float4 pairs never straddle two).
    let piece = (PIECE_ELEMENTS / cols.max(1)).max(1) * cols;
    let encode = |(k, xs): (usize, &[f32])| -> Vec<u8> {
        let mut scaled = Vec::with_capacity(xs.len());
        for (j, row) in xs.chunks_exact(cols).enumerate() {
            for (start, end, g) in scheme.runs(k * (piece / cols) + j, cols) {
                let f = plan.factors[g];
                scaled.extend(row[start..end].iter().map(|&v| match plan.apply {
                    Apply::Divide => div(v, f),
                    Apply::Multiply => mul(v, f),
                }));
            }
        }
        let clamped: Vec<f32> = in_arithmetic(&scaled, plan.arithmetic)
            .into_iter()
            .map(|v| {
                if plan.clamp {
                    clamp(v, -element_max, element_max)
                } else {
                    v
                }
            })
            .collect();
        if scheme.element == DType::Float8E4M3Fn {
            torch_cast(&bytes(&clamped), DType::Float32, DType::Float8E4M3Fn)
        } else {
            let code = match scheme.convention {
                Convention::CompressedTensors => ct_fp4_code,
                _ => ao_fp4_code,
            };
            clamped
                .chunks(2)
                .map(|p| code(p[0]) | code(p[1]) << 4)
                .collect()
        }
    };
    let elements: Vec<u8> = if x.is_empty() {
        Vec::new()
    } else {
        x.par_chunks(piece)
            .enumerate()
            .map(encode)
            .collect::<Vec<Vec<u8>>>()
            .concat()
    };
    Ok(QuantizedTensor {
        elements,
        scales: plan.scales,
        global_scale: plan.global,
    })
}

/// `values` rounded to `dtype` by torch's arithmetic on bfloat16 tensors: as `.to()`, but a NaN
/// result is the positive default NaN `0x7FC0` (not the `0xFFFF` of the copy kernel).
fn in_arithmetic(values: &[f32], dtype: DType) -> Vec<f32> {
    let mut out = in_dtype(values, dtype);
    if dtype != DType::Float32 {
        for v in out.iter_mut().filter(|v| v.is_nan()) {
            *v = f32::from_bits(0x7FC0_0000);
        }
    }
    out
}

/// Values already exact in `w` (float32 or bfloat16), as stored bytes: a bfloat16 is the top half
/// of its float32 (NaN bits kept).
fn store(values: &[f32], w: DType) -> Vec<u8> {
    if w == DType::BFloat16 {
        values
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    } else {
        bytes(values)
    }
}

/// Elements per piece of the element pass (whole rows, at least one).
const PIECE_ELEMENTS: usize = 1 << 16;

/// How elements are scaled.
enum Apply {
    Divide,
    Multiply,
}

/// A reference's scales for a tensor: stored bytes, the factor each element is divided or
/// multiplied by, the dtype that arithmetic rounds to, and whether the result is clamped first.
struct Plan {
    scales: Vec<u8>,
    global: Option<f32>,
    factors: Vec<f32>,
    apply: Apply,
    arithmetic: DType,
    clamp: bool,
}

/// compressed-tensors FP8: `scale = amax / 448` in the weight's dtype (0 becomes its eps), stored
/// in that dtype; `x / scale` in that dtype.
fn ct_fp8(amax: &[f32], w: DType) -> Plan {
    let eps = if w == DType::BFloat16 {
        pow2(-7)
    } else {
        pow2(-23)
    };
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
    }
}

/// compressed-tensors MX: `amax` rounded to a power of two at float4's mantissa width (up from
/// 1.75), `E = 127 + log2 - offset` clamped to a byte; `x / 2^(E-127)` in the weight's dtype.
/// The stored byte is `127 + floor(log2(scale))` as int32 — for a non-finite block (scale inf)
/// x86 makes that 127.
fn ct_mx(amax: &[f32], w: DType, scheme: &Scheme) -> Plan {
    let offset = if scheme.element == DType::Float8E4M3Fn {
        8.0
    } else {
        2.0
    };
    let mut stored = Vec::with_capacity(amax.len());
    let mut factors = Vec::with_capacity(amax.len());
    for &a in amax {
        let p2 = f32::from_bits(a.to_bits().wrapping_add(1 << 21) & 0xFF80_0000);
        let e = clamp(127.0 + p2.log2().floor() - offset, 0.0, 255.0).round_ties_even();
        // `.to(uint8)`: NaN converts as x86 does (0).
        let e = cvtt(e) as u8;
        let scale = round_to(pow2(i32::from(e) - 127), w);
        factors.push(scale);
        stored.push((127i32.wrapping_add(cvtt(scale.log2().floor()))) as u8);
    }
    Plan {
        scales: stored,
        global: None,
        factors,
        apply: Apply::Divide,
        arithmetic: w,
        clamp: true,
    }
}

/// compressed-tensors NVFP4: global scale `2688 / max(amax, tiny)` in the weight's dtype (NaN or
/// inf: 1), block scale `fp8(global * (amax_block / 6))` (0 becomes 0.125), `x / (s / global)`
/// in float32.
fn ct_nvfp4(amax: &[f32], tensor_amax: f32, w: DType) -> Plan {
    // finfo(w).tiny: 2^-126 for float32 and bfloat16 alike. `2688 / tensor` is torch's
    // `__rtruediv__`: the tensor's reciprocal times 2688, each rounded in `w`.
    let reciprocal = in_arithmetic(
        &[div(
            1.0,
            clamp(tensor_amax, f32::MIN_POSITIVE, f32::INFINITY),
        )],
        w,
    )[0];
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
    }
}

/// torchao MX FLOOR / CEIL / EVEN: the exponent of `amax` (EVEN: rounded at the element's
/// mantissa width first, CEIL: plus one if not a power of two) minus the element's largest
/// exponent, clamped to [-127, 128]; NaN: 255. Elements `x / max(2^(E-127), 2^-126)` in float32;
/// float8 clamped, float4 saturated by its encoder.
fn ao_mx(amax: &[f32], rounding: MxRounding, scheme: &Scheme) -> Plan {
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
    }
}

/// torchao MX RCEIL: `E = clamp(ceil(log2(amax / max)), -127, 127) + 127` (NaN: 255, inf: 254);
/// elements multiplied by `2^(127 - E)` (E = 0: 1, 254: 2^-127, 255: NaN) and clamped.
fn ao_mx_rceil(amax: &[f32], element_max: f32) -> Plan {
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
    }
}

/// torchao NVFP4: block scale `fp8(clamp(amax / 6 [/ per_tensor], 2^-6, 448))`; elements times
/// `1 / s` (two-level: `(1 / per_tensor) / s`), the per-tensor scale `amax / 2688` a multiplier.
fn ao_nvfp4(amax: &[f32], tensor_amax: f32, scheme: &Scheme) -> Plan {
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
    }
}

/// compressed-tensors' float4 of a clamped value (`cast_to_fp4`, then `pack_fp4_to_uint8`): the
/// magnitude rounded at its thresholds (ties to even), the sign bit kept.
fn ct_fp4_code(v: f32) -> u8 {
    let a = v.abs();
    let magnitude = if a.is_nan() {
        a
    } else if a <= 0.25 {
        0.0
    } else if a < 0.75 {
        0.5
    } else if a <= 1.25 {
        1.0
    } else if a < 1.75 {
        1.5
    } else if a <= 2.5 {
        2.0
    } else if a < 3.5 {
        3.0
    } else if a <= 5.0 {
        4.0
    } else {
        6.0
    };
    // `x * sign(x)`: sign(±0) is +0 (so -0 becomes +0), sign(NaN) the NaN itself.
    let sign = if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else if v.is_nan() {
        v
    } else {
        0.0
    };
    let q = mul(magnitude, sign);
    let twice = (cvtt(q * 2.0) as i8).unsigned_abs();
    let index = match twice {
        1..=4 => twice,
        6 => 5,
        8 => 6,
        t if t >= 12 => 7,
        _ => 0,
    };
    index | u8::from(q.is_sign_negative()) << 3
}

/// torchao's `_f32_to_floatx_unpacked` for e2m1: round to nearest even on the float32 bits,
/// saturating at 6; NaN is not handled (its bits go through the normal path, as there).
fn ao_fp4_code(v: f32) -> u8 {
    let sign = ((v.to_bits() & 0x8000_0000) >> 28) as u8;
    let x = f32::from_bits(v.to_bits() & 0x7FFF_FFFF);
    let code = if x >= 6.0 {
        7
    } else if x < 1.0 {
        // Below the smallest normal (1.0): adding 2^21 leaves the code in the low bits, the float
        // addition rounding it to nearest even.
        let denorm_exp: u32 = (127 - 1) + (23 - 1) + 1;
        let magic = f32::from_bits(denorm_exp << 23);
        ((x + magic).to_bits().wrapping_sub(denorm_exp << 23)) as u8
    } else {
        let bits = x.to_bits() as i32;
        let odd = (bits >> 22) & 1;
        let add = ((1 - 127) << 23) + ((1 << 21) - 1);
        (bits.wrapping_add(add).wrapping_add(odd) >> 22) as u8
    };
    code | sign
}
