//! The portable instruction set: [`Vector`] over sixteen plain `u32` lanes.
//!
//! Every operation is a loop over the lanes in plain Rust, written so that LLVM vectorises it for
//! whatever the target has (SSE2 on baseline x86-64, NEON on aarch64, SIMD128 on wasm). Where Rust's
//! own conversions leave NaN bits open, the rule's bits are written explicitly. This is what CPUs
//! without a dedicated instruction set run, and it is always available.

use super::steps::{self, Step};
use super::vector::Vector;
use super::KeyRun;

/// Lanes per vector: eight keep a few vectors in SSE2's sixteen registers without spilling
/// (measured against sixteen on the x86-64 baseline).
const N: usize = 8;

/// `N` 32-bit lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes([u32; N]);

impl Lanes {
    #[inline(always)]
    fn map(self, f: impl Fn(u32) -> u32) -> Lanes {
        let mut out = [0; N];
        for (o, x) in out.iter_mut().zip(self.0) {
            *o = f(x);
        }
        Lanes(out)
    }

    #[inline(always)]
    fn zip(self, other: Lanes, f: impl Fn(u32, u32) -> u32) -> Lanes {
        let mut out = [0; N];
        for ((o, x), y) in out.iter_mut().zip(self.0).zip(other.0) {
            *o = f(x, y);
        }
        Lanes(out)
    }

    #[inline(always)]
    fn from_fn(f: impl Fn(usize) -> u32) -> Lanes {
        let mut out = [0; N];
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(i);
        }
        Lanes(out)
    }
}

/// `N` bytes at `p + i * N`, as an array.
///
/// # Safety
/// `p + i * N .. p + (i + 1) * N` must be readable.
#[inline(always)]
unsafe fn read<const N: usize>(p: *const u8, i: usize) -> [u8; N] {
    // SAFETY: the caller's contract; `[u8; N]` has alignment 1.
    unsafe { p.add(i * N).cast::<[u8; N]>().read() }
}

/// Writes `bytes` at `p`: with the target's streaming stores when `STREAM` (x86-64's SSE2; an
/// ordinary store where the target has none on stable Rust).
///
/// # Safety
/// `p` must be valid for `bytes.len()` bytes of writes, and aligned to 16 when `STREAM`;
/// `bytes.len()` must be a multiple of 16.
#[inline(always)]
pub(super) unsafe fn put<const STREAM: bool>(p: *mut u8, bytes: &[u8]) {
    // SAFETY: the caller's contract.
    unsafe {
        if STREAM {
            super::x86::stream(p, bytes)
        } else {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len())
        }
    }
}

/// `words` as little-endian bytes at `p` (as [`put`]).
///
/// # Safety
/// As [`put`], for `4 * W` bytes.
#[inline(always)]
unsafe fn put_u32<const STREAM: bool, const W: usize>(p: *mut u8, words: [u32; W]) {
    let words = words.map(u32::to_le);
    // SAFETY: the caller's contract.
    unsafe { put::<STREAM>(p, bytemuck::cast_slice(&words)) }
}

/// f64 → f32 as the scalar rule (`formats::f64_to_f32`): nearest-even, NaN quieted keeping its
/// sign and top payload bits.
#[inline(always)]
fn f64_to_f32_bits(b: u64) -> u32 {
    let x = f64::from_bits(b);
    let nan = ((b >> 63) as u32) << 31 | 0x7FC0_0000 | ((b >> 29) as u32 & 0x3F_FFFF);
    if x.is_nan() {
        nan
    } else {
        (x as f32).to_bits()
    }
}

