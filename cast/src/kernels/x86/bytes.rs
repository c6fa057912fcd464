//! Tables of 256 entries looked up a vector of source bytes at a time: AVX-512 VBMI's two-register
//! byte permutes (`vpermi2b`, 128 entries each: two of them and a blend on the index's top bit),
//! or AVX2's byte shuffles (`vpshufb`, 16 entries each: sixteen of them, and blends that pick one
//! by the index's high nibble). A table's entries of `W` bytes are `W` planes of 256 bytes
//! (plane `k`: byte `k` of every entry), each looked up on its own; the planes' bytes are then
//! interleaved into entries by byte and word unpacks. The unpacks interleave within 128-bit lanes,
//! so the source bytes are first permuted into the order that makes their output come out in
//! element order (one `vpermb`).
//!
//! Used by the casts whose source element is a byte (or packs several elements into one: int4,
//! float4) and that have no SIMD kernel of their own (`packed.rs`'s byte tables): what the table
//! holds is the scalar kernel's output for every byte, so the bytes are the rules' by construction.

use core::arch::x86_64::*;

use crate::isa::Isa;

/// Whether this CPU has AVX-512 VBMI besides the subsets the AVX-512 kernels use (detected once).
fn vbmi_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| super::avx512_available() && is_x86_feature_detected!("avx512vbmi"))
}

/// Looks every byte of `src` up in `planes` (a table of `planes.len()` bytes an entry: 1, 2 or 4)
/// into `dst` (entries in source order), as far as whole vectors of `isa` reach; returns how many
/// source bytes it converted (the caller looks the rest up). AVX-512 without VBMI runs the AVX2
/// form; AVX2 takes entries of one byte (two planes' shuffles and blends ran no faster than the
/// scalar lookup); other sets convert nothing.
/// Whether [`look_up_bytes`] converts entries of `width` bytes on `isa` on this machine.
pub(crate) fn looks_up_bytes(isa: Isa, width: usize) -> bool {
    match isa {
        Isa::Avx512 if vbmi_available() => matches!(width, 1 | 2 | 4),
        Isa::Avx512 | Isa::Avx2 => width == 1 && super::avx2_available(),
        Isa::Portable | Isa::Scalar => false,
    }
}

pub(crate) fn look_up_bytes(isa: Isa, planes: &[[u8; 256]], src: &[u8], dst: &mut [u8]) -> usize {
    let width = planes.len();
    let n = src.len().min(dst.len() / width.max(1));
    let wide = isa == Isa::Avx512 && vbmi_available();
    let narrow = matches!(isa, Isa::Avx512 | Isa::Avx2) && super::avx2_available();
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    // SAFETY: the features were detected; each loop reads `n` rounded down to its vector of
    // bytes at `s` and writes `width` times as many at `d`, within both slices.
    unsafe {
        match (width, wide, narrow) {
            (1, true, _) => vbmi::<1>(planes, s, d, n - n % 64),
            (2, true, _) => vbmi::<2>(planes, s, d, n - n % 64),
            (4, true, _) => vbmi::<4>(planes, s, d, n - n % 64),
            (1, false, true) => avx2(&planes[0], s, d, n - n % 32),
            _ => 0,
        }
    }
}

/// Where each byte of a vector of 64 source bytes goes before the lookups, so that the byte
/// unpacks of `W` planes (and for `W = 4` the word unpacks after them) write entries in source
/// order: an unpack takes 8 bytes (or 4 words) from the same half of every 128-bit lane, so
/// position `16 j + 8 s + 4 t + e` of lane `j`, unpack half `s` (and word half `t`) must hold the
/// source byte of output vector `2 s + t`, lane `j`: byte `16 (2 s + t) + 4 j + e` (`W = 4`), or
/// `32 s + 8 j + e` (`W = 2`, `e` < 8).
const fn order(width: usize) -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut p = 0;
    while p < 64 {
        let (j, s, rest) = (p / 16, (p / 8) % 2, p % 8);
        order[p] = match width {
            4 => (16 * (2 * s + rest / 4) + 4 * j + rest % 4) as u8,
            2 => (32 * s + 8 * j + rest) as u8,
            _ => p as u8,
        };
        p += 1;
    }
    order
}

