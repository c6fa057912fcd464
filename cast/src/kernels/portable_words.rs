//! The portable instantiation of the 16-bit-lane narrowing (`words.rs`): [`Words`] over sixteen
//! plain `u16` lanes, every method a loop that LLVM vectorises for the target (SSE2 on baseline
//! x86-64: two registers a vector; NEON; SIMD128).
//!
//! The baseline has no variable shifts: the rounding below the smallest normal is a float32
//! addition ([`words::Quanta::float_bits`]), as in AVX2's instantiation (faster than the
//! variable shift built from float exponents it replaced).

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
    // On the x86-64 baseline the rounding below the smallest normal costs a large share of a
    // vector's time (as variable shifts, and as the float32 addition still does), and real
    // data's vectors rarely hold such lanes: always rounding there halved the speed. Skipping
    // infinity and NaN too (`codes`' plain vectors) saves instructions on every vector.
    const SKIPS_RARE_LANES: bool = true;
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
                // float6 goes through `run6` (bytes, then packed), never here.
                6 => unreachable!("6-bit codes are packed by `run6`"),
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
            // past 2^15 (overflow, inf, NaN: the caller's) saturate there, by the signed
            // saturation every target narrows with in one instruction (SSE2's `packssdw`, NEON's
            // `sqxtn`; an unsigned one is four on SSE2). The count is never negative: the sum
            // is at least the number added.
            let whole = f32::from_bits(q.float_bits);
            let mut out = [0; N];
            for (r, a) in out.iter_mut().zip(self.0) {
                let sum = f32::from_bits(u32::from(a) << q.widen) + whole;
                let count = sum.to_bits().wrapping_sub(q.float_bits) as i32;
                *r = count.clamp(i16::MIN.into(), i16::MAX.into()) as u16;
            }
            Plain16(out)
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
        unsafe fn within(self, lo: u16, hi: u16) -> bool {
            // One test of both compares (signed: lanes below 2^15).
            let (lo, hi) = (lo as i16, hi as i16);
            let outside = self
                .0
                .iter()
                .fold(0, |any, &x| any | mask((x as i16) < lo || (x as i16) > hi));
            outside == 0
        }
    }
}

/// [`words::run`] on the portable lanes, a float32 source folded into 16 bits as it is loaded;
/// 6-bit codes by [`run6`].
///
/// # Safety
/// As [`words::run`].
#[inline(always)]
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    let float32 = matches!(<K::S as crate::lanes::Lane>::DTYPE, DType::Float32);
    let six = <K::D as crate::lanes::Lane>::BITS == 6;
    // The loops below call these with N source elements inside the source.
    // SAFETY: as above.
    let folded = |p| unsafe { load_folded(p) };
    // SAFETY: as above.
    let plain = |p| unsafe { Plain16::load(p) };
    // SAFETY: the caller's contract.
    unsafe {
        match (float32, six) {
            (true, false) => words::run_loading::<Plain16, K, STREAM>(s, d, n, folded),
            (true, true) => run6::<K, STREAM>(s, d, n, folded),
            (false, false) => words::run::<Plain16, K, STREAM>(s, d, n),
            (false, true) => run6::<K, STREAM>(s, d, n, plain),
        }
    }
}

/// `N` float32 elements at `p`, folded into 16 bits ([`words::fold32`]).
///
/// # Safety
/// `p` must be readable for `4 * N` bytes.
#[inline(always)]
unsafe fn load_folded(p: *const u8) -> Plain16 {
    // SAFETY: the caller's contract.
    let words = unsafe { p.cast::<[u32; N]>().read_unaligned() };
    Plain16(words.map(|x| words::fold32(u32::from_le(x))))
}

/// Elements whose 6-bit codes [`run6`] holds as bytes at a time (2 KiB of float32 source, 768
/// bytes of output: in L1 both).
const STAGE: usize = 1024;

