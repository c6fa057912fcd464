#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Criterion: `dtcast_device::candle_to_dtype` against candle's own `Tensor::to_dtype` on the same
//! candle CPU tensor, beside a memcpy that reads and writes as many bytes (rayon, as the cast).
//!
//! `cargo bench -p dtcast-device --features candle --bench candle`; `DTCAST_BENCH_ELEMENTS` sets
//! the tensor size (default 2^24). Throughput is bytes read + written, so lines compare directly.

use candle_core::{DType as C, Device, Tensor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtcast_device::{candle_to_dtype, dtype_of_candle};
use rayon::prelude::*;

fn elements() -> usize {
    std::env::var("DTCAST_BENCH_ELEMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 24)
}

/// The pairs a model loader casts: weights down to 16 and 8 bits, and back up.
const PAIRS: [(C, C); 8] = [
    (C::F32, C::BF16),
    (C::F32, C::F16),
    (C::BF16, C::F32),
    (C::F16, C::F32),
    (C::BF16, C::F16),
    (C::F32, C::F8E4M3),
    (C::F8E4M3, C::F32),
    (C::F64, C::F32),
];

fn bench(c: &mut Criterion) {
    let n = elements();
    // Values spread over ±100, like model weights.
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 20011) as f32 / 100.0 - 100.0)
        .collect();
    let base = Tensor::from_vec(values, n, &Device::Cpu).expect("a tensor");
    let mut group = c.benchmark_group("candle");
    group.sample_size(10);
    for (from, to) in PAIRS {
        let src = base
            .to_dtype(from)
            .expect("candle casts f32 to every source here");
        let target = dtype_of_candle(to).expect("a shared dtype");
        let bytes = n * (from.size_in_bytes() + to.size_in_bytes());
        group.throughput(Throughput::Bytes(bytes as u64));
        let name = format!("{from:?}->{to:?}");
        group.bench_function(format!("{name}/dtcast"), |b| {
            b.iter(|| candle_to_dtype(&src, target).expect("a cast"))
        });
        group.bench_function(format!("{name}/candle"), |b| {
            b.iter(|| src.to_dtype(to).expect("a cast"))
        });
        let (a, mut d) = (vec![1u8; bytes / 2], vec![0u8; bytes / 2]);
        group.bench_function(format!("{name}/memcpy"), |bch| {
            bch.iter(|| {
                d.par_chunks_mut(1 << 20)
                    .zip(a.par_chunks(1 << 20))
                    .for_each(|(d, s)| d.copy_from_slice(s))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
