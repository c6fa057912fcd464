//! Dense floats to scaled elements, as each reference quantizes.

use dtcast_cast::{cast, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{bytes, clamp, cvtt, div, f32s, in_dtype, internal, mul, pow2, torch_cast};
use crate::dequant::{check_len, rows_cols, Quantized};
use crate::scheme::{Convention, Granularity, MxRounding, ScaleRule, Scheme};
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
    let n = rows * cols;
    // compressed-tensors computes on bfloat16 tensors (torch: in float32, rounded back, a NaN
    // coming back as 0x7FC0); torchao converts them to float32 first, bits kept.
    let input = Input {
        src,
        dtype,
        canonical_nan: dtype == DType::BFloat16
            && scheme.convention == Convention::CompressedTensors,
    };
    // The largest magnitude per scale, and of the whole tensor: a NaN in the group is the
    // result, as it is.
    let amax = amax_pass(&input, rows, cols, scheme, count)?;
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
    // piece, so float4 pairs never straddle two), through reused buffers and dtcast_cast's SIMD
    // casts.
    let piece_rows = (PIECE_ELEMENTS / cols.max(1)).max(1);
    let storage = |elements: usize| scheme.element.storage_bytes(elements).unwrap_or(0);
    let mut elements = vec![0u8; storage(n)];
    if n > 0 {
        elements
            .par_chunks_mut(storage(piece_rows * cols))
            .enumerate()
            .try_for_each_init(
                || (Vec::new(), Vec::new()),
                |(buf, narrow): &mut (Vec<f32>, Vec<u8>), (p, out)| -> Result<(), QuantError> {
                    let first = p * piece_rows * cols;
                    let count = out.len() * 8 / scheme.element.bits();
                    input.load(first, count, buf)?;
                    for (j, row) in buf.chunks_exact_mut(cols).enumerate() {
                        for (start, end, g) in scheme.runs(p * piece_rows + j, cols) {
                            scale_run(&mut row[start..end], plan.factors[g], &plan.apply);
                        }
                    }
                    if plan.arithmetic != DType::Float32 {
                        // Rounded to the arithmetic's dtype and read back (`in_arithmetic`).
                        narrow.resize(count * plan.arithmetic.byte_size().unwrap_or(4), 0);
                        let wide: &mut [u8] = bytemuck::cast_slice_mut(buf.as_mut_slice());
                        cast(
                            wide,
                            DType::Float32,
                            narrow,
                            plan.arithmetic,
                            CastMode::Torch,
                        )
                        .map_err(internal)?;
                        cast(
                            narrow,
                            plan.arithmetic,
                            wide,
                            DType::Float32,
                            CastMode::Torch,
                        )
                        .map_err(internal)?;
                        default_nan(buf);
                    }
                    if plan.clamp {
                        for v in buf.iter_mut() {
                            *v = if v.is_nan() {
                                *v
                            } else {
                                v.max(-element_max).min(element_max)
                            };
                        }
                    }
                    if scheme.element == DType::Float8E4M3Fn {
                        let wide: &[u8] = bytemuck::cast_slice(buf.as_slice());
                        cast(
                            wide,
                            DType::Float32,
                            out,
                            DType::Float8E4M3Fn,
                            CastMode::Torch,
                        )
                        .map_err(internal)?;
                    } else {
                        // float4 by the SIMD cast (nearest-even on the clamped magnitudes, as both
                        // references round), then the references' own codes where they differ
                        // from it: NaN, and compressed-tensors' -0 (its `x * sign(x)` is +0).
                        let wide: &[u8] = bytemuck::cast_slice(buf.as_slice());
                        cast(
                            wide,
                            DType::Float32,
                            out,
                            DType::Float4E2M1Fn,
                            CastMode::Torch,
                        )
                        .map_err(internal)?;
                        let code = match scheme.convention {
                            Convention::CompressedTensors => ct_fp4_code,
                            _ => ao_fp4_code,
                        };
                        for (i, &v) in buf.iter().enumerate() {
                            if v.is_nan() || v.to_bits() == 0x8000_0000 {
                                let shift = 4 * (i % 2);
                                out[i / 2] = out[i / 2] & !(0xF << shift) | code(v) << shift;
                            }
                        }
                    }
                    Ok(())
                },
            )?;
    }
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

/// Elements per piece of the element pass (whole rows, at least one): its buffers stay in the
/// core's cache.
const PIECE_ELEMENTS: usize = 1 << 14;

/// A run of values scaled by its factor: `div` / `mul`'s rules. A NaN factor is handled one
/// value at a time (rare); otherwise the hardware's division or product is the rule (x86 returns
/// a NaN element quieted), in a loop LLVM vectorises.
#[inline(always)]
fn scale_run(run: &mut [f32], f: f32, apply: &Apply) {
    match (apply, f.is_nan()) {
        (Apply::Divide, true) => run.iter_mut().for_each(|v| *v = div(*v, f)),
        (Apply::Multiply, true) => run.iter_mut().for_each(|v| *v = mul(*v, f)),
        (Apply::Divide, false) => run.iter_mut().for_each(|v| *v /= f),
        (Apply::Multiply, false) => run.iter_mut().for_each(|v| *v *= f),
    }
}

/// The largest magnitude of `vals` after `a` (the running value), as the sequential rule gives
/// it: a NaN already there stays, else the first NaN of `vals` is the result, else the maximum.
/// The magnitudes' bits compare as integers (a loop LLVM vectorises); a NaN is looked for only
/// when one is there.
fn run_amax(vals: &[f32], a: f32) -> f32 {
    if a.is_nan() {
        return a;
    }
    let m = vals
        .iter()
        .fold(0i32, |m, v| m.max((v.to_bits() & 0x7FFF_FFFF) as i32));
    if m > 0x7F80_0000 {
        return vals.iter().copied().find(|v| v.is_nan()).unwrap_or(a);
    }
    a.max(f32::from_bits(m as u32))
}

/// Every NaN of `values` as the positive default NaN, as torch's bfloat16 arithmetic leaves it.
fn default_nan(values: &mut [f32]) {
    for v in values {
        *v = if v.is_nan() {
            f32::from_bits(0x7FC0_0000)
        } else {
            *v
        };
    }
}

/// The tensor being quantized: its stored elements, read in pieces as float32.
struct Input<'a> {
    src: &'a [u8],
    dtype: DType,
    /// NaN read as the positive default NaN (compressed-tensors' bfloat16 arithmetic).
    canonical_nan: bool,
}

