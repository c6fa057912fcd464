//! The SIMD kernels give the same bytes as the scalar rules, for every input.

use dtcast::cast::{cast, cast_reference, cast_with_isa, hot_pairs, isas, CastMode, Isa};
use dtcast::DType;
use proptest::prelude::*;

/// The hot pairs whose sides are whole bytes (the packed ones are compared with the scalar rules
/// on every instruction set in lowp_casts.rs, through packed buffers).
fn byte_pairs() -> Vec<(DType, DType)> {
    hot_pairs()
        .iter()
        .copied()
        .filter(|(from, to)| !from.is_packed() && !to.is_packed())
        .collect()
}

/// Bit patterns that stress conversions: NaNs with payloads, infinities, zeros, subnormals,
/// rounding ties, format boundaries — mixed with uniformly random bits.
fn interesting_f32() -> impl Strategy<Value = u32> {
    let special = prop_oneof![
        Just(0x7F80_0000u32),
        Just(0xFF80_0000),
        Just(0x7FC0_0000),
        Just(0x7F80_0001),
        Just(0xFFFF_FFFF),
        Just(0x0000_0000),
        Just(0x8000_0000),
        Just(0x0000_0001),
        Just(0x007F_FFFF),
        Just(0x3F80_8000),
        Just(0x3F81_8000),
        Just(0x43E8_0000),
        Just(0x43E8_0001),
        Just(0x4F00_0000),
        Just(0xCF00_0000),
        Just(0x477F_E000),
        Just(0x4780_0000),
        Just(0x437F_0000),
        Just(0x4380_0000),
        Just(0x3B00_0000),
    ];
    prop_oneof![3 => any::<u32>(), 1 => special, 1 => (any::<u32>(), 0u32..0x7F80_0000u32).prop_map(|(s, m)| (s & 0x8000_0000) | m)]
}

fn buffer_for(dt: DType) -> BoxedStrategy<Vec<u8>> {
    match dt {
        DType::Float32 => proptest::collection::vec(interesting_f32(), 0..300)
            .prop_map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .boxed(),
        DType::Float64 => proptest::collection::vec(
            prop_oneof![
                any::<u64>(),
                interesting_f32().prop_map(|b| f64::from(f32::from_bits(b)).to_bits()),
                (any::<u64>()).prop_map(|b| b & 0x47FF_FFFF_FFFF_FFFF | 0x3800_0000_0000_0000)
            ],
            0..80,
        )
        .prop_map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .boxed(),
        other => {
            let size = other.byte_size().unwrap();
            (0usize..300)
                .prop_flat_map(move |n| proptest::collection::vec(any::<u8>(), n * size))
                .boxed()
        }
    }
}

fn check_pair(from: DType, to: DType, isa: Isa) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&buffer_for(from), |src| {
            let n = src.len() / from.byte_size().unwrap();
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let (mut fast, mut scalar) = (
                    vec![0u8; n * to.byte_size().unwrap()],
                    vec![0u8; n * to.byte_size().unwrap()],
                );
                cast_with_isa(&src, from, &mut fast, to, mode, isa).unwrap();
                cast_reference(&src, from, &mut scalar, to, mode).unwrap();
                for (i, (f, s)) in fast
                    .chunks(to.byte_size().unwrap())
                    .zip(scalar.chunks(to.byte_size().unwrap()))
                    .enumerate()
                {
                    let input =
                        &src[i * from.byte_size().unwrap()..(i + 1) * from.byte_size().unwrap()];
                    prop_assert_eq!(
                        f,
                        s,
                        "{} -> {} ({}, {:?}) element {} = {:02x?}",
                        from,
                        to,
                        mode,
                        isa,
                        i,
                        input
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn fast_kernels_match_the_scalar_rules_on_every_hot_pair() {
    if !isas().contains(&Isa::Avx2) {
        eprintln!("SKIPPED: no x86 SIMD on this machine (or built without it); the portable kernels are still tested");
    }
    // Every instruction set this machine has (portable, AVX2 and AVX-512 here), not just the best.
    for b in isas().into_iter().filter(|b| *b != Isa::Scalar) {
        for &(from, to) in &byte_pairs() {
            check_pair(from, to, b);
        }
    }
}

#[test]
fn byte_tables_match_on_large_multithreaded_buffers() {
    // Sources of one byte, or of several elements a byte (1, 2 or 4 bits), into whole-byte
    // dtypes without a SIMD kernel of their own convert by a table of what each source byte
    // becomes, looked up a vector of bytes at a time (AVX-512 VBMI permutes, AVX2 shuffles):
    // random bytes through the parallel split and its blocks, one byte past an aligned start, on
    // every instruction set, both modes.
    let n = 70_040; // past the parallel threshold (65,536), a multiple of 8 (whole int1 bytes)
    let mut next = xorshift(0x2545_F491_4F6C_DD1D);
    let random: Vec<u8> = (0..n + 1).map(|_| (next() >> 24) as u8).collect();
    let whole = || {
        DType::ALL
            .into_iter()
            .filter(|d| !d.is_packed() && *d != DType::Float4E2M1FnX2)
    };
    let sources = DType::ALL
        .into_iter()
        .filter(|d| matches!(d.bits(), 1 | 2 | 4 | 8) && *d != DType::Float4E2M1FnX2);
    for from in sources {
        let bytes = n * from.bits() / 8;
        // bool holds 0 and 1 only.
        let src: Vec<u8> = random[..bytes + 1]
            .iter()
            .map(|b| if from == DType::Bool { b & 1 } else { *b })
            .collect();
        let src = &src[1..];
        for to in whole().filter(|to| *to != from) {
            let out = n * to.byte_size().unwrap();
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let mut want = vec![0u8; out];
                cast_reference(src, from, &mut want, to, mode).unwrap();
                for b in isas() {
                    let mut got = vec![0u8; out + 1];
                    cast_with_isa(src, from, &mut got[1..], to, mode, b).unwrap();
                    assert!(
                        got[1..] == want[..],
                        "{from} -> {to} ({mode}, {b:?}) differs from the rules"
                    );
                }
            }
        }
    }
}

#[test]
fn fast_kernels_match_on_large_multithreaded_buffers() {
    // Random bits through the parallel split, every hot pair, both modes.
    let n = 150_001;
    let src: Vec<u8> = (0..n * 8)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 29) as u8)
        .collect();
    for &(from, to) in &byte_pairs() {
        let bytes = &src[..n * from.byte_size().unwrap()];
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let (mut fast, mut scalar) = (
                vec![0u8; n * to.byte_size().unwrap()],
                vec![0u8; n * to.byte_size().unwrap()],
            );
            cast(bytes, from, &mut fast, to, mode).unwrap();
            cast_reference(bytes, from, &mut scalar, to, mode).unwrap();
            assert!(
                fast == scalar,
                "{from} -> {to} ({mode}) differs from the scalar rules"
            );
        }
    }
}

