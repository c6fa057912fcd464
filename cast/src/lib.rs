//! Value casts between every pair of dtcast dtypes, bit-exact with PyTorch's CPU casts, and with
//! ml_dtypes' `astype` where torch cannot cast the pair.
//!
//! [`cast`] converts a buffer of little-endian elements of one [`DType`] into another, for every
//! pair of the 34 value dtypes (packed sub-byte buffers included; `float4_e2m1fn_x2` casts only to
//! itself), in one of four [`CastMode`]s:
//!
//! | mode | float → int | float → narrower float | an element that does not fit |
//! |---|---|---|---|
//! | [`Torch`](CastMode::Torch) (default) | PyTorch 2.15 on x86-64: wraps | through f32 (double rounding), torch's NaN bits | torch's answer |
//! | [`Saturate`](CastMode::Saturate) | clamps, NaN → 0 (as XLA) | one correct rounding; overflow saturates (not XLA's rule: see the mode) | the nearest representable |
//! | [`Checked`](CastMode::Checked) | as Torch | as Torch | error: NaN/inf/out of range → int, imaginary part → real, overflow |
//! | [`Exact`](CastMode::Exact) | as Torch | as Torch | error: any change of value |
//!
//! Where torch cannot cast a pair — one side is a dtype it lacks or only stores (float8_e4m3,
//! float8_e3m4, float8_e4m3b11fnuz, float8_e5m3fnu, float6, float4, int4/2/1, uint4/2/1) — the
//! Torch mode is ml_dtypes 0.7's `astype`, bit for bit: one rounding from float64 or float32
//! (integers through f32), nearest-even; overflow and ±inf to ±inf, else NaN, else (float6,
//! float4) ±max; NaN to the format's NaN or, without one, to the zero of the opposite sign; a
//! negative value into the unsigned float8_e5m3fnu is its NaN, and zero or a negative value into
//! float8_e8m0fnu its NaN; float → int4/2/1 truncates and keeps the low bits (NaN, ±inf,
//! |x| ≥ 2^31 → 0), float → int8..int64 gives 0 for NaN and the bounds for ±inf. Saturate gives +0
//! for NaN into a format without NaN and 0 for a negative value into float8_e5m3fnu; Checked
//! refuses both.
//!
//! Packed buffers hold element `i` in bits `i·b .. i·b + b` (see [`dtcast_dtype::packing`]); their
//! lengths must end on a byte.
//!
//! ```
//! use dtcast_cast::{cast_to_vec, CastMode};
//! use dtcast_dtype::DType;
//! let src: Vec<u8> = [1.0f32, 6.0, 0.5, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
//! let packed = cast_to_vec(&src, DType::Float32, DType::Float4E2M1Fn, CastMode::Torch)?;
//! assert_eq!(packed, [0x72, 0xC1]); // codes 2, 7, 1, 12: two per byte, low nibble first
//! # Ok::<(), dtcast_cast::CastError>(())
//! ```
//!
//! Errors name the first offending element; in Checked and Exact mode [`cast`] leaves the
//! destination untouched when an error is found (every element is checked before any is written).
//! That check is one more read of the source, screened a block at a time by vectorised tests; pairs
//! where no element can fail (Checked int32 → float32 or float16 → bfloat16, which only round) skip
//! it. Where the destination is new and is thrown away on error ([`cast_to_vec`], and
//! [`cast_into_scratch`] for buffers of your own), each block is checked and converted while it is
//! in cache: one pass.
//!
//! ```
//! use dtcast_cast::{cast_slice, CastMode};
//!
//! let src = [1.0f32, 2.5, -3.0, 300.0];
//! let mut dst = [0u8; 4];
//! cast_slice(&src, &mut dst, CastMode::Torch)?;
//! assert_eq!(dst, [1, 2, 253, 44]); // as torch: -3 wraps to 253, 300 to 44
//!
//! cast_slice(&src, &mut dst, CastMode::Saturate)?;
//! assert_eq!(dst, [1, 2, 0, 255]);
//!
//! let err = cast_slice(&src, &mut [0u8; 4], CastMode::Checked).unwrap_err();
//! assert_eq!(err.to_string(), "element 2 (-3.0) is out of range for uint8");
//! # Ok::<(), dtcast_cast::CastError>(())
//! ```
//!
//! Large buffers are split across rayon's thread pool (run inside `ThreadPool::install` to choose
//! the pool); small ones are converted on the calling thread. The hot pairs ([`hot_pairs`]) have
//! SIMD kernels, each algorithm written once and built for every instruction set ([`Isa`]): AVX-512
//! and AVX2 on x86-64, and portable Rust that LLVM vectorises for any CPU. The best set this
//! machine runs is chosen once at run time ([`isa()`]); every set gives the same bytes as the scalar
//! rules for every input. Build with `DTCAST_ISA=portable` in the environment to leave the x86
//! sets out (what other CPUs run).
#![deny(missing_docs)]

