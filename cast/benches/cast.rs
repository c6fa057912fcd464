//! Criterion benchmarks: cast throughput for the hot pairs beside a memcpy of the same bytes.
//!
//! `cargo bench -p dtcast-cast` (set `DTCAST_BENCH_ELEMENTS` to change the buffer size).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dtcast_cast::{cast, hot_pairs, CastMode};

fn elements() -> usize {
    std::env::var("DTCAST_BENCH_ELEMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 22)
}

fn bench(c: &mut Criterion) {
    let n = elements();
    let mut group = c.benchmark_group("cast");
    group.sample_size(20);
    for (from, to) in hot_pairs() {
        let src: Vec<u8> = (0..n * from.itemsize())
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8 & 0x3F)
            .collect();
        let mut dst = vec![0u8; n * to.itemsize()];
        group.throughput(Throughput::Bytes((src.len() + dst.len()) as u64));
        for mode in [CastMode::Torch, CastMode::Saturate] {
            group.bench_function(format!("{from}->{to}/{mode}"), |b| {
                b.iter(|| cast(&src, from, &mut dst, to, mode).expect("same lengths"))
            });
        }
        let mut copy = vec![0u8; src.len() + dst.len()];
        let half = copy.len() / 2;
        group.bench_function(format!("{from}->{to}/memcpy"), |b| {
            b.iter(|| {
                let (a, bb) = copy.split_at_mut(half);
                bb[..half.min(bb.len())].copy_from_slice(&a[..half.min(bb.len())]);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
