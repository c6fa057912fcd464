//! The conversion algorithms of the hot pairs, written once over [`Vector`].
//!
//! A [`Step`] converts `V::LANES * VECTORS` elements of one pair in one rounding; the instruction
//! sets instantiate every step with their vector type inside their own `#[target_feature]` loop.
//! The rules are the scalar ones of `lanes.rs` / `formats.rs` / `rules.rs`; comments say which.

use crate::lanes::{Bool, E4M3Fn, Lane, BF16, E5M2, F16};

use super::vector::Vector;
use super::KeyRun;
use crate::formats;

/// One pair's conversion, `V::LANES * VECTORS` elements at a time.
pub(crate) trait Step {
    /// The source lane.
    type S: Lane;
    /// The destination lane.
    type D: Lane;
    /// Saturate mode's rules (else Torch mode's); the scalar kernel for the tail follows it.
    const SATURATE: bool;
    /// Source vectors per step.
    const VECTORS: usize;
    /// Converts one step's elements from `s` to `d` (streaming stores when `STREAM`).
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set; `s` and `d` must be valid for one step's elements;
    /// when `STREAM`, `d` must be aligned to 64 bytes.
    unsafe fn step<V: Vector, const STREAM: bool>(s: *const u8, d: *mut u8);
}

/// Converts `n` elements (a multiple of the step) from `s` to `d`, prefetching the source a few
/// KiB ahead.
///
/// # Safety
/// As [`Step::step`], for all `n` elements.
#[inline(always)]
pub(crate) unsafe fn run<V: Vector, K: Step, const STREAM: bool>(
    s: *const u8,
    d: *mut u8,
    n: usize,
) {
    // Sizes in bits, so that packed sides fit: a step is a multiple of 8 elements, whole bytes.
    let (sb, db) = (K::S::BITS, K::D::BITS);
    let per = V::LANES * K::VECTORS;
    let lines = (per * sb / 8).div_ceil(64);
    let mut i = 0;
    while i < n {
        // SAFETY: i + per <= n, so the step's elements lie inside both buffers; the caller
        // aligned `d` for streams, and each step's output is a whole number of 64-byte lines
        // or of vectors no wider than 64 bytes.
        unsafe {
            let sp = s.add(i * sb / 8);
            super::x86::prefetch_ahead(sp, lines);
            K::step::<V, STREAM>(sp, d.add(i * db / 8));
        }
        i += per;
    }
    if STREAM {
        super::x86::store_fence();
    }
}

/// [`run`] that also screens the source as it goes (a 4- or 8-byte source: a step's source is
/// `VECTORS` vectors of lanes, loaded once more from L1 just before the step converts them):
/// whether no element's key lies in the failing run of `screen` (see [`KeyRun`]).
///
/// # Safety
/// As [`run`]; `K::S` must be 4 or 8 bytes.
#[inline(always)]
pub(crate) unsafe fn run_screened<V: Vector, K: Step, const STREAM: bool, const FLOAT: bool>(
    s: *const u8,
    d: *mut u8,
    n: usize,
    screen: KeyRun,
) -> bool {
    debug_assert!(matches!(K::S::SIZE, 4 | 8));
    let (sb, db) = (K::S::BITS, K::D::BITS);
    let per = V::LANES * K::VECTORS;
    let lines = (per * sb / 8).div_ceil(64);
    let wide = K::S::SIZE == 8;
    // SAFETY: the caller's contract: the CPU has `V`'s instruction set.
    let mut screen_state = unsafe { Screening::<V>::new(screen, wide) };
    let mut i = 0;
    while i < n {
        // SAFETY: as in `run` (the screen loads the step's own source bytes).
        unsafe {
            let sp = s.add(i * sb / 8);
            super::x86::prefetch_ahead(sp, lines);
            let mut k = 0;
            while k < K::VECTORS {
                if wide {
                    screen_state.add64::<FLOAT>(sp.add(8 * V::LANES * k));
                } else {
                    screen_state.add32::<FLOAT>(sp.add(4 * V::LANES * k));
                }
                k += 1;
            }
            K::step::<V, STREAM>(sp, d.add(i * db / 8));
        }
        i += per;
    }
    if STREAM {
        super::x86::store_fence();
    }
    // SAFETY: as above.
    unsafe { screen_state.clear() }
}