mod buffer;
mod check;
mod dispatch;
mod error;
mod formats;
mod isa;
mod kernels;
mod lanes;
pub mod layout;
mod lowp_lanes;
mod ml;
mod mode;
mod packed;
mod plain;
mod plan;
mod rules;
mod screen;
#[cfg(feature = "self-test")]
#[doc(hidden)]
pub mod self_test;
mod split;
mod tables;
mod through;

use dtcast_dtype::{packing, DType, Element};
use lanes::unit;
use rayon::prelude::*;
use split::{first_index, pieces, CHUNK_ELEMENTS, PARALLEL_THRESHOLD};

pub use buffer::{prefer_huge_pages, zeroed_vec};
pub use dtcast_dtype;
pub use error::{CastError, ValueErrorKind};
pub use isa::{isa, isas, pin_isa, Isa, ParseIsaError, PinIsaError};
pub use lanes::Quirks;
pub use mode::{CastMode, ParseCastModeError};

/// The pairs that model conversion and checkpoint work lean on, which have SIMD kernels where the
/// CPU allows: `dtcast bench` and the criterion benches measure these by default.
pub fn hot_pairs() -> &'static [(DType, DType)] {
    &kernels::FAST_PAIRS
}

/// Converts `src`, little-endian elements of `from`, into `dst` as elements of `to`.
///
/// `src.len()` must be a whole number of `from` elements and `dst` must hold exactly as many
/// `to` elements; otherwise an error says which. Neither buffer needs any alignment. When the
/// dtypes are equal the bytes are copied.
///
/// ```
/// use dtcast_cast::{cast, CastMode};
/// use dtcast_dtype::DType;
/// let src = 1.0f64.to_le_bytes();
/// let mut dst = [0u8; 2];
/// cast(&src, DType::Float64, &mut dst, DType::BFloat16, CastMode::Torch)?;
/// assert_eq!(u16::from_le_bytes(dst), 0x3F80);
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
) -> Result<(), CastError> {
    cast_with_isa(src, from, dst, to, mode, isa())
}

/// [`cast`] with the kernels of a chosen instruction set (for comparing sets, or pinning one),
/// screens included; a set this machine lacks, or a pair it has no kernel for, uses the scalar
/// kernels.
///
/// ```
/// use dtcast_cast::{cast_with_isa, isas, CastMode};
/// use dtcast_dtype::DType;
/// let src = [0u8, 0, 0x80, 0x3F];
/// for isa in isas() {
///     let mut dst = [0u8; 2];
///     cast_with_isa(&src, DType::Float32, &mut dst, DType::BFloat16, CastMode::Torch, isa)?;
///     assert_eq!(dst, [0x80, 0x3F]);
/// }
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_with_isa(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
    isa: Isa,
) -> Result<(), CastError> {
    let Some((_, fns, plan)) = begin(src, from, dst, to, mode, isa, true)? else {
        return Ok(());
    };
    if let Some((verify, check)) = plan.check {
        match check {
            screen::Check::Nothing => {}
            screen::Check::Screen(s) => check_all(src, from, fns.check, verify, Some((s, isa)))?,
            screen::Check::Elements => check_all(src, from, fns.check, verify, None)?,
        }
    }
    convert_all(src, from, dst, to, plan.kernel);
    Ok(())
}