/// [`words::run`] into 6-bit codes, in two loops a stage at a time: the codes as bytes into a
/// buffer (the rounding vectorised, as into float8), then the buffer packed four codes into three
/// bytes by 64-bit shifts ([`pack6`]). Packing each vector pair's codes where they are computed
/// made LLVM gather the bytes one at a time (a loop of thousands of instructions, slower than
/// the tables).
///
/// # Safety
/// As [`words::run`] (`n` a multiple of `words::step_elements`, 128); `load` reads `N` source
/// elements.
#[inline(always)]
unsafe fn run6<K: Step, const STREAM: bool>(
    s: *const u8,
    d: *mut u8,
    n: usize,
    load: impl Fn(*const u8) -> Plain16,
) {
    let size = const { <K::S as crate::lanes::Lane>::DTYPE.bits() / 8 };
    let mut codes = [0u8; STAGE];
    let mut packed = [0u8; STAGE * 6 / 8];
    let mut i = 0;
    while i < n {
        let m = (n - i).min(STAGE);
        // SAFETY: elements i..i + m lie inside the source; `codes` holds m bytes.
        unsafe { codes_of::<K>(s.add(size * i), &mut codes[..m], &load) };
        pack6(&codes[..m], &mut packed[..m * 6 / 8]);
        // SAFETY: the output of elements i..i + m lies in `d`; at a 64-byte-aligned `d` (when
        // streaming) plus a multiple of 96 bytes it is aligned to 32, and its length is a
        // multiple of 96 (m a multiple of 128): `put`'s contract.
        unsafe { put::<STREAM>(d.add(i * 6 / 8), &packed[..m * 6 / 8]) };
        i += m;
    }
    if STREAM {
        super::x86::store_fence();
    }
}

/// The codes of `codes.len()` source elements at `s` (a multiple of `2 * N`), one a byte: the
/// loop of [`words::run`] into bytes, prefetching as it does (faster with it at sizes past the
/// cache). `#[inline(never)]` was the first try against the slowdown that [`barrier`]
/// describes and did not help alone; it stays, not re-measured without it.
///
/// # Safety
/// `s` must be readable for `codes.len()` source elements; `load` reads `N` of them.
#[inline(never)]
unsafe fn codes_of<K: Step>(s: *const u8, codes: &mut [u8], load: &impl Fn(*const u8) -> Plain16) {
    let Some(rule) = (const {
        words::step_rule(
            <K::S as crate::lanes::Lane>::DTYPE,
            <K::D as crate::lanes::Lane>::DTYPE,
            K::SATURATE,
        )
    }) else {
        unreachable!("a word-lane pair (`applies`)")
    };
    let size = const { <K::S as crate::lanes::Lane>::DTYPE.bits() / 8 };
    let mut j = 0;
    while j < codes.len() {
        barrier();
        // SAFETY: j + 2 * N <= codes.len(): inside the source and `codes`.
        unsafe {
            let sp = s.add(size * j);
            super::prefetch_ahead(sp, size * 2 * N / 64);
            let low = words::codes(load(sp), rule);
            let high = words::codes(load(sp.add(size * N)), rule);
            Plain16::put::<false>(low, high, 8, codes.as_mut_ptr().add(j));
        }
        j += 2 * N;
    }
}

/// Nothing, where LLVM's loop vectoriser must not go: an empty `asm!` in a loop body keeps it
/// from vectorising across the loop's iterations. Without it, [`codes_of`]'s loop over vector
/// pairs was vectorised eight iterations at a time, every element loaded on its own (a function
/// ten times the size, and as many times slower) — the lanes are already the vector. (`words::run`'s loop, fast on x86
/// without a barrier, has a prefetch hint in that place, which may do the same there.)
#[inline(always)]
fn barrier() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: no instructions.
    unsafe {
        core::arch::asm!("", options(nomem, nostack, preserves_flags))
    };
}

