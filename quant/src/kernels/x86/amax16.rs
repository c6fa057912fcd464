//! The group maxima of 16-bit float groups on AVX-512 (a tree of register permutes folding K
//! vectors of K-element groups into one vector of maxima) and AVX2 (unpacks within 128-bit
//! halves, 16 groups a block); the definition and the algorithm's account are in
//! [`crate::amax16`].

use core::arch::x86_64::*;

/// The two permutes of one level of the tree where segments (one group's partial maxima)
/// are `s` lanes long: output lane `j` is lane `j % (s/2)` of segment `j / (s/2)` of the two
/// vectors side by side (`[0]`), or the lane `s/2` after it (`[1]`).
const fn halves(s: usize) -> [[u16; 32]; 2] {
    let mut t = [[0u16; 32]; 2];
    let mut j = 0;
    while j < 32 {
        let lane = (j / (s / 2)) * s + j % (s / 2);
        t[0][j] = lane as u16;
        t[1][j] = (lane + s / 2) as u16;
        j += 1;
    }
    t
}

/// The permutes of the levels, from segments of 32 lanes down to 2.
const LEVELS: [[[u16; 32]; 2]; 5] = [halves(32), halves(16), halves(8), halves(4), halves(2)];

/// One level: the segments of `a` and then of `b`, each halved by keeping the larger of its
/// two halves.
#[inline(always)]
unsafe fn fold(a: __m512i, b: __m512i, level: &[[u16; 32]; 2]) -> __m512i {
    // SAFETY: AVX-512 BW by the caller's contract; the tables are 64 bytes each.
    unsafe {
        let lo = _mm512_loadu_si512(level[0].as_ptr().cast());
        let hi = _mm512_loadu_si512(level[1].as_ptr().cast());
        _mm512_max_epu16(
            _mm512_permutex2var_epi16(a, lo, b),
            _mm512_permutex2var_epi16(a, hi, b),
        )
    }
}

/// The 32 group maxima of `K * 32` elements at `s` (`K` vectors of 32 lanes).
///
/// # Safety
/// The CPU runs AVX-512 F and BW; `K * 64` bytes at `s`.
#[inline(always)]
unsafe fn block<const K: usize>(s: *const u8) -> __m512i {
    // SAFETY: AVX-512 by the caller's contract, which also gives `K * 64` bytes at `s`.
    unsafe {
        let magnitude = _mm512_set1_epi16(0x7FFF);
        let mut v = [_mm512_setzero_si512(); 32];
        for (i, v) in v.iter_mut().enumerate().take(K) {
            *v = _mm512_and_si512(_mm512_loadu_si512(s.add(64 * i).cast()), magnitude);
        }
        // Segments start K lanes long (a group per vector half, or per vector).
        let mut count = K;
        let mut level = if K == 32 { 0 } else { 1 };
        while count > 1 {
            for i in 0..count / 2 {
                v[i] = fold(v[2 * i], v[2 * i + 1], &LEVELS[level]);
            }
            count /= 2;
            level += 1;
        }
        v[0]
    }
}

/// [`crate::amax16::group_maxima`] for whole blocks of 32 groups; returns how many groups it did.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn group_maxima(src: &[u8], group: usize, out: &mut [u16]) -> usize {
    let blocks = out.len() / 32;
    for b in 0..blocks {
        // SAFETY: block `b` reads `group * 64` bytes at `b * group * 64` of `src` (which holds
        // `out.len() * group * 2` bytes) and writes groups `32b..32b + 32` of `out`.
        unsafe {
            let s = src.as_ptr().add(b * group * 64);
            for line in 0..group {
                crate::simd::prefetch_ahead(s.add(64 * line));
            }
            let m = if group == 16 {
                block::<16>(s)
            } else {
                block::<32>(s)
            };
            _mm512_storeu_si512(out.as_mut_ptr().add(32 * b).cast(), m);
        }
    }
    blocks * 32
}

/// The same fold on AVX2, 16 groups a block: one vector per group (a group of 32 is the
/// larger of its two halves first), then four levels — `vpunpck{l,h}{wd,dq,qdq}` pair two
/// vectors' lanes within each 128-bit half and keep the larger, so that each level halves
/// the partial maxima per group and doubles the groups per vector, and a last level puts
/// the two 128-bit halves side by side — leave lane `j` holding group `j`'s maximum.
pub(crate) mod avx2 {
    use core::arch::x86_64::*;

    /// The 16 group maxima of 16 groups of `G` elements at `s`.
    ///
    /// # Safety
    /// The CPU runs AVX2; `G * 32` bytes at `s`; `G` is 16 or 32.
    #[inline(always)]
    unsafe fn block<const G: usize>(s: *const u8) -> __m256i {
        // SAFETY: AVX2 by the caller's contract, which also gives `G * 32` bytes at `s`.
        unsafe {
            let magnitude = _mm256_set1_epi16(0x7FFF);
            let load = |i: usize| _mm256_loadu_si256(s.add(32 * i).cast());
            let v: [__m256i; 16] = core::array::from_fn(|g| {
                if G == 16 {
                    _mm256_and_si256(load(g), magnitude)
                } else {
                    _mm256_max_epu16(
                        _mm256_and_si256(load(2 * g), magnitude),
                        _mm256_and_si256(load(2 * g + 1), magnitude),
                    )
                }
            });
            let w: [__m256i; 8] = core::array::from_fn(|i| {
                let (a, b) = (v[2 * i], v[2 * i + 1]);
                _mm256_max_epu16(_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b))
            });
            let x: [__m256i; 4] = core::array::from_fn(|i| {
                let (a, b) = (w[2 * i], w[2 * i + 1]);
                _mm256_max_epu16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b))
            });
            let y: [__m256i; 2] = core::array::from_fn(|i| {
                let (a, b) = (x[2 * i], x[2 * i + 1]);
                _mm256_max_epu16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b))
            });
            _mm256_max_epu16(
                _mm256_permute2x128_si256::<0x20>(y[0], y[1]),
                _mm256_permute2x128_si256::<0x31>(y[0], y[1]),
            )
        }
    }

    /// [`crate::amax16::group_maxima`] for whole blocks of 16 groups; returns how many
    /// groups it did.
    ///
    /// # Safety
    /// The CPU runs AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn group_maxima(src: &[u8], group: usize, out: &mut [u16]) -> usize {
        let blocks = out.len() / 16;
        for b in 0..blocks {
            // SAFETY: block `b` reads `group * 32` bytes at `b * group * 32` of `src` (which
            // holds `out.len() * group * 2` bytes) and writes groups `16b..16b + 16` of
            // `out`.
            unsafe {
                let s = src.as_ptr().add(b * group * 32);
                for line in 0..group / 2 {
                    crate::simd::prefetch_ahead(s.add(64 * line));
                }
                let m = if group == 16 {
                    block::<16>(s)
                } else {
                    block::<32>(s)
                };
                _mm256_storeu_si256(out.as_mut_ptr().add(16 * b).cast(), m);
            }
        }
        blocks * 16
    }
}