/// [`cast`] by the scalar rules alone: single-threaded, no SIMD, every element verified by the
/// rules (no screens). This is the reference the fast kernels are tested against (they must give
/// the same bytes).
///
/// ```
/// use dtcast_cast::{cast, cast_reference, CastMode};
/// use dtcast_dtype::DType;
/// let src: Vec<u8> = (0..64u32).flat_map(|i| f32::from_bits(i * 0x0101_0101).to_le_bytes()).collect();
/// let (mut a, mut b) = (vec![0u8; 128], vec![0u8; 128]);
/// cast(&src, DType::Float32, &mut a, DType::BFloat16, CastMode::Torch)?;
/// cast_reference(&src, DType::Float32, &mut b, DType::BFloat16, CastMode::Torch)?;
/// assert_eq!(a, b);
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_reference(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
) -> Result<(), CastError> {
    let (n, fns) = prepare(src.len(), from, dst.len(), to)?;
    // The same dtype runs through the element rules too (float4_e2m1fn_x2, which has none, is
    // copied).
    let Some(fns) = fns else {
        dst.copy_from_slice(src);
        return Ok(());
    };
    let plan = plan::plan(from, to, mode, 0, Isa::Scalar, &fns);
    // Packed buffers are unpacked whole: one byte per element, code in the low bits.
    let mut codes = vec![0u8; if from.is_packed() { n } else { 0 }];
    let src = unpacked(src, from, &mut codes)?;
    if let Some((verify, _)) = plan.check {
        (fns.check)(src, verify, 0)?;
    }
    if to.is_packed() {
        let mut out = vec![0u8; n];
        (plan.kernel)(src, &mut out);
        packing::pack(to, &out, dst).map_err(storage_error)?;
    } else {
        (plan.kernel)(src, dst);
    }
    Ok(())
}

/// The start every cast shares: checks the lengths, copies when the dtypes are equal, and runs the
/// casts that go block by block (`packed.rs`, verifying everything first when `read_first`).
/// What is left for the caller — the element count, the pair's kernels and the plan — or `None`
/// when the cast is done.
fn begin(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
    isa: Isa,
    read_first: bool,
) -> Result<Option<(usize, dispatch::PairFns, plan::Plan)>, CastError> {
    let (n, fns) = prepare(src.len(), from, dst.len(), to)?;
    let Some(fns) = fns.filter(|_| from != to) else {
        dst.copy_from_slice(src); // the same dtype: a copy
        return Ok(None);
    };
    let plan = plan::plan(from, to, mode, n, isa, &fns);
    if by_blocks(from, to, &plan) {
        let verification = packed_verification(from, &plan, &fns, read_first);
        packed::cast(src, from, dst, to, n, plan.kernel, verification, isa)?;
        return Ok(None);
    }
    Ok(Some((n, fns, plan)))
}

/// `src` one byte per element: unpacked into `codes` for a packed dtype, itself otherwise.
fn unpacked<'a>(src: &'a [u8], from: DType, codes: &'a mut [u8]) -> Result<&'a [u8], CastError> {
    if !from.is_packed() {
        return Ok(src);
    }
    packing::unpack(from, src, codes).map_err(storage_error)?;
    Ok(codes)
}

fn storage_error(e: packing::StorageError) -> CastError {
    match e {
        packing::StorageError::NotByteAligned { dtype, elements } => {
            CastError::NotByteAligned { dtype, elements }
        }
        packing::StorageError::Length { dtype, bytes, .. } => {
            CastError::PartialElement { dtype, len: bytes }
        }
    }
}

