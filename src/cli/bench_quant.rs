//! `dtcast bench --scheme`: quantizing bfloat16 weights (or `--quantize-from`'s dtype) with a
//! scaled scheme, and dequantizing them back (to bfloat16, or `--dequantize-to`'s dtype), beside
//! a memcpy of the same bytes,
//! rounds interleaved; with `--device cuda:N`, the same on a GPU, its bytes compared with the CPU's.

use std::io::Write;
use std::time::Duration;

use dtcast::cast::{cast_to_vec, CastMode};
use dtcast::quant::{dequantize_into, quantize, quantize_into, DequantPlan, Scheme};
use dtcast_device::cuda::time_scaled;
use dtcast_device::Tensor;
use dtcast_dtype::DType;

use super::args::BenchArgs;
use super::bench::median;
use super::CmdError;

/// Columns of the benchmark weight (rows = elements / columns).
const COLS: usize = 4096;

pub(crate) fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = args.threads {
        builder = builder.num_threads(usize::from(t));
    }
    // The work and the memcpy it is compared with run on the pool `--threads` asks for.
    let pool = builder.build()?;
    let threads = pool.current_num_threads();
    let (elements, shape) = weight_shape(args)?;
    let rows = shape[0];
    let dense_dtype = args.dequantize_to.unwrap_or(DType::BFloat16);
    let (from, src) = weight(elements, args)?;
    if !args.json {
        writeln!(
            out,
            "{elements} {from} elements ([{rows}, {COLS}]), {threads} threads, {} kernels, dequantize to {dense_dtype} into a reused buffer: one pass where the kernels have one (float4 groups into 16-bit outputs: each group's 16 outputs, looked up; float8: decode, product, rounding), else SIMD casts around a vectorised product; quantize: bands of rows (amax, then on AVX-512 scale, rounding and packing in registers while the band is in cache; NVFP4 reads the tensor once more first, for its global scale) into reused buffers; memcpy of the same bytes on the same threads; median of {} interleaved rounds (ratio: the median of the rounds' ratios); GB/s count bytes read + written",
            dtcast_cast::isa(),
            args.repeat
        )?;
        if from == DType::Float16 {
            writeln!(
                out,
                "float16 input: the one-pass kernels read it too (float8: each quotient rounded to float16 in registers, as compressed-tensors computes in float16; float4: the comparisons with each scale byte's thresholds, found for float16 magnitudes); bfloat16's exponent-shift forms are bfloat16's alone"
            )?;
        }
        columns(out, "memcpy GB/s")?;
    }
    for name in &args.scheme {
        let (reference, scheme) = scheme_of(name, from)?;
        let q = pool.install(|| quantize(&src, from, &shape, &scheme))?;
        // The library's checks of the output dtype (`--dequantize-to`), before any timing.
        DequantPlan::new(&q.view(&shape), &scheme, dense_dtype)?;
        let dense_size = dense_dtype.byte_size().unwrap_or(4);
        let packed = q.elements.len() + q.scales.len();
        for direction in ["quantize", "dequantize"] {
            // The dense side: the input, or the dequantized output.
            let (dense_side, dense_bytes) = if direction == "quantize" {
                (from, src.len())
            } else {
                (dense_dtype, elements * dense_size)
            };
            let bytes = dense_bytes + packed;
            let copy_from = vec![1u8; bytes / 2];
            let mut copy_to = vec![0u8; bytes / 2];
            // Both directions write into reused buffers, as memcpy does (and as a conversion
            // reuses its buffers): page faults of a fresh allocation are not the kernel's time.
            let mut dense = vec![0u8; elements * dense_size];
            let (mut packed_out, mut scales_out) = (q.elements.clone(), q.scales.clone());
            let repeat = usize::try_from(args.repeat).unwrap_or(1);
            let (work, copy) =
                super::bench::beside_memcpy(&pool, repeat, &mut copy_to, &copy_from, || {
                    if direction == "quantize" {
                        pool.install(|| {
                            quantize_into(
                                &src,
                                from,
                                &shape,
                                &scheme,
                                &mut packed_out,
                                &mut scales_out,
                            )
                        })?;
                        std::hint::black_box((&packed_out, &scales_out));
                    } else {
                        let view = q.view(&shape);
                        pool.install(|| dequantize_into(&view, &scheme, dense_dtype, &mut dense))?;
                        std::hint::black_box(&dense);
                    }
                    Ok(())
                })?;
            let ratio = super::bench::paired_ratio(&copy, &work);
            let (w, c) = (median(&work), median(&copy));
            let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
            let gelem = elements as f64 / w.as_secs_f64() / 1e9;
            if args.json {
                writeln!(
                    out,
                    "{{\"scheme\":\"{name}\",\"reference\":\"{reference}\",\"direction\":\"{direction}\",\"dense\":\"{dense_side}\",\"elements\":{elements},\"threads\":{threads},\"kernels\":\"{}\",\"gelem_per_s\":{gelem:.4},\"cast_gbps\":{:.3},\"memcpy_gbps\":{:.3},\"ratio\":{ratio:.3}}}",
                    dtcast_cast::isa(),
                    gbps(w),
                    gbps(c)
                )?;
            } else {
                table_row(out, name, direction, gelem, gbps(w), gbps(c), ratio)?;
            }
        }
    }
    Ok(())
}

