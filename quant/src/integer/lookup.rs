//! The one-pass form of 4-bit codes in groups of a multiple of 32 columns (GPTQ, AWQ,
//! compressed-tensors' `pack-quantized`, bitsandbytes' NF4/FP4): every element of a group has
//! one of 16 codes and the group one scale (and zero), so the group's 16 possible outputs are
//! made once — the general path's own products and casts, for a piece of rows' groups at a
//! time — and every element is looked up in them by `lookup4`'s kernels (a register permute on
//! AVX-512, byte shuffles on AVX2, a loop over the bytes elsewhere), which read each row as a
//! stream of nibbles, the first in the low nibble of its byte. Each layout's codes become such
//! streams in `codes.rs` (compressed-tensors' rows already are).

use dtcast_dtype::DType;

use crate::arith::round_then_cast;
use crate::lookup4::Groups;
use crate::QuantError;

/// Elements of a piece of the one-pass forms (a piece's tables are cast in one call each).
pub(crate) const PIECE_ELEMENTS: usize = 1 << 16;

/// The 16 outputs of each group of a piece, in row order, as `lookup4` reads them: its group
/// `g` (32 codes) is table `g / per`, 16 entries of the output dtype's bits at `bits`.
#[derive(Default)]
pub(crate) struct Tables {
    bits: Vec<u8>,
    /// AVX2's form of 16-bit tables: each table's low bytes, then its high bytes (empty
    /// elsewhere).
    split: Vec<[u8; 32]>,
    per: usize,
    size: usize,
    rounded: Vec<u8>,
}

impl Tables {
    /// The tables of `products` (16 float32 products a group, `per` steps of 32 codes each): each
    /// product rounded to `through` (the dtype the format computes in) where given, then cast
    /// to `out` — the general path's two casts, on the same values.
    pub(crate) fn build(
        &mut self,
        products: &[f32],
        through: Option<DType>,
        out: DType,
        per: usize,
    ) -> Result<(), QuantError> {
        self.build_for(products, through, out, per, crate::lookup4::avx2())
    }

    /// [`build`](Tables::build), with AVX2's split tables where `split`.
    fn build_for(
        &mut self,
        products: &[f32],
        through: Option<DType>,
        out: DType,
        per: usize,
        split: bool,
    ) -> Result<(), QuantError> {
        let values: &[u8] = bytemuck::cast_slice(products);
        self.size = out.byte_size().unwrap_or(4);
        self.per = per.max(1);
        // (4 bytes past the entries, which `by_index4`'s gathers may read.)
        let n = products.len() * self.size;
        self.bits.resize(n + 4, 0);
        round_then_cast(values, through, out, &mut self.bits[..n], &mut self.rounded)?;
        self.split.clear();
        if self.size == 2 && split {
            let entries = self.bits.chunks_exact(32);
            self.split
                .extend(entries.map(|t| core::array::from_fn(|i| t[2 * (i % 16) + i / 16])));
        }
        Ok(())
    }

    /// Table `t`'s bytes.
    #[inline(always)]
    fn entries(&self, t: usize) -> &[u8] {
        &self.bits[t * 16 * self.size..(t + 1) * 16 * self.size]
    }
}