/// Whether a cast goes block by block through `packed.rs`: packed buffers without a SIMD kernel
/// (which would read and write them packed), and one-byte sources that the plan looks up byte by
/// byte ([`Plan::bytes`](plan::Plan)).
fn by_blocks(from: DType, to: DType, plan: &plan::Plan) -> bool {
    let packed = from.is_packed() || to.is_packed();
    (!plan.simd && packed) || plan.bytes
}

/// The bytes of `elements` elements of `dtype`, for counts that end on a byte (the pieces and
/// blocks below are multiples of 64 elements, or whole buffers).
fn span(dtype: DType, elements: usize) -> usize {
    elements * dtype.bits() / 8
}

/// What a packed cast verifies, from the plan.
fn packed_verification(
    from: DType,
    plan: &plan::Plan,
    fns: &dispatch::PairFns,
    read_first: bool,
) -> Option<packed::Verification> {
    match plan.check {
        None | Some((_, screen::Check::Nothing)) => None,
        Some((verify, check)) => Some(packed::Verification {
            check: fns.check,
            verify,
            read_first,
            // Screens read elements as stored: a packed source's unpacked codes are checked
            // element by element.
            screen: match check {
                screen::Check::Screen(screen) if !from.is_packed() => Some(screen),
                _ => None,
            },
        }),
    }
}

/// [`cast`] over typed slices: `S` and `D` name the dtypes.
///
/// ```
/// use dtcast_cast::{cast_slice, CastMode};
/// use dtcast_dtype::half::bf16;
/// let mut out = [bf16::ZERO; 2];
/// cast_slice(&[1.0f32, 1.0 + 1.0 / 256.0], &mut out, CastMode::Torch)?;
/// assert_eq!(out, [bf16::ONE, bf16::ONE]); // a tie rounds to even
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_slice<S: Element, D: Element>(
    src: &[S],
    dst: &mut [D],
    mode: CastMode,
) -> Result<(), CastError> {
    let src_bytes: &[u8] = bytemuck::cast_slice(src);
    let len = core::mem::size_of_val(dst);
    // SAFETY: an `Element` is plain data without padding (`NoUninit`) whose size is its dtype's
    // itemsize, so its memory is `len` initialised bytes. The kernels write only valid elements
    // of `D::DTYPE` (bool: 0 or 1; every other element type accepts every bit pattern), and the
    // byte view does not outlive this call.
    let dst_bytes: &mut [u8] =
        unsafe { core::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), len) };
    cast(src_bytes, S::DTYPE, dst_bytes, D::DTYPE, mode)
}

/// [`cast`] with streaming (non-temporal) stores into any destination, where [`cast`] streams
/// only into large ones: for a large output written a piece at a time that is not read back
/// soon (a dequantized weight, band by band), the stores then skip the read-for-ownership that
/// ordinary stores cost. The bytes are [`cast`]'s; modes that check values run as [`cast`] does.
///
/// ```
/// use dtcast_cast::{cast, cast_streaming, CastMode};
/// use dtcast_dtype::DType;
/// let src: Vec<u8> = (0..1000).flat_map(|i| (i as f32 * 0.37).to_le_bytes()).collect();
/// let (mut a, mut b) = (vec![0u8; 2000], vec![0u8; 2000]);
/// cast(&src, DType::Float32, &mut a, DType::BFloat16, CastMode::Torch)?;
/// cast_streaming(&src, DType::Float32, &mut b, DType::BFloat16, CastMode::Torch)?;
/// assert_eq!(a, b);
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_streaming(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
) -> Result<(), CastError> {
    let Some((_, _, plan)) = begin(src, from, dst, to, mode, isa(), false)? else {
        return Ok(());
    };
    match plan.check {
        None | Some((_, screen::Check::Nothing)) => {
            convert_all(src, from, dst, to, plan.streaming);
            Ok(())
        }
        Some(_) => cast(src, from, dst, to, mode),
    }
}

