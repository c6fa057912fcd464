//! `dtcast bench --scheme gptq4,gptq4-act,awq4,w4a16,nf4,...`: dequantizing the integer formats
//! (GPTQ, AWQ, compressed-tensors' pack-quantized, bitsandbytes) from their stored parts into a
//! reused buffer, beside a memcpy of the output's bytes on the same threads, rounds interleaved.
//! The parts hold pseudo-random codes, zeros and group indices and plausible scales: the kernels'
//! speed does not depend on the values.

use std::io::Write;
use std::time::Duration;

use dtcast::quant::{
    dequantize_bnb4_into, dequantize_int_into, Bnb4Scheme, Bnb4Weight, IntGroups, IntLayout,
    IntPart, IntScheme, IntWeight, ZeroPoints,
};
use dtcast_dtype::DType;

use super::args::BenchArgs;
use super::bench::median;
use super::CmdError;

/// The integer schemes `--scheme` measures: name, what it is.
pub(crate) const SCHEMES: [(&str, &str); 8] = [
    ("gptq4", "GPTQ 4-bit, groups of 128, float16 scales"),
    ("gptq4-act", "GPTQ 4-bit, groups of 128, act-order g_idx"),
    ("gptq8", "GPTQ 8-bit, groups of 128"),
    ("awq4", "AWQ GEMM 4-bit, groups of 128"),
    (
        "w4a16",
        "compressed-tensors pack-quantized int4, groups of 128, bfloat16 scales",
    ),
    ("w4a16-asym", "the same with packed zero points"),
    (
        "w8a16",
        "compressed-tensors pack-quantized int8, groups of 128",
    ),
    ("nf4", "bitsandbytes NF4, blocks of 64, double quantization"),
];

/// Columns of the benchmark weight (its input features; rows = elements / columns).
const COLS: usize = 4096;

/// Whether `name` is one of [`SCHEMES`].
pub(crate) fn is_integer(name: &str) -> bool {
    SCHEMES.iter().any(|(n, _)| *n == name)
}

/// Pseudo-random bytes.
fn random(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect()
}

/// `n` scales near 0.01 in `dtype`.
fn scales(n: usize, dtype: DType) -> Vec<u8> {
    let bits: u16 = if dtype == DType::Float16 {
        0x211F
    } else {
        0x3C24
    };
    (0..n)
        .flat_map(|i| (bits + (i % 7) as u16).to_le_bytes())
        .collect()
}

/// One weight of `rows × COLS` in the scheme `name`, and how to dequantize it into `out`.
type Job = Box<dyn Fn(&mut [u8]) -> Result<(), dtcast::quant::QuantError> + Sync>;

