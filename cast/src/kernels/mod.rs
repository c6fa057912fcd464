//! The SIMD kernels of the hot pairs: each algorithm written once (`steps.rs`) over a small
//! [`Vector`](vector::Vector) trait, instantiated per instruction set — portable Rust
//! (`portable.rs`), and on x86-64 AVX2 and AVX-512 (`x86/`). Which pairs have kernels is one
//! table, [`FAST`]; which instruction set runs them is an [`Isa`] value the caller passes down.
//!
//! Every fast kernel gives the same bytes as the scalar rules (`lanes.rs`) for every input — the
//! property tests compare them on random bit patterns, NaN payloads, subnormals and out-of-range
//! values included, for every instruction set the machine has.

mod lookup;
mod ml_steps;
mod portable;
mod portable_words;
mod rebias16;
mod rounded16;
mod steps;
mod vector;
mod words;
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    path = "x86_absent.rs"
)]
mod x86;

use dtcast_dtype::DType;

pub(crate) use x86::{
    avx2_available, avx512_available, look_up_bytes, looks_up_bytes, prefetch_ahead, with_avx2,
    with_avx512, Task,
};

use crate::dispatch::Kernel;
use crate::isa::Isa;
use crate::mode::Rounding;
use ml_steps::*;
use steps::*;

/// The fast kernels for one rounding on one instruction set (`None` where the set is not built).
pub(crate) type Pick = fn(Isa, Rounding) -> Option<Fast>;

/// A pair's SIMD kernel on one instruction set, twice: streaming stores for large destinations
/// only (`kernel`), or for any destination (`streaming`: for callers that write a large
/// destination a block at a time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fast {
    pub(crate) kernel: Kernel,
    pub(crate) streaming: Kernel,
    /// `streaming` that also screens a 4- or 8-byte source ([`KeyRun`]), for the pairs that have
    /// one ([`pick_screened`]).
    pub(crate) screened: Option<ScreenedKernel>,
}

/// A failing run of keys that a kernel screens while it converts (`screen::Screen::Run` of a
/// 4- or 8-byte source): an element fails iff its key less `lo`, wrapping at the source's width,
/// is below `len` (`0 < len < 2^width`). The key is the bits under `mask`, or (`float`) a float's
/// bits made order-preserving (`screen::Key::Float`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyRun {
    pub(crate) mask: u64,
    pub(crate) float: bool,
    pub(crate) lo: u64,
    pub(crate) len: u64,
}

impl KeyRun {
    /// What the kernels add to a 32-bit key: then `key - lo <u len` becomes a signed compare of
    /// the sum (flipping the top bit turns unsigned order into signed order), and the least sum
    /// over a buffer decides whether any element fails.
    pub(crate) fn shift32(self) -> u32 {
        0x8000_0000u32.wrapping_sub(self.lo as u32)
    }

    /// Whether a 32-bit key plus [`shift32`](KeyRun::shift32) (`t`) is in the run.
    pub(crate) fn shifted_inside32(self, t: u32) -> bool {
        (t as i32) < (self.len as u32 ^ 0x8000_0000) as i32
    }

    /// Whether any little-endian element of `size` (4 or 8) bytes in `bytes` is in the run (the
    /// scalar form, for the few elements around a SIMD loop).
    pub(crate) fn any_inside(self, bytes: &[u8], size: usize) -> bool {
        let inside = |x: u64, width: u32| {
            let key = if self.float {
                let sign = 1u64 << (width - 1);
                if x & sign != 0 {
                    !x
                } else {
                    x | sign
                }
            } else {
                x & self.mask
            };
            let all = u64::MAX >> (64 - width);
            key.wrapping_sub(self.lo) & all < self.len
        };
        match size {
            4 => bytes
                .as_chunks::<4>()
                .0
                .iter()
                .any(|w| inside(u64::from(u32::from_le_bytes(*w)), 32)),
            8 => bytes
                .as_chunks::<8>()
                .0
                .iter()
                .any(|w| inside(u64::from_le_bytes(*w), 64)),
            _ => unreachable!("screened kernels read 4- or 8-byte sources"),
        }
    }
}

