//! The largest magnitude of every group of a run of 16-bit float groups (bfloat16 or float16;
//! NVFP4: 16 elements, MXFP4 and MXFP8: 32) on AVX-512 and AVX2. A group's magnitudes compare as
//! 16-bit integers (sign bit cleared: both formats order their magnitudes as their bits), and instead of a horizontal reduction per group — four or five shuffles for
//! every two groups — a tree of register permutes folds K vectors of K-element groups into one
//! vector holding the 32 groups' maxima: each level pairs two vectors, takes the first and
//! second half of every segment with one two-register permute each, and keeps the larger (three
//! instructions per pair and level, about 0.1 per element). AVX2 has no two-register permute:
//! its tree pairs lanes within 128-bit halves by unpacks (`x86::avx2`), 16 groups a block. The
//! loop over the groups ([`portable`]), which LLVM vectorises a group at a time (on AVX2 as slow
//! as the encoding after it), is the definition both are held to.

/// The largest magnitude bits (`bits & 0x7FFF`) of each group of `group` (16 or 32) bfloat16 or
/// float16 elements in `src` (whole groups, little-endian), one per entry of `out`. A group
/// holding a NaN gives more than the format's infinity (`0x7F80`, `0x7C00`: what the caller
/// looks for before reading the value).
pub(crate) fn group_maxima(src: &[u8], group: usize, out: &mut [u16]) {
    debug_assert_eq!(src.len(), out.len() * group * 2);
    #[cfg(target_arch = "x86_64")]
    if matches!(group, 16 | 32) && (crate::lookup4::avx512() || crate::lookup4::avx2()) {
        let done = if crate::lookup4::avx512() {
            // SAFETY: `avx512()` says this CPU runs AVX-512 F, BW, VL and DQ.
            unsafe { x86::group_maxima(src, group, out) }
        } else {
            // SAFETY: `avx2()` says this CPU runs AVX2.
            unsafe { x86::avx2::group_maxima(src, group, out) }
        };
        portable(&src[done * group * 2..], group, &mut out[done..]);
        return;
    }
    // Vectorised for the chosen set (AVX2: sixteen 16-bit lanes instead of SSE2's eight).
    crate::simd::with_best_isa(
        #[inline(always)]
        || portable(src, group, out),
    );
}

/// [`group_maxima`] as a loop over the groups.
#[inline(always)]
pub(crate) fn portable(src: &[u8], group: usize, out: &mut [u16]) {
    for (g, m) in src.chunks_exact(group * 2).zip(out) {
        *m = (g.as_chunks::<2>().0.iter()).fold(0, |m, &b| m.max(u16::from_le_bytes(b) & 0x7FFF));
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86::amax16 as x86;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_gives_every_groups_maximum() {
        let mut random = crate::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut next = move || random() as u16;
        for group in [16, 32] {
            // Whole blocks of 32 groups and a tail; the maximum at every position of a group,
            // negative values (the sign bit is no magnitude), NaN and inf patterns.
            for groups in [1, 31, 32, 33, 64, 100] {
                let mut values: Vec<u16> = (0..groups * group).map(|_| next() & 0xBFFF).collect();
                for g in 0..groups {
                    let at = g * group + (g * 7) % group;
                    values[at] = [0x4000 + g as u16, 0xC000 | g as u16, 0x7F80, 0xFFC1][g % 4];
                }
                let src: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                let (mut got, mut want) = (vec![0u16; groups], vec![0u16; groups]);
                group_maxima(&src, group, &mut got);
                for (g, w) in want.iter_mut().enumerate() {
                    *w = values[g * group..(g + 1) * group]
                        .iter()
                        .map(|v| v & 0x7FFF)
                        .max()
                        .unwrap();
                }
                assert_eq!(got, want, "group {group}, {groups} groups");
                portable(&src, group, &mut got);
                assert_eq!(got, want, "portable, group {group}, {groups} groups");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    got.fill(0);
                    // SAFETY: the CPU runs AVX2.
                    let done = unsafe { x86::avx2::group_maxima(&src, group, &mut got) };
                    assert_eq!(done, groups / 16 * 16);
                    assert_eq!(
                        got[..done],
                        want[..done],
                        "AVX2, group {group}, {groups} groups"
                    );
                }
            }
        }
    }
}
