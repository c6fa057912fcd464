//! Scaled formats on the GPU: dtcast-quant's schemes quantized and dequantized by the kernels of
//! `scaled.cu`, with the numbers of each scheme computed on the host by dtcast-quant itself
//! ([`DequantPlan`], [`Quantizer::plan`]) so that the GPU applies the CPU's description.
//!
//! Dequantizing downloads nothing but the scales (a few bytes per 16 to 16,384 elements, for the
//! factors of wide scales); quantizing finds every scale's amax on the GPU, brings the amaxes to
//! the host for the references' scale rules, and sends the factors back for the element pass.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use dtcast_dtype::DType;
use dtcast_quant::{scale_layout, DequantPlan, Quantizer, Scales, Scheme};

use super::{backend_of, compile, cuda_error, kernel_source, lane, quirk_args, Cuda, CudaStorage};
use crate::backend::{Backend, Storage};
use crate::error::TensorError;
use crate::{Device, Tensor};

/// The kernels' source after `kernels.cu`'s.
const SCALED_CU: &str = include_str!("scaled.cu");

/// The functions each kind of program defines.
const DEQUANT_FUNCTIONS: [&str; 2] = ["dtcast_dequant", "dtcast_gpt_oss"];
const QUANTIZE_FUNCTIONS: [&str; 3] = ["dtcast_amax", "dtcast_amax_value", "dtcast_encode"];

/// Threads per block of the scaled kernels (their grid-stride loops cover any rest).
const BLOCK_THREADS: u32 = 256;

/// Elements per thread of `dtcast_amax` (`DTCAST_AMAX_RUN` in `scaled.cu`): the launch's size
/// only, which any value would make correct.
const AMAX_RUN: usize = 16;

/// A tensor quantized on the GPU: its elements (float8_e4m3fn, or float4_e2m1fn packed two per
/// byte, in the input's shape), its scales (the scheme's scale dtype, one dimension, in the
/// scheme's order) and its global scale where the scheme has one.
#[derive(Clone, Debug)]
pub struct DeviceQuantized {
    /// The elements, on the input's device.
    pub elements: Tensor,
    /// The scales, on the input's device.
    pub scales: Tensor,
    /// The global scale (NVFP4).
    pub global_scale: Option<f32>,
}

/// The program line for dequantizing `element` codes into `out`.
pub fn dequant_line(element: DType, out: DType) -> Result<String, TensorError> {
    Ok(format!(
        "DTCAST_DEQUANT({}, {}, {})\n",
        element.bits(),
        lane_or_error(out)?,
        quirk_args(DType::Float32, out)
    ))
}

/// The program line for quantizing `input` (float32, bfloat16, float16) into `element` codes.
pub fn quantize_line(input: DType, element: DType) -> Result<String, TensorError> {
    Ok(format!(
        "DTCAST_QUANTIZE({}, {}, {})\n",
        lane_or_error(input)?,
        lane_or_error(element)?,
        quirk_args(DType::Float32, element)
    ))
}

fn lane_or_error(dtype: DType) -> Result<String, TensorError> {
    lane(dtype).ok_or_else(|| TensorError::Cuda(format!("no CUDA lane for {dtype}")))
}

/// The dtypes a plan's scaled values are rounded to
/// ([`ScalePlan::arithmetic`](dtcast_quant::ScalePlan::arithmetic)), each at the code
/// `dtcast_encode` takes for it (`DTCAST_ARITH_*` in `scaled.cu`).
const ARITHMETIC: [DType; 3] = [DType::Float32, DType::BFloat16, DType::Float16];

/// The code `dtcast_encode` takes for rounding to `arithmetic`.
pub fn arithmetic_code(arithmetic: DType) -> Result<u32, TensorError> {
    (ARITHMETIC.iter().position(|&d| d == arithmetic))
        .map(|code| code as u32)
        .ok_or_else(|| {
            TensorError::Cuda(format!(
                "the scaled kernels round in float32, bfloat16 or float16, not {arithmetic}"
            ))
        })
}

/// The element formats the scaled kernels read and write (MXFP6's float6 is the CPU's alone).
const KERNEL_ELEMENTS: [DType; 2] = [DType::Float8E4M3Fn, DType::Float4E2M1Fn];

/// Every program the scaled kernels need: (line, functions).
fn programs() -> Result<Vec<(String, &'static [&'static str])>, TensorError> {
    let mut lines = Vec::new();
    for element in KERNEL_ELEMENTS {
        for out in [DType::Float32, DType::BFloat16, DType::Float16] {
            lines.push((dequant_line(element, out)?, &DEQUANT_FUNCTIONS[..]));
        }
        for input in [DType::Float32, DType::BFloat16, DType::Float16] {
            lines.push((quantize_line(input, element)?, &QUANTIZE_FUNCTIONS[..]));
        }
    }
    Ok(lines)
}