/// [`cast`] into a buffer whose contents do not matter if the cast fails: on an error `dst` may
/// hold converted elements before the offending one (and after it, from other threads), so Checked
/// and Exact modes check and convert each block while it is in cache — one pass over the source
/// instead of two. Use it where the output is discarded on error (a new buffer, a temporary file);
/// the error is the same as [`cast`]'s.
///
/// ```
/// use dtcast_cast::{cast_into_scratch, CastMode};
/// use dtcast_dtype::DType;
/// let src: Vec<u8> = [1.0f32, 2.0, f32::NAN].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let mut dst = [0u8; 3 * 4];
/// let err = cast_into_scratch(&src, DType::Float32, &mut dst, DType::Int32, CastMode::Checked);
/// assert_eq!(err.unwrap_err().to_string(), "element 2 (NaN) cannot be represented in int32");
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_into_scratch(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    mode: CastMode,
) -> Result<(), CastError> {
    let isa = isa();
    let Some((n, fns, plan)) = begin(src, from, dst, to, mode, isa, false)? else {
        return Ok(());
    };
    let (verify, screen) = match plan.check {
        Some((verify, screen::Check::Screen(s))) => (verify, Some((s, isa))),
        Some((verify, screen::Check::Elements)) => (verify, None),
        None | Some((_, screen::Check::Nothing)) => {
            convert_all(src, from, dst, to, plan.kernel);
            return Ok(());
        }
    };
    // Streaming stores where a whole-buffer cast would use them, though each call writes a block.
    let kernel = if dst.len() >= kernels::STREAM_BYTES {
        plan.streaming
    } else {
        plan.kernel
    };
    // Where the pair has a kernel that screens as it converts and the screen is a run of 32- or
    // 64-bit keys, one loop does both (the block is loaded once); the per-element rules then look
    // only at blocks it flags.
    let fused = plan
        .screened
        .filter(|_| dst.len() >= kernels::STREAM_BYTES)
        .zip(screen.and_then(|(s, _)| s.key_run(unit(from))));
    // The source is whole bytes per element here (a packed source that is verified went block by
    // block in `begin`); the destination may be packed, written by a SIMD kernel.
    let piece = |s: &[u8], d: &mut [u8], base: usize| -> Result<(), CastError> {
        let mut scratch = Vec::new();
        let (mut s, mut d, mut first) = (s, d, base);
        while !s.is_empty() {
            // Blocks end where the destination is 64-byte aligned, so that each kernel call
            // streams from its first element (no scalar prologue per block).
            let gap = (64 - (d.as_ptr() as usize) % 64) % 64;
            let head = if (gap * 8).is_multiple_of(to.bits()) {
                gap * 8 / to.bits()
            } else {
                0
            };
            let len = if head > 0 { head } else { FUSED_BLOCK }.min(s.len() / unit(from));
            let (b, rest) = s.split_at(len * unit(from));
            let (o, out_rest) = d.split_at_mut(span(to, len));
            if let Some((screened, run)) = fused {
                if !screened(b, o, run) {
                    (fns.check)(b, verify, first)?;
                }
            } else {
                let clear = screen.is_some_and(|(sc, isa)| sc.passes(b, from, &mut scratch, isa));
                if !clear {
                    (fns.check)(b, verify, first)?;
                }
                kernel(b, o);
            }
            (s, d, first) = (rest, out_rest, first + len);
        }
        Ok(())
    };
    if n < PARALLEL_THRESHOLD || rayon::current_num_threads() == 1 {
        return piece(src, dst, 0);
    }
    let per = pieces(n);
    src.par_chunks(span(from, per))
        .zip(dst.par_chunks_mut(span(to, per)))
        .enumerate()
        .filter_map(|(i, (s, d))| piece(s, d, i * per).err())
        .min_by_key(first_index)
        .map_or(Ok(()), Err)
}

/// Elements a one-pass check screens and converts at a time: the block stays in L1/L2 between the
/// two.
const FUSED_BLOCK: usize = 4096;

