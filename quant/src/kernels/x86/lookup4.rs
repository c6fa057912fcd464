//! Float4 groups dequantized in one pass: each group's 16 outputs in a register, looked up by
//! a register permute (AVX-512) or byte shuffles and lane permutes (AVX2); the definition and
//! the tables are in [`crate::lookup4`].

use core::arch::x86_64::*;

use dtcast_dtype::DType;

use crate::arith::mul;
use crate::lookup4::Groups;
use crate::x86::lines::Lines;

/// `lookup4::table` in a register: the 16 outputs of a group with factor `f` as 32-bit
/// lanes (`values`: the codes' values).
#[inline(always)]
pub(crate) unsafe fn table(values: __m512, f: f32, out: DType) -> __m512i {
    // SAFETY: AVX-512 F/BW by the caller's contract.
    unsafe {
        let products = if f.is_nan() {
            // `mul(0, f)` over the whole group, as the general path fills it.
            _mm512_set1_ps(mul(0.0, f))
        } else {
            // x86's product, as the general path's (inf × 0 is the default NaN there too).
            _mm512_mul_ps(values, _mm512_set1_ps(f))
        };
        let bits = _mm512_castps_si512(products);
        if out == DType::Float16 {
            // `vcvtps2ph`: nearest-even, NaN quieted with its top payload bits (the cast's).
            let halves =
                _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(products);
            return _mm512_cvtepu16_epi32(halves);
        }
        if out != DType::BFloat16 {
            return bits;
        }
        // Nearest-even to the top 16 bits; every NaN 0xFFFF (torch's vectorised rounding).
        let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
        let bias = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF));
        let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(bits, bias));
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(products, products);
        _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0xFFFF))
    }
}

/// 32 codes (16 bytes at `s`) as 32 16-bit indices in element order: byte `j`'s low nibble
/// at lane `2j`, its high nibble at lane `2j + 1` (+ `offset` per lane).
#[inline(always)]
unsafe fn indices(s: *const u8, offset: __m512i) -> __m512i {
    // SAFETY: the caller's contract: 16 bytes at `s`.
    unsafe {
        let bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast()));
        let lo = _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
        let hi = _mm512_slli_epi32::<12>(_mm512_andnot_si512(lo, bytes));
        _mm512_add_epi16(_mm512_or_si512(lo, hi), offset)
    }
}

/// The 16-bit entries of one or two tables in a register (the second's at lanes 16..32).
#[inline(always)]
pub(crate) unsafe fn u16_tables(a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: AVX-512 F/BW by the caller's contract.
    unsafe {
        let (a, b) = (_mm512_cvtepi32_epi16(a), _mm512_cvtepi32_epi16(b));
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
    }
}

/// [`crate::lookup4::dequantize`] on AVX-512, for a multiple of 32 codes.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn dequantize<G: Groups>(
    src: &[u8],
    group: usize,
    groups: &G,
    out: DType,
    dst: &mut [u8],
) {
    let size = out.byte_size().unwrap_or(4);
    // 32 elements (16 bytes of codes) per step: one group of 32, or two groups of 16 (the
    // second's indices 16 higher, into the upper half of the table register).
    let steps = src.len() / 16;
    let second = if group == 16 {
        _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(16))
    } else {
        _mm512_setzero_si512()
    };
    // SAFETY: the writer's vectors are the steps' outputs, in order, inside `dst`.
    let mut lines = unsafe { Lines::new(dst.as_mut_ptr()) };
    for k in 0..steps {
        // (32 / group is 1 or 2: a shift, not a division per step.)
        let (g0, g1) = if group == 16 {
            (2 * k, 2 * k + 1)
        } else {
            (k, k)
        };
        // SAFETY: step `k` reads bytes 16k..16k+16 of `src` and writes the 32 elements at
        // 32k * size of `dst` (its next 64-byte vectors), inside both (`dst` holds 2 * size
        // bytes per byte of `src`); AVX-512 by this function's contract.
        unsafe {
            let idx = indices(src.as_ptr().add(16 * k), second);
            if size == 2 {
                lines.push(_mm512_permutexvar_epi16(idx, groups.lanes16(g0, g1)));
            } else {
                // float32 entries: the 32 indices as two vectors of 16 32-bit lanes, looked
                // up in both tables (index bit 4 picks the second).
                let a = groups.lanes32(g0);
                let b = if g1 == g0 { a } else { groups.lanes32(g1) };
                let low = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx));
                let high = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64::<1>(idx));
                lines.push(_mm512_permutex2var_epi32(a, low, b));
                lines.push(_mm512_permutex2var_epi32(a, high, b));
            }
        }
    }
    // SAFETY: as above; the caller fences (`store_fence`) once its piece is written.
    unsafe { lines.finish() };
}