#[test]
fn the_checked_screen_never_clears_a_bad_element() {
    // cast() clears blocks with a screen (vectorised tests, or a round trip in Exact mode) before
    // the per-element rules; cast_reference() runs the per-element rules alone. They must agree
    // on every buffer.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    for from in [DType::Float32, DType::Float64, DType::Int32, DType::Int64] {
        for to in DType::ALL {
            for mode in [CastMode::Checked, CastMode::Exact] {
                runner
                    .run(&buffer_for(from), |src| {
                        let n = src.len() / from.byte_size().unwrap();
                        let (mut a, mut b) = (
                            vec![0u8; n * to.byte_size().unwrap()],
                            vec![0u8; n * to.byte_size().unwrap()],
                        );
                        let fast = cast(&src, from, &mut a, to, mode);
                        let reference = cast_reference(&src, from, &mut b, to, mode);
                        prop_assert_eq!(&fast, &reference, "{} -> {} ({})", from, to, mode);
                        prop_assert_eq!(a, b);
                        Ok(())
                    })
                    .unwrap();
            }
        }
    }
}

#[test]
fn fast_kernels_match_when_streaming_into_large_buffers() {
    // Destinations of 1 MiB and more are written with streaming stores after an aligned prologue;
    // one thread splits the buffer into four pieces, each at least that size, and the tail is
    // not a whole step. Offsetting the destination by a few elements moves the prologue. Every
    // instruction set and every hot pair, packed ones included: the portable set's tables stream
    // chunks that they assemble in buffers of their own.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for &(from, to) in hot_pairs() {
        // 4 MiB of destination and 40 elements more, in whole bytes of every dtype (multiples of
        // 8 elements).
        let n = (1 << 25) / to.bits() / 8 * 8 + 40;
        let src: Vec<u8> = (0..from.storage_bytes(n).unwrap())
            .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 31) as u8)
            .collect();
        // The fewest elements that fill whole bytes (float6: 4, 4-bit: 2, others: 1).
        let group = [1, 2, 4]
            .into_iter()
            .find(|k| (k * to.bits()).is_multiple_of(8))
            .unwrap();
        let len = to.storage_bytes(n).unwrap();
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let mut scalar = vec![0u8; len];
            cast_reference(&src, from, &mut scalar, to, mode).unwrap();
            for isa in isas().into_iter().filter(|b| *b != Isa::Scalar) {
                for offset in [0, to.storage_bytes(group).unwrap()] {
                    let mut fast = vec![0u8; len + offset];
                    one.install(|| cast_with_isa(&src, from, &mut fast[offset..], to, mode, isa))
                        .unwrap();
                    assert!(
                        fast[offset..] == scalar[..],
                        "{from} -> {to} ({mode}, {isa}, offset {offset}) differs from the scalar rules"
                    );
                }
            }
        }
    }
}

