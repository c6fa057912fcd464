//! `dtcast bench`: cast throughput per pair, beside a memcpy of the same bytes in the same run.

use std::io::Write;
use std::time::{Duration, Instant};

use dtcast_cast::{cast_into_scratch, cast_to_vec, cast_with_isa, hot_pairs, isa, CastMode, Isa};
use dtcast_dtype::DType;
use rayon::prelude::*;

use super::args::BenchArgs;
use super::CmdError;

/// Which entry point a CPU bench times.
#[derive(Clone, Copy)]
enum Path {
    /// `cast_with_isa` into a reused buffer (Checked and Exact read first, then write).
    Cast,
    /// `cast_to_vec`: a new buffer per cast.
    Alloc,
    /// `cast_into_scratch` into a reused buffer.
    Scratch,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Cast => "cast",
            Path::Alloc => "cast_to_vec",
            Path::Scratch => "cast_into_scratch",
        }
    }
}

/// One way of running a cast that a bench compares: a kernel set and a mode.
#[derive(Clone, Copy)]
struct Variant {
    isa: Isa,
    mode: CastMode,
}

impl Variant {
    fn label(&self) -> String {
        format!("{} {}", self.isa, self.mode)
    }
}

/// One pair's figures in one variant.
struct Figures {
    from: DType,
    to: DType,
    variant: Variant,
    elements: usize,
    threads: usize,
    cast: Duration,
    memcpy: Duration,
    /// The median of the rounds' memcpy time over cast time ([`paired_ratio`]).
    ratio: f64,
    /// The median of the rounds' ratios of this variant's throughput to the first variant's.
    versus_first: f64,
}

impl Figures {
    fn bytes(&self) -> f64 {
        (self.elements * (self.from.bits() + self.to.bits())) as f64 / 8.0
    }
    fn gelem_per_s(&self) -> f64 {
        self.elements as f64 / self.cast.as_secs_f64() / 1e9
    }
    fn cast_gbps(&self) -> f64 {
        self.bytes() / self.cast.as_secs_f64() / 1e9
    }
    fn memcpy_gbps(&self) -> f64 {
        self.bytes() / self.memcpy.as_secs_f64() / 1e9
    }
}

