//! How Checked and Exact casts look at the source before writing anything: a [`Check`] per pair
//! and verification (chosen by `plan.rs`), and [`Screen`]s — cheap vectorised tests that clear
//! whole blocks of elements, so that the exact per-element rules only see the blocks a screen
//! cannot clear.

use std::sync::OnceLock;

use dtcast_dtype::{Category, DType, NanEncoding};

use crate::check::{int_range, lossless};
use crate::dispatch::{pair_fns, AcceptTable, Kernel};
use crate::isa::Isa;
use crate::kernels::{select, with_avx512, KeyRun, Task};
use crate::lanes::unit;
use crate::mode::{Rounding, Verify};

/// What checking one pair in one mode takes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Check {
    /// No element of the source can fail (Checked int32 → float32 rounds but never fails; so does
    /// float16 → bfloat16): nothing to check, and the cast runs at Torch-mode speed.
    Nothing,
    /// Screen each block; the per-element rules check the blocks the screen cannot clear.
    Screen(Screen),
    /// The per-element rules for every element.
    Elements,
}

/// A test that every element of a block surely passes, written so that the compiler vectorises
/// it. Each is exact (it fails an element exactly when the per-element rules do) except where
/// noted; a block that fails a screen is checked again element by element, which finds the first
/// offending element.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Screen {
    /// An element fails iff `key(bits) - lo`, wrapping in the source's width, is below `len`:
    /// the failing elements are one run of keys (`0 < len < 2^width`).
    Run { key: Key, lo: u64, len: u64 },
    /// One- or two-byte sources: the verdict for every bit pattern, looked up.
    Table { accept: &'static [bool] },
    /// Exact mode: an element passes iff casting it there and back gives its bits again — and,
    /// when `within` is given, it also passes that run. Sound where every destination value
    /// converts back exactly (then the destination holds the source's value), and for float →
    /// integer casts with `within` the Checked range (an integer converts back to an integral
    /// float, and an integral float inside the range converts exactly). Not exact: NaNs whose
    /// payload changes and -0 → integer fail the screen, and the per-element rules take them.
    RoundTrip {
        there: Kernel,
        back: Kernel,
        to_bits: usize,
        within: Option<(Key, u64, u64)>,
        /// The kernels' instruction set, for the Run screen of `within`.
        isa: Isa,
    },
}

/// What a [`Screen::Run`] compares instead of the raw bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// The bits under a mask (dropping a float's sign bit makes overflow one run of magnitudes).
    Masked(u64),
    /// A signed integer's bits with the sign bit flipped: ordered like the values, unsigned.
    Signed,
    /// A float's bits, all flipped when negative and the sign bit flipped when not: ordered like
    /// the values (NaNs beyond the infinities), unsigned.
    Float,
}

/// How to verify `n` elements from `from` to `to`, with `isa`'s kernels where a screen uses any.
/// One- and two-byte sources are decided bit pattern by bit pattern, once per process: one-byte
/// sources always, two-byte ones once a buffer is at least as long as the table (65,536).
pub(crate) fn check(
    from: DType,
    to: DType,
    verify: Verify,
    n: usize,
    isa: Isa,
    table: AcceptTable,
) -> Check {
    let small = unit(from) <= 2;
    if small && (unit(from) == 1 || n >= 1 << 16 || has_table_plan(from, to, verify)) {
        table_plan(from, to, verify, table)
    } else {
        match verify {
            Verify::Exact => exact_plan(from, to, isa),
            Verify::Checked => checked_plan(from, to),
        }
    }
}

