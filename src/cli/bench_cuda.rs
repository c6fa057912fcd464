//! `dtcast bench --device cuda:N`: the same pairs and JSON as the CPU bench, measured on a GPU —
//! each cast kernel beside a device-to-device copy of the same bytes — and with `--transfers`, the
//! host <-> device paths of `Tensor::to`.

use std::io::Write;
use std::time::{Duration, Instant};

use dtcast_cast::hot_pairs;
use dtcast_device::cuda::{precompile, time_cast, time_transfers};
use dtcast_device::{backend_for, Device, Tensor, ToOptions};
use dtcast_dtype::DType;

use super::args::BenchArgs;
use super::bench::{median, sample};
use super::CmdError;

fn gbps(bytes: f64, t: Duration) -> f64 {
    bytes / t.as_secs_f64() / 1e9
}

pub(crate) fn run(args: &BenchArgs, ordinal: u8, out: &mut dyn Write) -> Result<(), CmdError> {
    let device = Device::Cuda(ordinal);
    // Fails with "CUDA is not available: ..." before any work where there is no GPU.
    backend_for(device)?;
    let pairs: Vec<(DType, DType)> = if args.pairs.is_empty() {
        hot_pairs().to_vec()
    } else {
        args.pairs.clone()
    };
    // Every pair's kernels at once, on every core, rather than one by one in each warm-up.
    let casts: Vec<_> = pairs.iter().map(|&(f, t)| (f, t, args.mode[0])).collect();
    precompile(ordinal, &casts)?;
    let n = args.elements as usize;
    if !args.json {
        writeln!(
            out,
            "{n} elements on {device}, mode {}, median of {}; GB/s count bytes read + written",
            args.mode[0], args.repeat
        )?;
        writeln!(
            out,
            "{:<34} {:>9} {:>10} {:>11} {:>8} {:>9}",
            "pair", "Gelem/s", "cast GB/s", "copy GB/s", "ratio", "to() GB/s"
        )?;
    }
    for (from, to) in pairs {
        let src = sample(from, to, args.mode[0], n)?;
        let t = time_cast(ordinal, &src, from, to, args.mode[0], args.repeat)?;
        let bytes = (n * (from.bits() + to.bits())) as f64 / 8.0;
        let (cast, copy, whole) = (
            gbps(bytes, t.kernel),
            gbps(bytes, t.copy),
            gbps(bytes, t.to),
        );
        if args.json {
            writeln!(
                out,
                "{{\"from\": \"{from}\", \"to\": \"{to}\", \"elements\": {n}, \"device\": \"{device}\", \"gelem_per_s\": {:.4}, \"cast_gbps\": {cast:.3}, \"memcpy_gbps\": {copy:.3}, \"to_gbps\": {whole:.3}}}",
                n as f64 / t.kernel.as_secs_f64() / 1e9,
            )?;
        } else {
            writeln!(
                out,
                "{:<34} {:>9.3} {:>10.1} {:>11.1} {:>8.2} {:>9.1}",
                format!("{from} -> {to}"),
                n as f64 / t.kernel.as_secs_f64() / 1e9,
                cast,
                copy,
                cast / copy,
                whole
            )?;
        }
        out.flush()?;
    }
    if args.transfers {
        transfers(args, ordinal, out)?;
    }
    Ok(())
}

/// Host <-> device copies, and a float32 CPU tensor moved to the GPU as bfloat16 both ways round.
fn transfers(args: &BenchArgs, ordinal: u8, out: &mut dyn Write) -> Result<(), CmdError> {
    let t = time_transfers(ordinal, args.transfer_bytes as usize, args.repeat)?;
    let b = t.bytes as f64;
    let rows = [
        ("h2d", "pageable", t.h2d_pageable),
        ("h2d", "pinned", t.h2d_pinned),
        ("h2d", "staged", t.h2d_staged),
        ("d2h", "pageable", t.d2h_pageable),
        ("d2h", "pinned", t.d2h_pinned),
        ("d2h", "staged", t.d2h_staged),
    ];
    if !args.json {
        writeln!(
            out,
            "\n{} bytes per transfer (pageable: ordinary memory, the driver staging it; pinned: a page-locked buffer made beforehand, the bus alone; staged: what to() does, through dtcast's reused page-locked buffers)",
            t.bytes
        )?;
    }
    for (direction, memory, time) in rows {
        if args.json {
            writeln!(
                out,
                "{{\"transfer\": \"{direction}\", \"memory\": \"{memory}\", \"bytes\": {}, \"seconds\": {:.6}, \"gbps\": {:.3}}}",
                t.bytes,
                time.as_secs_f64(),
                gbps(b, time)
            )?;
        } else {
            writeln!(
                out,
                "{direction} {memory:<9} {:>8.2} ms {:>7.2} GB/s",
                time.as_secs_f64() * 1e3,
                gbps(b, time)
            )?;
        }
    }
    // A float32 CPU tensor of the same bytes to (cuda, bfloat16): dtcast's `to` casts before the
    // bus (half the bytes cross it); the other order copies float32 over and casts on the GPU.
    let n = t.bytes / 4;
    let host = Tensor::from_bytes(
        &sample(DType::Float32, DType::BFloat16, args.mode[0], n)?,
        DType::Float32,
        &[n],
    )?;
    let device = Device::Cuda(ordinal);
    let gpu = backend_for(device)?;
    let opts = ToOptions {
        mode: args.mode[0],
        ..Default::default()
    };
    let cast_first =
        || -> Result<Tensor, CmdError> { Ok(host.to_with((device, DType::BFloat16), opts)?) };
    let copy_first =
        || -> Result<Tensor, CmdError> { Ok(host.to(device)?.to_with(DType::BFloat16, opts)?) };
    if cast_first()?.to_bytes()? != copy_first()?.to_bytes()? {
        return Err("float32 -> (cuda, bfloat16): casting before and after the copy differ".into());
    }
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for _ in 0..args.repeat.max(1) {
        let s = Instant::now();
        drop(cast_first()?);
        gpu.synchronize()?;
        before.push(s.elapsed());
        let s = Instant::now();
        drop(copy_first()?);
        gpu.synchronize()?;
        after.push(s.elapsed());
    }
    let (before, after) = (median(&before), median(&after));
    if args.json {
        writeln!(
            out,
            "{{\"to\": \"(cuda, bfloat16)\", \"from\": \"float32 cpu\", \"elements\": {n}, \"cast_then_copy_s\": {:.6}, \"copy_then_cast_s\": {:.6}}}",
            before.as_secs_f64(),
            after.as_secs_f64()
        )?;
    } else {
        writeln!(
            out,
            "float32 cpu tensor ({n} elements) .to((cuda, bfloat16)): cast then copy {:.2} ms, copy then cast {:.2} ms ({:.2}x)",
            before.as_secs_f64() * 1e3,
            after.as_secs_f64() * 1e3,
            after.as_secs_f64() / before.as_secs_f64()
        )?;
    }
    Ok(())
}