#[test]
fn the_lookup_table_screen_agrees_with_the_element_rules() {
    // One- and two-byte sources in buffers at least as long as the table (256 or 65,536 bit
    // patterns) are checked by table lookup; it must give the reference's verdict, and the same
    // first offending element, in Checked and Exact mode, for every destination.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    // Packed dtypes are checked element by element (lowp_casts.rs compares them with the
    // reference); float4_e2m1fn_x2 has no value casts.
    let screened = |d: &DType| !d.is_packed() && *d != DType::Float4E2M1FnX2;
    for from in DType::ALL
        .into_iter()
        .filter(|d| screened(d) && d.byte_size().unwrap() <= 2)
    {
        let n = if from.byte_size().unwrap() == 1 {
            3000
        } else {
            70_000
        };
        // Small values first (so that most casts pass), then every bit pattern near the end.
        let mut src: Vec<u8> = (0..n * from.byte_size().unwrap())
            .map(|i| {
                if i % from.byte_size().unwrap() == 0 {
                    (i % 5) as u8
                } else {
                    0
                }
            })
            .collect();
        let tail = (0..(1usize << (8 * from.byte_size().unwrap())).min(256))
            .flat_map(|c| ((c * 257) as u16).to_le_bytes()[..from.byte_size().unwrap()].to_vec());
        let start = src.len() - 256 * from.byte_size().unwrap();
        for (b, t) in src[start..].iter_mut().zip(tail) {
            *b = t;
        }
        for to in DType::ALL.into_iter().filter(screened) {
            for mode in [CastMode::Checked, CastMode::Exact] {
                let (mut a, mut b) = (
                    vec![0u8; n * to.byte_size().unwrap()],
                    vec![0u8; n * to.byte_size().unwrap()],
                );
                let fast = pool.install(|| cast(&src, from, &mut a, to, mode));
                let reference = cast_reference(&src, from, &mut b, to, mode);
                assert_eq!(fast, reference, "{from} -> {to} ({mode})");
                // And with the bad tail removed, both accept (or both reject) the small values.
                let head = &src[..start];
                let m = head.len() / from.byte_size().unwrap();
                let (mut a, mut b) = (
                    vec![0u8; m * to.byte_size().unwrap()],
                    vec![0u8; m * to.byte_size().unwrap()],
                );
                assert_eq!(
                    pool.install(|| cast(head, from, &mut a, to, mode)),
                    cast_reference(head, from, &mut b, to, mode),
                    "{from} -> {to} ({mode}), head"
                );
            }
        }
    }
}

/// Every one of the 2^32 float32 bit patterns through every float32-source hot pair, every SIMD
/// instruction set and both modes, against the scalar rules. Minutes of CPU, so not part of the default
/// run: `cargo test --release -p dtcast-tests --test cast_simd -- --ignored`.
#[test]
#[ignore = "exhaustive over 2^32 inputs; run with --ignored"]
fn fast_kernels_match_on_every_float32_bit_pattern() {
    use rayon::prelude::*;
    const CHUNK: u64 = 1 << 20;
    let pairs: Vec<_> = byte_pairs()
        .into_iter()
        .filter(|(from, _)| *from == DType::Float32)
        .collect();
    for b in isas().into_iter().filter(|b| *b != Isa::Scalar) {
        for &(from, to) in &pairs {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                (0..(1u64 << 32) / CHUNK).into_par_iter().for_each(|c| {
                    let src: Vec<u8> = (c * CHUNK..(c + 1) * CHUNK)
                        .flat_map(|x| (x as u32).to_le_bytes())
                        .collect();
                    let n = CHUNK as usize * to.byte_size().unwrap();
                    let (mut fast, mut scalar) = (vec![0u8; n], vec![0u8; n]);
                    cast_with_isa(&src, from, &mut fast, to, mode, b).unwrap();
                    cast_reference(&src, from, &mut scalar, to, mode).unwrap();
                    if fast != scalar {
                        let i = (0..CHUNK as usize)
                            .find(|&i| {
                                let w = to.byte_size().unwrap();
                                fast[i * w..(i + 1) * w] != scalar[i * w..(i + 1) * w]
                            })
                            .unwrap();
                        panic!(
                            "{from} -> {to} ({mode}, {b:?}) differs at bits {:#010x}",
                            c * CHUNK + i as u64
                        );
                    }
                });
                eprintln!("{from} -> {to} ({mode}, {b:?}): all 2^32 inputs agree");
            }
        }
    }
}

#[test]
fn float32_sources_round_by_their_top_bits_and_a_sticky_bit_on_every_isa() {
    // Every top 16 bits of a float32 with the low 16 clear, lowest set and all set: exact ties,
    // values just past them and just below the next. The portable set looks float32 -> float8 up
    // by the top half with the low half folded into one sticky bit; every set must agree with the
    // rules. One thread, so that each kernel call is long enough to build the tables.
    let src: Vec<u8> = (0..=u16::MAX)
        .flat_map(|top| [0, 1, 0xFFFF].map(|low| u32::from(top) << 16 | low))
        .flat_map(u32::to_le_bytes)
        .collect();
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (from, to) in byte_pairs()
        .into_iter()
        .filter(|(f, _)| *f == DType::Float32)
    {
        let n = src.len() / 4 * to.byte_size().unwrap();
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let mut want = vec![0u8; n];
            cast_reference(&src, from, &mut want, to, mode).unwrap();
            for isa in isas() {
                let mut got = vec![0u8; n];
                one_thread
                    .install(|| cast_with_isa(&src, from, &mut got, to, mode, isa))
                    .unwrap();
                let first = got.iter().zip(&want).position(|(g, w)| g != w);
                assert!(
                    first.is_none(),
                    "{from} -> {to} ({mode}, {isa}): byte {first:?} differs"
                );
            }
        }
    }
}

