//! float16 ↔ bfloat16 on the portable instruction set, as 16-bit lane arithmetic.
//!
//! Where both formats hold a value as a normal number, converting it is a change of exponent
//! bias and of mantissa width on the magnitude's bits: float16 → bfloat16 drops three mantissa
//! bits (rounded to nearest-even by adding `3 + lsb` before the shift; a carry into the exponent
//! is the right result), bfloat16 → float16 adds three (exact). Zero is zero either way. Every
//! other element — float16 subnormals, inf and NaN; bfloat16 values outside float16's normal
//! range, inf and NaN — is rare in weights, so a step of sixteen elements holding one takes the
//! scalar rules instead. SSE2 has no float16 conversion; a few integer operations on eight
//! 16-bit lanes at a time beat a load per element. Measured on the x86-64 baseline (64M
//! elements, 2 threads, portable ÷ AVX2 in one run): 0.48–0.60 looked up (the lookup kernel's
//! chunks of indices and staged output around this same arithmetic), 1.00–1.05 here.

use dtcast_dtype::DType;

use super::portable::put;
use super::steps::Step;
use crate::formats::{BF16, F16};

/// Lanes per step: two SSE2 registers, one NEON pair.
const N: usize = 16;

/// Mantissa bits float16 has more than bfloat16 (their fields come from the dtype table's rows).
const DROP: u32 = F16.man_bits - BF16.man_bits;
/// bfloat16's biased exponent less float16's, at bfloat16's exponent position.
const REBIAS: u16 = ((BF16.bias - F16.bias) as u16) << BF16.man_bits;
/// The magnitude bits of both.
const MAG: u16 = 0x7FFF;

/// Which way a kernel converts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// float16 → bfloat16.
    Narrow,
    /// bfloat16 → float16.
    Widen,
}

impl Direction {
    const fn of(from: DType, to: DType) -> Option<Direction> {
        match (from, to) {
            (DType::Float16, DType::BFloat16) => Some(Direction::Narrow),
            (DType::BFloat16, DType::Float16) => Some(Direction::Widen),
            _ => None,
        }
    }

    /// The nonzero source magnitudes the arithmetic serves, `low..=high`.
    const fn plain(self) -> (u16, u16) {
        match self {
            // A normal float16: from the smallest normal up to the largest finite.
            Direction::Narrow => (1 << F16.man_bits, F16.max_mag as u16),
            // A bfloat16 whose exponent is one of float16's normal exponents.
            Direction::Widen => (
                REBIAS + (1 << BF16.man_bits),
                REBIAS + ((F16.max_mag as u16) >> DROP),
            ),
        }
    }
}

/// Whether the portable kernels run `from` → `to` here.
pub(crate) const fn applies(from: DType, to: DType) -> bool {
    Direction::of(from, to).is_some()
}

/// `N` elements at `s` converted into `d` (little-endian both), as the scalar rule does (through
/// an exact float32): float16 → bfloat16 rounds the low mantissa bits to nearest-even, a carry
/// moving into the exponent; bfloat16 → float16 inside the range is exact. False, with `d`
/// unspecified, where an element is neither zero nor plain.
#[inline(always)]
fn step(direction: Direction, s: &[u8; 2 * N], d: &mut [u16; N]) -> bool {
    let (low, high) = direction.plain();
    let mut fallback = 0u16;
    for (out, b) in d.iter_mut().zip(s.as_chunks::<2>().0) {
        let x = u16::from_le_bytes(*b);
        let m = x & MAG;
        fallback |= u16::from(m != 0 && !(low..=high).contains(&m));
        let y = match direction {
            Direction::Narrow => {
                let (half, odd) = ((1 << (DROP - 1)) - 1, (m >> DROP) & 1);
                ((m + half + odd) >> DROP) + REBIAS
            }
            Direction::Widen => m.wrapping_sub(REBIAS) << DROP,
        };
        *out = (x & !MAG | if m == 0 { 0 } else { y }).to_le();
    }
    fallback == 0
}