fn job(name: &str, rows: usize, out: DType) -> Result<Job, CmdError> {
    let cols = COLS;
    let int = |layout, bits, zeros, scale, act: bool| -> Result<Job, CmdError> {
        let scheme = IntScheme {
            layout,
            bits,
            groups: IntGroups::Size(128),
            zeros,
            scale,
        };
        let bytes = |part| -> Result<usize, CmdError> {
            let shape = scheme.part_shape(part, rows, cols)?;
            Ok(shape.iter().product::<usize>() * scheme.part_element_bytes(part))
        };
        let codes = random(bytes(IntPart::Codes)?, 1);
        let s = scales(
            bytes(IntPart::Scales)? / scale.byte_size().unwrap_or(2),
            scale,
        );
        let z =
            (zeros != ZeroPoints::Midpoint).then(|| random(bytes(IntPart::Zeros).unwrap_or(0), 2));
        let groups = scheme.group_count(cols) as u32;
        let g = act.then(|| {
            (random(cols * 4, 3).chunks(4))
                .flat_map(|b| (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % groups).to_le_bytes())
                .collect::<Vec<u8>>()
        });
        Ok(Box::new(move |dst: &mut [u8]| {
            let w = IntWeight {
                rows,
                cols,
                codes: &codes,
                scales: &s,
                zeros: z.as_deref(),
                group_index: g.as_deref(),
            };
            dequantize_int_into(&w, &scheme, out, dst)
        }))
    };
    use IntLayout::{Awq, CompressedTensors, Gptq};
    use ZeroPoints::{Midpoint, Stored, StoredMinusOne};
    match name {
        "gptq4" => int(Gptq, 4, StoredMinusOne, DType::Float16, false),
        "gptq4-act" => int(Gptq, 4, StoredMinusOne, DType::Float16, true),
        "gptq8" => int(Gptq, 8, StoredMinusOne, DType::Float16, false),
        "awq4" => int(Awq, 4, Stored, DType::Float16, false),
        "w4a16" => int(CompressedTensors, 4, Midpoint, DType::BFloat16, false),
        "w4a16-asym" => int(CompressedTensors, 4, Stored, DType::BFloat16, false),
        "w8a16" => int(CompressedTensors, 8, Midpoint, DType::BFloat16, false),
        "nf4" => {
            let n = rows * cols;
            let (blocksize, nested) = (64, 256);
            let codes = random(n / 2, 4);
            let map: Vec<u8> = (0..16)
                .flat_map(|c| ((c as f32 - 7.5) / 7.5).to_le_bytes())
                .collect();
            let absmax = random(n / blocksize, 5);
            let nested_map: Vec<u8> = (0..256)
                .flat_map(|c| (c as f32 / 255.0).to_le_bytes())
                .collect();
            let nested_absmax: Vec<u8> = (0..(n / blocksize).div_ceil(nested))
                .flat_map(|_| 0.05f32.to_le_bytes())
                .collect();
            let scheme = Bnb4Scheme {
                blocksize,
                nested: Some((nested, 0.01)),
                dtype: DType::BFloat16,
            };
            Ok(Box::new(move |dst: &mut [u8]| {
                let w = Bnb4Weight {
                    elements: n,
                    codes: &codes,
                    quant_map: &map,
                    absmax: &absmax,
                    nested: Some((&nested_absmax, &nested_map)),
                };
                dequantize_bnb4_into(&w, &scheme, out, dst)
            }))
        }
        other => Err(format!("--scheme {other}: not an integer scheme").into()),
    }
}

pub(crate) fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = args.threads {
        builder = builder.num_threads(usize::from(t));
    }
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
    let dense_dtype = args.dequantize_to.unwrap_or(DType::BFloat16);
    let dense_bytes = elements * dense_dtype.byte_size().unwrap_or(2);
    if !args.json {
        writeln!(
            out,
            "{elements} elements ([{COLS} in, {rows} out]) dequantized to {dense_dtype} into a reused buffer, {threads} threads, {} kernels; memcpy of the output's bytes on the same threads; median of {} interleaved rounds (ratio: the median of the rounds' ratios; GB/s: output bytes)",
            dtcast_cast::isa(),
            args.repeat
        )?;
        writeln!(
            out,
            "{:<12} {:>9} {:>10} {:>11} {:>7}",
            "scheme", "Gelem/s", "GB/s", "memcpy GB/s", "ratio"
        )?;
    }
    let copy_from = vec![1u8; dense_bytes];
    let mut copy_to = vec![0u8; dense_bytes];
    let mut dense = vec![0u8; dense_bytes];
    for name in &args.scheme {
        let work_of = job(name, rows, dense_dtype)?;
        // The library's checks before any timing.
        pool.install(|| work_of(&mut dense))?;
        let repeat = usize::try_from(args.repeat).unwrap_or(1);
        let (work, copy) =
            super::bench::beside_memcpy(&pool, repeat, &mut copy_to, &copy_from, || {
                pool.install(|| work_of(&mut dense))?;
                std::hint::black_box(&dense);
                Ok(())
            })?;
        let ratio = super::bench::paired_ratio(&copy, &work);
        let (w, c) = (median(&work), median(&copy));
        let gbps = |d: Duration| dense_bytes as f64 / d.as_secs_f64() / 1e9;
        let gelem = elements as f64 / w.as_secs_f64() / 1e9;
        if args.json {
            writeln!(
                out,
                "{{\"scheme\":\"{name}\",\"direction\":\"dequantize\",\"dense\":\"{dense_dtype}\",\"elements\":{elements},\"threads\":{threads},\"kernels\":\"{}\",\"gelem_per_s\":{gelem:.4},\"gbps\":{:.3},\"memcpy_gbps\":{:.3},\"ratio\":{ratio:.3}}}",
                dtcast_cast::isa(),
                gbps(w),
                gbps(c)
            )?;
        } else {
            writeln!(
                out,
                "{name:<12} {gelem:>9.3} {:>10.2} {:>11.2} {ratio:>7.2}",
                gbps(w),
                gbps(c)
            )?;
        }
    }
    Ok(())
}
