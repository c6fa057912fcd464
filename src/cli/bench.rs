//! `dtcast bench`: cast throughput per pair, beside a memcpy of the same bytes in the same run.

use std::io::Write;
use std::time::{Duration, Instant};

use dtcast_cast::{backend, cast_to_vec, cast_with_backend, hot_pairs, Backend, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

use super::args::{BackendName, BenchArgs};
use super::CmdError;

/// One pair's figures.
struct Figures {
    from: DType,
    to: DType,
    elements: usize,
    threads: usize,
    cast: Duration,
    memcpy: Duration,
}

impl Figures {
    fn bytes(&self) -> f64 {
        (self.elements * (self.from.itemsize() + self.to.itemsize())) as f64
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
    if let dtcast_device::Device::Cuda(ordinal) = args.device {
        if args.backend.is_some() || args.threads.is_some() {
            return Err(
                "--backend and --threads choose CPU kernels; leave them out with a CUDA --device"
                    .into(),
            );
        }
        return super::bench_cuda::run(args, ordinal, out);
    }
    if args.transfers {
        return Err("--transfers measures host <-> device copies; it needs --device cuda:N".into());
    }
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = args.threads {
        builder = builder.num_threads(usize::from(t));
    }
    let pool = builder.build()?;
    let kernels = match args.backend {
        None => backend(),
        Some(BackendName::Scalar) => Backend::Scalar,
        Some(BackendName::Avx2) => Backend::Avx2,
        Some(BackendName::Avx512) => Backend::Avx512,
    };
    if !kernels.is_available() {
        return Err(format!(
            "the {kernels:?} kernels are not available on this machine (available: {:?})",
            dtcast_cast::backends()
        )
        .into());
    }
    let pairs: Vec<(DType, DType)> = if args.pairs.is_empty() {
        hot_pairs().to_vec()
    } else {
        args.pairs.clone()
    };
    if !args.json {
        writeln!(
            out,
            "{} elements, {} threads, mode {}, {:?} kernels, median of {}; GB/s count bytes read + written",
            args.elements,
            pool.current_num_threads(),
            args.mode,
            kernels,
            args.repeat
        )?;
        writeln!(
            out,
            "{:<34} {:>9} {:>10} {:>11} {:>8}",
            "pair", "Gelem/s", "cast GB/s", "memcpy GB/s", "ratio"
        )?;
    }
    for (from, to) in pairs {
        let f = pool.install(|| {
            measure(
                from,
                to,
                args.elements as usize,
                args.mode,
                args.repeat,
                kernels,
            )
        })?;
        if args.json {
            writeln!(
                out,
                "{{\"from\": \"{}\", \"to\": \"{}\", \"elements\": {}, \"threads\": {}, \"gelem_per_s\": {:.4}, \"cast_gbps\": {:.3}, \"memcpy_gbps\": {:.3}}}",
                f.from, f.to, f.elements, f.threads, f.gelem_per_s(), f.cast_gbps(), f.memcpy_gbps()
            )?;
        } else {
            writeln!(
                out,
                "{:<34} {:>9.3} {:>10.2} {:>11.2} {:>8.2}",
                format!("{} -> {}", f.from, f.to),
                f.gelem_per_s(),
                f.cast_gbps(),
                f.memcpy_gbps(),
                f.cast_gbps() / f.memcpy_gbps()
            )?;
        }
        out.flush()?;
    }
    Ok(())
}

fn measure(
    from: DType,
    to: DType,
    n: usize,
    mode: CastMode,
    repeat: u32,
    kernels: Backend,
) -> Result<Figures, CmdError> {
    let src = sample(from, to, mode, n)?;
    let mut dst = vec![0u8; n * to.itemsize()];
    // A memcpy that reads and writes as many bytes as the cast: half the volume each way.
    let half = n * (from.itemsize() + to.itemsize()) / 2;
    let a = vec![1u8; half];
    let mut b = vec![0u8; half];
    let mut cast = || cast_with_backend(&src, from, &mut dst, to, mode, kernels);
    let mut memcpy = || {
        let chunk = 1 << 20;
        b.par_chunks_mut(chunk)
            .zip(a.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
    };
    // Warm-up, then alternate the two so that a slow spell of a shared machine hits both alike.
    cast()?;
    memcpy();
    let (mut cast_times, mut memcpy_times) = (Vec::new(), Vec::new());
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        cast()?;
        cast_times.push(t.elapsed());
        let t = Instant::now();
        memcpy();
        memcpy_times.push(t.elapsed());
    }
    let (cast_time, memcpy_time) = (median(cast_times), median(memcpy_times));
    Ok(Figures {
        from,
        to,
        elements: n,
        threads: rayon::current_num_threads(),
        cast: cast_time,
        memcpy: memcpy_time,
    })
}

/// The median of some timings.
pub(super) fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// `n` elements of `from` that `to` holds, so that Checked and Exact runs measure the check, not
/// an error, cast from f64 as a user's data would be: a spread of values in [0.5, 99.5) (which
/// every dtype holds after rounding), or for Exact runs powers of two from 1 to 64 (which every
/// dtype but bool holds exactly; 1 for bool).
pub(super) fn sample(
    from: DType,
    to: DType,
    mode: CastMode,
    n: usize,
) -> Result<Vec<u8>, CmdError> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let bool_side = from == DType::Bool || to == DType::Bool;
    let values: Vec<u8> = (0..n)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let x = match mode {
                CastMode::Exact if bool_side => 1.0,
                CastMode::Exact => f64::from(1u32 << (state % 7)),
                _ => 0.5 + unit * 99.0,
            };
            x.to_le_bytes()
        })
        .collect();
    Ok(cast_to_vec(&values, DType::Float64, from, CastMode::Torch)?)
}