/// A kernel that converts and screens in one pass: `true` when no element is in the run (the
/// output is written either way).
pub(crate) type ScreenedKernel = fn(src: &[u8], dst: &mut [u8], screen: KeyRun) -> bool;

/// The pairs of torch's dtypes with SIMD kernels, in the order `dtcast bench` lists them, with
/// their steps in Torch and Saturate rounding.
const BASIC: [(DType, DType, Pick); 22] = {
    use DType::*;
    [
        (
            Float32,
            BFloat16,
            pick_screened::<F32ToBf16<false>, F32ToBf16<true>>,
        ),
        (BFloat16, Float32, pick::<Bf16ToF32<false>, Bf16ToF32<true>>),
        (
            Float32,
            Float16,
            pick_screened::<F32ToF16<false>, F32ToF16<true>>,
        ),
        (Float16, Float32, pick::<F16ToF32<false>, F16ToF32<true>>),
        (
            Float64,
            Float32,
            pick_screened::<F64ToF32<false>, F64ToF32<true>>,
        ),
        (Float32, Float64, pick::<F32ToF64<false>, F32ToF64<true>>),
        (
            Float64,
            BFloat16,
            pick_screened::<F64ToBf16<false>, F64ToBf16<true>>,
        ),
        (
            Float32,
            Int32,
            pick_screened::<F32ToI32<false>, F32ToI32<true>>,
        ),
        (Int32, Float32, pick::<I32ToF32<false>, I32ToF32<true>>),
        (
            Int64,
            Int32,
            pick_screened::<I64ToI32<false>, I64ToI32<true>>,
        ),
        (UInt8, Float32, pick::<U8ToF32<false>, U8ToF32<true>>),
        (
            Float32,
            UInt8,
            pick_screened::<F32ToU8<false>, F32ToU8<true>>,
        ),
        (
            Float32,
            Float8E4M3Fn,
            pick_screened::<F32ToE4M3Fn<false>, F32ToE4M3Fn<true>>,
        ),
        (
            Float32,
            Float8E5M2,
            pick_screened::<F32ToE5M2<false>, F32ToE5M2<true>>,
        ),
        (
            BFloat16,
            Float8E4M3Fn,
            pick::<Bf16ToE4M3Fn<false>, Bf16ToE4M3Fn<true>>,
        ),
        (
            Float16,
            Float8E4M3Fn,
            pick::<F16ToE4M3Fn<false>, F16ToE4M3Fn<true>>,
        ),
        (
            BFloat16,
            Float8E5M2,
            pick::<Bf16ToE5M2<false>, Bf16ToE5M2<true>>,
        ),
        (
            Float16,
            Float8E5M2,
            pick::<F16ToE5M2<false>, F16ToE5M2<true>>,
        ),
        (Bool, Float32, pick::<BoolToF32<false>, BoolToF32<true>>),
        (Int32, Int64, pick::<I32ToI64<false>, I32ToI64<true>>),
        (Float16, BFloat16, pick::<F16ToBf16<false>, F16ToBf16<true>>),
        (BFloat16, Float16, pick::<Bf16ToF16<false>, Bf16ToF16<true>>),
    ]
};

/// Every pair with SIMD kernels: [`BASIC`], then ml_dtypes' formats ([`ML_FAST`], next to their
/// steps).
const FAST: [(DType, DType, Pick); BASIC.len() + ML_FAST.len()] = {
    let mut all = [BASIC[0]; BASIC.len() + ML_FAST.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < BASIC.len() {
            BASIC[i]
        } else {
            ML_FAST[i - BASIC.len()]
        };
        i += 1;
    }
    all
};