impl Groups for Tables {
    #[inline(always)]
    fn table(&self, g: usize) -> [u32; 16] {
        let t = self.entries(g / self.per);
        let size = self.size;
        core::array::from_fn(|i| {
            let b = &t[i * size..(i + 1) * size];
            if size == 2 {
                u32::from(u16::from_le_bytes([b[0], b[1]]))
            } else {
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
        })
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes32(&self, g: usize) -> core::arch::x86_64::__m512i {
        let t = self.entries(g / self.per);
        // SAFETY: the caller's contract; float32 tables (the only ones read as 32-bit lanes) are
        // 64 bytes.
        unsafe { core::arch::x86_64::_mm512_loadu_si512(t.as_ptr().cast()) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes16(&self, g0: usize, g1: usize) -> core::arch::x86_64::__m512i {
        use core::arch::x86_64::*;
        let (a, b) = (self.entries(g0 / self.per), self.entries(g1 / self.per));
        // SAFETY: the caller's contract; 16-bit tables are 32 bytes each.
        unsafe {
            let a = _mm512_castsi256_si512(_mm256_loadu_si256(a.as_ptr().cast()));
            _mm512_inserti64x4::<1>(a, _mm256_loadu_si256(b.as_ptr().cast()))
        }
    }
    #[inline(always)]
    fn split16(&self, g: usize) -> [u8; 32] {
        self.split[g / self.per]
    }
}

/// Rows of `codes` (one code a byte, `index.len()` a row) dequantized by their column's group:
/// element `c` of row `r` is entry `index[c] · 2^bits + code` of row `r`'s `row_entries` entries
/// in `tables` (built with one table of `2^bits` entries a group, in row order).
pub(crate) fn by_index(
    codes: &[u8],
    index: &[u32],
    bits: u32,
    tables: &Tables,
    row_entries: usize,
    size: usize,
    dst: &mut [u8],
) {
    let cols = index.len();
    let base: Vec<u32> = index.iter().map(|&g| g << bits).collect();
    for (r, (codes, dst)) in codes
        .chunks_exact(cols)
        .zip(dst.chunks_exact_mut(cols * size))
        .enumerate()
    {
        let table = &tables.bits[r * row_entries * size..(r + 1) * row_entries * size];
        if size == 2 {
            for ((d, &u), &b) in dst.chunks_exact_mut(2).zip(codes).zip(&base) {
                let at = 2 * (b as usize + usize::from(u));
                d.copy_from_slice(&table[at..at + 2]);
            }
        } else {
            for ((d, &u), &b) in dst.chunks_exact_mut(4).zip(codes).zip(&base) {
                let at = 4 * (b as usize + usize::from(u));
                d.copy_from_slice(&table[at..at + 4]);
            }
        }
    }
}

/// [`by_index`] for 4-bit codes read from nibble streams (each row's `index.len() / 2` bytes, the
/// first code of a byte in its low nibble).
pub(crate) fn by_index4(
    streams: &[u8],
    index: &[u32],
    tables: &Tables,
    row_entries: usize,
    size: usize,
    dst: &mut [u8],
) {
    let cols = index.len();
    let base: Vec<u32> = index.iter().map(|&g| g << 4).collect();
    // Every entry looked up is one of its row's (the gathers rely on it).
    let last = base.iter().max().map_or(0, |&b| b as usize + 15);
    assert!(cols == 0 || last < row_entries);
    let rows = streams
        .chunks_exact(cols / 2)
        .zip(dst.chunks_exact_mut(cols * size));
    for (r, (stream, dst)) in rows.enumerate() {
        let table = &tables.bits[r * row_entries * size..];
        let done = gathered(stream, &base, table, row_entries, size, dst);
        let t = &table[..row_entries * size];
        match size {
            2 => nibbles_by_index::<2>(&stream[done / 2..], &base[done..], t, &mut dst[done * 2..]),
            4 => nibbles_by_index::<4>(&stream[done / 2..], &base[done..], t, &mut dst[done * 4..]),
            _ => nibbles_by_index::<1>(&stream[done / 2..], &base[done..], t, &mut dst[done..]),
        }
    }
}

/// One row of [`by_index4`] by a loop: entries of `SIZE` bytes (a constant, so each copy is a
/// load and a store rather than a call to copy a run-time length).
#[inline(always)]
fn nibbles_by_index<const SIZE: usize>(stream: &[u8], base: &[u32], table: &[u8], dst: &mut [u8]) {
    let outputs = dst.chunks_exact_mut(2 * SIZE);
    for ((pair, &b), bases) in outputs.zip(stream).zip(base.chunks_exact(2)) {
        for (k, code) in [(0, b & 0xF), (1, b >> 4)] {
            let at = (bases[k] as usize + usize::from(code)) * SIZE;
            pair[k * SIZE..(k + 1) * SIZE].copy_from_slice(&table[at..at + SIZE]);
        }
    }
}

/// The columns of a row [`by_index4`] looks up by AVX-512 or AVX2 gathers (sixteen at a time),
/// and how many: none where the CPU has neither or the outputs are not 2 or 4 bytes. `table` is the row's
/// entries and every later row's, then the tables' 4 bytes of padding, which a gather of
/// 16-bit entries (32 bits each) may read past the last entry.
fn gathered(
    stream: &[u8],
    base: &[u32],
    table: &[u8],
    row_entries: usize,
    size: usize,
    dst: &mut [u8],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx512() && matches!(size, 2 | 4) {
        assert!(2 * stream.len() >= base.len() && dst.len() >= base.len() * size);
        assert!(table.len() >= row_entries * size + 2);
        // SAFETY: AVX-512 (`avx512()`); every `base + code` is below `row_entries` (asserted by
        // `by_index4`), and `table` holds 2 bytes past the row's last entry (asserted).
        unsafe { crate::x86::gather4::row(stream, base, table.as_ptr(), size, dst) };
        return base.len() / 16 * 16;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::lookup4::avx2() && matches!(size, 2 | 4) {
        assert!(2 * stream.len() >= base.len() && dst.len() >= base.len() * size);
        assert!(table.len() >= row_entries * size + 2);
        // SAFETY: AVX2 (`avx2()`); the entries as above.
        unsafe { crate::x86::gather4::row_avx2(stream, base, table.as_ptr(), size, dst) };
        return base.len() / 16 * 16;
    }
    let _ = (stream, base, table, row_entries, size, dst);
    0
}

/// Dequantizes a piece: `streams` (each row's codes as nibbles, rows one after the other) with
/// `tables` (built for the piece) into `dst`.
pub(crate) fn dequantize(streams: &[u8], tables: &Tables, out: DType, dst: &mut [u8]) {
    crate::lookup4::dequantize(streams, 32, tables, out, dst);
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn the_act_order_gathers_are_the_loop() {
        // One row of 128 columns in 7 groups, every column's group drawn at random, on 16- and
        // 32-bit entries: each gather this CPU runs against `nibbles_by_index`.
        let mut next = crate::xorshift(5);
        let (cols, groups) = (128, 7);
        let stream: Vec<u8> = (0..cols / 2).map(|_| (next() >> 24) as u8).collect();
        let base: Vec<u32> = (0..cols)
            .map(|_| ((next() >> 32) as u32 % groups) << 4)
            .collect();
        for size in [2, 4] {
            // Distinct entries (their own index), then the 4 bytes of padding the gathers read.
            let mut table: Vec<u8> = (0..16 * groups as usize)
                .flat_map(|i| (i as u32 * 0x0101_0101 + 0x0302_0100).to_le_bytes()[..size].to_vec())
                .collect();
            let entries = table.len();
            table.extend([0xEE; 4]);
            let mut want = vec![0u8; cols * size];
            match size {
                2 => nibbles_by_index::<2>(&stream, &base, &table[..entries], &mut want),
                _ => nibbles_by_index::<4>(&stream, &base, &table[..entries], &mut want),
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut got = vec![0u8; want.len()];
                // SAFETY: AVX2 is detected; every base + 15 is an entry; 4 bytes of padding.
                unsafe {
                    crate::x86::gather4::row_avx2(&stream, &base, table.as_ptr(), size, &mut got)
                };
                assert!(got == want, "AVX2 gathers of {size}-byte entries");
            }
            if crate::lookup4::avx512() {
                let mut got = vec![0u8; want.len()];
                // SAFETY: as above, on AVX-512.
                unsafe { crate::x86::gather4::row(&stream, &base, table.as_ptr(), size, &mut got) };
                assert!(got == want, "AVX-512 gathers of {size}-byte entries");
            }
        }
    }

    #[test]
    fn the_simd_lookups_of_integer_tables_are_the_loops() {
        // Every instruction set this CPU runs, on the same tables and codes: AVX-512's permutes,
        // AVX2's byte shuffles and lane permutes, and the loop over the bytes. (The best one is
        // what `dequantize_with`'s tests compare with the general path.)
        let mut next = crate::xorshift(9);
        let streams: Vec<u8> = (0..4096).map(|_| (next() >> 24) as u8).collect();
        // Groups of 64 and of 128 codes: two and four steps of 32 a table.
        for per in [2, 4] {
            let tables = streams.len() * 2 / (32 * per);
            let products: Vec<f32> = (0..16 * tables)
                .map(|i| ((next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * (i % 7) as f32)
                .collect();
            for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                let mut t = Tables::default();
                t.build_for(&products, Some(DType::Float16), out, per, true)
                    .unwrap();
                let size = out.byte_size().unwrap();
                let mut want = vec![0u8; streams.len() * 2 * size];
                crate::lookup4::portable(&streams, 32, &t, 0, out, &mut want);
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut got = vec![0u8; want.len()];
                    // SAFETY: the CPU runs AVX2 (detected just above).
                    unsafe {
                        if size == 2 {
                            crate::x86::lookup4::dequantize_avx2::<Tables, false>(
                                &streams, 32, &t, &mut got,
                            );
                        } else {
                            crate::x86::lookup4::dequantize_avx2::<Tables, true>(
                                &streams, 32, &t, &mut got,
                            );
                        }
                    }
                    crate::lookup4::store_fence();
                    assert!(got == want, "AVX2, groups of {}, into {out}", 32 * per);
                }
                if crate::lookup4::avx512() {
                    let mut got = vec![0u8; want.len()];
                    // SAFETY: `avx512()` says this CPU runs AVX-512.
                    unsafe { crate::x86::lookup4::dequantize(&streams, 32, &t, out, &mut got) };
                    crate::lookup4::store_fence();
                    assert!(got == want, "AVX-512, groups of {}, into {out}", 32 * per);
                }
            }
        }
    }
}
