//! Where each layout keeps a code and a zero point: unpacking into one byte per code.

use super::{IntLayout, IntScheme, Parts};

/// AWQ's order: output `8j + i` of a word is its nibble `AWQ_NIBBLE[i]` (AutoAWQ packs outputs
/// `[0, 2, 4, 6, 1, 3, 5, 7]` into nibbles 0 to 7).
pub(super) const AWQ_NIBBLE: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

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

/// The unsigned codes of rows `first..first + count` (each `cols` long), into `out` (`words`: a
/// buffer for GPTQ's words, transposed first).
pub(super) fn fill(
    parts: &Parts,
    scheme: &IntScheme,
    first: usize,
    count: usize,
    out: &mut [u8],
    words: &mut Vec<u32>,
) {
    let (rows, cols) = (parts.rows, parts.cols);
    let codes = parts.codes;
    let bits = scheme.bits;
    let mask = scheme.max_code();
    match scheme.layout {
        IntLayout::Gptq if 32 % bits == 0 => {
            // Word row `i` holds codes `i·per..(i + 1)·per` of every row: transposed, each
            // row's words are its codes in order.
            let per = scheme.per_word();
            let row_words = cols.div_ceil(per);
            transpose(codes, rows, 0..row_words, first..first + count, words);
            for (dst, row) in out
                .chunks_exact_mut(cols)
                .zip(words.chunks_exact(row_words))
            {
                if bits == 8 && cfg!(target_endian = "little") {
                    // (The words' bytes in memory are their codes, least significant first.)
                    dst.copy_from_slice(&bytemuck::cast_slice::<u32, u8>(row)[..cols]);
                    continue;
                }
                for (o, &w) in dst.chunks_mut(per).zip(row) {
                    for (k, o) in o.iter_mut().enumerate() {
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
        IntLayout::CompressedTensors | IntLayout::AwqGemv if 32 % bits == 0 => {
            let per = scheme.per_word();
            let words = cols.div_ceil(per);
            for r in 0..count {
                let row = &codes[4 * (first + r) * words..4 * (first + r + 1) * words];
                let dst = &mut out[r * cols..(r + 1) * cols];
                if bits == 8 {
                    // A word's four codes are its bytes, least significant first.
                    dst.copy_from_slice(&row[..cols]);
                    continue;
                }
                for (o, w) in dst.chunks_mut(per).zip(row.chunks_exact(4)) {
                    let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    for (k, o) in o.iter_mut().enumerate() {
                        *o = ((w >> (bits * k as u32)) & mask) as u8;
                    }
                }
            }
        }
        IntLayout::CompressedTensors | IntLayout::AwqGemv => {
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

/// The stored zero point of `group` in `row` as an unsigned code (`z`: the zero points as
/// stored for the weight of `parts`).
#[inline(always)]
pub(super) fn zero(z: &[u8], scheme: &IntScheme, parts: &Parts, row: usize, group: usize) -> i32 {
    let (rows, groups) = (parts.rows, parts.groups);
    let bits = scheme.bits;
    let mask = scheme.max_code();
    match scheme.layout {
        IntLayout::Gptq => {
            let words = rows * bits as usize / 32;
            stream_code(bits, row, |i| word(z, group * words + i)) as i32
        }
        IntLayout::Awq => {
            let w = word(z, group * (rows / 8) + row / 8);
            ((w >> (4 * AWQ_NIBBLE[row % 8])) & mask) as i32
        }
        IntLayout::CompressedTensors => {
            stream_code(bits, row, |i| word(z, i * groups + group)) as i32
        }
        IntLayout::AwqGemv => {
            let w = word(z, row * (parts.row_scales / 8) + group / 8);
            ((w >> (4 * (group % 8))) & mask) as i32
        }
        IntLayout::Int8 => i32::from(z[row * groups + group] ^ 0x80),
    }
}

/// The words of `rows` × `cols` of a row-major matrix of little-endian int32 words (`codes`,
/// `stride` words a row) transposed into `out` (`cols.len()` rows of `rows.len()` words). In
/// blocks of 16 by 16, so that loads and stores are whole cache lines (a store per word a row
/// apart would thrash the cache).
fn transpose(
    codes: &[u8],
    stride: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut Vec<u32>,
) {
    let (height, width) = (rows.len(), cols.len());
    // (Every word is written below: the buffer is zeroed only when its size changes.)
    if out.len() != height * width {
        out.clear();
        out.resize(height * width, 0);
    }
    for i0 in (0..height).step_by(16) {
        let h = (height - i0).min(16);
        // The rows two blocks on asked for ahead of their use: 16 strips a page or more apart,
        // which the hardware's prefetchers do not follow.
        for di in i0 + 32..(i0 + 48).min(height) {
            let at = 4 * ((rows.start + di) * stride + cols.start);
            for line in (at..at + 4 * width).step_by(64) {
                prefetch(codes, line);
            }
        }
        for j0 in (0..width).step_by(16) {
            let w = (width - j0).min(16);
            if h == 16 && w == 16 && transpose16_simd(codes, stride, &rows, &cols, i0, j0, out) {
                continue;
            }
            let mut block = [[0u32; 16]; 16];
            for (di, line) in block.iter_mut().enumerate().take(h) {
                let at = 4 * ((rows.start + i0 + di) * stride + cols.start + j0);
                for (x, b) in line.iter_mut().zip(codes[at..at + 4 * w].chunks_exact(4)) {
                    *x = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            for dj in 0..w {
                let to = &mut out[(j0 + dj) * height + i0..(j0 + dj) * height + i0 + h];
                for (x, line) in to.iter_mut().zip(&block) {
                    *x = line[dj];
                }
            }
        }
    }
}

/// Rows `first..first + count` of a 4-bit weight's codes as streams of nibbles (each row's first
/// code in the low nibble of its first byte, rows one after the other), as `lookup4` reads them:
/// compressed-tensors' and AWQ GEMV's rows as stored; GPTQ's words gathered from their column; AWQ's nibbles
/// taken from each word to their row. (`cols` a multiple of 8.)
pub(super) fn nibbles<'s>(
    parts: &'s Parts,
    scheme: &IntScheme,
    first: usize,
    count: usize,
    buf: &'s mut Vec<u8>,
    words_buf: &'s mut Vec<u32>,
) -> &'s [u8] {
    let (rows, cols) = (parts.rows, parts.cols);
    let row_bytes = cols / 2;
    let codes = parts.codes;
    match scheme.layout {
        IntLayout::CompressedTensors | IntLayout::AwqGemv | IntLayout::Int8 => {
            &codes[first * row_bytes..(first + count) * row_bytes]
        }
        IntLayout::Gptq => {
            // Word row `i` holds word `i` of every row's stream: a transpose of 32-bit words.
            transpose(codes, rows, 0..cols / 8, first..first + count, words_buf);
            bytemuck::cast_slice(&words_buf[..])
        }
        IntLayout::Awq => {
            // Row `8j + k` is nibble AWQ_NIBBLE[k] of every word in column `j` (pieces start
            // and end on word columns: multiples of 8 rows). The piece's columns of words are
            // gathered first, a row of `qweight` (its words side by side) at a time, so that
            // each word is read from memory once; then each two columns' words give the byte of
            // those two columns in all eight rows at once: the even nibbles of the two words
            // interleaved are four rows' bytes, the odd ones the other four's.
            let words = rows / 8;
            let (j0, j1) = (first / 8, (first + count) / 8);
            transpose(codes, words, 0..cols, j0..j1, words_buf);
            buf.resize(count * row_bytes, 0);
            // Nibble `p` of a word is row ROW_OF_NIBBLE[p] of its eight.
            const ROW_OF_NIBBLE: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
            for (j, column) in words_buf.chunks_exact(cols).enumerate() {
                let rows8 = &mut buf[8 * j * row_bytes..8 * (j + 1) * row_bytes];
                // AVX-512 or AVX2: 32 columns at a time.
                let done = awq_rows_simd(column, &ROW_OF_NIBBLE, row_bytes, rows8);
                let column = &column[done..];
                let rows8 = &mut rows8[done / 2..];
                // Eight pairs of columns at a time: their eight bytes of each row, one 8×8
                // transpose of bytes (in three rounds of swaps), stored as eight bytes a row.
                let blocks = column.chunks_exact(16);
                let tail = blocks.remainder();
                for (k, block) in blocks.enumerate() {
                    let mut x: [u64; 8] = core::array::from_fn(|p| {
                        let (w0, w1) = (block[2 * p], block[2 * p + 1]);
                        let even = (w0 & 0x0F0F_0F0F) | (w1 & 0x0F0F_0F0F) << 4;
                        let odd = (w0 >> 4 & 0x0F0F_0F0F) | (w1 & 0xF0F0_F0F0);
                        u64::from(even) | u64::from(odd) << 32
                    });
                    for (d, mask) in [
                        (1, 0x00FF_00FF_00FF_00FFu64),
                        (2, 0x0000_FFFF_0000_FFFF),
                        (4, 0xFFFF_FFFF),
                    ] {
                        for p in (0..8).filter(|p| p & d == 0) {
                            let t = ((x[p] >> (8 * d)) ^ x[p + d]) & mask;
                            x[p + d] ^= t;
                            x[p] ^= t << (8 * d);
                        }
                    }
                    // Byte m of a pair's value: nibble 2m (m < 4) or 2(m − 4) + 1 of its words.
                    for (m, v) in x.iter().enumerate() {
                        let nibble = if m < 4 { 2 * m } else { 2 * (m - 4) + 1 };
                        let at = ROW_OF_NIBBLE[nibble] * row_bytes + 8 * k;
                        rows8[at..at + 8].copy_from_slice(&v.to_le_bytes());
                    }
                }
                let done = (column.len() / 16) * 8;
                for (b, pair) in tail.chunks_exact(2).enumerate() {
                    let (w0, w1) = (pair[0], pair[1]);
                    let even = (w0 & 0x0F0F_0F0F) | (w1 & 0x0F0F_0F0F) << 4;
                    let odd = (w0 >> 4 & 0x0F0F_0F0F) | (w1 & 0xF0F0_F0F0);
                    for m in 0..4 {
                        rows8[ROW_OF_NIBBLE[2 * m] * row_bytes + done + b] =
                            (even >> (8 * m)) as u8;
                        rows8[ROW_OF_NIBBLE[2 * m + 1] * row_bytes + done + b] =
                            (odd >> (8 * m)) as u8;
                    }
                }
            }
            buf
        }
    }
}

/// The columns of a word column [`nibbles`] turns into AWQ's rows by the AVX-512 or AVX2 kernel
/// (32 at a time; none without either).
fn awq_rows_simd(
    column: &[u32],
    row_of_nibble: &[usize; 8],
    row_bytes: usize,
    rows8: &mut [u8],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx512() || crate::lookup4::avx2() {
        assert!(rows8.len() >= 8 * row_bytes && 2 * row_bytes >= column.len());
        // SAFETY: AVX-512 (`avx512()`) or AVX2 (`avx2()`); `rows8` is eight rows of
        // `row_bytes` ≥ half the columns (asserted).
        return unsafe {
            if crate::lookup4::avx512() {
                crate::x86::words::awq_rows(column, row_of_nibble, row_bytes, rows8)
            } else {
                crate::x86::words::awq_rows_avx2(column, row_of_nibble, row_bytes, rows8)
            }
        };
    }
    let _ = (column, row_of_nibble, row_bytes, rows8);
    0
}

/// [`transpose`]'s whole 16×16 block at (`i0`, `j0`) by the AVX-512 kernel, or AVX2's in four
/// 8×8 blocks; false (nothing done) without either.
fn transpose16_simd(
    codes: &[u8],
    stride: usize,
    rows: &std::ops::Range<usize>,
    cols: &std::ops::Range<usize>,
    i0: usize,
    j0: usize,
    out: &mut [u32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx512() || crate::lookup4::avx2() {
        let height = rows.len();
        let at = 4 * ((rows.start + i0) * stride + cols.start + j0);
        let last = 4 * ((rows.start + i0 + 15) * stride + cols.start + j0 + 16);
        let end = (j0 + 15) * height + i0 + 16;
        assert!(last <= codes.len() && end <= out.len());
        let (src, dst) = (codes.as_ptr(), out.as_mut_ptr());
        // SAFETY: AVX-512 (`avx512()`) or AVX2 (`avx2()`); the 16 rows of 16 words from `at`
        // end by `last`, within `codes`, and the 16 columns written end by `end`, within `out`
        // (both checked); AVX2's four 8×8 blocks are the quarters of that block.
        unsafe {
            if crate::lookup4::avx512() {
                crate::x86::words::transpose16(
                    src.add(at),
                    stride,
                    dst.add(j0 * height + i0),
                    height,
                );
            } else {
                for (di, dj) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
                    crate::x86::words::transpose8(
                        src.add(at + 4 * (di * stride + dj)),
                        stride,
                        dst.add((j0 + dj) * height + i0 + di),
                        height,
                    );
                }
            }
        }
        return true;
    }
    let _ = (codes, stride, rows, cols, i0, j0, out);
    false
}

/// Asks for the cache line of `bytes[at]` (a hint: nothing where `at` is past the end).
#[inline(always)]
fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < bytes.len() {
        // SAFETY: a prefetch reads nothing architecturally; the address is within `bytes`.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(at).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Word `(r, c)` of a row-major matrix of little-endian words `stride` wide.
    fn at(codes: &[u8], stride: usize, r: usize, c: usize) -> u32 {
        word(codes, r * stride + c)
    }

    #[test]
    fn transposing_words_moves_word_r_c_to_c_r() {
        // Blocks whole and partial (16×16 by this CPU's kernel, the rest by the loop), a window
        // that starts off the first row and column.
        let (stride, height) = (75, 70);
        let mut next = crate::xorshift(3);
        let codes: Vec<u8> = (0..4 * stride * height)
            .map(|_| (next() >> 24) as u8)
            .collect();
        let mut out = Vec::new();
        for (rows, cols) in [
            (0..64, 0..48),
            (3..70, 5..75),
            (6..38, 11..27),
            (0..16, 0..16),
        ] {
            transpose(&codes, stride, rows.clone(), cols.clone(), &mut out);
            let want: Vec<u32> = (cols.clone())
                .flat_map(|c| rows.clone().map(move |r| (r, c)))
                .map(|(r, c)| at(&codes, stride, r, c))
                .collect();
            assert!(out == want, "rows {rows:?}, columns {cols:?}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_simd_transposes_are_the_definition() {
        // Each kernel this CPU runs, whichever `transpose` chose.
        let stride = 40;
        let mut next = crate::xorshift(5);
        let codes: Vec<u8> = (0..4 * stride * 16).map(|_| (next() >> 24) as u8).collect();
        let want = |n: usize| -> Vec<u32> {
            (0..n)
                .flat_map(|c| (0..n).map(move |r| (r, c)))
                .map(|(r, c)| at(&codes, stride, r, c + 3))
                .collect()
        };
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut got = vec![0u32; 64];
            // SAFETY: AVX2 (detected); 8 rows of 8 words from word 3 of `codes`, 8 of `got`.
            unsafe {
                crate::x86::words::transpose8(codes[12..].as_ptr(), stride, got.as_mut_ptr(), 8)
            };
            assert_eq!(got, want(8), "AVX2");
        }
        if crate::lookup4::avx512() {
            let mut got = vec![0u32; 256];
            // SAFETY: AVX-512 (`avx512()`); 16 rows of 16 words from word 3, 16 of `got`.
            unsafe {
                crate::x86::words::transpose16(codes[12..].as_ptr(), stride, got.as_mut_ptr(), 16)
            };
            assert_eq!(got, want(16), "AVX-512");
        }
    }
}