/// The top bit of a 32-bit lane: flipping it turns unsigned order into signed order.
const TOP: u32 = 0x8000_0000;

/// What [`run_screened`] keeps of the elements it has screened so far.
#[derive(Clone, Copy)]
struct Screening<V: Vector> {
    run: KeyRun,
    wide: bool,
    /// 32-bit keys: the least key plus [`KeyRun::shift32`]; 64-bit keys: nonzero lanes where an
    /// element was in the run.
    seen: V,
    /// The run's constants as vectors. 32-bit keys: the mask and the shift. 64-bit keys: the
    /// mask's low and high words, the start's low word (top bit flipped) and high word, and the
    /// length's low and high words (top bits flipped).
    consts: [V; 6],
}

impl<V: Vector> Screening<V> {
    /// # Safety
    /// The CPU must have `V`'s instruction set.
    #[inline(always)]
    unsafe fn new(run: KeyRun, wide: bool) -> Self {
        let words = |x: u64| (x as u32, (x >> 32) as u32);
        let ((mask_lo, mask_hi), (lo_lo, lo_hi), (len_lo, len_hi)) =
            (words(run.mask), words(run.lo), words(run.len));
        // SAFETY: the caller's contract.
        unsafe {
            let (seen, consts) = if wide {
                (
                    V::splat(0),
                    [
                        V::splat(mask_lo),
                        V::splat(mask_hi),
                        V::splat(lo_lo ^ TOP),
                        V::splat(lo_hi),
                        V::splat(len_lo ^ TOP),
                        V::splat(len_hi ^ TOP),
                    ],
                )
            } else {
                let (mask, shift) = (V::splat(mask_lo), V::splat(run.shift32()));
                (
                    V::splat(i32::MAX as u32),
                    [mask, shift, mask, mask, mask, mask],
                )
            };
            Screening {
                run,
                wide,
                seen,
                consts,
            }
        }
    }

    /// Screens `LANES` 32-bit elements at `p`.
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set; `4 * LANES` bytes at `p` must be readable.
    #[inline(always)]
    unsafe fn add32<const FLOAT: bool>(&mut self, p: *const u8) {
        let [mask, shift, ..] = self.consts;
        // SAFETY: the caller's contract.
        unsafe {
            let x = V::load(p);
            let key = if FLOAT {
                x.xor(x.sra::<31>().or(V::splat(TOP)))
            } else {
                x.and(mask)
            };
            self.seen = self.seen.min_i32(key.add(shift));
        }
    }

    /// Screens `LANES` 64-bit elements at `p`: `key - lo <u len` on the keys' 32-bit halves.
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set; `8 * LANES` bytes at `p` must be readable.
    #[inline(always)]
    unsafe fn add64<const FLOAT: bool>(&mut self, p: *const u8) {
        let [mask_lo, mask_hi, lo_lo, lo_hi, len_lo, len_hi] = self.consts;
        // SAFETY: the caller's contract.
        unsafe {
            let (x_lo, x_hi) = (V::load_i64_low(p), V::load_i64_high(p));
            let (key_lo, key_hi) = if FLOAT {
                let negative = x_hi.sra::<31>();
                (x_lo.xor(negative), x_hi.xor(negative.or(V::splat(TOP))))
            } else {
                (x_lo.and(mask_lo), x_hi.and(mask_hi))
            };
            // t = key - lo: the low words' difference (the flipped top bits cancel), and the
            // high words' less one where the low word borrowed (key_lo <u lo_lo).
            let key_lo = key_lo.xor(V::splat(TOP));
            let t_lo = key_lo.sub(lo_lo);
            let borrow = V::select(lo_lo.gt_i32(key_lo), V::splat(1), V::splat(0));
            let t_hi = key_hi.sub(lo_hi).sub(borrow).xor(V::splat(TOP));
            let t_lo = t_lo.xor(V::splat(TOP));
            // Inside: t_hi <u len_hi, or t_hi == len_hi and t_lo <u len_lo (as signed compares
            // of the flipped words).
            let (ones, zero) = (V::splat(u32::MAX), V::splat(0));
            let low_inside = V::select(len_lo.gt_i32(t_lo), ones, zero);
            let inside = V::select(t_hi.eq(len_hi), low_inside, zero);
            let inside = V::select(len_hi.gt_i32(t_hi), ones, inside);
            self.seen = self.seen.or(inside);
        }
    }