/// The pairs that have SIMD kernels ([`hot_pairs`](crate::hot_pairs)).
pub(crate) const FAST_PAIRS: [(DType, DType); FAST.len()] = {
    let mut pairs = [(DType::Bool, DType::Bool); FAST.len()];
    let mut i = 0;
    while i < FAST.len() {
        pairs[i] = (FAST[i].0, FAST[i].1);
        i += 1;
    }
    pairs
};

pub(crate) fn pick<T: Step, U: Step>(isa: Isa, rounding: Rounding) -> Option<Fast> {
    match rounding {
        Rounding::Torch => instantiate::<T>(isa),
        Rounding::Saturate => instantiate::<U>(isa),
    }
}

/// Step `K` compiled for `isa`.
fn instantiate<K: Step>(isa: Isa) -> Option<Fast> {
    use crate::lanes::Lane;
    match isa {
        Isa::Scalar => None,
        // Where a destination element depends on at most 16 bits of its source, portable code
        // looks it up where that measured faster (`lookup.rs`). The conditions are constants, so
        // that only the kernels a pair runs are compiled for it (with `x86::kernels_of!` and
        // `lookup::kernels`: the others were a quarter of the crate's LLVM input, `cargo
        // llvm-lines`).
        Isa::Portable => {
            let (kernel, streaming): (Kernel, Kernel) =
                if const { portable_words::applies(K::S::DTYPE, K::D::DTYPE) } {
                    (
                        portable_words::kernel::<K, false>,
                        portable_words::kernel::<K, true>,
                    )
                } else if const { rebias16::applies(K::S::DTYPE, K::D::DTYPE) } {
                    (rebias16::kernel::<K, false>, rebias16::kernel::<K, true>)
                } else {
                    lookup::kernels::<K>()
                        .unwrap_or((portable::kernel::<K, false>, portable::kernel::<K, true>))
                };
            Some(Fast {
                kernel,
                streaming,
                screened: None,
            })
        }
        Isa::Avx2 => x86::avx2_kernel::<K>(),
        Isa::Avx512 => x86::avx512_kernel::<K>(),
    }
}

/// [`pick`] with kernels that also screen ([`Fast::screened`]): for the pairs from a 4- or
/// 8-byte source that Checked mode is used on (each screened kernel is two more instantiations per
/// instruction set and rounding, so not every pair gets one).
pub(crate) fn pick_screened<T: Step, U: Step>(isa: Isa, rounding: Rounding) -> Option<Fast> {
    let screened = match rounding {
        Rounding::Torch => screened::<T>(isa),
        Rounding::Saturate => screened::<U>(isa),
    };
    pick::<T, U>(isa, rounding).map(|fast| Fast { screened, ..fast })
}

/// The screened kernel of step `K` (a 4- or 8-byte source) on `isa`.
fn screened<K: Step>(isa: Isa) -> Option<ScreenedKernel> {
    use crate::lanes::Lane;
    assert!(
        matches!(K::S::SIZE, 4 | 8),
        "screened kernels read 32- or 64-bit keys"
    );
    match isa {
        Isa::Scalar => None,
        Isa::Portable => Some(portable::screened::<K>),
        Isa::Avx2 => x86::avx2_screened::<K>(),
        Isa::Avx512 => x86::avx512_screened::<K>(),
    }
}

/// The fast kernel of `isa` for a pair and rounding, if the pair has one and the CPU runs `isa`.
pub(crate) fn select(isa: Isa, from: DType, to: DType, rounding: Rounding) -> Option<Fast> {
    if !isa.is_available() {
        return None;
    }
    let (_, _, pick) = FAST.iter().find(|(f, t, _)| (*f, *t) == (from, to))?;
    pick(isa, rounding)
}

/// Runs `task` compiled for `isa`'s features where the CPU has them (the loops LLVM vectorises in
/// it then run as wide as that set's kernels), else as it is.
pub(crate) fn with_isa<T: Task>(isa: Isa, task: T) -> T::Output {
    match isa {
        Isa::Avx512 => with_avx512(task),
        Isa::Avx2 => with_avx2(task),
        Isa::Scalar | Isa::Portable => task.run(),
    }
}