impl Vector for Lanes {
    const LANES: usize = N;
    type Mask = Lanes;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller's contract: 4 * N readable bytes.
        Lanes::from_fn(|i| u32::from_le_bytes(unsafe { read::<4>(p, i) }))
    }
    #[inline(always)]
    unsafe fn load_u16(p: *const u8) -> Self {
        // SAFETY: the caller's contract: 2 * N readable bytes.
        Lanes::from_fn(|i| u32::from(u16::from_le_bytes(unsafe { read::<2>(p, i) })))
    }
    #[inline(always)]
    unsafe fn load_u8(p: *const u8) -> Self {
        // SAFETY: the caller's contract: N readable bytes.
        Lanes::from_fn(|i| u32::from(unsafe { read::<1>(p, i) }[0]))
    }
    #[inline(always)]
    unsafe fn store<const STREAM: bool>(self, p: *mut u8) {
        // SAFETY: the caller's contract: 4 * N writable bytes, aligned when streaming.
        unsafe { put_u32::<STREAM, N>(p, self.0) }
    }
    #[inline(always)]
    unsafe fn store_u16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
        // Narrowing into an array (not assembling 32-bit lanes) is what SSE2 vectorises well.
        let mut halves = [0u16; 2 * N];
        for (h, x) in halves.iter_mut().zip(a.0.into_iter().chain(b.0)) {
            *h = (x as u16).to_le();
        }
        // SAFETY: the caller's contract: 4 * N writable bytes, aligned when streaming.
        unsafe { put::<STREAM>(p, bytemuck::cast_slice(&halves)) }
    }
    #[inline(always)]
    unsafe fn store_i16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
        // A saturating narrowing, which the caller's lanes never reach, is SSE2's `packssdw`
        // (indexed halves: a chained iterator here is not vectorised).
        let narrow = |x: u32| (x as i32).clamp(i16::MIN.into(), i16::MAX.into()) as i16 as u16;
        let mut halves = [0u16; 2 * N];
        for i in 0..N {
            halves[i] = narrow(a.0[i]).to_le();
            halves[N + i] = narrow(b.0[i]).to_le();
        }
        // SAFETY: the caller's contract: 4 * N writable bytes, aligned when streaming.
        unsafe { put::<STREAM>(p, bytemuck::cast_slice(&halves)) }
    }
    #[inline(always)]
    unsafe fn store_u8<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
        let mut bytes = [[0u8; N]; 4];
        for (part, v) in bytes.iter_mut().zip([a, b, c, d]) {
            for (byte, x) in part.iter_mut().zip(v.0) {
                *byte = x as u8;
            }
        }
        let bytes = bytes.as_flattened();
        // SAFETY: the caller's contract: 4 * N writable bytes, aligned when streaming.
        unsafe { put::<STREAM>(p, bytes) }
    }
    #[inline(always)]
    unsafe fn load_u4(p: *const u8) -> [Self; 2] {
        // SAFETY: the caller's contract: N readable bytes.
        let bytes = unsafe { read::<N>(p, 0) };
        let code = |i: usize| u32::from(bytes[i / 2] >> (4 * (i % 2)) & 0xF);
        [Lanes::from_fn(code), Lanes::from_fn(|i| code(N + i))]
    }
    #[inline(always)]
    unsafe fn load_u6(p: *const u8) -> [Self; 4] {
        // SAFETY: the caller's contract: 3 * N readable bytes.
        let bytes = unsafe { read::<{ 3 * N }>(p, 0) };
        // Group g's three bytes as one 24-bit word; element 4g + k is its bits 6k..6k + 6.
        let code = |i: usize| {
            let g = &bytes[3 * (i / 4)..];
            let word = u32::from(g[0]) | u32::from(g[1]) << 8 | u32::from(g[2]) << 16;
            word >> (6 * (i % 4)) & 0x3F
        };
        [0, 1, 2, 3].map(|k| Lanes::from_fn(|i| code(k * N + i)))
    }
    #[inline(always)]
    unsafe fn store_u4<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
        let codes = [a.0, b.0, c.0, d.0];
        let codes = codes.as_flattened();
        let mut bytes = [0u8; 2 * N];
        for (byte, pair) in bytes.iter_mut().zip(codes.chunks_exact(2)) {
            *byte = (pair[0] | pair[1] << 4) as u8;
        }
        // SAFETY: the caller's contract: 2 * N writable bytes, aligned when streaming.
        unsafe { put::<STREAM>(p, &bytes) }
    }
    #[inline(always)]
    unsafe fn store_u6(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
        let codes = [a.0, b.0, c.0, d.0];
        let codes = codes.as_flattened();
        let mut bytes = [0u8; 3 * N];
        for (group, four) in bytes.chunks_exact_mut(3).zip(codes.chunks_exact(4)) {
            let word = four[0] | four[1] << 6 | four[2] << 12 | four[3] << 18;
            group.copy_from_slice(&word.to_le_bytes()[..3]);
        }
        // SAFETY: the caller's contract: 3 * N writable bytes.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) }
    }
    #[inline(always)]
    unsafe fn load_f64_as_f32(p: *const u8) -> Self {
        // SAFETY: the caller's contract: 8 * N readable bytes.
        let wide: [u64; N] =
            core::array::from_fn(|i| u64::from_le_bytes(unsafe { read::<8>(p, i) }));
        // Without NaNs (nearly always), the plain conversion: a loop LLVM vectorises (a fold,
        // not `any`: a short-circuiting test is not vectorised).
        if !wide
            .iter()
            .fold(false, |nan, &b| nan | f64::from_bits(b).is_nan())
        {
            return Lanes::from_fn(|i| (f64::from_bits(wide[i]) as f32).to_bits());
        }
        Lanes::from_fn(|i| f64_to_f32_bits(wide[i]))
    }
    #[inline(always)]
    unsafe fn load_f64_as_f32_odd(p: *const u8) -> Self {
        Lanes::from_fn(|i| {
            // SAFETY: the caller's contract: 8 * N readable bytes.
            let b = u64::from_le_bytes(unsafe { read::<8>(p, i) });
            let x = f64::from_bits(b);
            let t = f64_to_f32_bits(b);
            let back = f64::from(f32::from_bits(t));
            // Rounded away from zero: one step back towards it (inf back to the largest finite);
            // then the last bit set where inexact. Ordered compares: false for NaN.
            let t = if back.abs() > x.abs() { t - 1 } else { t };
            t | u32::from(back != x && !x.is_nan())
        })
    }
    #[inline(always)]
    unsafe fn store_f32_as_f64<const STREAM: bool>(self, p: *mut u8) {
        // Each f64 as its two 32-bit words, the NaN fix-up chosen word by word with a mask from
        // the f32 bits: selects of 32-bit lanes vectorise where 64-bit compares are missing (SSE2).
        let mut words = [0u32; 2 * N];
        // Without NaNs (nearly always), the plain conversion: a loop LLVM vectorises (`cvtps2pd`
        // on SSE2), stored as it is — split into 32-bit words, it went through general registers.
        // (A fold, not `any`: a short-circuiting test is not vectorised.)
        let nan = (self.0.iter()).fold(false, |nan, &b| nan | ((b & 0x7FFF_FFFF) > 0x7F80_0000));
        if !nan {
            let wide: [u64; N] = self
                .0
                .map(|b| f64::from(f32::from_bits(b)).to_bits().to_le());
            // SAFETY: the caller's contract: 8 * N writable bytes, aligned when streaming.
            return unsafe { put::<STREAM>(p, bytemuck::cast_slice(&wide)) };
        }
        for (pair, b) in words.chunks_exact_mut(2).zip(self.0) {
            let w = f64::from(f32::from_bits(b)).to_bits();
            let nan = (b & 0x7FFF_FFFF) > 0x7F80_0000;
            // The NaN of `formats::f32_to_f64`: sign, quiet exponent, payload moved up 29 bits.
            let hi = b & 0x8000_0000 | 0x7FF8_0000 | (b & 0x7F_FFFF) >> 3;
            pair[0] = if nan { b << 29 } else { w as u32 };
            pair[1] = if nan { hi } else { (w >> 32) as u32 };
        }
        // SAFETY: the caller's contract: 8 * N writable bytes, aligned when streaming.
        unsafe { put_u32::<STREAM, { 2 * N }>(p, words) }
    }
    #[inline(always)]
    unsafe fn load_i64_low(p: *const u8) -> Self {
        // SAFETY: the caller's contract: 8 * N readable bytes.
        Lanes::from_fn(|i| u64::from_le_bytes(unsafe { read::<8>(p, i) }) as u32)
    }
    #[inline(always)]
    unsafe fn load_i64_high(p: *const u8) -> Self {
        // SAFETY: the caller's contract: 8 * N readable bytes.
        Lanes::from_fn(|i| (u64::from_le_bytes(unsafe { read::<8>(p, i) }) >> 32) as u32)
    }
    #[inline(always)]
    unsafe fn store_i32_as_i64<const STREAM: bool>(self, p: *mut u8) {
        // Stored as 64-bit words, as `store_f32_as_f64` stores them.
        let wide: [u64; N] = self.0.map(|x| (i64::from(x as i32) as u64).to_le());
        // SAFETY: the caller's contract: 8 * N writable bytes, aligned when streaming.
        unsafe { put::<STREAM>(p, bytemuck::cast_slice(&wide)) }
    }

    #[inline(always)]
    unsafe fn splat(x: u32) -> Self {
        Lanes([x; N])
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        self.zip(o, u32::wrapping_add)
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        self.zip(o, u32::wrapping_sub)
    }
    #[inline(always)]
    unsafe fn and(self, o: Self) -> Self {
        self.zip(o, |x, y| x & y)
    }
    #[inline(always)]
    unsafe fn or(self, o: Self) -> Self {
        self.zip(o, |x, y| x | y)
    }
    #[inline(always)]
    unsafe fn xor(self, o: Self) -> Self {
        self.zip(o, |x, y| x ^ y)
    }
    #[inline(always)]
    unsafe fn shl<const K: i32>(self) -> Self {
        self.map(|x| x << K)
    }
    #[inline(always)]
    unsafe fn sra<const K: i32>(self) -> Self {
        self.map(|x| ((x as i32) >> K) as u32)
    }
    #[inline(always)]
    unsafe fn shr<const K: i32>(self) -> Self {
        self.map(|x| x >> K)
    }
    #[inline(always)]
    unsafe fn min_i32(self, o: Self) -> Self {
        self.zip(o, |x, y| (x as i32).min(y as i32) as u32)
    }
    #[inline(always)]
    unsafe fn max_i32(self, o: Self) -> Self {
        self.zip(o, |x, y| (x as i32).max(y as i32) as u32)
    }
    #[inline(always)]
    unsafe fn gt_i32(self, o: Self) -> Self::Mask {
        self.zip(o, |x, y| if (x as i32) > (y as i32) { !0 } else { 0 })
    }
    #[inline(always)]
    unsafe fn eq(self, o: Self) -> Self::Mask {
        self.zip(o, |x, y| if x == y { !0 } else { 0 })
    }
    #[inline(always)]
    unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
        Lanes::from_fn(|i| yes.0[i] & m.0[i] | no.0[i] & !m.0[i])
    }
    #[inline(always)]
    unsafe fn none(m: Self::Mask) -> bool {
        // A fold, not `all`: a short-circuiting test is not vectorised.
        m.0.iter().fold(0, |any, &x| any | x) == 0
    }

    #[inline(always)]
    unsafe fn f32_add(self, o: Self) -> Self {
        self.zip(o, |x, y| (f32::from_bits(x) + f32::from_bits(y)).to_bits())
    }
    #[inline(always)]
    unsafe fn f32_max(self, o: Self) -> Self {
        // `maxps`'s operand order (the comparison false for NaN gives `o`).
        self.zip(o, |x, y| {
            if f32::from_bits(x) > f32::from_bits(y) {
                x
            } else {
                y
            }
        })
    }
    #[inline(always)]
    unsafe fn f32_mul(self, o: Self) -> Self {
        self.zip(o, |x, y| (f32::from_bits(x) * f32::from_bits(y)).to_bits())
    }
    #[inline(always)]
    unsafe fn cvtt_f32_i32(self) -> Self {
        self.map(|b| {
            let x = f32::from_bits(b);
            if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
                // SAFETY: x is finite and truncates into the i32 range.
                (unsafe { x.to_int_unchecked::<i32>() }) as u32
            } else {
                i32::MIN as u32
            }
        })
    }
    #[inline(always)]
    unsafe fn i32_to_f32(self) -> Self {
        self.map(|x| (x as i32 as f32).to_bits())
    }
}