    /// Whether no element screened was in the run.
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set.
    #[inline(always)]
    unsafe fn clear(self) -> bool {
        let mut lanes = [0u32; 16];
        // SAFETY: 16 lanes at most: `4 * LANES` bytes fit in 64.
        unsafe { self.seen.store::<false>(lanes.as_mut_ptr().cast()) };
        let lanes = &lanes[..V::LANES];
        if self.wide {
            lanes.iter().all(|&t| t == 0)
        } else {
            lanes.iter().all(|&t| !self.run.shifted_inside32(t))
        }
    }
}

/// Defines a [`Step`] `$name<SATURATE>`, one per rounding (so that the scalar tail follows the
/// mode); `$body` sees the source `$s` and destination `$d` pointers, the vector type `V`, the
/// consts `SATURATE` and `STREAM`, and `w`, the lanes of a vector.
macro_rules! step {
    ($name:ident<SATURATE>: $S:ty => $D:ty, vectors = $k:literal, |$s:ident, $d:ident, $w:ident| $body:block) => {
        pub(crate) struct $name<const SATURATE: bool>;
        impl<const SATURATE: bool> Step for $name<SATURATE> {
            type S = $S;
            type D = $D;
            const SATURATE: bool = SATURATE;
            const VECTORS: usize = $k;
            #[inline(always)]
            unsafe fn step<V: Vector, const STREAM: bool>($s: *const u8, $d: *mut u8) {
                // Not every step needs `w`.
                let $w = V::LANES;
                let _ = $w;
                // SAFETY: the caller's contract (`Step::step`).
                unsafe { $body }
            }
        }
    };
}

// ---- shared pieces

pub(crate) use step;

/// The lanes of `x` (f32 bits) that are NaN.
#[inline(always)]
pub(crate) unsafe fn is_nan<V: Vector>(x: V) -> V::Mask {
    // SAFETY: the caller's contract.
    unsafe { x.and(V::splat(0x7FFF_FFFF)).gt_i32(V::splat(0x7F80_0000)) }
}

/// f32 bits → bfloat16 codes (low halves), round to nearest-even (`formats::f32_to_bf16`); NaN
/// lanes get `nan`. Adding 0x7FFF plus the lowest kept bit rounds; overflow carries into inf.
#[inline(always)]
unsafe fn bf16_round<V: Vector>(x: V, nan: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let lsb = x.shr::<16>().and(V::splat(1));
        let rounded = x.add(V::splat(0x7FFF)).add(lsb).shr::<16>();
        V::select(is_nan(x), nan, rounded)
    }
}

/// The NaN Saturate mode writes for f32 bits `x` narrowed to bfloat16: sign and top payload
/// bits kept, quieted (`formats::f64_to_bf16_once`).
#[inline(always)]
unsafe fn bf16_quiet<V: Vector>(x: V) -> V {
    // SAFETY: the caller's contract.
    unsafe { x.shr::<16>().or(V::splat(0x40)) }
}

/// f32 bits → bfloat16 codes in Torch rounding (a NaN becomes `torch_nan`) or Saturate rounding
/// (a NaN keeps its sign and top payload bits).
#[inline(always)]
unsafe fn to_bf16<V: Vector, const SATURATE: bool>(x: V, torch_nan: u32) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let nan = if SATURATE {
            bf16_quiet(x)
        } else {
            V::splat(torch_nan)
        };
        bf16_round(x, nan)
    }
}