/// [`crate::lookup4::dequantize`] on AVX2, for a multiple of 32 codes (16 bytes a step), into
/// float32 where `F32`, else into 16-bit outputs. 16-bit: each step's 32 codes looked up by
/// two byte shuffles (low bytes, high bytes), each 128-bit lane with its group's tables
/// (codes 0-15 are the first group of 16 and 16-31 the second; a group of 32 has its tables
/// in both lanes), the two bytes of each entry then put side by side. float32: each eight
/// codes widened to 32-bit indices and looked up in both halves of their group's 16 entries
/// by lane permutes (`vpermd`), index bit 3 picking the half.
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn dequantize_avx2<G: Groups, const F32: bool>(
    src: &[u8],
    group: usize,
    groups: &G,
    dst: &mut [u8],
) {
    let steps = src.len() / 16;
    let size = if F32 { 4 } else { 2 };
    // Streaming stores where the destination allows them (the caller fences).
    let stream = (dst.as_ptr() as usize).is_multiple_of(32);
    let nibble = _mm_set1_epi8(0xF);
    for k in 0..steps {
        let (g0, g1) = if group == 16 {
            (2 * k, 2 * k + 1)
        } else {
            (k, k)
        };
        // SAFETY: step `k` reads bytes 16k..16k+16 of `src` and writes its 32 outputs at
        // 32k * size of `dst`, inside both (`dst` holds 2 * size bytes per byte of `src`);
        // the tables are 16 entries (`split16`: 32 bytes); AVX2 by this function's contract.
        unsafe {
            let packed = _mm_loadu_si128(src.as_ptr().add(16 * k).cast());
            let (lo, hi) = (
                _mm_and_si128(packed, nibble),
                _mm_and_si128(_mm_srli_epi16::<4>(packed), nibble),
            );
            // The 32 codes as bytes in element order: byte j's low nibble, then its high.
            let codes = [_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)];
            let d = dst.as_mut_ptr().add(32 * size * k).cast::<__m256i>();
            if F32 {
                let tables = [groups.table(g0), groups.table(g1)];
                for (half, (codes, table)) in codes.into_iter().zip(&tables).enumerate() {
                    let entries = [
                        _mm256_loadu_si256(table.as_ptr().cast()),
                        _mm256_loadu_si256(table.as_ptr().add(8).cast()),
                    ];
                    let eights = [codes, _mm_srli_si128::<8>(codes)];
                    for (quarter, codes) in eights.into_iter().enumerate() {
                        let index = _mm256_cvtepu8_epi32(codes);
                        let (first, second) = (
                            _mm256_permutevar8x32_epi32(entries[0], index),
                            _mm256_permutevar8x32_epi32(entries[1], index),
                        );
                        // Index bit 3 to the sign bit: the second half's entries.
                        let pick = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(index));
                        let out = _mm256_castps_si256(_mm256_blendv_ps(
                            _mm256_castsi256_ps(first),
                            _mm256_castsi256_ps(second),
                            pick,
                        ));
                        put(d.add(2 * half + quarter), out, stream);
                    }
                }
                continue;
            }
            let (t0, t1) = (groups.split16(g0), groups.split16(g1));
            let table = |half: usize| {
                _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(t0.as_ptr().add(16 * half).cast())),
                    _mm_loadu_si128(t1.as_ptr().add(16 * half).cast()),
                )
            };
            let codes = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(codes[0]), codes[1]);
            let low = _mm256_shuffle_epi8(table(0), codes);
            let high = _mm256_shuffle_epi8(table(1), codes);
            let (a, b) = (
                _mm256_unpacklo_epi8(low, high),
                _mm256_unpackhi_epi8(low, high),
            );
            put(d, _mm256_permute2x128_si256::<0x20>(a, b), stream);
            put(d.add(1), _mm256_permute2x128_si256::<0x31>(a, b), stream);
        }
    }
}

/// One vector at `d`: streamed (`d` aligned to 32) or stored.
#[inline(always)]
unsafe fn put(d: *mut __m256i, v: __m256i, stream: bool) {
    // SAFETY: the caller's 32 bytes at `d`, aligned where streaming; AVX by its contract.
    unsafe {
        if stream {
            _mm256_stream_si256(d, v);
        } else {
            _mm256_storeu_si256(d, v);
        }
    }
}
