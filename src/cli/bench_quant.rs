//! `dtcast bench --scheme`: quantizing bfloat16 weights with a scaled scheme, and dequantizing
//! them back (to bfloat16, or `--dequantize-to`'s dtype), beside a memcpy of the same bytes,
//! rounds interleaved.

use std::io::Write;
use std::time::{Duration, Instant};

use dtcast::quant::{dequantize_into, quantize, quantize_into, DequantPlan, Scheme};
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
    let elements = usize::try_from(args.elements).map_err(|_| "--elements is too large")?;
    let rows = elements / COLS;
    if rows == 0 || elements % COLS != 0 {
        return Err(format!(
            "--scheme benches a weight of {COLS} columns: --elements must be a multiple of {COLS}"
        )
        .into());
    }
    let shape = [rows, COLS];
    let dense_dtype = args.dequantize_to.unwrap_or(DType::BFloat16);
    // Weight-like values: a fixed pseudo-random sequence, roughly normal, as bfloat16.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let src: Vec<u8> = (0..elements)
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
        .collect();
    if !args.json {
        writeln!(
            out,
            "{elements} bfloat16 elements ([{rows}, {COLS}]), {threads} threads, {} kernels, dequantize to {dense_dtype} into a reused buffer: one pass where the kernels have one (float4 groups into 16-bit outputs: each group's 16 outputs, looked up; float8: decode, product, rounding), else SIMD casts around a vectorised product; quantize: bands of rows (amax, then on AVX-512 scale, rounding and packing in registers while the band is in cache; NVFP4 reads the tensor once more first, for its global scale) into reused buffers; memcpy of the same bytes on the same threads; median of {} interleaved rounds (ratio: the median of the rounds' ratios); GB/s count bytes read + written",
            dtcast_cast::isa(),
            args.repeat
        )?;
        writeln!(
            out,
            "{:<22} {:<11} {:>9} {:>10} {:>11} {:>7}",
            "scheme", "direction", "Gelem/s", "GB/s", "memcpy GB/s", "ratio"
        )?;
    }
    for name in &args.scheme {
        let reference = dtcast_layer::checkpoint::quantize_scheme_name(name);
        let scheme = Scheme::named(reference, DType::BFloat16)?;
        let q = pool.install(|| quantize(&src, DType::BFloat16, &shape, &scheme))?;
        // The library's checks of the output dtype (`--dequantize-to`), before any timing.
        DequantPlan::new(&q.view(&shape), &scheme, dense_dtype)?;
        let dense_size = dense_dtype.byte_size().unwrap_or(4);
        let packed = q.elements.len() + q.scales.len();
        for direction in ["quantize", "dequantize"] {
            // The dense side: the bfloat16 input, or the dequantized output.
            let (dense_side, dense_bytes) = if direction == "quantize" {
                (DType::BFloat16, src.len())
            } else {
                (dense_dtype, elements * dense_size)
            };
            let bytes = dense_bytes + packed;
            let copy_from = vec![1u8; bytes / 2];
            let mut copy_to = vec![0u8; bytes / 2];
            let (mut work, mut copy) = (Vec::new(), Vec::new());
            // Both directions write into reused buffers, as memcpy does (and as a conversion
            // reuses its buffers): page faults of a fresh allocation are not the kernel's time.
            let mut dense = vec![0u8; elements * dense_size];
            let (mut packed_out, mut scales_out) = (q.elements.clone(), q.scales.clone());
            for _ in 0..args.repeat {
                let t = Instant::now();
                if direction == "quantize" {
                    pool.install(|| {
                        quantize_into(
                            &src,
                            DType::BFloat16,
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
                work.push(t.elapsed());
                let t = Instant::now();
                pool.install(|| super::bench::memcpy(&mut copy_to, &copy_from));
                std::hint::black_box(&copy_to);
                copy.push(t.elapsed());
            }
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
                writeln!(
                    out,
                    "{name:<22} {direction:<11} {gelem:>9.3} {:>10.2} {:>11.2} {:>7.2}",
                    gbps(w),
                    gbps(c),
                    ratio
                )?;
            }
        }
    }
    Ok(())
}
