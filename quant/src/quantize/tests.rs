use super::*;
use crate::arith::bytes;
use crate::rules::floor_log2;

/// `quantize` with the one-pass forms allowed (`one_pass`) or not.
fn quantize_with(
    src: &[u8],
    dtype: DType,
    shape: &[usize],
    scheme: &Scheme,
    one_pass: bool,
) -> QuantizedTensor {
    let mut job = Job::new(dtype, shape, scheme).unwrap();
    job.one_pass = one_pass;
    let mut elements = vec![0u8; job.element_bytes(job.rows)];
    let mut scales = vec![0u8; job.scale_bytes(0, job.rows)];
    let amax = job.tensor_amax(src);
    let global_scale = (job.rows_into(src, 0..job.rows, amax, &mut elements, &mut scales)).unwrap();
    QuantizedTensor {
        elements,
        scales,
        global_scale,
    }
}

/// Test inputs of one kind, as float32 values.
fn values(kind: usize, n: usize, seed: u64) -> Vec<f32> {
    let mut next = crate::xorshift(seed | 1);
    let specials = [
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::from_bits(0x0000_8000),
        -f32::from_bits(0x0001_0000),
        f32::MAX,
    ];
    // The float4 grid's ties and neighbours, for groups whose amax is 6 * 2^j.
    let ties = [0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0, 4.0];
    (0..n)
        .map(|i| {
            let r = next();
            let weight = ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
            match kind {
                // Weights as checkpoints hold them.
                0 => weight,
                // Every finite bit pattern: groups spanning any range (subnormal products).
                1 => {
                    let x = f32::from_bits(r as u32);
                    if x.is_finite() {
                        x
                    } else {
                        weight
                    }
                }
                // Weights with inf, NaN, zeros and subnormals sprinkled in.
                2 if r.is_multiple_of(97) => specials[(r >> 8) as usize % specials.len()],
                2 => weight,
                // Ties of the float4 grid (times 2^j, with 6 * 2^j once per 16 elements),
                // nudged by an ulp either way or not at all.
                3 => {
                    let j = (i / 64 % 40) as i32 - 20;
                    let t = if i % 16 == 0 {
                        6.0
                    } else {
                        ties[(r >> 8) as usize % 10]
                    };
                    let x = t * 2f32.powi(j);
                    let x = match r % 3 {
                        0 => x.next_up(),
                        1 => x.next_down(),
                        _ => x,
                    };
                    if r >> 20 & 1 == 1 {
                        -x
                    } else {
                        x
                    }
                }
                // float8_e4m3fn's rounding ties (normal and subnormal, times 2^j, with
                // 448 * 2^j once per 16 elements), nudged by an ulp either way or not.
                5 => {
                    let j = (i / 64 % 40) as i32 - 20;
                    let odd = (2 * (r >> 8) % 16 + 1) as f32;
                    let t = if i % 16 == 0 {
                        448.0
                    } else if r & 4 == 0 {
                        (1.0 + odd / 16.0) * 2f32.powi((r >> 16) as i32 % 15 - 6)
                    } else {
                        odd * 2f32.powi(-10)
                    };
                    let x = t * 2f32.powi(j);
                    let x = match r % 3 {
                        0 => x.next_up(),
                        1 => x.next_down(),
                        _ => x,
                    };
                    if r >> 20 & 1 == 1 {
                        -x
                    } else {
                        x
                    }
                }
                // bfloat16's smallest magnitudes: subnormals and the lowest normals, both
                // signs, which MX scales shift up by up to 127 binades.
                6 => f32::from_bits((r as u32 & 0x807F_FFFF) | (((r >> 32) % 3) as u32) << 23),
                // Zero groups (signed) among small values.
                _ if (i / 32) % 3 == 0 => {
                    if r & 1 == 1 {
                        -0.0
                    } else {
                        0.0
                    }
                }
                _ => weight * 1e-3,
            }
        })
        .collect()
}