/// The table's column names; `copy` names the copy the work is compared with.
fn columns(out: &mut dyn Write, copy: &str) -> Result<(), CmdError> {
    writeln!(
        out,
        "{:<22} {:<11} {:>9} {:>10} {copy:>11} {:>7}",
        "scheme", "direction", "Gelem/s", "GB/s", "ratio"
    )?;
    Ok(())
}

/// One row of the table.
fn table_row(
    out: &mut dyn Write,
    name: &str,
    direction: &str,
    gelem: f64,
    gbps: f64,
    copy_gbps: f64,
    ratio: f64,
) -> Result<(), CmdError> {
    writeln!(
        out,
        "{name:<22} {direction:<11} {gelem:>9.3} {gbps:>10.2} {copy_gbps:>11.2} {ratio:>7.2}"
    )?;
    Ok(())
}

/// The benchmark weight's element count and shape (`--elements` in rows of [`COLS`]).
fn weight_shape(args: &BenchArgs) -> Result<(usize, [usize; 2]), CmdError> {
    let elements = usize::try_from(args.elements).map_err(|_| "--elements is too large")?;
    let rows = elements / COLS;
    if rows == 0 || elements % COLS != 0 {
        return Err(format!(
            "--scheme benches a weight of {COLS} columns: --elements must be a multiple of {COLS}"
        )
        .into());
    }
    Ok((elements, [rows, COLS]))
}

/// The weight to quantize: [`weight_bf16`]'s values in `--quantize-from`'s dtype (bfloat16 by
/// default; exact in float32, rounded to float16), and that dtype.
fn weight(elements: usize, args: &BenchArgs) -> Result<(DType, Vec<u8>), CmdError> {
    let from = args.quantize_from.unwrap_or(DType::BFloat16);
    let bf16 = weight_bf16(elements);
    let src = if from == DType::BFloat16 {
        bf16
    } else {
        cast_to_vec(&bf16, DType::BFloat16, from, CastMode::Torch)?
    };
    Ok((from, src))
}

/// Weight-like values: a fixed pseudo-random sequence, roughly normal, as bfloat16 bytes.
fn weight_bf16(elements: usize) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..elements)
        .flat_map(|_| {
            let mut sum = 0f32;
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                sum += (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
            let bits = (sum * 0.05).to_bits();
            ((bits >> 16) as u16).to_le_bytes()
        })
        .collect()
}