#[test]
fn float64_to_bfloat16_rounds_once_at_every_kind_of_tie() {
    // Saturate rounds f64 → bfloat16 once (through f32 rounded to odd); Torch rounds through
    // nearest-even f32 (twice). Values at, just above and just below bfloat16 ties — where the two
    // differ — and at f32 ties below those, for every instruction set, both modes, against the rules.
    let mut values = Vec::new();
    for exp in [-133i32, -126, -100, -1, 0, 1, 60, 127] {
        for mantissa in [0u64, 1, 0x3F, 0x40, 0x7F] {
            // A bfloat16 value 1.m × 2^exp, then the tie half a bfloat16 ulp above it.
            let base = (1.0 + mantissa as f64 / 128.0) * 2f64.powi(exp);
            let tie = base + 2f64.powi(exp - 8);
            let f32_ulp = 2f64.powi(exp - 23);
            for x in [
                tie,
                tie + f32_ulp / 4.0,
                tie - f32_ulp / 4.0,
                tie + f32_ulp / 2.0,
                tie - f32_ulp / 2.0,
                tie.next_up(),
                tie.next_down(),
            ] {
                values.extend([x, -x]);
            }
        }
    }
    values.extend([
        f64::MAX,
        f64::MIN_POSITIVE,
        3.4e38,
        3.3961775e38,
        1e-46,
        f64::INFINITY,
        f64::NAN,
    ]);
    // Padded to several SIMD widths so that the vector loops, not only the tails, see them.
    let mut src: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    src.extend(std::iter::repeat_n(0u8, 8 * 64));
    let n = src.len() / 8;
    for b in isas() {
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let (mut fast, mut scalar) = (vec![0u8; n * 2], vec![0u8; n * 2]);
            cast_with_isa(&src, DType::Float64, &mut fast, DType::BFloat16, mode, b).unwrap();
            cast_reference(&src, DType::Float64, &mut scalar, DType::BFloat16, mode).unwrap();
            assert!(
                fast == scalar,
                "float64 -> bfloat16 ({mode}, {b:?}) differs from the rules"
            );
        }
    }
    // And the two modes really differ on some of these (else the test would not test rounding).
    let (mut torch, mut saturate) = (vec![0u8; n * 2], vec![0u8; n * 2]);
    cast(
        &src,
        DType::Float64,
        &mut torch,
        DType::BFloat16,
        CastMode::Torch,
    )
    .unwrap();
    cast(
        &src,
        DType::Float64,
        &mut saturate,
        DType::BFloat16,
        CastMode::Saturate,
    )
    .unwrap();
    assert!(torch != saturate);
}

#[test]
fn kernels_match_on_every_one_and_two_byte_source_pattern() {
    // Sources of one or two bytes have few enough bit patterns to try every one, every time: on
    // every pair into a whole-byte dtype (the hot pairs' SIMD kernels, the other pairs' lookup
    // tables, built from a cast this long) and every instruction set.
    let whole = || {
        DType::ALL
            .into_iter()
            .filter(|d| !d.is_packed() && *d != DType::Float4E2M1FnX2)
    };
    for from in whole().filter(|d| d.byte_size().unwrap() <= 2) {
        let size = from.byte_size().unwrap();
        // bool holds 0 and 1 only.
        let codes = if from == DType::Bool {
            2
        } else {
            1usize << (8 * size)
        };
        // Twice over, the second time one element later (so that the patterns fall in other
        // vector lanes), with a tail the scalar kernel converts.
        let src: Vec<u8> = (0..codes)
            .chain(1..=codes)
            .chain(0..7)
            .flat_map(|c| ((c % codes) as u16).to_le_bytes()[..size].to_vec())
            .collect();
        let n = src.len() / size;
        // (A cast to the same dtype is a copy.)
        for to in whole().filter(|to| *to != from) {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let mut want = vec![0u8; n * to.byte_size().unwrap()];
                cast_reference(&src, from, &mut want, to, mode).unwrap();
                for b in isas() {
                    let mut got = vec![0u8; want.len()];
                    cast_with_isa(&src, from, &mut got, to, mode, b).unwrap();
                    assert!(
                        got == want,
                        "{from} -> {to} ({mode}, {b:?}) differs from the rules"
                    );
                }
            }
        }
    }
}

