//! NVFP4's and compressed-tensors' MX float4 codes by comparisons with each group's row of
//! thresholds on AVX-512 (three comparisons an element, the rows picked by in-lane byte
//! shuffles) and AVX2 (the same search, a group of 16 a register); the thresholds and the
//! definition are in [`crate::thresholds`].

use core::arch::x86_64::*;

use crate::thresholds::{ZeroSign, INF_NAN, NONZERO, ROW};

/// The 16-bit `vpshufb` index of word `i` (0..8) of a 128-bit lane: its bytes `2i`, `2i + 1`.
const fn word(i: usize) -> i16 {
    (0x0100 + 0x0202 * i) as i16
}

/// `c + v` in the lanes of `k`, `c` elsewhere: one masked `vpaddw`, written as assembly
/// because LLVM otherwise rebuilds it as an or and a blend, two instructions, on the hottest
/// line of NVFP4's encoding.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn mask_add(c: __m512i, k: __mmask32, v: __m512i) -> __m512i {
    let mut out = c;
    // SAFETY: AVX-512 BW by the caller's contract; registers only.
    unsafe {
        core::arch::asm!(
            "vpaddw {o}{{{k}}}, {o}, {v}",
            o = inout(zmm_reg) out,
            k = in(kreg) k,
            v = in(zmm_reg) v,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    out
}

/// The codes (one per 16-bit lane) of 32 bfloat16 elements `x`, each under the thresholds
/// in words 0..8 of its own 128-bit lane of `near` (a row's first eight words: `NONZERO`
/// and the code steps, which `vpshufb` picks within a lane, one cheap instruction); where
/// `CHECK`, lanes whose element or scaled value is inf or NaN are added to `bad`, by the
/// `INF_NAN` word of the rows in `full` (lanes 0..16 under words 0..16, lanes 16..32 under
/// words 16..32). The sign is kept as `zero` says.
#[inline(always)]
unsafe fn codes<const CHECK: bool>(
    x: __m512i,
    near: __m512i,
    full: __m512i,
    fixed: &Fixed,
    zero: ZeroSign,
    bad: &mut __mmask32,
) -> __m512i {
    // SAFETY: AVX-512 F and BW by the caller's contract.
    unsafe {
        let set = |v: i16| _mm512_set1_epi16(v);
        let m = _mm512_and_si512(x, set(0x7FFF));
        if CHECK {
            // Each lane's own row: word i of the upper half is word 16 + i of `full`.
            let base =
                _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(ROW as i16));
            let at = _mm512_add_epi16(base, set(INF_NAN as i16));
            *bad |= _mm512_cmpge_epu16_mask(m, _mm512_permutexvar_epi16(at, full));
        }
        let reached = |i: __m512i| _mm512_cmpge_epu16_mask(m, _mm512_shuffle_epi8(near, i));
        // The magnitude code, bit by bit: 4, then 2 and 1 above what is found, counted in
        // steps of `word(1) - word(0)` so that `c + word(k)` picks word `code + k`.
        let step = word(1) - word(0);
        let c = _mm512_maskz_mov_epi16(reached(fixed.four), set(4 * step));
        let c = mask_add(c, reached(_mm512_add_epi16(c, set(word(2)))), set(2 * step));
        let c = mask_add(c, reached(_mm512_add_epi16(c, set(word(1)))), set(step));
        // The sign; compressed-tensors drops it from a scaled value of zero. Still in steps
        // (at most 15 * 0x0202, positive as `pack`'s signed multiply needs): `pack` shifts
        // after pairing. (A shift here, before `mask_add` was assembly, had LLVM rebuild the
        // last masked add as a mask-to-vector, two shifts and an or.)
        let negative = _mm512_movepi16_mask(x);
        let signed = match zero {
            ZeroSign::Keep => negative,
            ZeroSign::DropAtZero => _mm512_mask_test_epi16_mask(negative, m, m),
            ZeroSign::DropBelowNonzero => negative & reached(fixed.nonzero),
        };
        mask_add(c, signed, set(8 * step))
    }
}

/// The `vpshufb` indices that do not depend on the element, built once per call where LLVM
/// cannot see that they are constants: it would otherwise turn each shuffle by a constant
/// into two (`vpshuflw`/`vpshufhw` and `vpshufd`).
struct Fixed {
    four: __m512i,
    nonzero: __m512i,
}