/// The loop over `n` elements (a multiple of `N`), streaming when `STREAM` (then `d` is
/// aligned to 64 bytes).
///
/// # Safety
/// `2 * n` bytes readable at `s` and writable at `d`.
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    use crate::lanes::Lane;
    let Some(direction) = Direction::of(K::S::DTYPE, K::D::DTYPE) else {
        unreachable!("rebias16 kernels are picked for float16 <-> bfloat16 only")
    };
    let scalar = super::scalar::<K>();
    // SAFETY: the caller's contract.
    let (src, dst) = unsafe {
        (
            core::slice::from_raw_parts(s, 2 * n),
            core::slice::from_raw_parts_mut(d, 2 * n),
        )
    };
    let (src, _) = src.as_chunks::<{ 2 * N }>();
    let (dst, _) = dst.as_chunks_mut::<{ 2 * N }>();
    for (s, d) in src.iter().zip(dst) {
        let mut out = [0u16; N];
        if step(direction, s, &mut out) {
            // SAFETY: `d` holds the 2 * N bytes, aligned when streaming (every step is 32
            // bytes on from a 64-byte boundary).
            unsafe { put::<STREAM>(d.as_mut_ptr(), bytemuck::cast_slice(&out)) };
        } else {
            scalar(s, d);
        }
    }
    if STREAM {
        super::x86::store_fence();
    }
}

/// The portable kernel of step `K`, float16 ↔ bfloat16 ([`applies`]) (streaming into any
/// destination if `ALWAYS_STREAM`).
pub(crate) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    super::drive_portable::<K, ALWAYS_STREAM>(src, dst, N, [run::<K, false>, run::<K, true>]);
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::super::steps::{Bf16ToF16, F16ToBf16};
    use super::*;

    /// Every 16-bit pattern in order, and each again among fifteen plain neighbours (so that a
    /// plain one or a zero is computed, at every lane, and not sent to the scalar rules with its
    /// neighbours), plain and streaming, against step `K`'s scalar rules.
    fn matches_the_rules<K: Step>() {
        use crate::lanes::Lane;
        let one = if K::S::DTYPE == DType::Float16 {
            0x3C00
        } else {
            0x3F80
        };
        let spread = (0..=u16::MAX).flat_map(|p| {
            let mut chunk = [one; N];
            chunk[usize::from(p) % N] = p;
            chunk
        });
        let src: Vec<u8> = (0..=u16::MAX)
            .chain(spread)
            .flat_map(u16::to_le_bytes)
            .collect();
        let n = src.len() / 2;
        let mut expected = vec![0u8; src.len()];
        super::super::scalar::<K>()(&src, &mut expected);
        for stream in [false, true] {
            let mut out = vec![0u128; src.len() / 16 + 4];
            let d = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut out)[..];
            let offset = d.as_ptr().align_offset(64);
            let d = &mut d[offset..offset + src.len()];
            // SAFETY: `n` elements (a multiple of N) in both buffers; `d` is aligned.
            unsafe {
                if stream {
                    run::<K, true>(src.as_ptr(), d.as_mut_ptr(), n);
                } else {
                    run::<K, false>(src.as_ptr(), d.as_mut_ptr(), n);
                }
            }
            if let Some(i) = (0..n).find(|&i| d[2 * i..2 * i + 2] != expected[2 * i..2 * i + 2]) {
                let at = |b: &[u8]| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]);
                panic!(
                    "{} -> {}, streaming {stream}: {:#06x} gave {:#06x}, not {:#06x}",
                    K::S::DTYPE,
                    K::D::DTYPE,
                    at(&src),
                    at(d),
                    at(&expected)
                );
            }
        }
    }

    fn float16_and_bfloat16_on_word_lanes_match_the_rules_on_every_pattern() {
        matches_the_rules::<F16ToBf16<false>>();
        matches_the_rules::<F16ToBf16<true>>();
        matches_the_rules::<Bf16ToF16<false>>();
        matches_the_rules::<Bf16ToF16<true>>();
    }

    crate::self_test::list!(float16_and_bfloat16_on_word_lanes_match_the_rules_on_every_pattern);
}