/// `plan_finite` gives the general planners' scales and factors for every amax it takes
/// (every 4099th float32 below its limit, zeros, the largest), both weight dtypes, tensor
/// amaxes from tiny to huge.
#[test]
fn the_finite_plans_are_the_general_ones() {
    let mut amax: Vec<f32> = (0..0x7F60_0000u32)
        .step_by(4099)
        .map(f32::from_bits)
        .collect();
    amax.extend([0.0, f32::from_bits(0x7F5F_FFFF), 6.0, 448.0, 2688.0]);
    for name in ["ct_mxfp4", "ct_mxfp8", "ct_nvfp4"] {
        for w in [DType::BFloat16, DType::Float32] {
            let scheme = Scheme::named(name, w).unwrap();
            let job = Job::new(w, &[1, 32], &scheme).unwrap();
            for tensor in [1e-38f32, 1e-3, 1.0, 448.0, 3e38] {
                let fast = job.plan_finite(&amax, tensor).unwrap();
                let mut general_job = Job::new(w, &[1, 32], &scheme).unwrap();
                general_job.one_pass = false;
                let general = general_job.plan(&amax, tensor).unwrap();
                assert_eq!(
                    fast.scales, general.scales,
                    "{name}, {w}, tensor amax {tensor:e}"
                );
                assert_eq!(
                    fast.factors.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                    general
                        .factors
                        .iter()
                        .map(|f| f.to_bits())
                        .collect::<Vec<_>>(),
                    "{name}, {w}, tensor amax {tensor:e}"
                );
                assert_eq!(
                    fast.global.map(f32::to_bits),
                    general.global.map(f32::to_bits)
                );
                // Where factors are picked by the scale byte, the byte's is the group's.
                for (s, f) in fast.scales.iter().zip(&fast.factors) {
                    if let Some(by_byte) = &fast.byte_factors {
                        assert_eq!(by_byte[usize::from(*s)].to_bits(), f.to_bits(), "{name}");
                    }
                }
            }
        }
    }
    // float16: the finite plans on every finite float16 magnitude (MX: below 1.75 * 2^15,
    // where its power of two is finite in float16; from there on, the general rule).
    let halves: Vec<f32> = (0..0x7C00).map(crate::arith::f16_value).collect();
    let below = |limit: f32| halves.iter().copied().filter(move |&a| a < limit);
    let mx_halves: Vec<f32> = below(57344.0).collect();
    for (name, amax) in [
        ("ct_nvfp4", &halves),
        ("ct_mxfp4", &mx_halves),
        ("ct_mxfp8", &mx_halves),
    ] {
        let scheme = Scheme::named(name, DType::Float16).unwrap();
        let mut general_job = Job::new(DType::Float16, &[1, 32], &scheme).unwrap();
        let job = Job::new(DType::Float16, &[1, 32], &scheme).unwrap();
        general_job.one_pass = false;
        for tensor in [6e-8f32, 1e-3, 0.04, 1.0, 448.0, 65504.0] {
            let fast = job.plan_finite(amax, tensor).unwrap();
            let general = general_job.plan(amax, tensor).unwrap();
            let at = format!("{name}, tensor amax {tensor:e}");
            // (The first amax where they differ, not the whole lists.)
            let bits = |p: &Plan| p.factors.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            let (fast_bits, general_bits) = (bits(&fast), bits(&general));
            let differ = (0..amax.len())
                .find(|&i| fast.scales[i] != general.scales[i] || fast_bits[i] != general_bits[i]);
            assert_eq!(
                differ.map(|i| (amax[i], fast.scales[i], fast.factors[i])),
                differ.map(|i| (amax[i], general.scales[i], general.factors[i])),
                "{at}"
            );
            assert_eq!(fast.scales.len(), general.scales.len(), "{at}");
            assert_eq!(
                fast.global.map(f32::to_bits),
                general.global.map(f32::to_bits),
                "{at}"
            );
            for (s, f) in fast.scales.iter().zip(&fast.factors) {
                if let Some(by_byte) = &fast.byte_factors {
                    assert_eq!(by_byte[usize::from(*s)].to_bits(), f.to_bits(), "{at}");
                }
            }
        }
        // The first amax whose power of two is inf in float16 is the general rule's.
        let mx = name != "ct_nvfp4";
        assert_eq!(job.plan_finite(&[57344.0], 1.0).is_none(), mx, "{name}");
    }
}