/// f32 magnitude bits `a` → the code of a narrower format with `MAN` mantissa bits and bias
/// `BIAS` (`SHIFT` = 23 - `MAN`), rounded to nearest-even, without lane masks. Normals: rebias the
/// exponent, add just under half an ulp plus the kept lsb, truncate. Subnormals: a float add of
/// 2^(24 - BIAS - MAN), whose f32 ulp is the format's subnormal quantum, rounds to nearest-even.
/// Each path gives a number at least as large as the right code where the other is the right one
/// (below the smallest normal the normal path is given the smallest normal; from it up the
/// float-add count of quanta grows faster than the code), so the minimum of the two is the code.
/// Overflow and inf come out above every finite code and are the caller's to fix, as NaN is (every
/// value but a NaN lane's is below 2^31, so signed and unsigned minima agree).
/// (`formats::Narrow::encode`.)
#[inline(always)]
pub(crate) unsafe fn narrow_magnitude<
    V: Vector,
    const MAN: u32,
    const BIAS: u32,
    const SHIFT: i32,
>(
    a: V,
) -> V {
    debug_assert_eq!(SHIFT as u32, 23 - MAN);
    // SAFETY: the caller's contract.
    unsafe {
        let normal = a.max_i32(V::splat((128 - BIAS) << 23));
        let odd = normal.shr::<SHIFT>().and(V::splat(1));
        let rebias = BIAS.wrapping_sub(127) << 23;
        let half = (1u32 << (SHIFT - 1)) - 1;
        let norm = normal
            .add(V::splat(rebias.wrapping_add(half)))
            .add(odd)
            .shr::<SHIFT>();
        let magic = V::splat((151 - BIAS - MAN) << 23);
        let sub = a.f32_add(magic).sub(magic);
        norm.min_i32(sub)
    }
}

/// The constants of a narrow format's SIMD rules (`MAN`, `BIAS`, `SHIFT` = 23 - `MAN`, the largest
/// finite magnitude code `MAX`, the sign bit `SIGN`, `TO_SIGN` = how far f32's sign bit moves right
/// to become it, `IEEE` = has inf, `SIGNED` = has a sign bit (`SIGN` is then the bit above an
/// unsigned format's code), `INF` = the code of inf, or `MAX` where the format has none) as
/// items of the enclosing block, all derived from a [`Narrow`](formats::Narrow) — the format's row
/// of the dtype table — so that no number in a kernel repeats a fact of the table.
macro_rules! narrow_constants {
    ($narrow:expr) => {
        #[allow(dead_code)]
        const N: $crate::formats::Narrow = $narrow;
        #[allow(dead_code)]
        const MAN: u32 = N.man_bits;
        #[allow(dead_code)]
        const BIAS: u32 = N.bias as u32;
        #[allow(dead_code)]
        const SHIFT: i32 = 23 - MAN as i32;
        #[allow(dead_code)]
        const MAX: u32 = N.max_mag;
        #[allow(dead_code)]
        const SIGN: u32 = 1 << (N.exp_bits + N.man_bits);
        #[allow(dead_code)]
        const TO_SIGN: i32 = 31 - (N.exp_bits + N.man_bits) as i32;
        #[allow(dead_code)]
        const IEEE: bool = N.inf_mag.is_some();
        #[allow(dead_code)]
        const SIGNED: bool = N.signed;
        #[allow(dead_code)]
        const INF: u32 = match N.inf_mag {
            Some(inf) => inf,
            None => MAX,
        };
    };
}

pub(crate) use narrow_constants;

/// A float8 format's magnitude rule: f32 magnitude bits → the code (NaN: the caller's).
pub(crate) trait Float8Magnitude {
    /// The code torch writes for a positive NaN.
    const NAN: u32;

    /// The code of `a` (|x|'s bits, not NaN).
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set.
    unsafe fn code<V: Vector>(a: V) -> V;
}

/// torch 2.15's float8_e4m3fn: past 448 and inf saturate to 0x7E (Torch and Saturate agree for
/// float32 sources).
pub(crate) struct E4M3FnMagnitude;

impl Float8Magnitude for E4M3FnMagnitude {
    const NAN: u32 = formats::E4M3FN.nan_code;
    #[inline(always)]
    unsafe fn code<V: Vector>(a: V) -> V {
        narrow_constants!(formats::E4M3FN);
        // SAFETY: the caller's contract.
        unsafe { narrow_magnitude::<V, MAN, BIAS, SHIFT>(a).min_i32(V::splat(MAX)) }
    }
}

/// float8_e5m2. Torch: overflow and inf give inf (0x7C). Saturate: finite overflow gives 0x7B
/// (57344), inf stays inf.
pub(crate) struct E5M2Magnitude<const SATURATE: bool>;

