//! `dtcast bench`: cast throughput per pair, beside a memcpy of the same bytes in the same run.

use std::io::Write;
use std::time::{Duration, Instant};

use dtcast_cast::{cast_to_vec, cast_with_isa, hot_pairs, isa, CastMode, Isa};
use dtcast_dtype::DType;
use rayon::prelude::*;

use super::args::BenchArgs;
use super::CmdError;

/// One pair's figures on one kernel set.
struct Figures {
    from: DType,
    to: DType,
    isa: Isa,
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
        if !args.backend.is_empty() || args.threads.is_some() {
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
    let pairs: Vec<(DType, DType)> = if args.pairs.is_empty() {
        hot_pairs().to_vec()
    } else {
        args.pairs.clone()
    };
    let names: Vec<&str> = sets.iter().map(|s| s.name()).collect();
    if !args.json {
        writeln!(
            out,
            "{} elements, {} threads, mode {}, {} kernels, median of {} interleaved rounds; GB/s count bytes read + written",
            args.elements,
            pool.current_num_threads(),
            args.mode,
            names.join(" / "),
            args.repeat
        )?;
        write!(
            out,
            "{:<34} {:>9} {:>9} {:>10} {:>11} {:>8}",
            "pair", "kernels", "Gelem/s", "cast GB/s", "memcpy GB/s", "ratio"
        )?;
        if sets.len() > 1 {
            write!(out, " {:>10}", format!("x {}", sets[0]))?;
        }
        writeln!(out)?;
    }
    for (from, to) in pairs {
        let figures = pool.install(|| {
            measure(
                from,
                to,
                args.elements as usize,
                args.mode,
                args.repeat,
                &sets,
            )
        })?;
        let first = figures[0].gelem_per_s();
        for f in &figures {
            if args.json {
                writeln!(
                    out,
                    "{{\"from\": \"{}\", \"to\": \"{}\", \"kernels\": \"{}\", \"elements\": {}, \"threads\": {}, \"gelem_per_s\": {:.4}, \"cast_gbps\": {:.3}, \"memcpy_gbps\": {:.3}}}",
                    f.from, f.to, f.isa, f.elements, f.threads, f.gelem_per_s(), f.cast_gbps(), f.memcpy_gbps()
                )?;
            } else {
                write!(
                    out,
                    "{:<34} {:>9} {:>9.3} {:>10.2} {:>11.2} {:>8.2}",
                    format!("{} -> {}", f.from, f.to),
                    f.isa.name(),
                    f.gelem_per_s(),
                    f.cast_gbps(),
                    f.memcpy_gbps(),
                    f.cast_gbps() / f.memcpy_gbps()
                )?;
                if sets.len() > 1 {
                    write!(out, " {:>10.2}", f.gelem_per_s() / first)?;
                }
                writeln!(out)?;
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// Times the cast on every kernel set and a memcpy of the same bytes, in rounds: each round runs
/// every set once and the memcpy once, so that a slow spell of a shared machine hits all alike.
fn measure(
    from: DType,
    to: DType,
    n: usize,
    mode: CastMode,
    repeat: u32,
    sets: &[Isa],
) -> Result<Vec<Figures>, CmdError> {
    let src = sample(from, to, mode, n)?;
    let mut dst = vec![0u8; n * to.itemsize()];
    // A memcpy that reads and writes as many bytes as the cast: half the volume each way.
    let half = n * (from.itemsize() + to.itemsize()) / 2;
    let a = vec![1u8; half];
    let mut b = vec![0u8; half];
    let mut cast = |isa| cast_with_isa(&src, from, &mut dst, to, mode, isa);
    let mut memcpy = || {
        let chunk = 1 << 20;
        b.par_chunks_mut(chunk)
            .zip(a.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
    };
    // Warm-up, then the rounds.
    for &isa in sets {
        cast(isa)?;
    }
    memcpy();
    let mut cast_times = vec![Vec::new(); sets.len()];
    let mut memcpy_times = Vec::new();
    for _ in 0..repeat.max(1) {
        for (&isa, times) in sets.iter().zip(&mut cast_times) {
            let t = Instant::now();
            cast(isa)?;
            times.push(t.elapsed());
        }
        let t = Instant::now();
        memcpy();
        memcpy_times.push(t.elapsed());
    }
    let memcpy_time = median(memcpy_times);
    Ok(sets
        .iter()
        .zip(cast_times)
        .map(|(&isa, times)| Figures {
            from,
            to,
            isa,
            elements: n,
            threads: rayon::current_num_threads(),
            cast: median(times),
            memcpy: memcpy_time,
        })
        .collect())
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
