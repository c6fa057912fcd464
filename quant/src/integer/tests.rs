//! The one-pass forms (`lookup.rs`) give the general path's bytes on the inputs that reach them:
//! every 4-bit layout, every output dtype, 16- and 32-bit scales including NaN, ±inf, zero and
//! subnormal ones, zero points at either end, groups of 32 to whole rows, pieces that start on
//! any row a band may start on; and bitsandbytes' NF4/FP4 with and without double quantization.

use dtcast_dtype::DType;

use super::{dequantize_with, IntGroups, IntLayout, IntPart, IntScheme, IntWeight, ZeroPoints};
use crate::bitsandbytes::dequantize_bnb4_with;
use crate::{Bnb4Scheme, Bnb4Weight};

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut next = crate::xorshift(seed);
    (0..len).map(|_| (next() >> 24) as u8).collect()
}

/// Scales of `dtype`: mostly ordinary, with the special values among them.
fn scales(n: usize, dtype: DType, seed: u64) -> Vec<u8> {
    let special16: [u16; 8] = [
        0x7E00, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x7FFF, 0x3C00,
    ];
    let mut next = crate::xorshift(seed);
    (0..n)
        .flat_map(|i| {
            let r = next();
            match dtype {
                DType::Float32 => {
                    let v = if i % 13 == 5 {
                        [f32::NAN, f32::INFINITY, 0.0, -0.0, 1e-40][i % 5]
                    } else {
                        ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
                    };
                    v.to_le_bytes().to_vec()
                }
                _ => {
                    let bits = if i % 13 == 5 {
                        let s = special16[i % 8];
                        // (bfloat16's NaN and inf from float16's: the same top bits differ.)
                        if dtype == DType::BFloat16 {
                            [0x7FC0, 0x7F80, 0xFF80, 0, 0x8000, 1, 0x7FFF, 0x3F80][i % 8]
                        } else {
                            s
                        }
                    } else if dtype == DType::BFloat16 {
                        0x3C00 | (r >> 48) as u16 & 0x83FF
                    } else {
                        0x2000 | (r >> 48) as u16 & 0x83FF
                    };
                    bits.to_le_bytes().to_vec()
                }
            }
        })
        .collect()
}

/// Random codes, scales (special values among them) and zero points (where the scheme stores
/// them) of a `[rows, cols]` weight, as stored.
fn stored(
    scheme: &IntScheme,
    rows: usize,
    cols: usize,
    seed: u64,
) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    let bytes = |part| {
        let shape = scheme.part_shape(part, rows, cols).unwrap();
        shape.iter().product::<usize>() * scheme.part_element_bytes(part)
    };
    let size = scheme.scale.byte_size().unwrap();
    let codes = random(bytes(IntPart::Codes), seed);
    let s = scales(bytes(IntPart::Scales) / size, scheme.scale, seed);
    let z = (scheme.stores_zeros()).then(|| random(bytes(IntPart::Zeros), seed + 7));
    (codes, s, z)
}