impl Fixed {
    #[inline(always)]
    unsafe fn new() -> Fixed {
        // SAFETY: AVX-512 F by the caller's contract.
        unsafe {
            Fixed {
                four: core::hint::black_box(_mm512_set1_epi16(word(4))),
                nonzero: core::hint::black_box(_mm512_set1_epi16(word(NONZERO))),
            }
        }
    }
}

/// 32 codes (16-bit lanes, each `code * 0x0202`) packed into 16 bytes, the first of each
/// pair in the low nibble: each pair's `first + 16 * second` (times 0x0202, at most
/// `255 * 0x0202`) by one multiply-add, shifted down by 9 (`v * 0x0202 >> 9` is `v` for `v`
/// below 256), then each 32-bit lane's low byte.
#[inline(always)]
unsafe fn pack(c: __m512i) -> __m128i {
    // SAFETY: AVX-512 F and BW by the caller's contract.
    unsafe {
        let pairs = _mm512_madd_epi16(c, _mm512_set1_epi32(0x0010_0001));
        _mm512_cvtepi32_epi8(_mm512_srli_epi32::<9>(pairs))
    }
}

/// [`crate::thresholds::encode`] on AVX-512 for any group size and bound, each group's scale byte
/// `pick(g)`; line `i` of `src` is read with a prefetch of line `i` at `ahead`.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `pick` may be called with every group of `out`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn encode_any(
    src: &[u8],
    group: usize,
    bounded: bool,
    pick: impl FnMut(usize) -> u8,
    rows: &[[u16; ROW]; 256],
    zero: ZeroSign,
    out: &mut [u8],
    ahead: *const u8,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        match (group, bounded) {
            (16, true) => encode::<16, false>(src, pick, rows, zero, out, ahead),
            (16, false) => encode::<16, true>(src, pick, rows, zero, out, ahead),
            (_, true) => encode::<32, false>(src, pick, rows, zero, out, ahead),
            (_, false) => encode::<32, true>(src, pick, rows, zero, out, ahead),
        }
    }
}

/// [`crate::thresholds::encode`] on AVX-512, for groups of `G` (16 or 32): a constant, so the loop has
/// no branch on it; group `g`'s scale byte is `pick(g)`. Where `CHECK` is false the caller
/// knows that no element is inf or NaN and none scales to either, and nothing is reported.
///
/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ; `pick` may be called with every group of `out`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn encode<const G: usize, const CHECK: bool>(
    src: &[u8],
    mut pick: impl FnMut(usize) -> u8,
    rows: &[[u16; ROW]; 256],
    zero: ZeroSign,
    out: &mut [u8],
    ahead: *const u8,
) -> bool {
    let mut bad: __mmask32 = 0;
    let row = |b: u8| rows[usize::from(b)].as_ptr();
    let steps = out.len() / 16;
    // SAFETY: AVX-512 by the caller's contract.
    let fixed = unsafe { Fixed::new() };
    // SAFETY: step `k` reads bytes 64k..64k + 64 of `src` (32 elements: `out` holds half a
    // byte per element, and `k < steps`), and rows of 32 bytes each.
    let mut step = |k: usize, bad: &mut __mmask32| unsafe {
        // The scale bytes of the step's 32 elements: groups 2k and 2k + 1, or group k.
        let (b0, b1) = if G == 16 {
            (pick(2 * k), pick(2 * k + 1))
        } else {
            let b = pick(k);
            (b, b)
        };
        let low = _mm512_broadcast_i32x4(_mm_loadu_si128(row(b0).cast()));
        let near = if G == 16 {
            _mm512_mask_broadcast_i32x4(low, 0xFF00, _mm_loadu_si128(row(b1).cast()))
        } else {
            low
        };
        let full = if CHECK {
            _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(row(b0).cast())),
                _mm256_loadu_si256(row(b1).cast()),
            )
        } else {
            near
        };
        crate::simd::prefetch_line(ahead.wrapping_add(64 * k));
        let x = _mm512_loadu_si512(src.as_ptr().add(64 * k).cast());
        pack(codes::<CHECK>(x, near, full, &fixed, zero, bad))
    };
    // SAFETY: as `write_steps` asks: `steps` 16-byte results for `out`.
    unsafe { crate::x86::encode4::write_steps(out, steps, |k| step(k, &mut bad)) };
    if !out.len().is_multiple_of(16) {
        // A last group of 16: the low half of a vector, 8 bytes out.
        // SAFETY: bytes 64k..64k + 32 of `src` and 16k..16k + 8 of `out`, inside both.
        unsafe {
            let b = row(pick(2 * steps));
            let near = _mm512_broadcast_i32x4(_mm_loadu_si128(b.cast()));
            let full = _mm512_castsi256_si512(_mm256_loadu_si256(b.cast()));
            let x = _mm512_zextsi256_si512(_mm256_loadu_si256(src.as_ptr().add(64 * steps).cast()));
            let mut reported: __mmask32 = 0;
            let packed = pack(codes::<CHECK>(x, near, full, &fixed, zero, &mut reported));
            // Lanes 16..32 hold no element (and no row: nothing of theirs is reported).
            bad |= reported & 0xFFFF;
            _mm_storel_epi64(out.as_mut_ptr().add(16 * steps).cast(), packed);
        }
    }
    // (Through the safe helper: under Rust 1.89, the declared minimum, the intrinsic is an
    // unsafe call here.)
    crate::lookup4::store_fence();
    bad == 0
}