/// The Exact-mode plan for sources without a table.
fn exact_plan(from: DType, to: DType, isa: Isa) -> Check {
    let real = to.to_real();
    // Integers up to 2^precision (and within the largest finite value) are exact in a signed
    // float format.
    if from.is_integral(false) && real.is_floating_point() {
        return match real.float_format() {
            Some(f) if f.signed => {
                let bound = (1i128 << (f.mantissa_bits + 1)).min(f.max_finite.floor() as i128);
                int_source_plan(from, -bound, bound)
            }
            _ => Check::Elements,
        };
    }
    let within = if lossless(to, from) {
        None
    } else if from.is_floating_point() && !from.is_complex() && to.is_integral(false) {
        match checked_plan(from, to) {
            Check::Screen(Screen::Run { key, lo, len }) => Some((key, lo, len)),
            _ => return Check::Elements,
        }
    } else {
        return Check::Elements;
    };
    let (Some(forward), Some(backward)) = (pair_fns(from, to), pair_fns(to, from)) else {
        return Check::Elements;
    };
    // The SIMD kernels read and write packed elements as stored, the scalar rules one byte per
    // element. A packed source reaches the screen unpacked: the scalar rules both ways. A packed
    // destination: the SIMD kernels both ways where the pair has them (the middle packed), else
    // the scalar rules both ways (an order of magnitude slower in Exact mode). Otherwise each
    // way's kernel on its own.
    let simd = |from: DType, to: DType| select(isa, from, to, Rounding::Torch);
    let scalar = (forward.torch, backward.torch, 8 * unit(to));
    let (there, back, to_bits) = if from.is_packed() {
        scalar
    } else if to.is_packed() {
        match (simd(from, to), simd(to, from)) {
            (Some(there), Some(back)) => (there.kernel, back.kernel, to.bits()),
            _ => scalar,
        }
    } else {
        (
            simd(from, to).map_or(forward.torch, |f| f.kernel),
            simd(to, from).map_or(backward.torch, |f| f.kernel),
            8 * unit(to),
        )
    };
    Check::Screen(Screen::RoundTrip {
        there,
        back,
        to_bits,
        within,
        isa,
    })
}

/// The plan for an integer source whose accepted values are `[lo, hi]`.
fn int_source_plan(from: DType, lo: i128, hi: i128) -> Check {
    let width = from.bits() as u32;
    let (flo, fhi) = int_range(from);
    let (lo, hi) = (lo.max(flo), hi.min(fhi));
    if lo > hi {
        return Check::Elements;
    }
    let (key, offset) = if from.is_signed() {
        (Key::Signed, 1i128 << (width - 1))
    } else {
        (Key::Masked(u64::MAX), 0)
    };
    accepted_run(width, key, (lo + offset) as u128, (hi + offset) as u128)
}

/// Plans from the verdict on every bit pattern, per (source, destination, mode).
static TABLE_PLANS: [OnceLock<Check>; DType::COUNT * DType::COUNT * 2] =
    [const { OnceLock::new() }; DType::COUNT * DType::COUNT * 2];

fn table_slot(from: DType, to: DType, verify: Verify) -> usize {
    (from.index() * DType::COUNT + to.index()) * 2 + usize::from(verify == Verify::Exact)
}

/// Whether [`table_plan`] has already been worked out for this pair and mode.
fn has_table_plan(from: DType, to: DType, verify: Verify) -> bool {
    TABLE_PLANS[table_slot(from, to, verify)].get().is_some()
}

/// The plan from the verdict on every bit pattern, worked out once per (pair, mode).
fn table_plan(from: DType, to: DType, verify: Verify, table: AcceptTable) -> Check {
    *TABLE_PLANS[table_slot(from, to, verify)].get_or_init(|| {
        let Some(accept) = table(verify) else {
            return Check::Elements;
        };
        if accept.iter().all(|&ok| ok) {
            Check::Nothing
        } else if let Some(run) = table_run(&accept) {
            Check::Screen(run)
        } else {
            // Leaked once per pair and mode at most (this runs inside the cache's initialiser).
            Check::Screen(Screen::Table {
                accept: Vec::leak(accept),
            })
        }
    })
}

/// A [`Screen::Run`] for a verdict table whose failures form one run of codes (after dropping the
/// sign bit if both halves of the table agree), if they do.
fn table_run(accept: &[bool]) -> Option<Screen> {
    let half = accept.len() / 2;
    let (mask, part) = if accept[..half] == accept[half..] {
        (half - 1, &accept[..half])
    } else {
        (accept.len() - 1, accept)
    };
    let lo = part.iter().position(|&ok| !ok)?;
    let len = part[lo..]
        .iter()
        .position(|&ok| ok)
        .unwrap_or(part.len() - lo);
    let rest_passes = part[lo + len..].iter().all(|&ok| ok);
    // A run of every code means every element fails: nothing to screen.
    (rest_passes && len < part.len()).then_some(Screen::Run {
        key: Key::Masked(mask as u64),
        lo: lo as u64,
        len: len as u64,
    })
}