/// Compiles every scaled kernel (each element format into each output, from each input) with
/// NVRTC, without a GPU, as one program (each kernel renamed): what the test suite runs where
/// NVRTC is installed.
pub fn compile_scaled_kernels(arch: Option<&str>) -> Result<(), TensorError> {
    let mut src = format!("{}\n{SCALED_CU}\n", kernel_source());
    for (k, (line, functions)) in programs()?.iter().enumerate() {
        let rename: String = functions
            .iter()
            .map(|f| format!("#define {f} {f}_{k}\n"))
            .collect();
        let undo: String = functions.iter().map(|f| format!("#undef {f}\n")).collect();
        src.push_str(&format!("{rename}{line}{undo}"));
    }
    compile(src, arch, "the scaled-format kernels", &[]).map(|_| ())
}

impl Cuda {
    /// The functions of the program `line`, compiled on first use and cached for this context.
    fn scaled_functions(
        &self,
        line: &str,
        names: &[&str],
    ) -> Result<Vec<CudaFunction>, TensorError> {
        let module = self.scaled.get_or_build(line.to_owned(), || {
            let src = format!("{}\n{SCALED_CU}\n{line}", kernel_source());
            let what = format!("the scaled kernels `{}`", line.trim());
            let ptx = self.code_for(src, &what)?;
            self.ctx.load_module(ptx).map_err(cuda_error)
        })?;
        names
            .iter()
            .map(|name| module.load_function(name).map_err(cuda_error))
            .collect()
    }

    fn slice_of<'a>(&self, t: &'a Tensor) -> Result<&'a CudaSlice<u8>, TensorError> {
        Ok(&self.storage(t.storage().as_ref())?.buf)
    }

    fn upload_f32(&self, values: &[f32]) -> Result<CudaSlice<u8>, TensorError> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let mut buf = self.alloc_for_writing(bytes.len())?;
        if !bytes.is_empty() {
            self.stream
                .memcpy_htod(bytes, &mut buf.slice_mut(0..bytes.len()))
                .map_err(cuda_error)?;
        }
        Ok(buf)
    }

    fn wrap(&self, buf: CudaSlice<u8>, len: usize) -> Arc<dyn Storage> {
        Arc::new(CudaStorage {
            buf,
            len,
            ordinal: self.ordinal,
        })
    }
}

/// The launch of a grid-stride kernel over `n` items.
fn grid(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK_THREADS as usize).clamp(1, 1 << 16);
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The CUDA backend of a tensor's device, or why it has none.
fn cuda_of(t: &Tensor) -> Result<Arc<Cuda>, TensorError> {
    match t.device() {
        Device::Cuda(ordinal) => backend_of(ordinal),
        other => Err(TensorError::WrongDevice {
            backend: Device::Cuda(0),
            storage: other,
        }),
    }
}