#[test]
fn integer_sources_give_the_rules_bytes_aligned_or_not() {
    // Pairs from an integer or bool dtype run typed loops where both buffers are aligned for
    // their types, and the rules where not: both must give the rules' bytes, into every
    // whole-byte dtype. The values: each width's edges, the integers around float32's and
    // float64's last exact ones and their rounding ties, and random bits.
    let edges: [u64; 16] = [
        0,
        1,
        u64::MAX,
        0x7F,
        0x80,
        0xFF,
        0x7FFF,
        0x8000,
        0x7FFF_FFFF,
        0x8000_0000,
        (1 << 24) + 1,
        (1 << 25) + 3,
        (1 << 53) + 1,
        u64::MAX - (1 << 10),
        i64::MAX as u64,
        i64::MIN as u64,
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut random = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        state ^ (state >> 29)
    };
    let values: Vec<u64> = edges
        .iter()
        .flat_map(|&e| [e, e.wrapping_neg()])
        .chain((0..1000).map(|_| random()))
        .collect();
    // (Not the packed ones: they have their own tests in lowp_casts.rs.)
    let integers = DType::ALL
        .into_iter()
        .filter(|d| (d.category().is_integer() || *d == DType::Bool) && !d.is_packed());
    for from in integers {
        let size = from.byte_size().unwrap();
        let elements: Vec<u8> = values
            .iter()
            .flat_map(|v| {
                let v = if from == DType::Bool { v & 1 } else { *v };
                v.to_le_bytes()[..size].to_vec()
            })
            .collect();
        // At offsets 0 and 1: aligned, and not.
        every_isa_gives_the_rules_bytes(from, &elements, [0, 1]);
    }
}

/// Casts `elements` of `from` into every other whole-byte dtype in Torch and Saturate rounding,
/// on every instruction set, from and into buffers `offset` bytes past a 16-byte boundary, and
/// compares the bytes with the rules'.
fn every_isa_gives_the_rules_bytes(from: DType, elements: &[u8], offsets: [usize; 2]) {
    let size = from.byte_size().unwrap();
    let n = elements.len() / size;
    let whole = DType::ALL
        .into_iter()
        .filter(|d| !d.is_packed() && *d != DType::Float4E2M1FnX2);
    for to in whole.filter(|to| *to != from) {
        let out = to.byte_size().unwrap();
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let mut want = vec![0u8; n * out];
            cast_reference(elements, from, &mut want, to, mode).unwrap();
            for b in isas() {
                for shift in offsets {
                    let mut src = vec![0u128; (n * size).div_ceil(16) + 1];
                    let src = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut src)[shift..];
                    src[..n * size].copy_from_slice(elements);
                    let mut dst = vec![0u128; (n * out).div_ceil(16) + 1];
                    let dst = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut dst)[shift..];
                    cast_with_isa(&src[..n * size], from, &mut dst[..n * out], to, mode, b)
                        .unwrap();
                    assert!(
                        dst[..n * out] == want[..],
                        "{from} -> {to} ({mode}, {b:?}, offset {shift}) differs from the rules"
                    );
                }
            }
        }
    }
}

#[test]
fn float_and_complex_sources_give_the_rules_bytes_aligned_or_not() {
    // float32, float64, complex64 and complex128 sources run typed loops (`plain.rs`), and into
    // float16/float8 two kernels through float32 (`through.rs`), where the buffers are aligned,
    // and the rules where not: both must give the rules' bytes into every whole-byte dtype. The
    // values: the edges of every integer width (where x86's truncation stops fitting, and the
    // halves around them), infinities, NaNs with payloads and signs (signalling ones too),
    // subnormals, and random bits; a complex value's imaginary part is another of them.
    let mut edges: Vec<f64> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE / 4.0,
        1e300,
        65504.0,
        65520.0,
        448.0,
        464.0,
        57344.0,
        61440.0,
    ];
    for bits in [7u32, 8, 15, 16, 31, 32, 63, 64] {
        let p = 2f64.powi(bits as i32);
        for d in [0.0, 0.5, 1.0, -0.5, -1.0, 256.0, -256.0, 2048.0] {
            edges.extend([p + d, -p + d, -p - d]);
        }
    }
    let nans64 = [
        0x7FF8_0000_0000_0000u64,
        0xFFF8_0000_0000_0000,
        0x7FF0_0000_0000_0001,
        0xFFF4_0000_0000_0001,
        0x7FFF_FFFF_FFFF_FFFF,
    ];
    let nans32 = [
        0x7FC0_0000u32,
        0xFFC0_0000,
        0x7F80_0001,
        0xFFA0_0001,
        0x7FFF_FFFF,
    ];
    let mut random = xorshift(0x2545_F491_4F6C_DD1D);
    let f64s: Vec<u64> = (edges.iter().map(|x| x.to_bits()))
        .chain(nans64)
        .chain((0..1000).map(|_| random()))
        .collect();
    let f32s: Vec<u32> = (edges.iter().map(|x| (*x as f32).to_bits()))
        .chain(nans32)
        .chain((0..1000).map(|_| random() as u32))
        .collect();
    let sources: [(DType, Vec<u8>); 4] = [
        (
            DType::Float32,
            f32s.iter().flat_map(|b| b.to_le_bytes()).collect(),
        ),
        (
            DType::Float64,
            f64s.iter().flat_map(|b| b.to_le_bytes()).collect(),
        ),
        (
            DType::Complex64,
            (f32s.iter().zip(f32s.iter().rev()))
                .flat_map(|(re, im)| [re.to_le_bytes(), im.to_le_bytes()].concat())
                .collect(),
        ),
        (
            DType::Complex128,
            (f64s.iter().zip(f64s.iter().rev()))
                .flat_map(|(re, im)| [re.to_le_bytes(), im.to_le_bytes()].concat())
                .collect(),
        ),
    ];
    for (from, elements) in sources {
        // At offsets 0 and 4: aligned for every type, and for the 8- and 16-byte ones not.
        every_isa_gives_the_rules_bytes(from, &elements, [0, 4]);
    }
}