/// Destinations from this size on are written with streaming (non-temporal) stores where the
/// instruction set has them: a cast writes a buffer it will not read back, and streaming stores
/// skip the read-for-ownership that ordinary stores cost, which matters most for widening pairs.
pub(crate) const STREAM_BYTES: usize = 1 << 20;

/// Step `K`'s scalar kernel (the rules, over stored buffers): what every kernel falls back on,
/// and what the tests hold the kernels to.
pub(crate) fn scalar<K: Step>() -> Kernel {
    if K::SATURATE {
        crate::dispatch::convert_stored::<K::S, K::D, true>
    } else {
        crate::dispatch::convert_stored::<K::S, K::D, false>
    }
}

/// The loops of a portable kernel: without streaming stores, and with them.
type PortableLoops = [unsafe fn(*const u8, *mut u8, usize); 2];

/// [`drive`] for the portable set's loops (plain Rust: always available; no screen): `loops`
/// (`[plain, streaming]`) over `n` elements at a time, a multiple of `lanes`. Each loop's
/// contract: `n` elements readable at its source and writable at its destination, which is
/// aligned to 64 bytes where it streams.
#[inline(always)]
fn drive_portable<K: Step, const ALWAYS_STREAM: bool>(
    src: &[u8],
    dst: &mut [u8],
    lanes: usize,
    loops: PortableLoops,
) {
    drive::<K, ALWAYS_STREAM>(
        src,
        dst,
        lanes,
        true,
        x86::STREAMS,
        None,
        |s, d, n, stream| {
            // SAFETY: `drive` passes `n` elements (a multiple of `lanes`) that fit both slices
            // and, when streaming, `d` aligned to 64 bytes: each loop's contract.
            unsafe { loops[usize::from(stream)](s.as_ptr(), d.as_mut_ptr(), n) };
            true
        },
    );
}

/// Runs a SIMD loop over `src` → `dst` the way every instruction set does: when `available`,
/// destinations of [`STREAM_BYTES`] and more (any, if `ALWAYS_STREAM`) first get a few scalar
/// elements so that the destination pointer is 64-byte aligned where the set `streams`, then
/// `simd(src, dst, n, stream)` converts `n` elements (a multiple of `lanes`); the scalar kernel
/// converts whatever is left. Offsets are counted in bits, so that packed sides (4 or 6 bits an
/// element) fit: the buffers hold whole elements, and every split falls on a byte of both.
///
/// With a `screen` (a 4- or 8-byte source), `simd` screens what it converts and says whether it
/// found nothing in the run, and the scalar elements are screened here: the result says whether
/// no element is in the run. Without one, the result is `simd`'s.
///
/// Generic only in what it passes on: the splitting is [`drive_split`], compiled once (it was a
/// sixth of the crate's LLVM input, compiled per kernel); it runs once per block of a cast.
#[inline(always)]
fn drive<K: Step, const ALWAYS_STREAM: bool>(
    src: &[u8],
    dst: &mut [u8],
    lanes: usize,
    available: bool,
    streams: bool,
    screen: Option<KeyRun>,
    mut simd: impl FnMut(&[u8], &mut [u8], usize, bool) -> bool,
) -> bool {
    use crate::lanes::Lane;
    let split = Split {
        source_bits: K::S::BITS,
        destination_bits: K::D::BITS,
        lanes,
        available,
        streams,
        always_stream: ALWAYS_STREAM,
    };
    drive_split(src, dst, split, scalar::<K>(), screen, &mut simd)
}

/// How [`drive`] splits a cast between scalar elements and a SIMD loop.
#[derive(Clone, Copy)]
struct Split {
    source_bits: usize,
    destination_bits: usize,
    lanes: usize,
    available: bool,
    streams: bool,
    always_stream: bool,
}