impl<const SATURATE: bool> Float8Magnitude for E5M2Magnitude<SATURATE> {
    const NAN: u32 = formats::E5M2.nan_code;
    #[inline(always)]
    unsafe fn code<V: Vector>(a: V) -> V {
        narrow_constants!(formats::E5M2);
        // SAFETY: the caller's contract.
        unsafe {
            let code = narrow_magnitude::<V, MAN, BIAS, SHIFT>(a);
            if SATURATE {
                let inf = a.gt_i32(V::splat(0x7F7F_FFFF));
                V::select(inf, V::splat(INF), code.min_i32(V::splat(MAX)))
            } else {
                code.min_i32(V::splat(INF))
            }
        }
    }
}

/// float8 codes from f32 bits `b` by rule `M`, NaN lanes set to its NaN code and the sign bit
/// put back.
#[inline(always)]
unsafe fn float8<V: Vector, M: Float8Magnitude>(b: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let a = b.and(V::splat(0x7FFF_FFFF));
        let code = V::select(is_nan(b), V::splat(M::NAN), M::code(a));
        code.or(b.shr::<24>().and(V::splat(0x80)))
    }
}

/// A step's source elements read as f32 bits, exactly (float32 itself, bfloat16, float16).
///
/// A type rather than a closure, as every helper of the steps is: the steps are generic
/// `#[inline(always)]` functions with no target features of their own, so a closure defined in
/// one and left out of line by the inliner is compiled without the loop's instruction set, and
/// each intrinsic in it becomes a call (a kernel ten to twenty-five times slower; `.ci/run`
/// checks that no kernel calls an intrinsic).
pub(crate) trait Widened {
    /// Bytes per source element.
    const SIZE: usize;
    /// `V::LANES` source elements at `p` as f32 bits.
    ///
    /// # Safety
    /// The CPU must have `V`'s instruction set; `V::LANES` elements readable at `p`.
    unsafe fn load<V: Vector>(p: *const u8) -> V;
}

/// float32 sources.
pub(crate) struct FromF32;

/// bfloat16 sources.
pub(crate) struct FromBf16;

/// float16 sources (a NaN quieted with its payload kept).
pub(crate) struct FromF16;

impl Widened for FromF32 {
    const SIZE: usize = 4;
    #[inline(always)]
    unsafe fn load<V: Vector>(p: *const u8) -> V {
        // SAFETY: the caller's contract.
        unsafe { V::load(p) }
    }
}

impl Widened for FromBf16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load<V: Vector>(p: *const u8) -> V {
        // SAFETY: the caller's contract.
        unsafe { V::load_u16(p).shl::<16>() }
    }
}

impl Widened for FromF16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load<V: Vector>(p: *const u8) -> V {
        // SAFETY: the caller's contract.
        unsafe { V::load_f16_as_f32(p) }
    }
}

/// Vector `k` of a step's source at `s` (elements `k * LANES ..`), read as f32 bits.
///
/// # Safety
/// As [`Widened::load`], for that vector.
#[inline(always)]
pub(crate) unsafe fn widened<V: Vector, L: Widened>(s: *const u8, k: usize) -> V {
    // SAFETY: the caller's contract.
    unsafe { L::load::<V>(s.add(L::SIZE * V::LANES * k)) }
}

/// Four vectors of the step's source at `s`, read as f32 bits by `L`, → float8 codes by rule
/// `M`, written at `d`.
#[inline(always)]
unsafe fn float8_4<V: Vector, M: Float8Magnitude, L: Widened, const STREAM: bool>(
    s: *const u8,
    d: *mut u8,
) {
    // SAFETY: the caller's contract: four vectors at `s`, their codes' room at `d`.
    unsafe {
        V::store_u8::<STREAM>(
            float8::<V, M>(widened::<V, L>(s, 0)),
            float8::<V, M>(widened::<V, L>(s, 1)),
            float8::<V, M>(widened::<V, L>(s, 2)),
            float8::<V, M>(widened::<V, L>(s, 3)),
            d,
        )
    }
}

// ---- float32 ↔ bfloat16 / float16