#[test]
fn float32_truncation_into_integers_gives_the_rules_bytes_block_by_block() {
    // float32 into int8/int16/uint16 (torch truncates to 32 bits) and int64/uint32/uint64 (to 64
    // bits) truncates a block of 16 at a time to 32 bits where every |x| in it is below 2^31
    // (`plain.rs`), else by the rules. Blocks of values inside that range — the largest float32
    // below 2^31, the wrap points of 8 and 16 bits and the halves around them, zeros, subnormals,
    // random magnitudes — and the same blocks with one value outside it (NaN, ±inf, exactly
    // -2^31, 2^31, 1e20) at each position, so that a block's verdict and each lane's fallback
    // are both tried; float16 and bfloat16 sources go up through these loops (`through.rs`).
    let edges: [f32; 16] = [
        2_147_483_520.0,
        -2_147_483_520.0,
        127.5,
        128.0,
        -128.5,
        -129.0,
        255.75,
        256.0,
        32_767.9,
        32_768.0,
        -32_769.0,
        65_535.5,
        65_536.0,
        -0.999,
        -0.0,
        f32::from_bits(1),
    ];
    let mut random = xorshift(0x9E37_79B9_7F4A_7C15);
    // |x| < 2^31: a biased exponent below 158.
    let mut inside = || {
        let r = random();
        let exponent = (r >> 32) as u32 % 158;
        f32::from_bits((r as u32 & 0x807F_FFFF) | exponent << 23)
    };
    let outside = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -2_147_483_648.0,
        2_147_483_648.0,
        1e20,
    ];
    let mut values: Vec<f32> = edges.to_vec();
    for _ in 0..8 {
        values.extend((0..16).map(|_| inside()));
    }
    for at in 0..16 {
        let mut block = edges;
        block[at] = outside[at % outside.len()];
        values.extend(block);
        values.extend((0..16).map(|i| {
            if i == 15 - at {
                outside[at % 6]
            } else {
                inside()
            }
        }));
    }
    // A tail shorter than a block.
    values.extend((0..7).map(|_| inside()));
    let elements: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    every_isa_gives_the_rules_bytes(DType::Float32, &elements, [0, 4]);
    // The same values as float16 and bfloat16 where they have them (rounded there).
    for from in [DType::Float16, DType::BFloat16] {
        let narrow =
            dtcast::cast::cast_to_vec(&elements, DType::Float32, from, CastMode::Torch).unwrap();
        every_isa_gives_the_rules_bytes(from, &narrow, [0, 2]);
    }
}

#[test]
fn float64_sources_through_float32_give_the_rules_bytes() {
    // float64 -> float16/float8 have no SIMD kernel of their own: in Torch rounding they run
    // float64's kernel into float32, then float32's (`through.rs`), which must be torch's double
    // rounding as the rules define it — random float64 bits, values near the float32 rounding
    // points, every kernel set.
    for b in isas().into_iter().filter(|b| *b != Isa::Scalar) {
        for to in [DType::Float16, DType::Float8E4M3Fn, DType::Float8E5M2] {
            check_pair(DType::Float64, to, b);
        }
    }
}

#[test]
fn exact_mode_finds_the_one_changed_element_in_a_large_buffer() {
    // 200,000 values every destination holds exactly (so every screen clears their blocks), and
    // one that it does not, at several places: the error names that element and its value, and
    // the destination is untouched.
    let n = 200_000;
    let cases: [(DType, DType, f64); 6] = [
        (DType::Float32, DType::BFloat16, 1.0 + 2f64.powi(-20)),
        (DType::Float64, DType::Float32, 1.0 + 2f64.powi(-40)),
        (DType::Float32, DType::Int32, 2.5),
        (DType::Int64, DType::Int32, 4_294_967_296.0),
        (DType::Int32, DType::Float32, 16_777_217.0),
        (DType::Float32, DType::Float8E4M3Fn, 17.0),
    ];
    for (from, to, bad) in cases {
        for at in [0, 1023, 1024, 99_999, n - 1] {
            let values: Vec<f64> = (0..n)
                .map(|i| {
                    if i == at {
                        bad
                    } else {
                        f64::from(1u32 << (i % 4))
                    }
                })
                .collect();
            let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            let src =
                dtcast::cast::cast_to_vec(&bytes, DType::Float64, from, CastMode::Torch).unwrap();
            let mut dst = vec![0xA5u8; n * to.byte_size().unwrap()];
            let err = cast(&src, from, &mut dst, to, CastMode::Exact).unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("element {at} (")),
                "{from} -> {to}, bad element at {at}: {err}"
            );
            assert!(
                dst.iter().all(|&b| b == 0xA5),
                "{from} -> {to}: destination written"
            );
            // Without the bad element, the whole buffer casts.
            let good =
                dtcast::cast::cast_to_vec(&bytes[..at * 8], DType::Float64, from, CastMode::Torch)
                    .unwrap();
            let mut out = vec![0u8; at * to.byte_size().unwrap()];
            cast(&good, from, &mut out, to, CastMode::Exact).unwrap();
        }
    }
}