/// The one-pass forms (`amax16`, `plan_finite`, `encode4`, `encode8`, `thresholds`) give the
/// general path's bytes: every scheme they serve, every input dtype its reference takes,
/// inputs of every kind (weights, any finite value, inf/NaN/zeros/subnormals, the float4 and
/// float8 grids' ties, bfloat16's smallest magnitudes, zero groups), shapes with an odd
/// number of groups of 16 per band, partial blocks, several bands.
#[test]
fn the_one_pass_forms_give_the_general_paths_bytes() {
    let schemes = [
        "ct_mxfp4",
        "ct_nvfp4",
        "ct_mxfp8",
        "ao_mxfp4_floor",
        "ao_mxfp4_ceil",
        "ao_mxfp4_even",
        "ao_mxfp4_rceil",
        "ao_nvfp4_two_level",
        "ao_nvfp4_single_level",
        "gpt_oss_mxfp4",
        "ct_fp8_tensor",
        "ct_fp8_channel",
        "ct_fp8_block",
        "deepseek_v3_fp8_block",
        "ao_mxfp8_floor",
        "ao_mxfp8_rceil",
    ];
    for name in schemes {
        for dtype in [DType::BFloat16, DType::Float32, DType::Float16] {
            let Ok(scheme) = Scheme::named(name, dtype) else {
                continue;
            };
            if scheme.check_input(dtype).is_err() {
                // (float16 weights: compressed-tensors' schemes only.)
                continue;
            }
            for kind in 0..7 {
                for shape in [[3, 32], [1, 16 * 33], [4099, 96], [37, 4096], [130, 200]] {
                    let group = match scheme.granularity {
                        Granularity::Group(k) => k,
                        _ => 1,
                    };
                    if shape[1] % group != 0 {
                        continue;
                    }
                    let n = shape[0] * shape[1];
                    let x = values(kind, n, (kind * 7919 + n) as u64);
                    let src = if dtype != DType::Float32 {
                        let wide: &[u8] = bytemuck::cast_slice(&x);
                        let mut b = vec![0u8; n * 2];
                        cast(wide, DType::Float32, &mut b, dtype, CastMode::Torch).unwrap();
                        b
                    } else {
                        bytes(&x)
                    };
                    let one_pass = quantize_with(&src, dtype, &shape, &scheme, true);
                    let general = quantize_with(&src, dtype, &shape, &scheme, false);
                    let at =
                        (one_pass.elements.iter().zip(&general.elements)).position(|(a, b)| a != b);
                    assert!(
                        at.is_none(),
                        "{name}, {dtype}, kind {kind}, {shape:?}: element byte {at:?}: {:#x} vs {:#x}",
                        one_pass.elements[at.unwrap_or(0)],
                        general.elements[at.unwrap_or(0)]
                    );
                    assert_eq!(
                        one_pass.scales, general.scales,
                        "{name}, {dtype}, kind {kind}, {shape:?}"
                    );
                    assert_eq!(
                        one_pass.global_scale.map(f32::to_bits),
                        general.global_scale.map(f32::to_bits),
                        "{name}, {dtype}, kind {kind}, {shape:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_row_of_blocks_has_the_sequential_rules_amax() {
    // bfloat16 rows in 2-D blocks: the columns' maxima, then each block's, against the
    // sequential rule run by run (`Input::band_amax`), bit for bit — NaNs of both signs and
    // several payloads at scattered rows and columns (the first NaN in row-major order wins,
    // not the largest), infinities, and a last block narrower than the others.
    let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15);
    for name in ["ct_fp8_block", "deepseek_v3_fp8_block"] {
        let scheme = Scheme::named(name, DType::BFloat16).unwrap();
        for trial in 0..24 {
            let (rows, cols) = (256, 128 * 3 + 72);
            let mut x: Vec<u16> = (0..rows * cols).map(|_| next() as u16 & 0xBF7F).collect();
            // A few specials in some trials: NaN payloads, signs, infinities.
            for _ in 0..trial % 6 {
                let at = next() as usize % x.len();
                x[at] = [0x7FC1, 0xFFC2, 0x7F81, 0xFFFF, 0x7F80, 0xFF80][next() as usize % 6];
            }
            let src: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut job = Job::new(DType::BFloat16, &[rows, cols], &scheme).unwrap();
            let input = Input::new(&src, DType::BFloat16, &scheme);
            for first in [0, 128] {
                let at = Rows {
                    local: first,
                    first_row: 0,
                    first_scale: scheme.scale_range(0, first, cols).len(),
                    next: None,
                };
                let blocks = scheme.scale_range(first, first + 128, cols).len();
                let (mut one_pass, mut general) = (vec![0f32; blocks], vec![0f32; blocks]);
                job.one_pass = true;
                job.band_amax(&input, first..first + 128, &at, None, &mut one_pass);
                job.one_pass = false;
                job.band_amax(&input, first..first + 128, &at, None, &mut general);
                assert_eq!(
                    one_pass.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    general.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{name}, trial {trial}, rows from {first}"
                );
            }
        }
    }
}

/// `reciprocal_serves_bf16`'s claim: for every finite bfloat16 `x` (both signs, subnormals)
/// and bfloat16 factors of every significand at exponents across the range it accepts,
/// `x / f` and `x * (1 / f)` round to the same bfloat16; and it refuses what is not a
/// bfloat16 or has no normal reciprocal.
#[test]
fn a_bfloat16_quotient_is_the_product_by_the_reciprocal() {
    let round = |y: f32| {
        let b = y.to_bits();
        b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16
    };
    for e in [-126i32, -100, -40, -7, -1, 0, 1, 8, 40, 100, 125] {
        for m in 0..128u32 {
            let f = f32::from_bits(((e + 127) as u32) << 23 | m << 16);
            assert!(reciprocal_serves_bf16(f), "{f:e}");
            let r = 1.0 / f;
            for x in (0..=0xFFFFu32).filter(|b| b & 0x7F80 != 0x7F80) {
                let x = f32::from_bits(x << 16);
                assert_eq!(round(x / f), round(x * r), "{x:e} / {f:e}");
            }
        }
    }
    for f in [
        1.0f32 + 1.0 / 256.0,
        pow2(-127),
        pow2(127),
        0.0,
        -1.0,
        f32::INFINITY,
    ] {
        assert!(!reciprocal_serves_bf16(f), "{f:e}");
    }
}

/// Float32 values across the whole range: every 4099th bit pattern (both signs, subnormals,
/// inf, NaN payloads), and the bfloat16 rounding ties around a few values.
fn sweep() -> Vec<f32> {
    let mut values: Vec<f32> = (0..=u32::MAX).step_by(4099).map(f32::from_bits).collect();
    for base in [1.0f32, -3.0, 448.0, 6.0e-39, f32::MAX] {
        let b = base.to_bits();
        values.extend([b + 0x7FFF, b + 0x8000, b + 0x8001, b + 0x1_8000].map(f32::from_bits));
    }
    values
}

/// The element loop's bfloat16 rounding is torch's cast to bfloat16 and back (dtcast_cast's
/// Torch mode), a NaN the default NaN: on the sweep, bit for bit.
#[test]
fn round_bf16_is_the_cast_to_bfloat16_and_back() {
    let values = sweep();
    let mut narrow = vec![0u8; values.len() * 2];
    cast(
        bytemuck::cast_slice(&values),
        DType::Float32,
        &mut narrow,
        DType::BFloat16,
        CastMode::Torch,
    )
    .unwrap();
    for (v, b) in values.iter().zip(narrow.chunks_exact(2)) {
        let back = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
        let want = if back.is_nan() { DEFAULT_NAN } else { back };
        assert_eq!(
            round_bf16(*v).to_bits(),
            want.to_bits(),
            "{v:e} ({:#x})",
            v.to_bits()
        );
    }
}

/// The element loop divides by a normal power of two as a product with its reciprocal:
/// the same bits as the division (on the sweep, for every normal power of two).
#[test]
fn dividing_by_a_power_of_two_is_multiplying_by_its_reciprocal() {
    let values: Vec<f32> = sweep().into_iter().step_by(61).collect();
    for e in 1..=254u32 {
        let f = f32::from_bits(e << 23);
        let r = 1.0 / f;
        for &x in &values {
            let (q, p) = (std::hint::black_box(x) / f, std::hint::black_box(x) * r);
            assert_eq!(q.to_bits(), p.to_bits(), "{x:e} / 2^{}", e as i32 - 127);
        }
    }
}

/// The element pass encodes float4 with dtcast_cast's SIMD cast and keeps the references'
/// own code functions for NaN and -0 only: on every other clamped value (every 4096th float32
/// of magnitude at most 6, and each tie of the float4 grid with its neighbours) the cast must
/// give both references' codes.
#[test]
fn the_float4_cast_gives_both_references_codes_on_clamped_values() {
    let mut values: Vec<f32> = (0..1u32 << 20)
        .map(|i| f32::from_bits(i << 12 | 0x800))
        .filter(|v| v.abs() <= 6.0)
        .collect();
    for k in -24..=24 {
        let tie = k as f32 * 0.25;
        values.extend([tie, tie.next_up(), tie.next_down()]);
    }
    values.retain(|v| !v.is_nan() && v.to_bits() != 0x8000_0000 && v.abs() <= 6.0);
    if values.len() % 2 == 1 {
        values.pop();
    }
    let mut codes = vec![0u8; values.len() / 2];
    cast(
        bytemuck::cast_slice(&values),
        DType::Float32,
        &mut codes,
        DType::Float4E2M1Fn,
        CastMode::Torch,
    )
    .unwrap();
    for (i, &v) in values.iter().enumerate() {
        let got = codes[i / 2] >> (4 * (i % 2)) & 0xF;
        assert_eq!(
            got,
            compressed_tensors_fp4_code(v),
            "compressed-tensors, {v:e} ({:#x})",
            v.to_bits()
        );
        assert_eq!(
            got,
            torchao_fp4_code(v),
            "torchao, {v:e} ({:#x})",
            v.to_bits()
        );
    }
}

/// `floor_log2` is libm's `log2().floor()` on every positive normal power of two (where it
/// does not call libm) and on the sweep.
#[test]
fn floor_log2_is_libms_on_powers_of_two_and_the_rest() {
    let powers = (1..=254u32).map(|e| f32::from_bits(e << 23));
    for x in powers.chain(sweep()) {
        let (got, want) = (floor_log2(x), x.log2().floor());
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{x:e}: {got} vs {want}"
        );
    }
}