/// The AVX-512 VBMI loop over `n` (a multiple of 64) source bytes.
///
/// # Safety
/// AVX-512 F/BW and VBMI; `n` readable bytes at `s`, `W * n` writable at `d`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn vbmi<const W: usize>(planes: &[[u8; 256]], s: *const u8, d: *mut u8, n: usize) -> usize {
    // SAFETY: the caller's contract; `planes` holds `W` planes of 256 bytes (`look_up_bytes`).
    unsafe {
        let quarter = |k: usize, q: usize| _mm512_loadu_si512(planes[k][64 * q..].as_ptr().cast());
        let tables: [[__m512i; 4]; W] =
            core::array::from_fn(|k| [quarter(k, 0), quarter(k, 1), quarter(k, 2), quarter(k, 3)]);
        let order = _mm512_loadu_si512(const { order(W) }.as_ptr().cast());
        let mut i = 0;
        while i < n {
            super::prefetch_ahead(s.add(i), 1);
            let mut index = _mm512_loadu_si512(s.add(i).cast());
            if W > 1 {
                index = _mm512_permutexvar_epi8(order, index);
            }
            // Bit 7 of the index picks the table's half; the permutes read bits 0-6.
            let high = _mm512_movepi8_mask(index);
            let plane = |[a, b, c, e]: [__m512i; 4]| {
                _mm512_mask_blend_epi8(
                    high,
                    _mm512_permutex2var_epi8(a, index, b),
                    _mm512_permutex2var_epi8(c, index, e),
                )
            };
            let out = d.add(W * i);
            let store = |k: usize, v: __m512i| _mm512_storeu_si512(out.add(64 * k).cast(), v);
            match W {
                1 => store(0, plane(tables[0])),
                2 => {
                    let (p0, p1) = (plane(tables[0]), plane(tables[1]));
                    store(0, _mm512_unpacklo_epi8(p0, p1));
                    store(1, _mm512_unpackhi_epi8(p0, p1));
                }
                _ => {
                    let p: [__m512i; 4] = core::array::from_fn(|k| plane(tables[k]));
                    let (lo01, hi01) = (
                        _mm512_unpacklo_epi8(p[0], p[1]),
                        _mm512_unpackhi_epi8(p[0], p[1]),
                    );
                    let (lo23, hi23) = (
                        _mm512_unpacklo_epi8(p[2], p[3]),
                        _mm512_unpackhi_epi8(p[2], p[3]),
                    );
                    store(0, _mm512_unpacklo_epi16(lo01, lo23));
                    store(1, _mm512_unpackhi_epi16(lo01, lo23));
                    store(2, _mm512_unpacklo_epi16(hi01, hi23));
                    store(3, _mm512_unpackhi_epi16(hi01, hi23));
                }
            }
            i += 64;
        }
        n
    }
}

/// The AVX2 loop over `n` (a multiple of 32) source bytes, entries of one byte: sixteen shuffles
/// look the index's low nibble up in each row of 16 entries, and a tree of fifteen blends picks
/// the row by the high nibble's bits (each brought to bit 7 of its byte, which `vpblendvb` reads,
/// by a 16-bit shift).
///
/// # Safety
/// AVX2; `n` readable bytes at `s` and writable at `d`.
#[target_feature(enable = "avx2")]
unsafe fn avx2(plane: &[u8; 256], s: *const u8, d: *mut u8, n: usize) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        // Row `r` (entries 16 r .. 16 r + 15) in both 128-bit lanes.
        let rows: [__m256i; 16] = core::array::from_fn(|r| {
            _mm256_broadcastsi128_si256(_mm_loadu_si128(plane[16 * r..].as_ptr().cast()))
        });
        let mut i = 0;
        while i < n {
            super::prefetch_ahead(s.add(i), 1);
            let index = _mm256_loadu_si256(s.add(i).cast());
            let column = _mm256_and_si256(index, _mm256_set1_epi8(0x0F));
            let mut picked: [__m256i; 16] =
                core::array::from_fn(|r| _mm256_shuffle_epi8(rows[r], column));
            // Bit 4, 5, 6, then 7 of the index halves the rows left.
            let bits = [
                _mm256_slli_epi16::<3>(index),
                _mm256_slli_epi16::<2>(index),
                _mm256_slli_epi16::<1>(index),
                index,
            ];
            let mut left = 16;
            for bit in bits {
                left /= 2;
                for r in 0..left {
                    picked[r] = _mm256_blendv_epi8(picked[2 * r], picked[2 * r + 1], bit);
                }
            }
            _mm256_storeu_si256(d.add(i).cast(), picked[0]);
            i += 32;
        }
        n
    }
}