/// Converts `src` into a new buffer of `to` elements (checking and converting in one pass in
/// Checked and Exact mode, as [`cast_into_scratch`]: the buffer is dropped on error).
///
/// ```
/// use dtcast_cast::{cast_to_vec, CastMode};
/// use dtcast_dtype::DType;
/// let out = cast_to_vec(&[0x01, 0x00, 0x02], DType::UInt8, DType::Bool, CastMode::Torch)?;
/// assert_eq!(out, vec![1, 0, 1]);
/// # Ok::<(), dtcast_cast::CastError>(())
/// ```
pub fn cast_to_vec(
    src: &[u8],
    from: DType,
    to: DType,
    mode: CastMode,
) -> Result<Vec<u8>, CastError> {
    let n = elements(src.len(), from)?;
    let bytes = to.storage_bytes(n).map_err(|_| CastError::NotByteAligned {
        dtype: to,
        elements: n,
    })?;
    let mut out = zeroed_vec(bytes).ok_or(CastError::OutOfMemory { bytes })?;
    cast_into_scratch(src, from, &mut out, to, mode)?;
    Ok(out)
}

/// Checks that both buffers hold the same whole number of elements: that number, and the pair's
/// kernels (`None` only for float4_e2m1fn_x2 to itself, a copy).
fn prepare(
    src_len: usize,
    from: DType,
    dst_len: usize,
    to: DType,
) -> Result<(usize, Option<dispatch::PairFns>), CastError> {
    let (n, m) = (elements(src_len, from)?, elements(dst_len, to)?);
    if n != m {
        return Err(CastError::LengthMismatch {
            from,
            to,
            src_elements: n,
            dst_elements: m,
        });
    }
    match dispatch::pair_fns(from, to) {
        None if from != to => Err(CastError::Unsupported { from, to }),
        fns => Ok((n, fns)),
    }
}

fn elements(len: usize, dtype: DType) -> Result<usize, CastError> {
    dtype
        .elements_in(len)
        .ok_or(CastError::PartialElement { dtype, len })
}

/// Converts every element, nothing checked; in parallel pieces for large buffers. The buffers are
/// as stored (packed sides packed: only SIMD kernels get here with them).
fn convert_all(src: &[u8], from: DType, dst: &mut [u8], to: DType, kernel: dispatch::Kernel) {
    let n = src.len() * 8 / from.bits();
    if n < PARALLEL_THRESHOLD || rayon::current_num_threads() == 1 {
        kernel(src, dst);
        return;
    }
    let per = pieces(n);
    src.par_chunks(span(from, per))
        .zip(dst.par_chunks_mut(span(to, per)))
        .for_each(|(s, d)| kernel(s, d));
}

/// Checks every element, in parallel for large buffers; a screen (when the pair has one) clears
/// whole blocks with a vectorised test first, so only blocks it cannot clear are checked element
/// by element.
fn check_all(
    src: &[u8],
    from: DType,
    check: dispatch::Checker,
    verify: mode::Verify,
    screen: Option<(screen::Screen, Isa)>,
) -> Result<(), CastError> {
    const BLOCK: usize = 1024;
    let chunk = |s: &[u8], base: usize| -> Result<(), CastError> {
        let Some((screen, isa)) = screen else {
            return check(s, verify, base);
        };
        let mut scratch = Vec::new();
        s.chunks(BLOCK * unit(from))
            .enumerate()
            .try_for_each(|(j, b)| {
                if screen.passes(b, from, &mut scratch, isa) {
                    Ok(())
                } else {
                    check(b, verify, base + j * BLOCK)
                }
            })
    };
    let n = src.len() / unit(from);
    if n < PARALLEL_THRESHOLD || rayon::current_num_threads() == 1 {
        return chunk(src, 0);
    }
    // The first offending element overall: the error of the lowest chunk that has one.
    src.par_chunks(CHUNK_ELEMENTS * unit(from))
        .enumerate()
        .filter_map(|(i, s)| chunk(s, i * CHUNK_ELEMENTS).err())
        .min_by_key(first_index)
        .map_or(Ok(()), Err)
}

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