/// The dense tensor of a quantized one whose elements and scales are on a CUDA device (their
/// bytes as stored: any dtype, read as bytes), bit for bit as [`dtcast_quant::dequantize`] gives it
/// on the CPU. `shape` is the logical shape in elements, as there.
///
/// Without a GPU this returns `TensorError::CudaUnavailable` (or `WrongDevice` for tensors on
/// the CPU: use `dtcast_quant::dequantize` there).
///
/// ```
/// use dtcast_device::{cuda, Tensor};
/// use dtcast_dtype::DType;
/// use dtcast_quant::Scheme;
/// let elements = Tensor::from_bytes(&[0x38, 0x40], DType::UInt8, &[2])?;
/// let scales = Tensor::from_bytes(&0.5f32.to_le_bytes(), DType::UInt8, &[4])?;
/// let scheme = Scheme::named("deepseek_v3_fp8_block", DType::BFloat16)?;
/// // CPU tensors are refused: the kernels run on a CUDA device.
/// assert!(cuda::dequantize(&elements, &scales, &[1, 2], None, &scheme, DType::BFloat16).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn dequantize(
    elements: &Tensor,
    scales: &Tensor,
    shape: &[usize],
    global_scale: Option<f32>,
    scheme: &Scheme,
    out: DType,
) -> Result<Tensor, TensorError> {
    let cuda = cuda_of(elements)?;
    if !KERNEL_ELEMENTS.contains(&scheme.element) {
        return Err(TensorError::Cuda(format!(
            "the scaled kernels read float8_e4m3fn and float4_e2m1fn elements, not {} (MXFP6 \
             is dequantized on the CPU)",
            scheme.element
        )));
    }
    // Wide scales come to the host, where their factors are computed; one-byte scales' factors
    // are a table of the 256 bytes, so only their length is needed.
    let scale_len = scales.storage().len();
    let downloaded = match scheme.scale.byte_size() {
        Some(1) => None,
        _ => Some(cuda.download_vec(scales.storage().as_ref())?),
    };
    let scale_view = downloaded
        .as_deref()
        .map_or(Scales::Length(scale_len), Scales::Bytes);
    let element_bytes = elements.storage().len();
    let plan =
        DequantPlan::from_parts(element_bytes, shape, scale_view, global_scale, scheme, out)?;
    let (rows, cols) = (plan.rows as u64, plan.cols as u64);
    let n = plan.rows * plan.cols;
    let len = n * out.byte_size().unwrap_or(4);
    let mut dst = cuda.alloc_for_writing(len)?;
    let out_shape = plan.output_shape(shape);
    if n > 0 {
        let [dequant, gpt_oss]: [CudaFunction; 2] = cuda
            .scaled_functions(&dequant_line(scheme.element, out)?, &DEQUANT_FUNCTIONS)?
            .try_into()
            .map_err(|_| TensorError::Cuda("missing scaled kernels".to_owned()))?;
        let (kind, a, b) = scale_layout(scheme.granularity);
        let (a, b) = (a as u64, b as u64);
        let values = cuda.upload_f32(&plan.values)?;
        let src = cuda.slice_of(elements)?;
        let scale_buf = cuda.slice_of(scales)?;
        match plan.gpt_oss_experts {
            Some(experts) => {
                let per_expert = (plan.rows / experts.max(1)) as u64;
                let mut launch = cuda.stream.launch_builder(&gpt_oss);
                launch
                    .arg(src)
                    .arg(&values)
                    .arg(scale_buf)
                    .arg(&kind)
                    .arg(&a)
                    .arg(&b);
                launch.arg(&rows).arg(&cols).arg(&per_expert).arg(&mut dst);
                // SAFETY: `dtcast_gpt_oss` reads rows * cols codes (the plan checked the
                // elements' bytes), one scale byte per group (checked) and 16 values, and writes
                // rows * cols outputs of `out` into `dst` (allocated for them).
                unsafe { launch.launch(grid(n)) }.map_err(cuda_error)?;
            }
            None => {
                let factors = cuda.upload_f32(&plan.factors)?;
                let by_byte = u32::from(plan.by_scale_byte);
                let mut launch = cuda.stream.launch_builder(&dequant);
                launch
                    .arg(src)
                    .arg(&values)
                    .arg(&factors)
                    .arg(scale_buf)
                    .arg(&by_byte);
                launch
                    .arg(&kind)
                    .arg(&a)
                    .arg(&b)
                    .arg(&rows)
                    .arg(&cols)
                    .arg(&mut dst);
                // SAFETY: `dtcast_dequant` reads rows * cols codes (checked), each element's scale
                // (the plan checked the scales' bytes) and factor (256 by byte, else one per
                // scale) and its code's value, and writes rows * cols outputs into `dst`.
                unsafe { launch.launch(grid(n)) }.map_err(cuda_error)?;
            }
        }
        cuda.stream.synchronize().map_err(cuda_error)?;
    }
    Tensor::from_storage(cuda.wrap(dst, len), out, &out_shape)
}