step!(F32ToBf16<SATURATE>: f32 => BF16, vectors = 2, |s, d, w| {
    // torch writes 0xFFFF for every float32 NaN on this path (ATen's AVX-512 conversion).
    V::store_u16::<STREAM>(
        to_bf16::<V, SATURATE>(V::load(s), 0xFFFF),
        to_bf16::<V, SATURATE>(V::load(s.add(4 * w)), 0xFFFF),
        d,
    )
});

step!(Bf16ToF32<SATURATE>: BF16 => f32, vectors = 1, |s, d, w| {
    V::load_u16(s).shl::<16>().store::<STREAM>(d)
});

step!(F32ToF16<SATURATE>: f32 => F16, vectors = 2, |s, d, w| {
    V::store_f16::<STREAM>(V::load(s), V::load(s.add(4 * w)), d)
});

step!(F16ToF32<SATURATE>: F16 => f32, vectors = 1, |s, d, w| {
    let x = V::load_f16_as_f32(s);
    if SATURATE {
        x.store::<STREAM>(d)
    } else {
        // torch writes 0x7FFFFFFF for every float16 NaN on this path.
        V::select(is_nan(x), V::splat(0x7FFF_FFFF), x).store::<STREAM>(d)
    }
});

step!(F16ToBf16<SATURATE>: F16 => BF16, vectors = 2, |s, d, w| {
    // float16 → f32 is exact; c10::BFloat16(float) then rounds, NaN → 0x7FC0.
    V::store_u16::<STREAM>(
        to_bf16::<V, SATURATE>(widened::<V, FromF16>(s, 0), 0x7FC0),
        to_bf16::<V, SATURATE>(widened::<V, FromF16>(s, 1), 0x7FC0),
        d,
    )
});

step!(Bf16ToF16<SATURATE>: BF16 => F16, vectors = 2, |s, d, w| {
    // bfloat16 → f32 is exact, so the float16 rounding is the one rounding (both modes agree).
    V::store_f16::<STREAM>(widened::<V, FromBf16>(s, 0), widened::<V, FromBf16>(s, 1), d)
});

// ---- float64

step!(F64ToF32<SATURATE>: f64 => f32, vectors = 1, |s, d, w| {
    V::load_f64_as_f32(s).store::<STREAM>(d)
});

step!(F32ToF64<SATURATE>: f32 => f64, vectors = 1, |s, d, w| {
    V::load(s).store_f32_as_f64::<STREAM>(d)
});

step!(F64ToBf16<SATURATE>: f64 => BF16, vectors = 2, |s, d, w| {
    // Torch: c10::BFloat16(double) goes through float (two roundings), NaN → 0x7FC0. Saturate:
    // one correct rounding — to odd in f32, then to nearest-even in bfloat16.
    V::store_u16::<STREAM>(f64_to_bf16::<V, SATURATE>(s), f64_to_bf16::<V, SATURATE>(s.add(8 * w)), d)
});

/// `V::LANES` f64 at `p` → bfloat16 bits (low 16 bits of each lane), as [`F64ToBf16`] rounds.
#[inline(always)]
unsafe fn f64_to_bf16<V: Vector, const SATURATE: bool>(p: *const u8) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let x = if SATURATE {
            V::load_f64_as_f32_odd(p)
        } else {
            V::load_f64_as_f32(p)
        };
        to_bf16::<V, SATURATE>(x, 0x7FC0)
    }
}

// ---- integers

step!(F32ToI32<SATURATE>: f32 => i32, vectors = 1, |s, d, w| {
    let x = V::load(s);
    let t = x.cvtt_f32_i32();
    if SATURATE {
        // Rust's `as` (XLA's convert): truncation, clamped, NaN → 0. Among the f32 bits read as
        // signed integers, x >= 2^31 (+inf included) is the run (0x4EFF_FFFF, 0x7F80_0000].
        let t = V::select(x.gt_i32(V::splat(0x4EFF_FFFF)), V::splat(0x7FFF_FFFF), t);
        V::select(is_nan(x), V::splat(0), t).store::<STREAM>(d)
    } else {
        t.store::<STREAM>(d)
    }
});

step!(I32ToF32<SATURATE>: i32 => f32, vectors = 1, |s, d, w| {
    V::load(s).i32_to_f32().store::<STREAM>(d)
});