/// A `--scheme` name (the CLI's, or a reference's) and its scheme for `from` input (checked:
/// a dtype the scheme's reference does not quantize is an error before any timing).
fn scheme_of(name: &str, from: DType) -> Result<(&str, Scheme), CmdError> {
    let reference = dtcast_layer::checkpoint::quantize_scheme_name(name);
    let scheme = Scheme::named(reference, from)?;
    scheme.check_input(from)?;
    Ok((reference, scheme))
}

/// `--scheme` with `--device cuda:N`: the whole `cuda::quantize` and `cuda::dequantize` calls
/// beside device-to-device copies of as many bytes (wall clock, rounds interleaved), and their
/// bytes compared with the CPU's (an error where they differ).
pub(crate) fn run_cuda(args: &BenchArgs, ordinal: u8, out: &mut dyn Write) -> Result<(), CmdError> {
    let device = dtcast_device::Device::Cuda(ordinal);
    // "CUDA is not available: ..." before any work where there is no GPU.
    dtcast_device::backend_for(device)?;
    let (elements, shape) = weight_shape(args)?;
    let dense_dtype = args.dequantize_to.unwrap_or(DType::BFloat16);
    let (from, src) = weight(elements, args)?;
    let x = Tensor::from_bytes(&src, from, &shape)?;
    if !args.json {
        writeln!(
            out,
            "{elements} {from} elements ([{}, {COLS}]) on {device}, dequantize to {dense_dtype}; each figure the whole library call until the device is idle (quantize: amax kernels, scale rules on the host, encoding kernel; dequantize: factors, kernel; outputs from the memory pool) beside a device-to-device copy of as many bytes, wall clock, median of {} interleaved rounds; GB/s count bytes read + written; the GPU's bytes equal the CPU's (checked)",
            shape[0],
            args.repeat
        )?;
        columns(out, "copy GB/s")?;
    }
    for name in &args.scheme {
        let (reference, scheme) = scheme_of(name, from)?;
        let t = time_scaled(ordinal, &x, &scheme, dense_dtype, args.repeat)?;
        // The GPU's bytes are the CPU's: quantized, and dequantized from the GPU's own codes.
        let cpu = quantize(&src, from, &shape, &scheme)?;
        let (codes, scales, global) = &t.quantized;
        if (codes, scales, *global) != (&cpu.elements, &cpu.scales, cpu.global_scale) {
            return Err(
                format!("{name} on {device}: the quantized weight differs from the CPU's").into(),
            );
        }
        let mut dense = vec![0u8; elements * dense_dtype.byte_size().unwrap_or(4)];
        dequantize_into(&cpu.view(&shape), &scheme, dense_dtype, &mut dense)?;
        if t.dense != dense {
            return Err(format!(
                "{name} on {device}: the dequantized weight differs from the CPU's"
            )
            .into());
        }
        let rows = [
            ("quantize", t.quantize, t.quantize_copy, t.quantize_bytes),
            (
                "dequantize",
                t.dequantize,
                t.dequantize_copy,
                t.dequantize_bytes,
            ),
        ];
        for (direction, work, copy, bytes) in rows {
            let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
            let gelem = elements as f64 / work.as_secs_f64() / 1e9;
            let ratio = copy.as_secs_f64() / work.as_secs_f64();
            if args.json {
                writeln!(
                    out,
                    "{{\"scheme\":\"{name}\",\"reference\":\"{reference}\",\"direction\":\"{direction}\",\"elements\":{elements},\"device\":\"{device}\",\"gelem_per_s\":{gelem:.4},\"cast_gbps\":{:.3},\"memcpy_gbps\":{:.3},\"ratio\":{ratio:.3}}}",
                    gbps(work),
                    gbps(copy)
                )?;
            } else {
                table_row(out, name, direction, gelem, gbps(work), gbps(copy), ratio)?;
            }
        }
        out.flush()?;
    }
    Ok(())
}