#[test]
fn the_four_bit_lookup_gives_the_general_paths_bytes() {
    let mut checked = 0;
    for layout in [
        IntLayout::Gptq,
        IntLayout::Awq,
        IntLayout::AwqGemv,
        IntLayout::CompressedTensors,
    ] {
        for scale in [DType::Float16, DType::BFloat16, DType::Float32] {
            for groups in [
                IntGroups::Size(32),
                IntGroups::Size(128),
                IntGroups::Channel,
            ] {
                let zeros = match layout {
                    IntLayout::Gptq => ZeroPoints::StoredMinusOne,
                    IntLayout::Awq | IntLayout::AwqGemv => ZeroPoints::Stored,
                    _ if groups == IntGroups::Size(32) => ZeroPoints::Midpoint,
                    _ => ZeroPoints::Stored,
                };
                let scheme = IntScheme {
                    layout,
                    bits: 4,
                    groups,
                    zeros,
                    scale,
                };
                for (rows, cols) in [(32, 256), (64, 96), (160, 128)] {
                    if groups == IntGroups::Size(128) && cols % 128 != 0 {
                        continue;
                    }
                    // (AWQ GEMV stores groups of 32, 64, or 128 columns or more.)
                    if layout == IntLayout::AwqGemv && groups == IntGroups::Channel && cols < 128 {
                        continue;
                    }
                    let (codes, s, z) = stored(&scheme, rows, cols, checked as u64 + 1);
                    let w = IntWeight {
                        rows,
                        cols,
                        codes: &codes,
                        scales: &s,
                        zeros: z.as_deref(),
                        group_index: None,
                    };
                    for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                        let n = rows * cols * out.byte_size().unwrap();
                        let (mut fast, mut general) = (vec![0u8; n], vec![0u8; n]);
                        dequantize_with(&w, &scheme, out, &mut fast, true).unwrap();
                        dequantize_with(&w, &scheme, out, &mut general, false).unwrap();
                        let first = fast.iter().zip(&general).position(|(a, b)| a != b);
                        assert_eq!(first, None, "{scheme:?} [{rows}, {cols}] into {out}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 200, "{checked}");
}

#[test]
fn the_bitsandbytes_lookup_gives_the_general_paths_bytes() {
    for (n, blocksize) in [(4096, 64), (4096 + 32, 64), (8192, 128), (2048, 32)] {
        for nested in [false, true] {
            for dtype in [DType::BFloat16, DType::Float16, DType::Float32] {
                let seed = n as u64 + blocksize as u64 + u64::from(nested);
                let codes = random(n / 2, seed);
                let map: Vec<u8> = (0..16)
                    .flat_map(|c| ((c as f32 - 7.0) / 7.0).to_le_bytes())
                    .collect();
                let blocks = n.div_ceil(blocksize);
                let (absmax, nested_parts, scheme_nested) = if nested {
                    let nested_map: Vec<u8> = (0..256)
                        .flat_map(|c| (c as f32 / 200.0).to_le_bytes())
                        .collect();
                    let na = scales(blocks.div_ceil(256), DType::Float32, seed);
                    (
                        random(blocks, seed + 1),
                        Some((na, nested_map)),
                        Some((256, 0.01)),
                    )
                } else {
                    (scales(blocks, DType::Float32, seed), None, None)
                };
                let scheme = Bnb4Scheme {
                    blocksize,
                    nested: scheme_nested,
                    dtype,
                };
                let w = Bnb4Weight {
                    elements: n,
                    codes: &codes,
                    quant_map: &map,
                    absmax: &absmax,
                    nested: nested_parts
                        .as_ref()
                        .map(|(a, m)| (a.as_slice(), m.as_slice())),
                };
                for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                    let len = n * out.byte_size().unwrap();
                    let (mut fast, mut general) = (vec![0u8; len], vec![0u8; len]);
                    dequantize_bnb4_with(&w, &scheme, out, &mut fast, true).unwrap();
                    dequantize_bnb4_with(&w, &scheme, out, &mut general, false).unwrap();
                    let first = fast.iter().zip(&general).position(|(a, b)| a != b);
                    assert_eq!(
                        first, None,
                        "{n} in blocks of {blocksize}, nested {nested}, {dtype} into {out}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_act_order_lookup_gives_the_general_paths_bytes() {
    // A group per column (GPTQ's act-order g_idx; compressed-tensors' weight_g_idx), 2 to 4 bits.
    for (layout, zeros) in [
        (IntLayout::Gptq, ZeroPoints::StoredMinusOne),
        (IntLayout::Gptq, ZeroPoints::Stored),
        (IntLayout::CompressedTensors, ZeroPoints::Midpoint),
        (IntLayout::CompressedTensors, ZeroPoints::Stored),
    ] {
        for bits in [2, 3, 4] {
            for scale in [DType::Float16, DType::BFloat16, DType::Float32] {
                let scheme = IntScheme {
                    layout,
                    bits,
                    groups: IntGroups::Size(64),
                    zeros,
                    scale,
                };
                // (200 columns: the gathers' tail of 8; a GPTQ word of 2 or 3 bits needs 32.)
                let shapes: &[(usize, usize)] =
                    if layout == IntLayout::CompressedTensors || bits == 4 {
                        &[(64, 256), (48, 200)]
                    } else {
                        &[(64, 256)]
                    };
                for &(rows, cols) in shapes {
                    let seed = u64::from(bits) * 31 + scale.byte_size().unwrap() as u64;
                    let (codes, s, z) = stored(&scheme, rows, cols, seed);
                    // GPTQ reads any index; compressed-tensors only act-order's, 64 columns a
                    // group (column c in place 97c mod cols of the order: 97 is prime to both
                    // widths).
                    let g_idx: Vec<u8> = if layout == IntLayout::CompressedTensors {
                        (0..cols)
                            .flat_map(|c| ((c * 97 % cols / 64) as i32).to_le_bytes())
                            .collect()
                    } else {
                        (random(cols, seed + 5).iter())
                            .flat_map(|&b| (i32::from(b) % 4).to_le_bytes())
                            .collect()
                    };
                    let w = IntWeight {
                        rows,
                        cols,
                        codes: &codes,
                        scales: &s,
                        zeros: z.as_deref(),
                        group_index: Some(&g_idx),
                    };
                    for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                        let n = rows * cols * out.byte_size().unwrap();
                        let (mut fast, mut general) = (vec![0u8; n], vec![0u8; n]);
                        dequantize_with(&w, &scheme, out, &mut fast, true).unwrap();
                        dequantize_with(&w, &scheme, out, &mut general, false).unwrap();
                        let first = fast.iter().zip(&general).position(|(a, b)| a != b);
                        assert_eq!(first, None, "{scheme:?} [{rows}, {cols}] into {out}");
                    }
                }
            }
        }
    }
}

/// The column form's kernels this CPU runs.
#[cfg(target_arch = "x86_64")]
fn column_kernels() -> Vec<super::columns::Kernel> {
    use super::columns::Kernel;
    use std::arch::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("f16c");
    let avx512 = avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl");
    let bf16 = avx512 && has!("avx512bf16");
    [
        (avx2, Kernel::Avx2),
        (avx512, Kernel::Avx512),
        (bf16, Kernel::Avx512Bf16),
    ]
    .into_iter()
    .filter_map(|(runs, kernel)| runs.then_some(kernel))
    .collect()
}

/// Finite float16 scales of every magnitude (zeros, subnormals, and ones whose products overflow
/// float16 among them).
#[cfg(target_arch = "x86_64")]
fn finite_half_scales(n: usize, seed: u64) -> Vec<u8> {
    let mut next = crate::xorshift(seed);
    (0..n)
        .flat_map(|_| {
            let bits = (next() >> 48) as u16;
            let bits = if (bits >> 10) & 0x1F == 0x1F {
                bits ^ 0x4000
            } else {
                bits
            };
            bits.to_le_bytes()
        })
        .collect()
}

#[test]
#[cfg(target_arch = "x86_64")]
fn the_column_form_gives_the_general_paths_bytes() {
    // GPTQ (2, 4 and 8 bits, v1 and v2 zeros, with and without act-order's index), read a column
    // at a time (`columns.rs`) by each kernel this CPU runs, into bfloat16 and float16: the form
    // must take each weight and give the general path's bytes. Shapes: pieces of 32 lanes and of
    // 16 (48 rows), passes of columns cut short (96), and outputs at every even offset in a
    // line (the passes that stream, and those around them).
    let cases = [
        (IntLayout::Gptq, 2, ZeroPoints::StoredMinusOne),
        (IntLayout::Gptq, 4, ZeroPoints::StoredMinusOne),
        (IntLayout::Gptq, 4, ZeroPoints::Stored),
        (IntLayout::Gptq, 8, ZeroPoints::StoredMinusOne),
    ];
    let mut taken = 0;
    for (seed, (layout, bits, zeros)) in cases.into_iter().enumerate() {
        for (groups, act_order) in [
            (IntGroups::Size(32), false),
            (IntGroups::Size(32), true),
            (IntGroups::Channel, false),
        ] {
            let scheme = IntScheme {
                layout,
                bits,
                groups,
                zeros,
                scale: DType::Float16,
            };
            for (rows, cols) in [(128, 256), (48, 96), (256, 160)] {
                let seed = seed as u64 * 10 + cols as u64;
                let (codes, _, z) = stored(&scheme, rows, cols, seed);
                let n = scheme.part_shape(IntPart::Scales, rows, cols).unwrap();
                let s = finite_half_scales(n.iter().product(), seed + 3);
                let g_idx: Vec<u8> = (random(cols, seed + 5).iter())
                    .flat_map(|&b| (i32::from(b) % (cols / 32) as i32).to_le_bytes())
                    .collect();
                let w = IntWeight {
                    rows,
                    cols,
                    codes: &codes,
                    scales: &s,
                    zeros: z.as_deref(),
                    group_index: (act_order && layout == IntLayout::Gptq).then_some(&g_idx[..]),
                };
                for out in [DType::BFloat16, DType::Float16] {
                    let len = rows * cols * 2;
                    let (mut fast, mut general) = (vec![0u8; len], vec![0u8; len]);
                    dequantize_with(&w, &scheme, out, &mut general, false).unwrap();
                    if !super::columns::reads(&scheme, out) {
                        continue;
                    }
                    let parts = super::checked_parts(&w, &scheme).unwrap();
                    let mut scratch = super::columns::Scratch::default();
                    let mut lines = vec![0u8; len + 128];
                    let aligned = lines.as_ptr().align_offset(64);
                    for (kernel, offset) in column_kernels()
                        .into_iter()
                        .flat_map(|k| [0, 2, 16, 46, 1].map(|o| (k, o)))
                    {
                        let dst = &mut lines[aligned + offset..aligned + offset + len];
                        dst.fill(0);
                        let done = super::columns::dequantize(
                            &parts,
                            &scheme,
                            (0, rows),
                            out,
                            dst,
                            &mut scratch,
                            kernel,
                        )
                        .unwrap();
                        let what = format!(
                            "{scheme:?} [{rows}, {cols}] into {out} by {kernel:?} at {offset}"
                        );
                        assert!(done, "{what}: not taken");
                        let first = dst.iter().zip(&general).position(|(a, b)| a != b);
                        assert_eq!(first, None, "{what}");
                    }
                    // And through the dispatch, in pieces.
                    dequantize_with(&w, &scheme, out, &mut fast, true).unwrap();
                    assert!(
                        fast == general,
                        "{scheme:?} [{rows}, {cols}] into {out}, in pieces"
                    );
                    taken += 1;
                }
            }
        }
    }
    eprintln!("the column form took {taken} weights");
}
