//! The portable instantiation of the 16-bit-lane narrowing (`words.rs`): [`Words`] over sixteen
//! plain `u16` lanes, every method a loop that LLVM vectorises for the target (SSE2 on baseline
//! x86-64: two registers a vector; NEON; SIMD128).
//!
//! The baseline has no variable shifts: the rounding below the smallest normal is a float32
//! addition ([`words::Quanta::float_bits`]), as in AVX2's instantiation. Against the variable
//! shift built from float exponents that it replaced: 64M elements, 2 threads, two interleaved
//! runs, bfloat16 → float8_e4m3fn 4.6–5.1 → 5.0–6.1 Gelem/s, float16 → float8_e4m3fn 4.7–4.9 →
//! 5.4–5.9.

use dtcast_dtype::DType;

use super::portable::put;
use super::steps::Step;
use super::words::{self, inline_all, Words};

/// Lanes per vector: as many as AVX2's instantiation (two SSE2 registers, one NEON pair).
const N: usize = 16;

/// `N` 16-bit lanes.
#[derive(Clone, Copy)]
struct Plain16([u16; N]);

impl Plain16 {
    #[inline(always)]
    fn zip(self, o: Plain16, f: impl Fn(u16, u16) -> u16) -> Plain16 {
        let mut out = [0; N];
        for ((r, x), y) in out.iter_mut().zip(self.0).zip(o.0) {
            *r = f(x, y);
        }
        Plain16(out)
    }

    #[inline(always)]
    fn map(self, f: impl Fn(u16) -> u16) -> Plain16 {
        Plain16(self.0.map(f))
    }
}

/// All ones where `c`.
#[inline(always)]
fn mask(c: bool) -> u16 {
    0u16.wrapping_sub(u16::from(c))
}

// Every method: plain Rust, no CPU requirement (the trait's `unsafe` is for the other sets).
impl Words for Plain16 {
    const LANES: usize = N;
    // Measured on the x86-64 baseline (one thread, in cache, bfloat16 → float8_e4m3): the
    // rounding below the smallest normal took about 40% of the time of a vector without such
    // lanes.
    const SKIPS_SUBNORMAL_ROUNDING: bool = true;
    type Mask = Plain16;
    inline_all! {
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 2 * N readable bytes.
            let words = unsafe { p.cast::<[u16; N]>().read_unaligned() };
            Plain16(words.map(u16::from_le))
        }
        unsafe fn put<const STREAM: bool>(low: Self, high: Self, bits: usize, p: *mut u8) {
            // Indexed halves: a chained iterator here is not vectorised.
            let mut codes = [0u8; 2 * N];
            for i in 0..N {
                codes[i] = low.0[i] as u8;
                codes[N + i] = high.0[i] as u8;
            }
            // The caller's contract: `2 * N * bits / 8` writable bytes at `p`, aligned to their
            // size when streaming (8 and 4 bits: 32 and 16 bytes).
            match bits {
                // SAFETY: the contract above, for 32 bytes.
                8 => unsafe { put::<STREAM>(p, &codes) },
                // float6 is not selected (`applies`: the tables measured faster, since packing
                // lane by lane kept LLVM from vectorising the rounding); plain loops, tested like
                // the rest.
                6 => {
                    let mut bytes = [0u8; 3 * N / 2];
                    for (group, four) in bytes.chunks_exact_mut(3).zip(codes.chunks_exact(4)) {
                        let word = u32::from(four[0])
                            | u32::from(four[1]) << 6
                            | u32::from(four[2]) << 12
                            | u32::from(four[3]) << 18;
                        group.copy_from_slice(&word.to_le_bytes()[..3]);
                    }
                    // SAFETY: the contract above, for 24 bytes.
                    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) }
                }
                _ => {
                    let mut bytes = [0u8; N];
                    for (byte, two) in bytes.iter_mut().zip(codes.chunks_exact(2)) {
                        *byte = two[0] | two[1] << 4;
                    }
                    // SAFETY: the contract above, for 16 bytes.
                    unsafe { put::<STREAM>(p, &bytes) }
                }
            }
        }
        unsafe fn splat(v: u16) -> Self {
            Plain16([v; N])
        }
        unsafe fn and(self, o: Self) -> Self {
            self.zip(o, |x, y| x & y)
        }
        unsafe fn or(self, o: Self) -> Self {
            self.zip(o, |x, y| x | y)
        }
        unsafe fn xor(self, o: Self) -> Self {
            self.zip(o, |x, y| x ^ y)
        }
        unsafe fn add(self, o: Self) -> Self {
            self.zip(o, u16::wrapping_add)
        }
        unsafe fn min(self, o: Self) -> Self {
            self.zip(o, u16::min)
        }
        unsafe fn max(self, o: Self) -> Self {
            self.zip(o, u16::max)
        }
        unsafe fn shr(self, k: u16) -> Self {
            self.map(|x| x >> k)
        }
        unsafe fn quanta(self, q: words::Quanta) -> Self {
            // Float32 addition (see `Quanta::float_bits`), which every target vectorises; counts
            // past 2^16 (overflow, inf, NaN: the caller's) saturate.
            let whole = f32::from_bits(q.float_bits);
            self.map(|a| {
                let sum = f32::from_bits(u32::from(a) << q.widen) + whole;
                (sum.to_bits() - q.float_bits).min(0xFFFF) as u16
            })
        }
        unsafe fn below(self, o: Self) -> Self::Mask {
            // Lanes below 2^15: a signed compare (SSE2 has it) is the unsigned one.
            self.zip(o, |x, y| mask((x as i16) < (y as i16)))
        }
        unsafe fn above(self, o: Self) -> Self::Mask {
            self.zip(o, |x, y| mask((x as i16) > (y as i16)))
        }
        unsafe fn eq(self, o: Self) -> Self::Mask {
            self.zip(o, |x, y| mask(x == y))
        }
        unsafe fn count(self, m: Self::Mask) -> Self {
            // A mask lane is 0xFFFF where it holds.
            self.zip(m, u16::wrapping_sub)
        }
        unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
            let mut out = [0; N];
            for (((r, y), n), m) in out.iter_mut().zip(yes.0).zip(no.0).zip(m.0) {
                *r = y & m | n & !m;
            }
            Plain16(out)
        }
        unsafe fn none(m: Self::Mask) -> bool {
            m.0.iter().fold(0, |any, &x| any | x) == 0
        }
    }
}