/// The Checked-mode plan for sources without a table: integers, float32 and float64.
fn checked_plan(from: DType, to: DType) -> Check {
    let to = to.to_real();
    let width = from.bits() as u32;
    match from.category() {
        Category::SignedInt | Category::UnsignedInt => {
            // The accepted values are one range of integers.
            let (lo, hi) = match to.category() {
                Category::SignedInt | Category::UnsignedInt => int_range(to),
                Category::Floating => match to.float_format() {
                    Some(f) => {
                        // Integers inside the overflow threshold, and the threshold itself when
                        // the tie rounds down (`as` saturates: huge thresholds cover every
                        // integer); an unsigned format holds no negative values (e8m0: no
                        // zero either).
                        let (t, tie_overflows) = f.overflow_threshold();
                        let hi = if t.fract() == 0.0 && tie_overflows {
                            (t as i128).saturating_sub(1)
                        } else {
                            t.floor() as i128
                        };
                        let lo = match (f.signed, f.has_zero) {
                            (true, _) => -hi,
                            (false, true) => 0,
                            (false, false) => 1,
                        };
                        (lo, hi)
                    }
                    None => return Check::Elements,
                },
                _ => return Check::Nothing, // bool takes every integer
            };
            int_source_plan(from, lo, hi)
        }
        Category::Floating if matches!(from, DType::Float32 | DType::Float64) => {
            let single = from == DType::Float32;
            match to.category() {
                // Bool takes everything but NaN.
                Category::Bool => accepted_run(
                    width,
                    Key::Float,
                    float_key(f64::NEG_INFINITY, single),
                    float_key(f64::INFINITY, single),
                ),
                // Integers take what truncates into their range: the open interval
                // (lo - 1, hi + 1). hi + 1 is a power of two, so the source holds it; lo - 1
                // it may not (-2^63 - 1), and then no source value lies between it and lo.
                Category::SignedInt | Category::UnsignedInt => {
                    let (lo, hi) = int_range(to);
                    let below = if single {
                        f64::from((lo - 1) as f32)
                    } else {
                        (lo - 1) as f64
                    };
                    let first = if below as i128 == lo - 1 {
                        next_in(below, single, Dir::Up, true)
                    } else {
                        lo as f64
                    };
                    let last = next_in((hi + 1) as f64, single, Dir::Down, true);
                    accepted_run(
                        width,
                        Key::Float,
                        float_key(first, single),
                        float_key(last, single),
                    )
                }
                Category::Floating => match to.float_format() {
                    Some(f) => {
                        // Magnitudes from the threshold on overflow (the tie itself when it
                        // overflows), up to inf, and inf too when the format has none (and the
                        // NaNs when it has no NaN).
                        let (t, tie_overflows) = f.overflow_threshold();
                        let first = next_in(t, single, Dir::Up, !tie_overflows);
                        let first = float_bits(first, single);
                        let inf = float_bits(f64::INFINITY, single);
                        if f.signed {
                            let abs = (1u64 << (width - 1)) - 1;
                            // NaNs fail too where the format has none (float6, float4).
                            let end = if f.nan == NanEncoding::None {
                                u128::from(abs) + 1
                            } else {
                                inf + u128::from(!f.has_inf)
                            };
                            failing_run(width, Key::Masked(abs), first, end.saturating_sub(first))
                        } else {
                            // No sign. Failing: from the threshold up through every negative
                            // bit pattern, and (e8m0: no zero) wrapping round to +0. (NaNs and
                            // -0 fail the screen too, though the rules take them: this screen
                            // is not exact.)
                            let all = 1u128 << width;
                            let zero = u128::from(!f.has_zero);
                            failing_run(width, Key::Masked(u64::MAX), first, all - first + zero)
                        }
                    }
                    None => Check::Elements,
                },
                _ => Check::Elements,
            }
        }
        _ => Check::Elements,
    }
}

/// The plan for a source of `width` bits whose accepted keys are `[first, last]`.
fn accepted_run(width: u32, key: Key, first: u128, last: u128) -> Check {
    let all = 1u128 << width;
    failing_run(width, key, (last + 1) % all, all - (last - first + 1))
}