/// The same comparisons on AVX2: a group of 16 elements per 256-bit register (16-bit
/// lanes), its row's first eight words in both 128-bit lanes so that `vpshufb` picks the
/// thresholds; AVX2 compares signed 16-bit lanes only, which serves because magnitudes and
/// thresholds are below 0x8000, and says "not reached" (`t > m`) rather than "reached".
pub(crate) mod avx2 {
    use core::arch::x86_64::*;

    use super::word;
    use crate::thresholds::{ZeroSign, INF_NAN, NONZERO, ROW};

    /// The codes (16-bit lanes) of 16 elements `x` under the thresholds of `near` (a row's
    /// first eight words in each 128-bit lane); where `CHECK`, whether one is at least
    /// `bad_at` (the row's `INF_NAN` word) is or-ed into `bad` (as lanes of all ones). `four`:
    /// every lane `word(4)`, built once by the caller where LLVM cannot see a constant (it
    /// would turn the shuffle by it into two instructions, as on AVX-512). The sign is kept
    /// as `zero` says.
    #[inline(always)]
    unsafe fn codes<const CHECK: bool>(
        x: __m256i,
        near: __m256i,
        four: __m256i,
        bad_at: i16,
        zero: ZeroSign,
        bad: &mut __m256i,
    ) -> __m256i {
        // SAFETY: AVX2 by the caller's contract.
        unsafe {
            let set = |v: i16| _mm256_set1_epi16(v);
            let m = _mm256_and_si256(x, set(0x7FFF));
            if CHECK {
                // m >= bad_at, as m > bad_at - 1 (0 - 1 is -1: every m).
                let reached = _mm256_cmpgt_epi16(m, set(bad_at.wrapping_sub(1)));
                *bad = _mm256_or_si256(*bad, reached);
            }
            // Lanes where `m` is below the threshold that index `i` picks.
            let below = |i: __m256i| _mm256_cmpgt_epi16(_mm256_shuffle_epi8(near, i), m);
            let step = word(1) - word(0);
            let c = _mm256_andnot_si256(below(four), set(4 * step));
            let next = _mm256_add_epi16(c, set(word(2)));
            let c = _mm256_add_epi16(c, _mm256_andnot_si256(below(next), set(2 * step)));
            let next = _mm256_add_epi16(c, set(word(1)));
            let c = _mm256_add_epi16(c, _mm256_andnot_si256(below(next), set(step)));
            // `code * 0x0202` to `code`.
            let c = _mm256_srli_epi16::<9>(c);
            // The sign (8) where negative; compressed-tensors drops it from a scaled zero.
            let negative = _mm256_srai_epi16::<15>(x);
            let signed = match zero {
                ZeroSign::Keep => negative,
                ZeroSign::DropAtZero => {
                    _mm256_andnot_si256(_mm256_cmpeq_epi16(m, _mm256_setzero_si256()), negative)
                }
                ZeroSign::DropBelowNonzero => {
                    _mm256_andnot_si256(below(set(word(NONZERO))), negative)
                }
            };
            _mm256_or_si256(c, _mm256_and_si256(signed, set(8)))
        }
    }