/// [`words::run`] on the portable lanes, a float32 source folded into 16 bits as it is loaded.
///
/// # Safety
/// As [`words::run`].
#[inline(always)]
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: the caller's contract; each load reads N elements.
    unsafe {
        if matches!(<K::S as crate::lanes::Lane>::DTYPE, DType::Float32) {
            words::run_loading::<Plain16, K, STREAM>(s, d, n, |p| {
                let words = p.cast::<[u32; N]>().read_unaligned();
                Plain16(words.map(|x| words::fold32(u32::from_le(x))))
            })
        } else {
            words::run::<Plain16, K, STREAM>(s, d, n)
        }
    }
}

/// Whether `from` → `to` narrows on the portable word lanes: a word-lane pair (`words::applies`),
/// or float32 folded into 16 bits (`words::applies_folded32`), into whole bytes or into float4
/// (whose codes are a count of seven compares, `words::counts`). Into float6 the tables
/// (`lookup.rs`) stay: on the x86-64 baseline, 64M elements, 2 threads, bfloat16 →
/// float6_e2m3fn ran 0.7–0.8 Gelem/s on word lanes against 4.1–4.8 looked up (0.6–0.7 still
/// with the float32 rounding and eight vectors packed at a time, whether the packing squeezes
/// 32-bit or 64-bit words: LLVM's code for that loop is not understood yet); float16/bfloat16
/// → float4_e2m1fn ran 2.5–3.3 looked up against 3.9–4.6 counted.
pub(crate) const fn applies(from: DType, to: DType) -> bool {
    (words::applies(from, to) || matches!(from, DType::Float32) && words::applies_folded32(to))
        && (to.bits() == 8 || words::counts(from, to))
}

/// The portable word-lane kernel of step `K` (streaming into any destination if
/// `ALWAYS_STREAM`).
pub(crate) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    let step = words::step_elements::<Plain16>(<K::D as crate::lanes::Lane>::DTYPE.bits());
    super::drive_portable::<K, ALWAYS_STREAM>(src, dst, step, [run::<K, false>, run::<K, true>]);
}

#[cfg(test)]
mod tests {
    use super::super::ml_steps::{Bf16ToE2M1Fn, Bf16ToE2M3Fn, F16ToE3M2Fn, F16ToE4M3, F32ToE3M4};
    use super::super::steps::{Bf16ToE4M3Fn, F32ToE4M3Fn};
    use super::*;

    /// Every 16-bit pattern through the portable word lanes, plain and streaming, against step
    /// `K`'s scalar rules: the pairs the tables serve too (packed destinations), which the kernel
    /// tests through `select` do not reach on this instruction set. Float32 sources: every
    /// 16-bit pattern as the top half, with each of the low halves that decide a rounding (0, 1,
    /// 0x7FFF, 0x8000, 0xFFFF).
    fn matches_the_rules<K: Step>() {
        let (from, to) = (
            <K::S as crate::lanes::Lane>::DTYPE,
            <K::D as crate::lanes::Lane>::DTYPE,
        );
        let src: Vec<u8> = if from == DType::Float32 {
            [0u32, 1, 0x7FFF, 0x8000, 0xFFFF]
                .into_iter()
                .flat_map(|low| (0..=u16::MAX).map(move |top| u32::from(top) << 16 | low))
                .flat_map(u32::to_le_bytes)
                .collect()
        } else {
            (0..=u16::MAX).flat_map(u16::to_le_bytes).collect()
        };
        let n = src.len() / (from.bits() / 8);
        let bytes = to.storage_bytes(n).unwrap();
        let mut expected = vec![0u8; bytes];
        super::super::scalar::<K>()(&src, &mut expected);
        for stream in [false, true] {
            // 64-byte aligned, as streaming stores need.
            let mut out = vec![0u128; bytes.div_ceil(16) + 4];
            let d = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut out)[..];
            let offset = d.as_ptr().align_offset(64);
            let d = &mut d[offset..offset + bytes];
            // SAFETY: `n` elements (a multiple of 2 * N) in both buffers; `d` is aligned.
            unsafe {
                if stream {
                    run::<K, true>(src.as_ptr(), d.as_mut_ptr(), n)
                } else {
                    run::<K, false>(src.as_ptr(), d.as_mut_ptr(), n)
                }
            }
            assert!(d == &expected[..], "{from} -> {to}, streaming {stream}");
        }
    }

    #[test]
    fn the_portable_word_lanes_match_the_rules_on_every_16_bit_pattern() {
        matches_the_rules::<Bf16ToE4M3Fn<false>>();
        matches_the_rules::<Bf16ToE4M3Fn<true>>();
        matches_the_rules::<F16ToE4M3<false>>();
        matches_the_rules::<Bf16ToE2M3Fn<false>>();
        matches_the_rules::<F16ToE3M2Fn<true>>();
        matches_the_rules::<Bf16ToE2M1Fn<false>>();
        matches_the_rules::<Bf16ToE2M1Fn<true>>();
        matches_the_rules::<F32ToE4M3Fn<false>>();
        matches_the_rules::<F32ToE3M4<true>>();
    }
}
