//! Where each layout keeps a code and a zero point: unpacking into one byte per code.

use super::{IntLayout, IntScheme, Parts};

/// AWQ's order: output `8j + i` of a word is its nibble `AWQ_NIBBLE[i]` (AutoAWQ packs outputs
/// `[0, 2, 4, 6, 1, 3, 5, 7]` into nibbles 0 to 7).
const AWQ_NIBBLE: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

#[inline(always)]
fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([
        bytes[4 * i],
        bytes[4 * i + 1],
        bytes[4 * i + 2],
        bytes[4 * i + 3],
    ])
}

/// Code `k` of a stream of `bits`-bit codes stored least significant bits first in the words
/// `word(at(0))`, `word(at(1))`, ... (a code may cross into the next word: GPTQ's 3 bits).
#[inline(always)]
fn stream_code(bits: u32, k: usize, at: impl Fn(usize) -> u32) -> u32 {
    let bit = k * bits as usize;
    let (w, shift) = (bit / 32, (bit % 32) as u32);
    let mut v = at(w) >> shift;
    if shift + bits > 32 {
        v |= at(w + 1) << (32 - shift);
    }
    v & ((1u32 << bits) - 1)
}

/// The unsigned codes of rows `first..first + count` (each `cols` long), into `out`.
pub(super) fn fill(parts: &Parts, scheme: &IntScheme, first: usize, count: usize, out: &mut [u8]) {
    let (rows, cols) = (parts.rows, parts.cols);
    let codes = parts.codes;
    let bits = scheme.bits;
    let mask = scheme.max_code();
    match scheme.layout {
        IntLayout::Gptq if 32 % bits == 0 => {
            // Word row `i` holds codes `i·per..(i + 1)·per` of every row: each word read once,
            // the rows of a piece side by side in it.
            let per = scheme.per_word();
            for i in 0..cols.div_ceil(per) {
                for r in 0..count {
                    let w = word(codes, i * rows + first + r);
                    let row = &mut out[r * cols..(r + 1) * cols];
                    for (k, o) in row[i * per..((i + 1) * per).min(cols)]
                        .iter_mut()
                        .enumerate()
                    {
                        *o = ((w >> (bits * k as u32)) & mask) as u8;
                    }
                }
            }
        }
        IntLayout::Gptq => {
            for r in 0..count {
                let at = |i: usize| word(codes, i * rows + first + r);
                for (c, o) in out[r * cols..(r + 1) * cols].iter_mut().enumerate() {
                    *o = stream_code(bits, c, at) as u8;
                }
            }
        }
        IntLayout::Awq => {
            let words = rows / 8;
            for r in 0..count {
                let row = first + r;
                let shift = 4 * AWQ_NIBBLE[row % 8];
                for (c, o) in out[r * cols..(r + 1) * cols].iter_mut().enumerate() {
                    *o = ((word(codes, c * words + row / 8) >> shift) & mask) as u8;
                }
            }
        }
        IntLayout::CompressedTensors if 32 % bits == 0 => {
            let per = scheme.per_word();
            let words = cols.div_ceil(per);
            for r in 0..count {
                let base = (first + r) * words;
                for (c, o) in out[r * cols..(r + 1) * cols].iter_mut().enumerate() {
                    let w = word(codes, base + c / per);
                    *o = ((w >> (bits * (c % per) as u32)) & mask) as u8;
                }
            }
        }
        IntLayout::CompressedTensors => {
            let words = (cols * bits as usize).div_ceil(32);
            for r in 0..count {
                let base = (first + r) * words;
                let at = |i: usize| word(codes, base + i);
                for (c, o) in out[r * cols..(r + 1) * cols].iter_mut().enumerate() {
                    *o = stream_code(bits, c, at) as u8;
                }
            }
        }
        IntLayout::Int8 => {
            let src = &codes[first * cols..(first + count) * cols];
            for (o, &b) in out.iter_mut().zip(src) {
                *o = b ^ 0x80;
            }
        }
    }
}

/// Every zero point as an unsigned code, indexed as the scales are (`Parts::at`).
pub(super) fn zeros(z: &[u8], scheme: &IntScheme, rows: usize, groups: usize) -> Vec<i32> {
    let bits = scheme.bits;
    let mask = scheme.max_code();
    match scheme.layout {
        IntLayout::Gptq => {
            let words = rows * bits as usize / 32;
            (0..groups)
                .flat_map(|g| {
                    (0..rows).map(move |r| stream_code(bits, r, |i| word(z, g * words + i)) as i32)
                })
                .collect()
        }
        IntLayout::Awq => {
            let words = rows / 8;
            (0..groups)
                .flat_map(|g| {
                    (0..rows).map(move |r| {
                        ((word(z, g * words + r / 8) >> (4 * AWQ_NIBBLE[r % 8])) & mask) as i32
                    })
                })
                .collect()
        }
        IntLayout::CompressedTensors => (0..rows)
            .flat_map(|r| {
                (0..groups).map(move |g| stream_code(bits, r, |i| word(z, i * groups + g)) as i32)
            })
            .collect(),
        IntLayout::Int8 => z.iter().map(|&b| i32::from(b ^ 0x80)).collect(),
    }
}