#[test]
fn the_one_pass_check_gives_the_read_first_answer() {
    // cast_into_scratch (and cast_to_vec) checks and converts block by block; cast checks the
    // whole source first. Same error (the first offending element overall, across threads and
    // blocks) or the same bytes, for every hot pair, Checked and Exact, with a few bad elements
    // placed at block and thread boundaries — and on the proptest buffers for wide sources.
    let n = 300_000;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for &(from, to) in &byte_pairs() {
        for mode in [CastMode::Checked, CastMode::Exact] {
            for bad_at in [
                None,
                Some(vec![0]),
                Some(vec![4095, 4096, 250_000]),
                Some(vec![n - 1]),
            ] {
                // Values every destination holds (so that only the planted ones fail).
                let values: Vec<f64> = (0..n)
                    .map(|i| match &bad_at {
                        Some(at) if at.contains(&i) => 1e300,
                        _ => f64::from(1u32 << (i % 5)),
                    })
                    .collect();
                let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
                let src = dtcast::cast::cast_to_vec(&bytes, DType::Float64, from, CastMode::Torch)
                    .unwrap();
                let mut first_pass = vec![0u8; n * to.byte_size().unwrap()];
                let read_first = cast(&src, from, &mut first_pass, to, mode);
                let mut one_pass = vec![0u8; n * to.byte_size().unwrap()];
                let fused = pool.install(|| {
                    dtcast::cast::cast_into_scratch(&src, from, &mut one_pass, to, mode)
                });
                assert_eq!(
                    fused, read_first,
                    "{from} -> {to} ({mode}), bad at {bad_at:?}"
                );
                if read_first.is_ok() {
                    assert!(
                        one_pass == first_pass,
                        "{from} -> {to} ({mode}): bytes differ"
                    );
                }
                let vec = pool.install(|| dtcast::cast::cast_to_vec(&src, from, to, mode));
                assert_eq!(vec.as_ref().err(), read_first.as_ref().err());
            }
        }
    }
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 100,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    for from in [DType::Float32, DType::Float64, DType::Int64] {
        for to in DType::ALL {
            for mode in [CastMode::Checked, CastMode::Exact] {
                runner
                    .run(&buffer_for(from), |src| {
                        let n = src.len() / from.byte_size().unwrap();
                        let (mut a, mut b) = (
                            vec![0u8; n * to.byte_size().unwrap()],
                            vec![0u8; n * to.byte_size().unwrap()],
                        );
                        let read_first = cast(&src, from, &mut a, to, mode);
                        let fused = dtcast::cast::cast_into_scratch(&src, from, &mut b, to, mode);
                        prop_assert_eq!(&fused, &read_first, "{} -> {} ({})", from, to, mode);
                        if read_first.is_ok() {
                            prop_assert_eq!(a, b);
                        }
                        Ok(())
                    })
                    .unwrap();
            }
        }
    }
}

#[test]
fn verified_one_byte_sources_give_the_rules_answer() {
    // One-byte sources are looked up block by block, each block screened first (Checked and
    // Exact): the error (the first offending element, across blocks and threads) or the bytes
    // must be the rules' (`cast_reference`), on every instruction set and entry point, and a
    // caller's buffer is untouched on error. The buffers hold codes the destination takes (each
    // code tried alone against the rules), with codes it does not planted at block and piece
    // boundaries, or none.
    let n = 150_001;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let whole = || {
        DType::ALL
            .into_iter()
            .filter(|d| !d.is_packed() && *d != DType::Float4E2M1FnX2)
    };
    let mut random = xorshift(0x9E37_79B9_7F4A_7C15);
    for from in whole().filter(|d| d.byte_size() == Some(1)) {
        let codes: Vec<u8> = if from == DType::Bool {
            vec![0, 1]
        } else {
            (0..=255).collect()
        };
        for to in whole().filter(|to| *to != from) {
            let size = to.byte_size().unwrap();
            for mode in [CastMode::Checked, CastMode::Exact] {
                let passes =
                    |c: u8| cast_reference(&[c], from, &mut vec![0; size], to, mode).is_ok();
                let (good, bad): (Vec<u8>, Vec<u8>) = codes.iter().partition(|&&c| passes(c));
                if good.is_empty() {
                    continue;
                }
                let plantings: [&[usize]; 3] = [&[], &[4095, 4096, 100_000], &[n - 1]];
                for at in plantings
                    .iter()
                    .filter(|at| at.is_empty() || !bad.is_empty())
                {
                    let mut src: Vec<u8> = (0..n)
                        .map(|_| good[random() as usize % good.len()])
                        .collect();
                    for (k, &i) in at.iter().enumerate() {
                        src[i] = bad[k % bad.len()];
                    }
                    let mut want = vec![0u8; n * size];
                    let expected = cast_reference(&src, from, &mut want, to, mode);
                    for b in isas() {
                        let mut got = vec![0xA5u8; n * size];
                        let answer =
                            pool.install(|| cast_with_isa(&src, from, &mut got, to, mode, b));
                        assert_eq!(
                            answer, expected,
                            "{from} -> {to} ({mode}, {b:?}), bad at {at:?}"
                        );
                        match answer {
                            Ok(()) => assert!(got == want, "{from} -> {to} ({mode}, {b:?}): bytes"),
                            Err(_) => assert!(
                                got.iter().all(|&x| x == 0xA5),
                                "{from} -> {to} ({mode}, {b:?}): destination written"
                            ),
                        }
                    }
                    let mut scratch = vec![0u8; n * size];
                    let fused = pool.install(|| {
                        dtcast::cast::cast_into_scratch(&src, from, &mut scratch, to, mode)
                    });
                    assert_eq!(
                        fused, expected,
                        "{from} -> {to} ({mode}, one pass), bad at {at:?}"
                    );
                    if fused.is_ok() {
                        assert!(scratch == want, "{from} -> {to} ({mode}, one pass): bytes");
                    }
                }
            }
        }
    }
}