/// 6-bit codes (one a byte, `codes.len()` a multiple of 32) packed as `dtcast_dtype::packing`
/// lays float6 out: four codes in three bytes, the first in the low bits. Eight codes are one
/// 64-bit word, squeezed to 48 bits in three steps (pairs, fours, eights); four such words are
/// three.
#[inline(always)]
fn pack6(codes: &[u8], packed: &mut [u8]) {
    #[inline(always)]
    fn squeeze(x: u64) -> u64 {
        let x = (x & 0x003F_003F_003F_003F) | (x >> 2 & 0x0FC0_0FC0_0FC0_0FC0);
        let x = (x & 0x0000_0FFF_0000_0FFF) | (x >> 4 & 0x00FF_F000_00FF_F000);
        (x & 0x00FF_FFFF) | (x >> 8 & 0xFFFF_FF00_0000)
    }
    for (out, four) in packed.chunks_exact_mut(24).zip(codes.chunks_exact(32)) {
        let mut w = [0u64; 4];
        for (k, word) in w.iter_mut().enumerate() {
            let mut eight = [0u8; 8];
            eight.copy_from_slice(&four[8 * k..8 * k + 8]);
            *word = squeeze(u64::from_le_bytes(eight));
        }
        let three = [
            w[0] | w[1] << 48,
            w[1] >> 16 | w[2] << 32,
            w[2] >> 32 | w[3] << 16,
        ];
        for (o, word) in out.chunks_exact_mut(8).zip(three) {
            o.copy_from_slice(&word.to_le_bytes());
        }
    }
}

/// Whether `from` → `to` narrows on the portable word lanes: a word-lane pair (`words::applies`),
/// or float32 folded into 16 bits (`words::applies_folded32`), into whole bytes, float6 with
/// three exponent bits ([`run6`]) or float4 (whose codes are a count of seven compares,
/// `words::counts`) — where they beat the tables (`lookup.rs`) on the x86-64 baseline.
/// float6_e2m3fn, whose smallest normal is 1, has its lanes below it in most vectors of real
/// data, where the lanes round on the slow path: it is looked up (faster on both of the bench's
/// samples); float6_e3m2fn stays on the lanes. float16/bfloat16 → float4_e2m1fn are looked up
/// since the tables pack 16-bit sources' codes straight from the source (`lookup.rs`); from
/// float32, whose table index is folded, the lanes stay.
pub(crate) const fn applies(from: DType, to: DType) -> bool {
    const fn float6_lanes(to: DType) -> bool {
        to.bits() == 6
            && match to.float_format() {
                Some(f) => f.exponent_bits >= 3,
                None => false,
            }
    }
    // float4 from float32 only: from the 16-bit floats the table now packs straight from the
    // source (see above).
    const fn float4_lanes(from: DType, to: DType) -> bool {
        words::counts(from, to) && matches!(from, DType::Float32)
    }
    (words::applies(from, to) || matches!(from, DType::Float32) && words::applies_folded32(to))
        && (to.bits() == 8 || float6_lanes(to) || float4_lanes(from, to))
}

/// The portable word-lane kernel of step `K` (streaming into any destination if
/// `ALWAYS_STREAM`).
pub(crate) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    let step = words::step_elements::<Plain16>(<K::D as crate::lanes::Lane>::BITS);
    super::drive_portable::<K, ALWAYS_STREAM>(src, dst, step, [run::<K, false>, run::<K, true>]);
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::super::ml_steps::{
        Bf16ToE2M1Fn, Bf16ToE2M3Fn, F16ToE2M3Fn, F16ToE3M2Fn, F16ToE4M3, F32ToE2M3Fn, F32ToE3M2Fn,
        F32ToE3M4,
    };
    use super::super::steps::{Bf16ToE4M3Fn, F16ToE5M2, F32ToE4M3Fn};
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

    fn the_portable_word_lanes_match_the_rules_on_every_16_bit_pattern() {
        matches_the_rules::<Bf16ToE4M3Fn<false>>();
        matches_the_rules::<Bf16ToE4M3Fn<true>>();
        matches_the_rules::<F16ToE4M3<false>>();
        matches_the_rules::<F16ToE5M2<false>>();
        matches_the_rules::<F16ToE5M2<true>>();
        matches_the_rules::<Bf16ToE2M3Fn<false>>();
        matches_the_rules::<F16ToE2M3Fn<true>>();
        matches_the_rules::<F16ToE3M2Fn<true>>();
        matches_the_rules::<F32ToE2M3Fn<false>>();
        matches_the_rules::<F32ToE3M2Fn<true>>();
        matches_the_rules::<Bf16ToE2M1Fn<false>>();
        matches_the_rules::<Bf16ToE2M1Fn<true>>();
        matches_the_rules::<F32ToE4M3Fn<false>>();
        matches_the_rules::<F32ToE3M4<true>>();
    }

    crate::self_test::list!(the_portable_word_lanes_match_the_rules_on_every_16_bit_pattern);
}