pub(crate) fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    if !args.scheme.is_empty() {
        let cast_flags = !args.pairs.is_empty()
            || args.backend.len() > 1
            || args.alloc
            || args.scratch
            || args.transfers
            || args.mode != [CastMode::Torch];
        if cast_flags {
            return Err(
                "--scheme measures the scaled formats with their own kernels; leave out \
                 --pairs, --mode, --alloc, --scratch and --transfers (--threads, --elements, \
                 --repeat, --json, --device and one --backend apply)"
                    .into(),
            );
        }
        if let dtcast_device::Device::Cuda(ordinal) = dtcast_device::resolve_device(args.device) {
            if !args.backend.is_empty() || args.threads.is_some() {
                return Err(
                    "--backend and --threads choose CPU kernels; leave them out with a CUDA --device"
                        .into(),
                );
            }
            return super::bench_quant::run_cuda(args, ordinal, out);
        }
        if let [set] = args.backend[..] {
            // What a machine whose best kernels are `set` runs, for every step of the schemes.
            dtcast_cast::pin_isa(set).map_err(|e| e.to_string())?;
        }
        let integer = args
            .scheme
            .iter()
            .filter(|s| super::bench_int::is_integer(s))
            .count();
        return match integer {
            0 => super::bench_quant::run(args, out),
            n if n == args.scheme.len() => super::bench_int::run(args, out),
            _ => Err(
                "--scheme: measure the integer schemes (gptq4, awq4, w4a16, nf4, ...) and \
                      the scaled ones in separate runs"
                    .into(),
            ),
        };
    }
    if let dtcast_device::Device::Cuda(ordinal) = dtcast_device::resolve_device(args.device) {
        if !args.backend.is_empty() || args.threads.is_some() || args.alloc || args.scratch {
            return Err(
                "--backend, --threads, --alloc and --scratch choose CPU paths; leave them out with a CUDA --device"
                    .into(),
            );
        }
        if args.mode.len() > 1 {
            return Err("with a CUDA --device, give one --mode".into());
        }
        return super::bench_cuda::run(args, ordinal, out);
    }
    if args.transfers {
        return Err("--transfers measures host <-> device copies; it needs --device cuda:N".into());
    }
    if (args.alloc || args.scratch) && !args.backend.is_empty() {
        return Err(format!(
            "--alloc and --scratch measure cast_to_vec and cast_into_scratch, which run the best kernels of this machine ({}); leave --backend out",
            isa()
        )
        .into());
    }
    let path = if args.alloc {
        Path::Alloc
    } else if args.scratch {
        Path::Scratch
    } else {
        Path::Cast
    };
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = args.threads {
        builder = builder.num_threads(usize::from(t));
    }
    let pool = builder.build()?;
    let sets = if args.backend.is_empty() {
        vec![isa()]
    } else {
        args.backend.clone()
    };
    if let Some(missing) = sets.iter().find(|s| !s.is_available()) {
        let available: Vec<&str> = dtcast_cast::isas().into_iter().map(Isa::name).collect();
        return Err(format!(
            "the {missing} kernels are not available on this machine (available: {})",
            available.join(", ")
        )
        .into());
    }
    let variants: Vec<Variant> = sets
        .iter()
        .flat_map(|&isa| args.mode.iter().map(move |&mode| Variant { isa, mode }))
        .collect();
    let pairs: Vec<(DType, DType)> = if args.pairs.is_empty() {
        hot_pairs().to_vec()
    } else {
        args.pairs.clone()
    };
    if !args.json {
        let labels: Vec<String> = variants.iter().map(Variant::label).collect();
        writeln!(
            out,
            "{} elements, {} threads, {}{}, median of {} interleaved rounds (ratios: the median of the rounds' ratios); GB/s count bytes read + written",
            args.elements,
            pool.current_num_threads(),
            labels.join(" / "),
            match path {
                Path::Cast => "",
                Path::Alloc => ", allocating (cast_to_vec)",
                Path::Scratch => ", into a reused scratch buffer (cast_into_scratch)",
            },
            args.repeat
        )?;
        write!(
            out,
            "{:<34} {:>18} {:>9} {:>10} {:>11} {:>8}",
            "pair", "kernels mode", "Gelem/s", "cast GB/s", "memcpy GB/s", "ratio"
        )?;
        if variants.len() > 1 {
            write!(out, " {:>10}", "x first")?;
        }
        writeln!(out)?;
    }
    for (from, to) in pairs {
        let figures = pool.install(|| {
            measure(
                from,
                to,
                args.elements as usize,
                args.repeat,
                &variants,
                path,
            )
        })?;
        for f in &figures {
            if args.json {
                writeln!(
                    out,
                    "{{\"from\": \"{}\", \"to\": \"{}\", \"kernels\": \"{}\", \"mode\": \"{}\", \"path\": \"{}\", \"elements\": {}, \"threads\": {}, \"gelem_per_s\": {:.4}, \"cast_gbps\": {:.3}, \"memcpy_gbps\": {:.3}, \"ratio\": {:.3}, \"versus_first\": {:.3}}}",
                    f.from, f.to, f.variant.isa, f.variant.mode, path.name(), f.elements, f.threads, f.gelem_per_s(), f.cast_gbps(), f.memcpy_gbps(), f.ratio, f.versus_first
                )?;
            } else {
                write!(
                    out,
                    "{:<34} {:>18} {:>9.3} {:>10.2} {:>11.2} {:>8.2}",
                    format!("{} -> {}", f.from, f.to),
                    f.variant.label(),
                    f.gelem_per_s(),
                    f.cast_gbps(),
                    f.memcpy_gbps(),
                    f.ratio
                )?;
                if variants.len() > 1 {
                    write!(out, " {:>10.2}", f.versus_first)?;
                }
                writeln!(out)?;
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// The memcpy every benchmark compares with: `src` into `dst` in 1 MiB chunks on the current
/// thread pool — run inside the pool the measured work runs on, so that both use the same
/// threads (a single-threaded memcpy would halve the baseline on two cores).
pub(crate) fn memcpy(dst: &mut [u8], src: &[u8]) {
    let chunk = 1 << 20;
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Times the cast in every variant and a memcpy of the same bytes, in rounds: each round runs
/// every variant once and the memcpy once, so that a slow spell of a shared machine hits all
/// alike. The values are ones every variant's mode accepts (the strictest mode's sample).
fn measure(
    from: DType,
    to: DType,
    n: usize,
    repeat: u32,
    variants: &[Variant],
    path: Path,
) -> Result<Vec<Figures>, CmdError> {
    let strictest = variants
        .iter()
        .map(|v| v.mode)
        .max_by_key(|m| match m {
            CastMode::Exact => 2,
            CastMode::Checked => 1,
            CastMode::Torch | CastMode::Saturate => 0,
        })
        .unwrap_or_default();
    let src = sample(from, to, strictest, n)?;
    // `n` is a power of two of at least 2^10 elements: whole bytes of every dtype.
    let mut dst = vec![0u8; n * to.bits() / 8];
    // A memcpy that reads and writes as many bytes as the cast: half the volume each way.
    let half = n * (from.bits() + to.bits()) / 16;
    let a = vec![1u8; half];
    let mut b = vec![0u8; half];
    let mut cast = |v: Variant| match path {
        Path::Cast => cast_with_isa(&src, from, &mut dst, to, v.mode, v.isa),
        // Dropped inside the timing, as a caller's buffer would be at some point.
        Path::Alloc => cast_to_vec(&src, from, to, v.mode).map(drop),
        Path::Scratch => cast_into_scratch(&src, from, &mut dst, to, v.mode),
    };
    let mut memcpy = || memcpy(&mut b, &a);
    // Warm-up, then the rounds.
    for &v in variants {
        cast(v)?;
    }
    memcpy();
    let mut cast_times = vec![Vec::new(); variants.len()];
    let mut memcpy_times = Vec::new();
    for _ in 0..repeat.max(1) {
        for (&v, times) in variants.iter().zip(&mut cast_times) {
            let t = Instant::now();
            cast(v)?;
            times.push(t.elapsed());
        }
        let t = Instant::now();
        memcpy();
        memcpy_times.push(t.elapsed());
    }
    let memcpy_time = median(&memcpy_times);
    Ok(variants
        .iter()
        .zip(&cast_times)
        .map(|(&variant, times)| Figures {
            from,
            to,
            variant,
            elements: n,
            threads: rayon::current_num_threads(),
            cast: median(times),
            memcpy: memcpy_time,
            ratio: paired_ratio(&memcpy_times, times),
            versus_first: paired_ratio(&cast_times[0], times),
        })
        .collect())
}

/// `repeat` rounds of `work` then a memcpy of `copy_from` into `copy_to` on `pool`, interleaved:
/// each side's times, in round order.
pub(super) fn beside_memcpy(
    pool: &rayon::ThreadPool,
    repeat: usize,
    copy_to: &mut [u8],
    copy_from: &[u8],
    mut work: impl FnMut() -> Result<(), CmdError>,
) -> Result<(Vec<Duration>, Vec<Duration>), CmdError> {
    let (mut times, mut copy) = (Vec::with_capacity(repeat), Vec::with_capacity(repeat));
    for _ in 0..repeat {
        let t = Instant::now();
        work()?;
        times.push(t.elapsed());
        let t = Instant::now();
        pool.install(|| memcpy(copy_to, copy_from));
        std::hint::black_box(&copy_to);
        copy.push(t.elapsed());
    }
    Ok((times, copy))
}

/// The median over rounds of `numerator[i] / denominator[i]` (two timings of one round): a
/// slow spell of a shared machine that hits one round slows both sides of its ratio, where a
/// ratio of two medians can take them from different spells.
pub(super) fn paired_ratio(numerator: &[Duration], denominator: &[Duration]) -> f64 {
    let mut ratios: Vec<f64> = numerator
        .iter()
        .zip(denominator)
        .map(|(n, d)| n.as_secs_f64() / d.as_secs_f64().max(f64::MIN_POSITIVE))
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

/// The median of some timings.
pub(super) fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// `n` elements of `from`, cast from f64 as a user's data would be: a spread of values in
/// [0.5, 99.5) for Torch and Saturate runs (the figures of every earlier run were measured on it;
/// into float4 and float6 most of it overflows), and for Checked and Exact runs values that `to`
/// holds, so that they measure the check, not an error: a spread in [0.005 h, h), where `h` is
/// 99.5 or the largest value both dtypes hold if that is smaller (float4_e2m1fn: 6, int4: 7), or
/// for Exact runs powers of two from 1 up to 64 or to `h` (1 for bool; 0 for int1, whose values
/// are 0 and -1).
pub(super) fn sample(
    from: DType,
    to: DType,
    mode: CastMode,
    n: usize,
) -> Result<Vec<u8>, CmdError> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let high = largest(from).min(largest(to)).min(99.5);
    // The powers of two up to `high`: 2^0 .. 2^(powers - 1), at most 2^6.
    let powers = (0..7u32)
        .take_while(|&k| f64::from(1u32 << k) <= high)
        .count() as u64;
    let values: Vec<u8> = (0..n)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let x = match mode {
                CastMode::Exact if powers == 0 => 0.0,
                CastMode::Exact => f64::from(1u32 << (state % powers)),
                CastMode::Checked => high * (0.005 + 0.995 * unit),
                CastMode::Torch | CastMode::Saturate => 0.5 + unit * 99.0,
            };
            x.to_le_bytes()
        })
        .collect();
    Ok(cast_to_vec(&values, DType::Float64, from, CastMode::Torch)?)
}

/// The largest value `d` holds (its real part's, for a complex dtype).
fn largest(d: DType) -> f64 {
    let real = d.to_real();
    match real.float_format() {
        Some(format) => format.max_finite,
        None if real == DType::Bool => 1.0,
        None if real.is_integral(false) => {
            let bits = real.bits() as i32;
            let magnitude_bits = if real.is_signed() { bits - 1 } else { bits };
            2f64.powi(magnitude_bits) - 1.0
        }
        // float4_e2m1fn_x2: bytes of two float4, which have no value casts.
        None => f64::MAX,
    }
}