/// The plan for a source of `width` bits whose failing keys are the `len` from `lo` on (mod 2^width).
fn failing_run(width: u32, key: Key, lo: u128, len: u128) -> Check {
    if len == 0 {
        Check::Nothing
    } else if len >= 1u128 << width {
        Check::Elements
    } else {
        Check::Screen(Screen::Run {
            key,
            lo: lo as u64,
            len: len as u64,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Up,
    Down,
}

/// The nearest value of the source format (f32 if `single`, else f64) at or beyond `x` in
/// direction `dir` — strictly beyond when `strict`.
fn next_in(x: f64, single: bool, dir: Dir, strict: bool) -> f64 {
    let beyond = |v: f64| match dir {
        Dir::Up => v > x || (!strict && v == x),
        Dir::Down => v < x || (!strict && v == x),
    };
    if single {
        let f = x as f32;
        let step = |f: f32| {
            if dir == Dir::Up {
                f.next_up()
            } else {
                f.next_down()
            }
        };
        f64::from(if beyond(f64::from(f)) { f } else { step(f) })
    } else if beyond(x) {
        x
    } else if dir == Dir::Up {
        x.next_up()
    } else {
        x.next_down()
    }
}

/// The bits of `x`, a value of the source format.
fn float_bits(x: f64, single: bool) -> u128 {
    if single {
        u128::from((x as f32).to_bits())
    } else {
        u128::from(x.to_bits())
    }
}

/// [`Key::Float`] of `x`, a value of the source format.
fn float_key(x: f64, single: bool) -> u128 {
    let width = if single { 32 } else { 64 };
    let bits = float_bits(x, single);
    let sign = 1u128 << (width - 1);
    if bits & sign != 0 {
        bits ^ ((1u128 << width) - 1)
    } else {
        bits ^ sign
    }
}

impl Screen {
    /// This screen as the kernels' [`KeyRun`], for a source of `size` bytes (4 or 8): `None`
    /// unless it is a run.
    pub(crate) fn key_run(&self, size: usize) -> Option<KeyRun> {
        let Screen::Run { key, lo, len } = *self else {
            return None;
        };
        let top = match size {
            4 => 1u64 << 31,
            8 => 1u64 << 63,
            _ => return None,
        };
        Some(match key {
            Key::Masked(mask) => KeyRun {
                mask,
                float: false,
                lo,
                len,
            },
            // x ^ top is x + top: the run of x from lo - top.
            Key::Signed => KeyRun {
                mask: u64::MAX,
                float: false,
                lo: lo.wrapping_sub(top) & (top | (top - 1)),
                len,
            },
            Key::Float => KeyRun {
                mask: u64::MAX,
                float: true,
                lo,
                len,
            },
        })
    }

    /// `true` if every element of `block` (little-endian `from` elements) surely passes;
    /// `scratch` is working memory, reused from block to block. The loops are compiled for
    /// AVX-512 when `isa` is AVX-512 (the x86-64 baseline has no 64-bit compares or shifts in
    /// SIMD), as they are for every other set.
    pub(crate) fn passes(
        &self,
        block: &[u8],
        from: DType,
        scratch: &mut Vec<u8>,
        isa: Isa,
    ) -> bool {
        if let Screen::RoundTrip {
            there,
            back,
            to_bits,
            within,
            isa,
        } = *self
        {
            let inside = within.is_none_or(|(key, lo, len)| {
                Screen::Run { key, lo, len }.passes(block, from, scratch, isa)
            });
            return inside && round_trips(block, unit(from), there, back, to_bits, scratch);
        }
        if let Screen::Table { accept } = *self {
            if unit(from) == 1 && crate::kernels::looks_up_bytes(isa, 1) {
                return table_passes(accept, block, isa);
            }
        }
        let task = Passes {
            screen: self,
            block,
            from,
        };
        match isa {
            Isa::Avx512 => with_avx512(task),
            Isa::Scalar | Isa::Portable | Isa::Avx2 => task.run(),
        }
    }

    #[inline(always)]
    fn passes_portable(&self, block: &[u8], from: DType) -> bool {
        match *self {
            Screen::Run { key, lo, len } => {
                /// The run test in the source's own width, one loop per key.
                macro_rules! run {
                    ($u:ty, $i:ty, $n:literal) => {{
                        const SIGN: $u = 1 << ($n * 8 - 1);
                        let (lo, len) = (lo as $u, len as $u);
                        let outside = |k: $u| k.wrapping_sub(lo) >= len;
                        match key {
                            Key::Masked(mask) => {
                                let mask = mask as $u;
                                all(block, |b: [u8; $n]| outside(<$u>::from_le_bytes(b) & mask))
                            }
                            Key::Signed => {
                                all(block, |b: [u8; $n]| outside(<$u>::from_le_bytes(b) ^ SIGN))
                            }
                            Key::Float => all(block, |b: [u8; $n]| {
                                let x = <$u>::from_le_bytes(b);
                                outside(x ^ ((<$i>::from_le_bytes(b) >> ($n * 8 - 1)) as $u | SIGN))
                            }),
                        }
                    }};
                }
                match unit(from) {
                    1 => run!(u8, i8, 1),
                    2 => run!(u16, i16, 2),
                    4 => run!(u32, i32, 4),
                    8 => run!(u64, i64, 8),
                    _ => false,
                }
            }
            Screen::Table { accept } => match unit(from) {
                1 => all(block, |b: [u8; 1]| accept[usize::from(b[0])]),
                _ => all(block, |b: [u8; 2]| {
                    accept[usize::from(u16::from_le_bytes(b))]
                }),
            },
            Screen::RoundTrip { .. } => false, // handled in `passes`
        }
    }
}

/// Whether every byte of `block` (a one-byte source) passes the verdicts `accept`: the verdicts
/// looked up a vector of bytes at a time (`kernels::look_up_bytes`, as the casts' byte tables
/// are), a piece in cache at a time, then and-ed together: about half the time of a verdict
/// looked up per byte.
fn table_passes(accept: &[bool], block: &[u8], isa: Isa) -> bool {
    const PIECE: usize = 4096;
    let verdicts: &[u8] = bytemuck::cast_slice(accept);
    let Ok(plane) = <[u8; 256]>::try_from(verdicts) else {
        unreachable!("one-byte sources have 256 verdicts")
    };
    let mut looked_up = [0u8; PIECE];
    block.chunks(PIECE).all(|piece| {
        let out = &mut looked_up[..piece.len()];
        let done = crate::kernels::look_up_bytes(isa, core::slice::from_ref(&plane), piece, out);
        let vectors = out[..done].iter().fold(1u8, |all, &v| all & v);
        vectors == 1 && piece[done..].iter().all(|&b| accept[usize::from(b)])
    })
}

/// [`Screen::passes_portable`] as a [`Task`], to be compiled for a wider instruction set.
struct Passes<'a> {
    screen: &'a Screen,
    block: &'a [u8],
    from: DType,
}

impl Task for Passes<'_> {
    type Output = bool;
    #[inline(always)]
    fn run(self) -> bool {
        self.screen.passes_portable(self.block, self.from)
    }
}

/// Whether casting `block` (elements of `from_size` bytes) by `there` (into elements of
/// `to_bits` bits) and then `back` gives its bytes again.
fn round_trips(
    block: &[u8],
    from_size: usize,
    there: Kernel,
    back: Kernel,
    to_bits: usize,
    scratch: &mut Vec<u8>,
) -> bool {
    // Blocks are 1,024 or 4,096 elements, and the last one the rest of a buffer, which holds a
    // whole number of bytes of the destination: so does every block of a cast. Anything else
    // (a single float4 element) is not cleared here, and the per-element rules take it.
    let bits = block.len() / from_size * to_bits;
    if !bits.is_multiple_of(8) {
        return false;
    }
    let mid_len = bits / 8;
    scratch.resize(mid_len + block.len(), 0);
    let (mid, again) = scratch.split_at_mut(mid_len);
    there(block, mid);
    back(mid, again);
    *again == *block
}

/// `true` if `ok` holds for every `N`-byte element of `block`; branch-free so that it vectorises.
#[inline(always)]
fn all<const N: usize>(block: &[u8], ok: impl Fn([u8; N]) -> bool) -> bool {
    let (elements, _) = block.as_chunks::<N>();
    // A count of failures (not an early exit, not a fold over bools) is what LLVM vectorises;
    // plain loops (not `Iterator::sum`, whose `fold` may stay out of line and so lose the
    // caller's target features). Each 512-byte group first prefetches the group a few KiB
    // ahead, as the cast kernels do: spread out so, the prefetches never queue up.
    let mut failures = 0u32;
    for group in elements.chunks(512 / N) {
        crate::kernels::prefetch_ahead(group.as_ptr().cast(), 8);
        for &b in group {
            failures += u32::from(!ok(b));
        }
    }
    failures == 0
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    fn table_of(rejects: &[usize], size: usize) -> Vec<bool> {
        let mut t = vec![true; size];
        for &r in rejects {
            t[r] = false;
        }
        t
    }

    fn run_of(screen: Option<Screen>) -> Option<(Key, u64, u64)> {
        match screen? {
            Screen::Run { key, lo, len } => Some((key, lo, len)),
            _ => None,
        }
    }

    fn one_run_of_failures_in_a_table_becomes_a_run_screen() {
        // Both signs fail alike: the sign bit is masked off.
        let t = table_of(&[0x70, 0x71, 0xF0, 0xF1], 256);
        assert_eq!(run_of(table_run(&t)), Some((Key::Masked(0x7F), 0x70, 2)));
        // One sign only: the whole code is compared.
        let t = table_of(&[0x80, 0x81, 0x82], 256);
        assert_eq!(run_of(table_run(&t)), Some((Key::Masked(0xFF), 0x80, 3)));
        // A run up to the last code.
        let rejects: Vec<usize> = (0x7C00..0x8000).chain(0xFC00..0x10000).collect();
        let t = table_of(&rejects, 1 << 16);
        assert_eq!(
            run_of(table_run(&t)),
            Some((Key::Masked(0x7FFF), 0x7C00, 0x400))
        );
    }

    fn scattered_failures_need_the_table() {
        assert!(table_run(&table_of(&[3, 5], 256)).is_none());
        assert!(table_run(&[false; 256]).is_none());
    }

    fn plans_give_the_element_rules_verdict_on_every_bit_pattern() {
        // For every one- and two-byte source, destination and mode: what the plan lets through
        // is exactly what the per-element rules accept, code by code.
        for from in DType::ALL.into_iter().filter(|d| unit(*d) <= 2) {
            let codes = 1usize << (8 * unit(from));
            for to in DType::ALL {
                let Some(fns) = crate::dispatch::pair_fns(from, to) else {
                    continue; // float4_e2m1fn_x2
                };
                for verify in [Verify::Checked, Verify::Exact] {
                    let accept = (fns.accept_table)(verify).unwrap();
                    let plan = check(from, to, verify, codes, Isa::Scalar, fns.accept_table);
                    for (code, &ok) in accept.iter().enumerate() {
                        let bytes = &(code as u16).to_le_bytes()[..unit(from)];
                        for isa in crate::isa::isas() {
                            let passes = match plan {
                                Check::Nothing => true,
                                Check::Screen(s) => s.passes(bytes, from, &mut Vec::new(), isa),
                                Check::Elements => panic!("{from} -> {to}: no plan from the table"),
                            };
                            assert_eq!(
                                passes, ok,
                                "{from} -> {to} ({verify:?}, {isa}), code {code:#x}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Elements the Checked rules accept or reject, to test screens of wider sources with.
    fn verdict(from: DType, to: DType, verify: Verify, bytes: &[u8]) -> bool {
        let check = crate::dispatch::pair_fns(from, to).unwrap().check;
        check(bytes, verify, 0).is_ok()
    }

    fn plans_for_wide_sources_agree_with_the_element_rules_at_the_edges() {
        // Around every boundary a screen is built from: the integer ranges, the float
        // thresholds, zero, the infinities and NaN — for every wide source and destination.
        let mut f64s: Vec<f64> = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MAX,
            f64::MIN,
        ];
        for to in DType::ALL {
            if let Some(f) = to.to_real().float_format() {
                let (t, _) = f.overflow_threshold();
                f64s.extend([t, -t, f.max_finite, -f.max_finite]);
            }
            if to.is_integral(false) {
                let (lo, hi) = int_range(to);
                f64s.extend([
                    lo as f64 - 1.0,
                    lo as f64,
                    hi as f64,
                    hi as f64 + 1.0,
                    lo as f64 - 0.5,
                    hi as f64 + 0.5,
                ]);
            }
        }
        let mut values = Vec::new();
        for x in f64s {
            for single in [true, false] {
                for dir in [Dir::Up, Dir::Down] {
                    for strict in [true, false] {
                        let v = next_in(x, single, dir, strict);
                        values.push(v);
                        values.push(next_in(v, single, dir, true));
                    }
                }
            }
        }
        let ints: Vec<i128> = values
            .iter()
            .filter(|v| v.is_finite())
            .map(|&v| v as i128)
            .chain([0, 1, -1, i128::from(i64::MIN), i128::from(u64::MAX)])
            .collect();
        for from in DType::ALL
            .into_iter()
            .filter(|d| unit(*d) >= 4 && !d.is_complex())
        {
            for (to, verify, isa) in DType::ALL.into_iter().flat_map(|to| {
                crate::isa::isas()
                    .into_iter()
                    .flat_map(move |isa| [(to, Verify::Checked, isa), (to, Verify::Exact, isa)])
            }) {
                let plan = match verify {
                    Verify::Exact => exact_plan(from, to, isa),
                    Verify::Checked => checked_plan(from, to),
                };
                let Check::Screen(screen) = plan else {
                    continue;
                };
                let samples: Vec<Vec<u8>> = match from {
                    DType::Float32 => values
                        .iter()
                        .map(|&v| (v as f32).to_le_bytes().to_vec())
                        .collect(),
                    DType::Float64 => values.iter().map(|&v| v.to_le_bytes().to_vec()).collect(),
                    _ => ints
                        .iter()
                        .flat_map(|&i| [i, i.wrapping_sub(1), i.wrapping_add(1)])
                        .map(|i| (i as u64).to_le_bytes()[..unit(from)].to_vec())
                        .collect(),
                };
                // And random bit patterns.
                let mut state = 0x9E37_79B9_7F4A_7C15u64;
                let random = (0..20_000).map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state.to_le_bytes()[..unit(from)].to_vec()
                });
                let samples: Vec<Vec<u8>> = samples.into_iter().chain(random).collect();
                // Exact screens, and Checked ones from floats into an unsigned format (e8m0's
                // NaNs, e5m3fnu's -0 and NaNs), may fail good elements too.
                let unsigned_from_float =
                    to.float_format().is_some_and(|f| !f.signed) && from.is_floating_point();
                let precise = verify == Verify::Checked && !unsigned_from_float;
                for bytes in samples {
                    let (passes, ok) = (
                        screen.passes(&bytes, from, &mut Vec::new(), isa),
                        verdict(from, to, verify, &bytes),
                    );
                    assert!(
                        !passes || ok,
                        "{from} -> {to} ({verify:?}, {isa}): the screen clears {bytes:02x?}, which fails"
                    );
                    if precise {
                        assert_eq!(
                            passes, ok,
                            "{from} -> {to} ({isa}): screen and rules differ on {bytes:02x?}"
                        );
                    }
                }
            }
        }
    }

    fn pairs_that_cannot_fail_have_nothing_to_check() {
        let nothing = |from, to| matches!(checked_plan(from, to), Check::Nothing);
        assert!(nothing(DType::Int32, DType::Float32));
        assert!(nothing(DType::Int64, DType::BFloat16));
        assert!(nothing(DType::UInt32, DType::Int64));
        assert!(nothing(DType::Int64, DType::Bool));
        assert!(!nothing(DType::UInt64, DType::Float16));
        assert!(!nothing(DType::Int32, DType::Float8E8M0Fnu));
        assert!(!nothing(DType::Float32, DType::BFloat16)); // f32::MAX rounds past bf16's max
        assert!(!nothing(DType::Float32, DType::Int32)); // NaN
        assert!(!nothing(DType::Float32, DType::Bool)); // NaN
    }

    crate::self_test::list!(
        one_run_of_failures_in_a_table_becomes_a_run_screen,
        scattered_failures_need_the_table,
        plans_give_the_element_rules_verdict_on_every_bit_pattern,
        plans_for_wide_sources_agree_with_the_element_rules_at_the_edges,
        pairs_that_cannot_fail_have_nothing_to_check,
    );
}