impl Input<'_> {
    /// Elements `first..first + count` as float32 in `buf` (a SIMD cast).
    fn load(&self, first: usize, count: usize, buf: &mut Vec<f32>) -> Result<(), QuantError> {
        let size = self.dtype.byte_size().unwrap_or(4);
        buf.resize(count, 0.0);
        let src = &self.src[first * size..(first + count) * size];
        let wide: &mut [u8] = bytemuck::cast_slice_mut(buf.as_mut_slice());
        cast(src, self.dtype, wide, DType::Float32, CastMode::Torch).map_err(internal)?;
        if self.canonical_nan {
            default_nan(buf);
        }
        Ok(())
    }
}

/// Each scale's largest magnitude (`run_amax` over its runs, in order), on the thread pool: the
/// rows that share scales (a band: one row, or a block's rows) fill their own slots, each band
/// read through a reused float32 buffer.
fn amax_pass(
    input: &Input,
    rows: usize,
    cols: usize,
    scheme: &Scheme,
    count: usize,
) -> Result<Vec<f32>, QuantError> {
    let mut amax = vec![0f32; count];
    if rows == 0 || cols == 0 {
        return Ok(amax);
    }
    let n = rows * cols;
    let (band, slots) = match scheme.granularity {
        Granularity::Tensor => {
            // One slot: partial maxima of pieces in order, then folded by the same rule.
            let pieces = n.div_ceil(PIECE_ELEMENTS);
            let parts = (0..pieces)
                .into_par_iter()
                .map_init(Vec::new, |buf, p| {
                    let first = p * PIECE_ELEMENTS;
                    input.load(first, PIECE_ELEMENTS.min(n - first), buf)?;
                    Ok(run_amax(buf, 0.0))
                })
                .collect::<Result<Vec<f32>, QuantError>>()?;
            amax[0] = parts.iter().fold(0f32, |a, &p| run_amax(&[p], a));
            return Ok(amax);
        }
        Granularity::Channel => (1, 1),
        Granularity::Group(k) => (1, cols / k),
        Granularity::Block(br, bc) => (br, cols.div_ceil(bc)),
    };
    amax.par_chunks_mut(slots)
        .enumerate()
        .try_for_each_init(Vec::new, |buf, (b, slot)| {
            let first_row = b * band;
            let band_rows = band.min(rows - first_row);
            input.load(first_row * cols, band_rows * cols, buf)?;
            for (j, row) in buf.chunks_exact(cols).enumerate() {
                for (start, end, k) in scheme.runs(first_row + j, cols) {
                    let s = &mut slot[k - b * slots];
                    *s = run_amax(&row[start..end], *s);
                }
            }
            Ok(())
        })?;
    Ok(amax)
}

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
    // `2^(e-127)` in the weight's dtype for every byte `e`, rounded once.
    let powers: Vec<f32> = (0..=255).map(|e| pow2(e - 127)).collect();
    let rounded = in_dtype(&powers, w);
    let mut stored = Vec::with_capacity(amax.len());
    let mut factors = Vec::with_capacity(amax.len());
    for &a in amax {
        let p2 = f32::from_bits(a.to_bits().wrapping_add(1 << 21) & 0xFF80_0000);
        let e = clamp(127.0 + p2.log2().floor() - offset, 0.0, 255.0).round_ties_even();
        // `.to(uint8)`: NaN converts as x86 does (0).
        let e = cvtt(e) as u8;
        let scale = rounded[usize::from(e)];
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The element pass encodes float4 with dtcast_cast's SIMD cast and keeps the references'
    /// own code functions for NaN and -0 only: on every other clamped value (every 4096th float32
    /// of magnitude at most 6, and each tie of the float4 grid with its neighbours) the cast must
    /// give both references' codes.
    #[test]
    fn the_float4_cast_gives_both_references_codes_on_clamped_values() {
        let mut values: Vec<f32> = (0..1u32 << 20)
            .map(|i| f32::from_bits(i << 12 | 0x800))
            .filter(|v| v.abs() <= 6.0)
            .collect();
        for k in -24..=24 {
            let tie = k as f32 * 0.25;
            values.extend([tie, tie.next_up(), tie.next_down()]);
        }
        values.retain(|v| !v.is_nan() && v.to_bits() != 0x8000_0000 && v.abs() <= 6.0);
        if values.len() % 2 == 1 {
            values.pop();
        }
        let mut codes = vec![0u8; values.len() / 2];
        cast(
            bytemuck::cast_slice(&values),
            DType::Float32,
            &mut codes,
            DType::Float4E2M1Fn,
            CastMode::Torch,
        )
        .unwrap();
        for (i, &v) in values.iter().enumerate() {
            let got = codes[i / 2] >> (4 * (i % 2)) & 0xF;
            assert_eq!(
                got,
                ct_fp4_code(v),
                "compressed-tensors, {v:e} ({:#x})",
                v.to_bits()
            );
            assert_eq!(got, ao_fp4_code(v), "torchao, {v:e} ({:#x})", v.to_bits());
        }
    }
}