#[test]
fn the_kernels_that_screen_as_they_convert_give_the_read_first_answer() {
    // Destinations of 1 MiB and more in the one-pass path use kernels that screen the source while
    // they convert it (float32, float64 and int64 sources). Same error or bytes as the read-first
    // `cast`, with bad elements (inf, NaN, the largest float, a value past the integer range) at
    // the start, around block and piece boundaries, and at the end.
    let n = (1 << 20) + 4099;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let f32s = |x: f32| x.to_le_bytes().to_vec();
    let f64s = |x: f64| x.to_le_bytes().to_vec();
    let i64s = |x: i64| x.to_le_bytes().to_vec();
    type Cases = Vec<(Vec<u8>, Vec<usize>)>;
    let float_cases = |enc: &dyn Fn(f64) -> Vec<u8>, max: f64| -> Cases {
        vec![
            (enc(f64::INFINITY), vec![0]),
            (enc(f64::NAN), vec![4095, 4096, 700_001]),
            (enc(max), vec![n - 1]),
            (enc(-max), vec![8191, 262_150, 700_001]),
            (enc(-3e9), vec![262_150]),
        ]
    };
    let from_f32: Cases = float_cases(&|x| f32s(x as f32), f64::from(f32::MAX));
    let from_f64: Cases = float_cases(&f64s, f64::MAX);
    let from_i64: Cases = vec![
        (i64s(1 << 31), vec![0]),
        (i64s(-(1 << 31) - 1), vec![4095, 4096, 700_001]),
        (i64s(i64::MIN), vec![n - 1]),
        (i64s(1 << 40), vec![262_150]),
    ];
    let good = |from: DType, i: usize| -> Vec<u8> {
        let x = 1i64 << (i % 5);
        match from {
            DType::Float32 => f32s(x as f32),
            DType::Float64 => f64s(x as f64),
            _ => i64s(if i.is_multiple_of(2) { x } else { -x }),
        }
    };
    let pairs = [
        (DType::Float32, DType::BFloat16, &from_f32),
        (DType::Float32, DType::Float16, &from_f32),
        (DType::Float32, DType::Int32, &from_f32),
        (DType::Float32, DType::UInt8, &from_f32),
        (DType::Float32, DType::Float8E4M3Fn, &from_f32),
        (DType::Float32, DType::Float8E5M2, &from_f32),
        (DType::Float64, DType::Float32, &from_f64),
        (DType::Float64, DType::BFloat16, &from_f64),
        (DType::Int64, DType::Int32, &from_i64),
    ];
    for (from, to, cases) in pairs {
        let mut errors = 0;
        for (bad, at) in cases.iter() {
            let src: Vec<u8> = (0..n)
                .flat_map(|i| {
                    if at.contains(&i) {
                        bad.clone()
                    } else {
                        good(from, i)
                    }
                })
                .collect();
            let size = to.byte_size().unwrap();
            let mut first_pass = vec![0u8; n * size];
            let read_first = cast(&src, from, &mut first_pass, to, CastMode::Checked);
            errors += usize::from(read_first.is_err());
            let mut one_pass = vec![0u8; n * size];
            let fused = pool.install(|| {
                dtcast::cast::cast_into_scratch(&src, from, &mut one_pass, to, CastMode::Checked)
            });
            assert_eq!(fused, read_first, "{from} -> {to}, {bad:?} at {at:?}");
        }
        // Infinities and NaNs pass into formats that hold them; the others are errors.
        assert!(
            errors >= 1,
            "{from} -> {to}: none of the planted cases fails"
        );
        // And a clean buffer: the same bytes.
        let src: Vec<u8> = (0..n).flat_map(|i| good(from, i)).collect();
        let size = to.byte_size().unwrap();
        let (mut first_pass, mut one_pass) = (vec![0u8; n * size], vec![0u8; n * size]);
        cast(&src, from, &mut first_pass, to, CastMode::Checked).unwrap();
        pool.install(|| {
            dtcast::cast::cast_into_scratch(&src, from, &mut one_pass, to, CastMode::Checked)
        })
        .unwrap();
        assert!(one_pass == first_pass, "{from} -> {to}: bytes differ");
    }
}

/// A xorshift64 sequence from `state` (nonzero): the tests' reproducible random bits.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