    /// Two groups' codes (16-bit lanes each) packed into 16 bytes, the first of each pair in
    /// the low nibble, `a`'s first.
    #[inline(always)]
    unsafe fn pack(a: __m256i, b: __m256i) -> __m128i {
        // SAFETY: AVX2 by the caller's contract.
        unsafe {
            // The codes as bytes, each 128-bit half packing its own lanes: a0-7 b0-7 |
            // a8-15 b8-15.
            let codes = _mm256_packus_epi16(a, b);
            // Each pair of bytes as `first + 16 * second` in a 16-bit lane (at most 255).
            let pairs = _mm256_maddubs_epi16(codes, _mm256_set1_epi16(0x1001));
            // As bytes (each half twice): dword 0 holds a0-7's, 1 b0-7's, 4 a8-15's and 5
            // b8-15's, put in that order.
            let bytes = _mm256_packus_epi16(pairs, pairs);
            let order = _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5);
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(bytes, order))
        }
    }

    /// [`crate::thresholds::encode`] on AVX2 for groups of 16 or 32 and either bound, group `g`'s
    /// scale byte `pick(g)`.
    ///
    /// # Safety
    /// The CPU runs AVX2; `pick` may be called with every group of `out`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn encode_any(
        src: &[u8],
        group: usize,
        bounded: bool,
        pick: impl FnMut(usize) -> u8,
        rows: &[[u16; ROW]; 256],
        zero: ZeroSign,
        out: &mut [u8],
        ahead: *const u8,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe {
            match (bounded, group) {
                (true, 16) => encode::<false, 1>(src, pick, rows, zero, out, ahead),
                (false, 16) => encode::<true, 1>(src, pick, rows, zero, out, ahead),
                (true, _) => encode::<false, 2>(src, pick, rows, zero, out, ahead),
                (false, _) => encode::<true, 2>(src, pick, rows, zero, out, ahead),
            }
        }
    }

    /// [`encode_any`] with the inf/NaN check or without (`CHECK`), for groups of
    /// `16 * HALVES` elements (a known count, so that finding a half's group is a shift, not
    /// a division, and a group of 32 picks its row once).
    ///
    /// # Safety
    /// As [`encode_any`].
    #[target_feature(enable = "avx2")]
    unsafe fn encode<const CHECK: bool, const HALVES: usize>(
        src: &[u8],
        mut pick: impl FnMut(usize) -> u8,
        rows: &[[u16; ROW]; 256],
        zero: ZeroSign,
        out: &mut [u8],
        ahead: *const u8,
    ) -> bool {
        let mut bad = _mm256_setzero_si256();
        // Every 16 elements (8 bytes out) under one row: groups of 32 are two such halves.
        let halves = out.len() / 8;
        let four = core::hint::black_box(_mm256_set1_epi16(word(4)));
        // SAFETY: half `h` reads bytes 32h..32h + 32 of `src` (which holds 4 bytes per byte
        // of `out`); a row is 32 bytes.
        let half = |h: usize, row: &[u16; ROW], bad: &mut __m256i| unsafe {
            let near = _mm256_broadcastsi128_si256(_mm_loadu_si128(row.as_ptr().cast()));
            let x = _mm256_loadu_si256(src.as_ptr().add(32 * h).cast());
            codes::<CHECK>(x, near, four, row[INF_NAN] as i16, zero, bad)
        };
        let mut h = 0;
        while h + 2 <= halves {
            let first = &rows[usize::from(pick(h / HALVES))];
            // Two halves of one group, or two groups of 16.
            let second = if HALVES == 2 {
                first
            } else {
                &rows[usize::from(pick(h + 1))]
            };
            // The two halves are one line of `src` where it is aligned to 64 bytes.
            crate::simd::prefetch_line(ahead.wrapping_add(32 * h));
            let (a, b) = (half(h, first, &mut bad), half(h + 1, second, &mut bad));
            // SAFETY: bytes 8h..8h + 16 of `out`, inside it.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().add(8 * h).cast(), pack(a, b)) };
            h += 2;
        }
        if h < halves {
            let a = half(h, &rows[usize::from(pick(h / HALVES))], &mut bad);
            // SAFETY: bytes 8h..8h + 8 of `out`, inside it.
            unsafe { _mm_storel_epi64(out.as_mut_ptr().add(8 * h).cast(), pack(a, a)) };
        }
        _mm256_testz_si256(bad, bad) == 1
    }
}