step!(I64ToI32<SATURATE>: i64 => i32, vectors = 1, |s, d, w| {
    // The low halves: wrap-around, as every mode does for int → int.
    V::load_i64_low(s).store::<STREAM>(d)
});

step!(I32ToI64<SATURATE>: i32 => i64, vectors = 1, |s, d, w| {
    V::load(s).store_i32_as_i64::<STREAM>(d)
});

step!(U8ToF32<SATURATE>: u8 => f32, vectors = 1, |s, d, w| {
    V::load_u8(s).i32_to_f32().store::<STREAM>(d)
});

step!(BoolToF32<SATURATE>: Bool => f32, vectors = 1, |s, d, w| {
    // Any nonzero byte is true.
    V::select(V::load_u8(s).eq(V::splat(0)), V::splat(0), V::splat(0x3F80_0000)).store::<STREAM>(d)
});

/// f32 bits `x` → uint8 codes (one per 32-bit lane). (A function, not a closure: [`Widened`].)
#[inline(always)]
unsafe fn to_u8<V: Vector, const SATURATE: bool>(x: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        let t = x.cvtt_f32_i32();
        if SATURATE {
            // Clamp to [0, 255], NaN → 0. On the f32 bits read as signed integers: negative
            // values (and -0, and negative NaNs) are below 0; x >= 255 (+inf and +NaN too) is
            // above 0x437E_FFFF; +NaN is above inf's bits.
            let t = V::select(x.gt_i32(V::splat(0x437E_FFFF)), V::splat(0xFF), t);
            let t = V::select(V::splat(0).gt_i32(x), V::splat(0), t);
            V::select(x.gt_i32(V::splat(0x7F80_0000)), V::splat(0), t)
        } else {
            // torch's uint8(int64(x)): the low byte of the truncation. A 32-bit truncation has
            // the same low byte: f32 values from 2^31 up are multiples of 256, and NaN gives 0
            // both ways.
            t.and(V::splat(0xFF))
        }
    }
}

step!(F32ToU8<SATURATE>: f32 => u8, vectors = 4, |s, d, w| {
    V::store_u8::<STREAM>(
        to_u8::<V, SATURATE>(widened::<V, FromF32>(s, 0)),
        to_u8::<V, SATURATE>(widened::<V, FromF32>(s, 1)),
        to_u8::<V, SATURATE>(widened::<V, FromF32>(s, 2)),
        to_u8::<V, SATURATE>(widened::<V, FromF32>(s, 3)),
        d,
    )
});

// ---- float8

step!(F32ToE4M3Fn<SATURATE>: f32 => E4M3Fn, vectors = 4, |s, d, w| {
    float8_4::<V, E4M3FnMagnitude, FromF32, STREAM>(s, d)
});

step!(F32ToE5M2<SATURATE>: f32 => E5M2, vectors = 4, |s, d, w| {
    float8_4::<V, E5M2Magnitude<SATURATE>, FromF32, STREAM>(s, d)
});

// torch casts bfloat16 and float16 to its float8 formats through float32 (`c10::Float8_*`'s
// constructors take a float), and both widen exactly: the codes are float32's. A NaN's payload
// does not matter (every NaN gives the NaN code of its sign), so the float16 load may quiet it.

step!(Bf16ToE4M3Fn<SATURATE>: BF16 => E4M3Fn, vectors = 4, |s, d, w| {
    float8_4::<V, E4M3FnMagnitude, FromBf16, STREAM>(s, d)
});

step!(F16ToE4M3Fn<SATURATE>: F16 => E4M3Fn, vectors = 4, |s, d, w| {
    float8_4::<V, E4M3FnMagnitude, FromF16, STREAM>(s, d)
});

step!(Bf16ToE5M2<SATURATE>: BF16 => E5M2, vectors = 4, |s, d, w| {
    float8_4::<V, E5M2Magnitude<SATURATE>, FromBf16, STREAM>(s, d)
});

step!(F16ToE5M2<SATURATE>: F16 => E5M2, vectors = 4, |s, d, w| {
    float8_4::<V, E5M2Magnitude<SATURATE>, FromF16, STREAM>(s, d)
});
