//! Casts where either side is packed (float6, float4, int4/2/1, uint4/2/1): each block of
//! elements is unpacked to one byte per element, checked and converted by the ordinary kernels,
//! and packed again — so the value rules are written once, for one-byte codes. A source of 1, 2,
//! 4 or 8 bits into a whole-byte destination is looked up instead, byte by byte, in a table of
//! what each source byte becomes (by vectors where the instruction set has them:
//! `kernels::look_up_bytes`); the plan sends one-byte sources here too (`plan::by_bytes`).

use dtcast_dtype::{packing, DType};
use rayon::prelude::*;

use crate::dispatch::{Checker, Kernel};
use crate::error::CastError;
use crate::isa::Isa;
use crate::lanes::unit;
use crate::mode::Verify;
use crate::screen::Screen;
use crate::split::{first_index, pieces, PARALLEL_THRESHOLD};

/// Elements per block: a multiple of 8, so that a block of any packed dtype starts and ends on a
/// byte (float6: 4 elements in 3 bytes).
const BLOCK: usize = 4096;

/// How a packed cast verifies.
pub(crate) struct Verification {
    pub(crate) check: Checker,
    pub(crate) verify: Verify,
    /// Check every element before writing any (a caller's buffer), or each block before
    /// converting it (an output dropped on error).
    pub(crate) read_first: bool,
    /// The plan's screen of a whole-byte source: a block it passes needs no element checks.
    pub(crate) screen: Option<Screen>,
}

impl Verification {
    /// Checks the block `codes` (one byte per element, or the source as stored where it is
    /// whole bytes) whose first element is `base`: by the screen first, where there is one.
    fn check(
        &self,
        codes: &[u8],
        from: DType,
        base: usize,
        scratch: &mut Vec<u8>,
        isa: Isa,
    ) -> Result<(), CastError> {
        match &self.screen {
            Some(screen) if screen.passes(codes, from, scratch, isa) => Ok(()),
            _ => (self.check)(codes, self.verify, base),
        }
    }
}

/// Converts `n` elements `from` → `to` (either packed) with the unit-form `kernel`; byte tables
/// are looked up with `isa`'s vectors where it has a form for them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cast(
    src: &[u8],
    from: DType,
    dst: &mut [u8],
    to: DType,
    n: usize,
    kernel: Kernel,
    verification: Option<Verification>,
    isa: Isa,
) -> Result<(), CastError> {
    // Sources of 1, 2, 4 or 8 bits into a whole-byte destination: the outputs of every source
    // byte, computed once by the kernel itself, then looked up (the same bytes by construction).
    let table = byte_table(from, to, kernel);
    let convert = |s: &[u8], d: &mut [u8], scratch: &mut Scratch| match &table {
        // float6's codes straddle bytes: unpacked first, then looked up code by code.
        Some(t) if t.per_code => t.apply(unpacked(s, from, &mut scratch.src), d, isa),
        Some(t) => t.apply(s, d, isa),
        None => convert_block(s, from, d, to, kernel, scratch),
    };
    match &verification {
        Some(v) if v.read_first => {
            over_pieces(src, from, None, to, n, &|s, _, base, scratch| {
                let s = unpacked(s, from, &mut scratch.src);
                v.check(s, from, base, &mut scratch.screen, isa)
            })?;
            over_pieces(src, from, Some(dst), to, n, &|s, d, _, scratch| {
                convert(s, d, scratch);
                Ok(())
            })
        }
        _ => over_pieces(src, from, Some(dst), to, n, &|s, d, base, scratch| {
            if let Some(v) = &verification {
                let codes = unpacked(s, from, &mut scratch.src);
                v.check(codes, from, base, &mut scratch.screen, isa)?;
            }
            convert(s, d, scratch);
            Ok(())
        }),
    }
}

/// Reusable unpacked buffers of one thread.
#[derive(Default)]
struct Scratch {
    src: Vec<u8>,
    dst: Vec<u8>,
    screen: Vec<u8>,
}

/// What one block does: source bytes, destination bytes (`None` when only checking), the index of
/// its first element.
type BlockFn<'a> =
    dyn Fn(&[u8], &mut [u8], usize, &mut Scratch) -> Result<(), CastError> + Sync + 'a;

/// Runs `block` over every block, in parallel pieces for large buffers; the first error by
/// element index.
fn over_pieces(
    src: &[u8],
    from: DType,
    dst: Option<&mut [u8]>,
    to: DType,
    n: usize,
    block: &BlockFn<'_>,
) -> Result<(), CastError> {
    let piece = |s: &[u8], mut d: Option<&mut [u8]>, first: usize| -> Result<(), CastError> {
        let mut scratch = Scratch::default();
        let (sb, db) = (bytes(from, BLOCK), bytes(to, BLOCK));
        for (j, s) in s.chunks(sb).enumerate() {
            let d: &mut [u8] = match d.as_deref_mut() {
                Some(d) => {
                    let len = d.len().min((j + 1) * db);
                    &mut d[j * db..len]
                }
                None => &mut [],
            };
            block(s, d, first + j * BLOCK, &mut scratch)?;
        }
        Ok(())
    };
    if n < PARALLEL_THRESHOLD || rayon::current_num_threads() == 1 {
        return piece(src, dst, 0);
    }
    let per = pieces(n).next_multiple_of(BLOCK);
    let pieces = src.par_chunks(bytes(from, per)).enumerate();
    let errors = match dst {
        Some(dst) => pieces
            .zip(dst.par_chunks_mut(bytes(to, per)))
            .filter_map(|((i, s), d)| piece(s, Some(d), i * per).err())
            .min_by_key(first_index),
        None => pieces
            .filter_map(|(i, s)| piece(s, None, i * per).err())
            .min_by_key(first_index),
    };
    errors.map_or(Ok(()), Err)
}