/// The portable kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
pub(crate) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    // (Plain Rust and the baseline's hints: no CPU requirement beyond `steps::run`'s contract.)
    super::drive_portable::<K, ALWAYS_STREAM>(
        src,
        dst,
        Lanes::LANES * K::VECTORS,
        [steps::run::<Lanes, K, false>, steps::run::<Lanes, K, true>],
    );
}

/// The portable kernel of step `K` (a 4- or 8-byte source) that screens as it converts, streaming.
pub(crate) fn screened<K: Step>(src: &[u8], dst: &mut [u8], screen: KeyRun) -> bool {
    let lanes = Lanes::LANES * K::VECTORS;
    super::drive::<K, true>(
        src,
        dst,
        lanes,
        true,
        super::x86::STREAMS,
        Some(screen),
        |s, d, n, stream| {
            let (s, d) = (s.as_ptr(), d.as_mut_ptr());
            // SAFETY: as in `kernel`; the step's source is 4 or 8 bytes (`pick_screened`).
            unsafe {
                match (stream, screen.float) {
                    (true, true) => steps::run_screened::<Lanes, K, true, true>(s, d, n, screen),
                    (true, false) => steps::run_screened::<Lanes, K, true, false>(s, d, n, screen),
                    // A destination that cannot stream (misaligned elements): the plain loop,
                    // then the scalar screen.
                    (false, _) => {
                        steps::run::<Lanes, K, false>(s, d, n);
                        !screen.any_inside(
                            core::slice::from_raw_parts(s, <K::S as crate::lanes::Lane>::SIZE * n),
                            <K::S as crate::lanes::Lane>::SIZE,
                        )
                    }
                }
            }
        },
    )
}