/// A float32, bfloat16 or float16 tensor on a CUDA device quantized with `scheme` (float16 under
/// compressed-tensors' rules, as on the CPU), bit for bit as
/// [`dtcast_quant::quantize`] does it on the CPU: every scale's amax on the GPU, the scheme's
/// scale rules on the host (dtcast-quant's), the elements on the GPU.
///
/// Without a GPU this returns `TensorError::CudaUnavailable` (or `WrongDevice` for a CPU tensor:
/// use `dtcast_quant::quantize` there).
///
/// ```
/// use dtcast_device::{cuda, Tensor};
/// use dtcast_dtype::DType;
/// use dtcast_quant::Scheme;
/// let x = Tensor::from_vec(vec![1.0f32; 32], &[1, 32])?;
/// let scheme = Scheme::named("ct_mxfp4", DType::Float32)?;
/// assert!(cuda::quantize(&x, &scheme).is_err()); // a CPU tensor
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn quantize(x: &Tensor, scheme: &Scheme) -> Result<DeviceQuantized, TensorError> {
    let cuda = cuda_of(x)?;
    let quantizer = Quantizer::new(x.dtype(), x.shape(), scheme)?;
    let (rows, cols) = quantizer.rows_cols();
    let count = quantizer.scale_count();
    let n = rows * cols;
    let [amax_fn, amax_value, encode]: [CudaFunction; 3] = cuda
        .scaled_functions(
            &quantize_line(x.dtype(), scheme.element)?,
            &QUANTIZE_FUNCTIONS,
        )?
        .try_into()
        .map_err(|_| TensorError::Cuda("missing scaled kernels".to_owned()))?;
    let (kind, a, b) = scale_layout(scheme.granularity);
    let (a, b, rows64, cols64, count64) =
        (a as u64, b as u64, rows as u64, cols as u64, count as u64);
    let src = cuda.slice_of(x)?;
    // Every scale's amax: its largest magnitude and its first NaN, then the value.
    let mut magnitude = cuda.alloc_zeroed(4 * count)?;
    let mut nan_key = cuda.alloc_zeroed(8 * count)?;
    let mut amax_buf = cuda.alloc_for_writing(4 * count)?;
    let plan_of = |amax: &[f32]| quantizer.plan(amax);
    let plan = if count > 0 {
        if n > 0 {
            let mut launch = cuda.stream.launch_builder(&amax_fn);
            launch
                .arg(src)
                .arg(&kind)
                .arg(&a)
                .arg(&b)
                .arg(&rows64)
                .arg(&cols64);
            launch.arg(&mut magnitude).arg(&mut nan_key);
            // SAFETY: `dtcast_amax` reads rows * cols inputs (the tensor holds them) and updates
            // one u32 and one u64 per scale (allocated, zeroed). A thread per run of
            // `DTCAST_AMAX_RUN` elements (its grid-stride loop covers any other grid).
            unsafe { launch.launch(grid(n.div_ceil(AMAX_RUN))) }.map_err(cuda_error)?;
        }
        let default_nan = u32::from(quantizer.amax_nan_is_default());
        let mut launch = cuda.stream.launch_builder(&amax_value);
        launch
            .arg(src)
            .arg(&magnitude)
            .arg(&nan_key)
            .arg(&count64)
            .arg(&default_nan);
        launch.arg(&mut amax_buf);
        // SAFETY: `dtcast_amax_value` reads `count` maxima (and an input element where one is a
        // NaN's index) and writes `count` float32s.
        unsafe { launch.launch(grid(count)) }.map_err(cuda_error)?;
        let mut amax = vec![0u8; 4 * count];
        cuda.stream
            .memcpy_dtoh(&amax_buf.slice(0..4 * count), &mut amax)
            .map_err(cuda_error)?;
        cuda.stream.synchronize().map_err(cuda_error)?;
        let amax: Vec<f32> = amax
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        plan_of(&amax)?
    } else {
        plan_of(&[])?
    };
    let element_len = scheme.element.storage_bytes(n).map_err(|_| {
        TensorError::Cuda(format!(
            "{n} {} elements do not end on a byte",
            scheme.element
        ))
    })?;
    let mut dst = cuda.alloc_for_writing(element_len)?;
    if element_len > 0 {
        let factors = cuda.upload_f32(&plan.factors)?;
        let flags = [
            u32::from(plan.divide),
            arithmetic_code(plan.arithmetic)?,
            u32::from(plan.canonical_nan),
            u32::from(plan.compressed_tensors_float4),
        ];
        let mut launch = cuda.stream.launch_builder(&encode);
        launch
            .arg(src)
            .arg(&factors)
            .arg(&kind)
            .arg(&a)
            .arg(&b)
            .arg(&rows64)
            .arg(&cols64);
        launch
            .arg(&flags[0])
            .arg(&flags[1])
            .arg(&flags[2])
            .arg(&flags[3])
            .arg(&plan.limit);
        launch.arg(&mut dst);
        // SAFETY: `dtcast_encode` reads rows * cols inputs and one factor per scale (the plan has
        // one per scale) and writes `element_len` bytes into `dst` (allocated for them).
        unsafe { launch.launch(grid(element_len)) }.map_err(cuda_error)?;
    }
    let scales = cuda.upload(&plan.scales)?;
    cuda.stream.synchronize().map_err(cuda_error)?;
    let scale_count = plan.scales.len() / scheme.scale.byte_size().unwrap_or(1);
    Ok(DeviceQuantized {
        elements: Tensor::from_storage(cuda.wrap(dst, element_len), scheme.element, x.shape())?,
        scales: Tensor::from_storage(scales, scheme.scale, &[scale_count])?,
        global_scale: plan.global_scale,
    })
}
