#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Criterion benchmarks: cast throughput of the hot pairs, each beside a memcpy that reads and
//! writes as many bytes as the cast (half the cast's volume each way), on 2 threads by default.
//!
//! `cargo bench -p dtcast-cast`; `DTCAST_BENCH_ELEMENTS` sets the buffer size (default 2^24).
//! Criterion reports bytes/s over bytes read + written, so cast and memcpy lines compare directly.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtcast_cast::{cast, cast_to_vec, hot_pairs, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

fn elements() -> usize {
    std::env::var("DTCAST_BENCH_ELEMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 24)
}

/// Values spread over ±100, like model weights, stored as `dtype`.
fn sample(dtype: DType, n: usize) -> Vec<u8> {
    let f: Vec<u8> = (0..n)
        .flat_map(|i| (((i * 7919) % 20011) as f64 / 100.0 - 100.0).to_le_bytes())
        .collect();
    cast_to_vec(&f, DType::Float64, dtype, CastMode::Torch).expect("whole elements")
}

fn bench(c: &mut Criterion) {
    let n = elements();
    let mut group = c.benchmark_group("cast");
    group.sample_size(10);
    for &(from, to) in hot_pairs() {
        let src = sample(from, n);
        let mut dst = vec![0u8; n * to.byte_size().unwrap()];
        group.throughput(Throughput::Bytes((src.len() + dst.len()) as u64));
        for mode in [CastMode::Torch, CastMode::Saturate, CastMode::Checked] {
            group.bench_function(format!("{from}->{to}/{mode}"), |b| {
                b.iter(|| cast(&src, from, &mut dst, to, mode).expect("values in range"))
            });
        }
        let half = (src.len() + dst.len()) / 2;
        let (a, mut b) = (vec![1u8; half], vec![0u8; half]);
        group.bench_function(format!("{from}->{to}/memcpy"), |bch| {
            bch.iter(|| {
                b.par_chunks_mut(1 << 20)
                    .zip(a.par_chunks(1 << 20))
                    .for_each(|(d, s)| d.copy_from_slice(s))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