/// The storage of `elements` elements, `elements` a multiple of 8 (so always whole bytes).
fn bytes(dtype: DType, elements: usize) -> usize {
    elements * dtype.bits() / 8
}

/// `s` in unit form: unpacked into `scratch` for a packed dtype, itself otherwise.
fn unpacked<'a>(s: &'a [u8], dtype: DType, scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if !dtype.is_packed() {
        return s;
    }
    let n = s.len() * 8 / dtype.bits();
    scratch.resize(n, 0);
    // The lengths come from whole blocks of a buffer whose size was checked.
    let unpacked = packing::unpack(dtype, s, scratch);
    debug_assert!(unpacked.is_ok());
    scratch
}

/// What every source byte becomes — `8 / bits(from)` destination elements, `width` bytes in all —
/// or, for float6 (`per_code`), what every code becomes.
struct ByteTable {
    bytes: Vec<u8>,
    width: usize,
    per_code: bool,
    /// Entries of 1, 2 or 4 bytes as planes (plane `k`: byte `k` of every entry), for the SIMD
    /// lookups (`kernels::look_up_bytes`); empty otherwise.
    planes: Vec<[u8; 256]>,
}

fn byte_table(from: DType, to: DType, kernel: Kernel) -> Option<ByteTable> {
    if to.is_packed() {
        return None;
    }
    let (codes, per_code) = match from.bits() {
        6 => ((0..64).collect::<Vec<u8>>(), true),
        1 | 2 | 4 | 8 => {
            let all: Vec<u8> = (0..=255).collect();
            let mut codes = vec![0u8; 256 * 8 / from.bits()];
            packing::unpack(from, &all, &mut codes).ok()?;
            (codes, false)
        }
        _ => return None,
    };
    let width = if per_code { 1 } else { 8 / from.bits() } * unit(to);
    let mut bytes = vec![0u8; codes.len() * unit(to)];
    kernel(&codes, &mut bytes);
    let planes = if !per_code && matches!(width, 1 | 2 | 4) {
        (0..width)
            .map(|k| core::array::from_fn(|b| bytes[b * width + k]))
            .collect()
    } else {
        Vec::new()
    };
    Some(ByteTable {
        bytes,
        width,
        per_code,
        planes,
    })
}

impl ByteTable {
    /// Looks every byte (or float6 code) of `s` up into `d`: by `isa`'s vectors as far as they
    /// reach, the rest one entry at a time.
    fn apply(&self, s: &[u8], d: &mut [u8], isa: Isa) {
        let done = if self.planes.is_empty() {
            0
        } else {
            crate::kernels::look_up_bytes(isa, &self.planes, s, d)
        };
        self.apply_scalar(&s[done..], &mut d[done * self.width..]);
    }

    fn apply_scalar(&self, s: &[u8], d: &mut [u8]) {
        match self.width {
            1 => self.apply_n::<1>(s, d),
            2 => self.apply_n::<2>(s, d),
            4 => self.apply_n::<4>(s, d),
            8 => self.apply_n::<8>(s, d),
            16 => self.apply_n::<16>(s, d),
            32 => self.apply_n::<32>(s, d),
            w => {
                for (&b, out) in s.iter().zip(d.chunks_exact_mut(w)) {
                    out.copy_from_slice(&self.bytes[usize::from(b) * w..][..w]);
                }
            }
        }
    }

    /// The lookup with the entry size known to the compiler (one fixed-size copy per byte).
    fn apply_n<const W: usize>(&self, s: &[u8], d: &mut [u8]) {
        let (entries, _) = self.bytes.as_chunks::<W>();
        let (outs, _) = d.as_chunks_mut::<W>();
        for (&b, out) in s.iter().zip(outs) {
            *out = entries[usize::from(b)];
        }
    }
}

fn convert_block(
    s: &[u8],
    from: DType,
    d: &mut [u8],
    to: DType,
    kernel: Kernel,
    scratch: &mut Scratch,
) {
    let codes = unpacked(s, from, &mut scratch.src);
    if !to.is_packed() {
        kernel(codes, d);
        return;
    }
    let n = codes.len() / unit(from);
    scratch.dst.resize(n, 0);
    kernel(codes, &mut scratch.dst);
    let packed = packing::pack(to, &scratch.dst, d);
    debug_assert!(packed.is_ok());
}