/// A SIMD loop as [`drive`] runs it: `(src, dst, n, stream)`, whether no element is in the run.
type SimdLoop<'a> = dyn FnMut(&[u8], &mut [u8], usize, bool) -> bool + 'a;

/// [`drive`]'s work, with the step's facts as values.
#[inline(never)]
fn drive_split(
    src: &[u8],
    dst: &mut [u8],
    split: Split,
    scalar: Kernel,
    screen: Option<KeyRun>,
    simd: &mut SimdLoop<'_>,
) -> bool {
    let (sb, db) = (split.source_bits, split.destination_bits);
    let n = (src.len() * 8 / sb).min(dst.len() * 8 / db);
    let (mut done, mut clear, mut head) = (0, true, 0);
    if split.available {
        // The elements up to the destination's next 64-byte boundary, where that boundary falls
        // between elements of both buffers.
        let gap = (64 - (dst.as_ptr() as usize) % 64) % 64;
        let stream = split.streams
            && (split.always_stream || dst.len() >= STREAM_BYTES)
            && (gap * 8).is_multiple_of(db)
            && (gap * 8 / db * sb).is_multiple_of(8);
        if stream {
            done = (gap * 8 / db).min(n);
            scalar(&src[..done * sb / 8], &mut dst[..done * db / 8]);
        }
        head = done;
        let full = (n - done) - (n - done) % split.lanes;
        clear = simd(
            &src[done * sb / 8..],
            &mut dst[done * db / 8..],
            full,
            stream,
        );
        done += full;
    }
    scalar(&src[done * sb / 8..], &mut dst[done * db / 8..]);
    match screen {
        // Whole-byte source elements: `head` before the SIMD loop, from `done` to `n` after it.
        Some(run) => {
            let size = sb / 8;
            clear
                && !run.any_inside(&src[..size * head], size)
                && !run.any_inside(&src[size * done..size * n], size)
        }
        None => clear,
    }
}

/// The kernels' tests (`crate::self_test`), module by module.
#[cfg(feature = "self-test")]
pub(crate) fn self_tests() -> [&'static [crate::self_test::Test]; 5] {
    [
        tests::TESTS,
        portable_words::tests::TESTS,
        rebias16::tests::TESTS,
        rounded16::tests::TESTS,
        words::tests::TESTS,
    ]
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    /// `len` xorshift bytes.
    fn random_bytes(len: usize) -> Vec<u8> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect()
    }

    fn the_plain_lookup_reads_codes_where_packing_puts_them() {
        // `Vector::lookup_u16`'s provided body (AVX-512's and AVX2's own are held to the scalar
        // rules by the cast tests of float6/float4 → bfloat16/float16): every code of random packed bytes,
        // unpacked by `dtcast_dtype::packing`, looked up in a table of distinct entries.
        use vector::Vector;
        type Plain = portable::Lanes;
        // Distinct entries without their top bit (an 8-bit code's sign sets it).
        let table = vector::Codes::new(
            core::array::from_fn(|i| (i as u16).wrapping_mul(1031) & 0x7FFF),
            None,
        );
        let n = 4 * Plain::LANES;
        for dtype in [DType::Float8E4M3, DType::Float6E2M3Fn, DType::Float4E2M1Fn] {
            let src = random_bytes(dtype.storage_bytes(n).unwrap());
            let mut codes = vec![0u8; n];
            dtcast_dtype::packing::unpack(dtype, &src, &mut codes).unwrap();
            let want: Vec<u8> = codes
                .iter()
                .flat_map(|&c| {
                    let sign = u16::from(c & 0x80) << 8;
                    (table.entries[usize::from(c & 0x7F)] | sign).to_le_bytes()
                })
                .collect();
            let mut got = vec![0u8; 2 * n];
            // SAFETY: `src` holds `n` codes, `got` room for `n` u16; the portable set runs
            // everywhere.
            unsafe {
                if dtype.bits() == 8 {
                    Plain::lookup_u16::<8, false>(src.as_ptr(), got.as_mut_ptr(), &table)
                } else if dtype.bits() == 6 {
                    Plain::lookup_u16::<6, false>(src.as_ptr(), got.as_mut_ptr(), &table)
                } else {
                    Plain::lookup_u16::<4, false>(src.as_ptr(), got.as_mut_ptr(), &table)
                }
            }
            assert_eq!(got, want, "{dtype}");
        }
        // An 8-bit table with a sign-set entry that stands for another value (`Codes::recode`):
        // only the code whose magnitude's entry that is (the entries are distinct) reads it.
        let recoded = 0x85u8;
        let from = table.entries[usize::from(recoded & 0x7F)] | 0x8000;
        let table = vector::Codes::new(table.entries, Some((from, 0x1234)));
        let mut src: Vec<u8> = (0..n).map(|k| (k * 37 % 256) as u8).collect();
        src[n / 2] = recoded;
        let want: Vec<u8> = (src.iter())
            .flat_map(|&c| match c {
                0x85 => 0x1234u16.to_le_bytes(),
                _ => {
                    (table.entries[usize::from(c & 0x7F)] | u16::from(c & 0x80) << 8).to_le_bytes()
                }
            })
            .collect();
        let mut got = vec![0u8; 2 * n];
        // SAFETY: `src` holds `n` codes, `got` room for `n` u16.
        unsafe { Plain::lookup_u16::<8, false>(src.as_ptr(), got.as_mut_ptr(), &table) };
        assert_eq!(got, want, "a recoded entry");
    }

    fn the_provided_float16_conversions_are_the_scalar_rules() {
        // `Vector`'s provided float16 bodies, which only the portable set runs (x86 overrides
        // both with F16C): held here to `formats` on every float16 and, the other way, on every
        // float32 sign, exponent and top 7 mantissa bits with low bits around each rounding
        // point, in order — vectors wholly inside float16's normal range (the integer rounding),
        // vectors across its ends, and vectors with and without the rare lanes (inf, NaN) that
        // take the longest way.
        use vector::Vector;
        type Plain = portable::Lanes;
        let n = Plain::LANES;
        let halves: Vec<u16> = (0..=u16::MAX).collect();
        for chunk in halves.chunks_exact(n) {
            let src: Vec<u8> = chunk.iter().flat_map(|h| h.to_le_bytes()).collect();
            let mut got = vec![0u8; 4 * n];
            // SAFETY: `src` holds `n` u16 and `got` room for `n` u32; the portable set runs
            // everywhere.
            unsafe { Plain::load_f16_as_f32(src.as_ptr()).store::<false>(got.as_mut_ptr()) };
            for (&h, out) in chunk.iter().zip(got.chunks_exact(4)) {
                let want = crate::formats::f16_to_f32(h).to_bits();
                let got = u32::from_le_bytes(out.try_into().unwrap());
                assert_eq!(got, want, "float16 {h:#06x}: {got:#010x} not {want:#010x}");
            }
        }
        let lows = [
            0u32, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3FFF, 0xFFFF,
        ];
        let words: Vec<u32> = (0..=u16::MAX as u32)
            .flat_map(|top| lows.map(|low| top << 16 | low))
            .collect();
        for chunk in words.chunks_exact(2 * n) {
            let src: Vec<u8> = chunk.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut got = vec![0u8; 4 * n];
            // SAFETY: as above, `2n` u32 in and `2n` u16 out.
            unsafe {
                let (a, b) = (
                    Plain::load(src.as_ptr()),
                    Plain::load(src.as_ptr().add(4 * n)),
                );
                Plain::store_f16::<false>(a, b, got.as_mut_ptr());
            }
            for (&w, out) in chunk.iter().zip(got.chunks_exact(2)) {
                let want = crate::formats::f32_to_f16(f32::from_bits(w));
                let got = u16::from_le_bytes(out.try_into().unwrap());
                assert_eq!(got, want, "float32 {w:#010x}: {got:#06x} not {want:#06x}");
            }
        }
    }

    fn screened_kernels_convert_as_the_plain_ones_and_screen_as_the_scalar_run() {
        // Every screened kernel on every instruction set this machine runs: the same bytes as the
        // streaming kernel, and "clear" exactly when no element's key is in the run — for runs
        // holding one element's key, wherever it sits (scalar head, SIMD loop, scalar tail), and
        // for runs holding none; for 32- and 64-bit keys. The destination offsets move the head.
        let n = 1000 + 37;
        let mut checked = 0;
        for &(from, to, pick) in &FAST {
            let (Some(size), Some(out_size)) = (from.byte_size(), to.byte_size()) else {
                continue; // packed sides: no screened kernels
            };
            let width = from.bits() as u32;
            let all = u64::MAX >> (64 - width);
            let src = random_bytes(n * size);
            // The key of element i (as `KeyRun::any_inside` defines it, written again here).
            let key_of = |i: usize, float: bool, mask: u64| {
                let mut word = [0u8; 8];
                word[..size].copy_from_slice(&src[size * i..size * (i + 1)]);
                let x = u64::from_le_bytes(word);
                let sign = 1u64 << (width - 1);
                if !float {
                    x & mask
                } else if x & sign != 0 {
                    !x & all
                } else {
                    x | sign
                }
            };
            for isa in crate::isas() {
                for rounding in [Rounding::Torch, Rounding::Saturate] {
                    let Some(Fast {
                        streaming,
                        screened: Some(screened),
                        ..
                    }) = pick(isa, rounding)
                    else {
                        continue;
                    };
                    let mut want = vec![0u8; n * out_size];
                    streaming(&src, &mut want);
                    for offset in [0, out_size, 3 * out_size] {
                        for (float, mask) in [(false, all >> 1), (false, all), (true, 0)] {
                            let key_run = |lo: u64, len: u64| KeyRun {
                                mask,
                                float,
                                lo,
                                len,
                            };
                            let mut runs: Vec<(KeyRun, bool)> = [0, 1, 15, 500, n - 1]
                                .into_iter()
                                .map(|i| (key_run(key_of(i, float, mask), 1), false))
                                .collect();
                            // Runs that hold no element's key: just past the largest key, and
                            // (64-bit keys) every key but the least, starting past it, whose
                            // length crosses a high-word boundary (wrapping round).
                            let keys: Vec<u64> = (0..n).map(|i| key_of(i, float, mask)).collect();
                            let (least, top) =
                                (*keys.iter().min().unwrap(), *keys.iter().max().unwrap());
                            if top != all {
                                runs.push((key_run(top + 1, 1), true));
                            }
                            if top != all && least != 0 {
                                runs.push((key_run(top + 1, (all - top) + least), true));
                                runs.push((key_run(top + 1, (all - top) + least + 1), false));
                            }
                            for (run, clear) in runs {
                                assert_eq!(run.any_inside(&src, size), !clear, "{run:?}");
                                let mut out = vec![0u8; n * out_size + offset];
                                let got = screened(&src, &mut out[offset..], run);
                                assert_eq!(
                                    got, clear,
                                    "{from} -> {to} ({isa:?}, {run:?}, offset {offset})"
                                );
                                assert!(
                                    out[offset..] == want[..],
                                    "{from} -> {to} ({isa:?}): bytes differ"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        // The 9 pairs with screened kernels (6 from float32, 3 from 64-bit sources) on at least
        // the portable set.
        assert!(checked >= 9 * 2 * 3 * 3 * 6, "{checked}");
    }

    crate::self_test::list!(
        the_plain_lookup_reads_codes_where_packing_puts_them,
        the_provided_float16_conversions_are_the_scalar_rules,
        screened_kernels_convert_as_the_plain_ones_and_screen_as_the_scalar_run,
    );
}
