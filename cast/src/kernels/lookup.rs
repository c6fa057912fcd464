//! Table kernels of the portable instruction set: where a destination element depends on at most
//! 16 bits of its source element, the portable kernels look it up instead of computing it — except
//! where computing measured faster (float32 destinations from 16-bit sources and
//! float8_e5m2: [`index_of`];
//! chunks of float16/bfloat16 → float8 and float4 inside the range where 16-bit lane arithmetic was checked
//! against the table: `rounded16.rs`).
//!
//! A target without wide SIMD (the x86-64 baseline's SSE2 has no lane-wise min, max or blend, and
//! no float16 conversion) spends a dozen instructions per lane on a float8 rounding that AVX2 does
//! in a few; one load from a table that stays in cache costs less. The tables are computed from the
//! scalar rules (`dispatch::convert_stored`) once per pair and rounding, so they give the rules'
//! bytes by construction, and the property tests hold them to the rules as every kernel is.
//!
//! The index of an element is its code (float8 sources), two codes at once with an entry holding
//! both outputs (float4: a byte; float6: 12 bits, since four codes straddle three bytes; float4
//! into 16-bit floats four codes, two bytes), its bits (16-bit
//! sources), or for float32 into formats of at most 6 mantissa bits its top 16 bits
//! with the lowest of them or'ed with "any of the low 16 bits set": rounding to at most 6 mantissa
//! bits looks at sign, exponent, the top 7 mantissa bits and whether anything below them is set,
//! and nothing else — so the table entry of that folded value is the rounding of every value that
//! folds to it.
//!
//! The pairs that narrow on the portable word lanes into whole bytes (`portable_words.rs`:
//! bfloat16/float16 → the signed float8 formats it covers, float32 → those folded), and float16
//! ↔ bfloat16 (`rebias16.rs`), run there instead, which measured faster still; their tables are
//! never built.
//!
//! [`codes`] serves the other instruction sets: the 64-entry tables that AVX-512 permutes
//! registers over for float6/float4 → bfloat16/float16.

use std::sync::OnceLock;

use dtcast_dtype::{packing, DType};

use super::rounded16::Rounded16;
use super::scalar;
use super::steps::Step;
use super::vector::Codes;
use crate::lanes::{unit, Lane};

/// How a kernel reads table indices from the source.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Index {
    /// One code per element of 8 bits.
    Code,
    /// Two codes per index (float4: a byte, float6: 12 bits, float8 into 16-bit destinations:
    /// two bytes): an entry holds two destination elements.
    Pairs,
    /// Four 4-bit codes per index (two bytes) into 16-bit destinations: an entry holds four
    /// (512 KiB a table).
    Quads,
    /// A 16-bit element's bits.
    Bits16,
    /// A float32's top 16 bits, the lowest or'ed with whether any of the low 16 is set.
    Folded32,
}

/// The table kernel's plan for a pair: how to index and how wide an entry is; `None` where the
/// portable lanes compute the pair faster.
///
/// 16-bit sources into float32 are computed: the lanes hold float32 already, so the value is a
/// few operations on them, where a lookup costs a load, a store and a reload per element. Float8
/// codes into float32 are looked up: computed, their inf and NaN codes cost the lanes two more
/// selects, three SSE2 instructions each — except float8_e5m2, which widens as float16's top
/// byte with no select (`Vector::load_e5m2_as_f32`), and is faster computed. Sub-byte sources
/// keep their tables, as does every narrowing pair, where SSE2 lacks the instructions. Float8
/// codes into 16-bit destinations are looked up two at a time (a table of 65,536 four-byte
/// entries, 256 KiB, where the entries of real data's few codes stay in cache); into float32
/// two codes a lookup would need 512 KiB, and one code a lookup is as fast. (The measurements
/// are in the commits that chose each.)
const fn index_of(from: DType, to: DType) -> Option<Index> {
    // (`const`, so that the kernels of the pairs not looked up are never instantiated: `kernels`.)
    const fn narrow_float(t: DType) -> bool {
        t.bits() <= 8
            && match t.float_format() {
                Some(f) => f.mantissa_bits <= 6 && f.signed,
                None => false,
            }
    }
    // float8_e5m2 is float16's top byte: widened as float16 is, with no select of its own (its
    // subnormal codes, below 2^-14, are float32 subnormals in the multiplication, as float16's
    // are: rare in data, where Intel would take a microcode assist).
    let widens_as_f16 = matches!(from, DType::Float8E5M2);
    if matches!(to, DType::Float32) && from.bits() == 8 && from.is_floating_point() {
        return if widens_as_f16 {
            None
        } else {
            Some(Index::Code)
        };
    }
    if matches!(to, DType::Float32) && from.bits() >= 8 {
        return None;
    }
    match from.bits() {
        // Two float8 codes a lookup where the pair's entry fits 4 bytes (256 KiB a table).
        8 if from.is_floating_point() && !to.is_packed() && unit(to) == 2 => Some(Index::Pairs),
        8 if from.is_floating_point() && !to.is_packed() => Some(Index::Code),
        // Two destination elements per entry: at most 8 bytes (4-bit integers too: looked up,
        // faster than on the lanes). Four float4 codes a lookup into bfloat16/float16: a table of
        // 512 KiB, within a 1 MiB L2, and half the lookups of two codes each.
        4 if !to.is_packed() && unit(to) == 2 => Some(Index::Quads),
        4 | 6 if !to.is_packed() && unit(to) <= 4 => Some(Index::Pairs),
        16 if to.bits() <= 8 || matches!(from, DType::Float16) || matches!(to, DType::Float16) => {
            Some(Index::Bits16)
        }
        32 if matches!(from, DType::Float32) && narrow_float(to) => Some(Index::Folded32),
        _ => None,
    }
}

impl Index {
    /// Destination elements per table entry.
    fn per_entry(self) -> usize {
        match self {
            Index::Pairs => 2,
            Index::Quads => 4,
            Index::Code | Index::Bits16 | Index::Folded32 => 1,
        }
    }
}

/// A pair's table, and the arithmetic that computes a chunk in its place where it can.
struct Built {
    entries: Table,
    rounded: Option<Rounded16>,
}

/// Entries per table: one per 16-bit index, whatever the index form (a form of fewer bits
/// leaves the rest zero, on pages never touched), so that a `u16` index needs no bounds check.
const ENTRIES: usize = 1 << 16;

/// A pair's table: one entry per index, the destination elements' codes or bits.
enum Table {
    U8(Box<[u8; ENTRIES]>),
    U16(Box<[u16; ENTRIES]>),
    U32(Box<[u32; ENTRIES]>),
    U64(Box<[u64; ENTRIES]>),
}

/// Elements of a kernel call from which a missing table is built: a one-pass cast calls the
/// kernel on blocks of 4,096.
const WORTH_A_TABLE: usize = 4096;

/// Tables per (source, destination, saturate), computed on first use.
static TABLES: [OnceLock<Built>; DType::COUNT * DType::COUNT * 2] =
    [const { OnceLock::new() }; DType::COUNT * DType::COUNT * 2];

/// The table of step `K`'s pair and rounding for a kernel call on `n` elements: built on first
/// use by a call of [`WORTH_A_TABLE`] elements or more, so that a program that only casts a few
/// elements never pays for one (up to 65,536 scalar conversions); `None` until then.
fn table<K: Step>(n: usize) -> Option<&'static Built> {
    table_of(K::S::DTYPE, K::D::DTYPE, K::SATURATE, scalar::<K>(), n)
}

/// [`table`] of a pair and rounding whose scalar kernel is `rules`: written once, not per step.
fn table_of(
    from: DType,
    to: DType,
    saturate: bool,
    rules: super::Kernel,
    n: usize,
) -> Option<&'static Built> {
    let slot = &TABLES[(from.index() * DType::COUNT + to.index()) * 2 + usize::from(saturate)];
    match slot.get() {
        Some(table) => Some(table),
        None if n >= WORTH_A_TABLE => Some(
            slot.get_or_init(|| build(from, to, index_of(from, to).expect("a table pair"), rules)),
        ),
        None => None,
    }
}

/// Runs the scalar kernel `rules` of `from` → `to` over one representative source element per
/// index; and where the arithmetic of [`Rounded16`] gives those entries, keeps it too.
fn build(from: DType, to: DType, index: Index, rules: super::Kernel) -> Built {
    // The representatives, stored as the source stores them.
    let src: Vec<u8> = match index {
        Index::Code | Index::Pairs | Index::Quads => {
            let (bits, per) = (from.bits(), index.per_entry());
            let codes: Vec<u8> = if per > 1 {
                (0..1u32 << (per * bits))
                    .flat_map(|v| {
                        (0..per).map(move |k| (v >> (k * bits) & ((1 << bits) - 1)) as u8)
                    })
                    .collect()
            } else {
                (0..1u16 << from.bits()).map(|c| c as u8).collect()
            };
            let mut packed = vec![0u8; from.storage_bytes(codes.len()).expect("whole bytes")];
            packing::pack(from, &codes, &mut packed).expect("sizes from storage_bytes");
            packed
        }
        Index::Bits16 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
        Index::Folded32 => (0..=u16::MAX)
            .flat_map(|top| (u32::from(top) << 16).to_le_bytes())
            .collect(),
    };
    let n = from.elements_in(src.len()).expect("whole elements");
    let mut out = vec![0u8; to.storage_bytes(n).expect("whole bytes")];
    rules(&src, &mut out);
    let mut codes = vec![0u8; if to.is_packed() { n } else { 0 }];
    let out = if to.is_packed() {
        packing::unpack(to, &out, &mut codes).expect("sizes from storage_bytes");
        &codes
    } else {
        &out
    };
    // Whole-byte entries hold the destination's stored bytes as a little-endian number, so that
    // entries shifted into a little-endian word are the chunk's bytes (`look_up`). A zeroed
    // allocation: the pages no index reaches stay untouched.
    fn entries<const W: usize, T: Copy + Default + std::fmt::Debug>(
        out: &[u8],
        word: fn([u8; W]) -> T,
    ) -> Box<[T; ENTRIES]> {
        let mut table = vec![T::default(); ENTRIES];
        for (entry, bytes) in table.iter_mut().zip(out.as_chunks::<W>().0) {
            *entry = word(*bytes);
        }
        table
            .into_boxed_slice()
            .try_into()
            .expect("ENTRIES entries")
    }
    let width = if to.is_packed() { 1 } else { unit(to) } * index.per_entry();
    let entries = match width {
        8 => Table::U64(entries(out, u64::from_le_bytes)),
        4 => Table::U32(entries(out, u32::from_le_bytes)),
        2 => Table::U16(entries(out, u16::from_le_bytes)),
        _ => Table::U8(entries(out, u8::from_le_bytes)),
    };
    let rounded = match (&entries, index) {
        (Table::U8(table), Index::Bits16) => Rounded16::derive(from, to, &table[..]),
        _ => None,
    };
    Built { entries, rounded }
}

/// The 16-bit destination bits of every code of step `K`'s source (float8, float6 or float4;
/// codes past the format's are 0; float8's negative codes as [`Codes`] keeps them), for the SIMD
/// steps that look a code up ([`Vector::lookup_u16`]) where that is cheaper than computing it:
/// the scalar rules' bits by construction, from up to 256 scalar conversions on first use.
///
/// [`Vector::lookup_u16`]: super::vector::Vector::lookup_u16
pub(crate) fn codes<K: Step>() -> &'static Codes {
    static CODES: [OnceLock<Codes>; DType::COUNT * DType::COUNT * 2] =
        [const { OnceLock::new() }; DType::COUNT * DType::COUNT * 2];
    let (from, to) = (K::S::DTYPE, K::D::DTYPE);
    let slot = &CODES[(from.index() * DType::COUNT + to.index()) * 2 + usize::from(K::SATURATE)];
    slot.get_or_init(|| {
        assert!(
            matches!(from.bits(), 4 | 6 | 8) && to.bits() == 16,
            "codes of {from} → {to}"
        );
        let codes: Vec<u8> = (0..1u16 << from.bits()).map(|c| c as u8).collect();
        let mut src = vec![0u8; from.storage_bytes(codes.len()).expect("whole bytes")];
        packing::pack(from, &codes, &mut src).expect("sizes from storage_bytes");
        let mut out = vec![0u8; 2 * codes.len()];
        scalar::<K>()(&src, &mut out);
        let all: Vec<u16> = out
            .as_chunks::<2>()
            .0
            .iter()
            .map(|b| u16::from_le_bytes(*b))
            .collect();
        let mut table = [0u16; 128];
        for (entry, &value) in table.iter_mut().zip(&all) {
            *entry = value;
        }
        // The top half (8-bit codes only; 4- and 6-bit codes have none) must be the bottom half
        // with the sign set, but for one value the rules write otherwise (`Codes::recode`): the
        // first code where the sign alone is wrong says which, and every code is then checked.
        let (positive, negative) = all.split_at(all.len().min(128));
        let pairs = || positive.iter().zip(negative);
        let recode = pairs()
            .find(|&(p, n)| p | 0x8000 != *n)
            .map(|(p, n)| (p | 0x8000, *n));
        let codes = Codes::new(table, recode);
        assert!(
            pairs().all(|(p, n)| codes.signed(*p, 0x8000) == *n),
            "{from} → {to}: the negative codes are not their magnitudes' entries with the sign, \
             but for one value"
        );
        codes
    })
}

/// The table kernels of step `K` (plain and always streaming), if its pair is looked up.
pub(crate) fn kernels<K: Step>() -> Option<(super::Kernel, super::Kernel)> {
    // A constant condition: the kernels of a pair that is not looked up are not compiled.
    if const { index_of(K::S::DTYPE, K::D::DTYPE).is_some() } {
        Some((kernel::<K, false>, kernel::<K, true>))
    } else {
        None
    }
}

/// Elements per chunk: a multiple of 8 (float6 groups of 4 fill whole bytes) whose output is a
/// multiple of 16 bytes for every destination width (4 bits: 32 bytes), as streaming stores need.
pub(super) const CHUNK: usize = 128;

/// The table kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    let (from, to) = (K::S::DTYPE, K::D::DTYPE);
    let index = index_of(from, to).expect("a table pair");
    let Some(built) = table::<K>(src.len() * 8 / K::S::BITS) else {
        // A short cast before any long one: the portable lanes (the same bytes).
        return super::portable::kernel::<K, ALWAYS_STREAM>(src, dst);
    };
    let pair = Pair {
        from,
        to,
        index,
        rounded: built.rounded,
    };
    super::drive::<K, ALWAYS_STREAM>(
        src,
        dst,
        CHUNK,
        true,
        super::x86::STREAMS,
        None,
        |s, d, n, stream| {
            match (&built.entries, stream) {
                (Table::U8(t), false) => run::<u8, false>(pair, s, d, n, t),
                (Table::U8(t), true) => run::<u8, true>(pair, s, d, n, t),
                (Table::U16(t), false) => run::<u16, false>(pair, s, d, n, t),
                (Table::U16(t), true) => run::<u16, true>(pair, s, d, n, t),
                (Table::U32(t), false) => run::<u32, false>(pair, s, d, n, t),
                (Table::U32(t), true) => run::<u32, true>(pair, s, d, n, t),
                (Table::U64(t), false) => run::<u64, false>(pair, s, d, n, t),
                (Table::U64(t), true) => run::<u64, true>(pair, s, d, n, t),
            }
            true
        },
    );
}

/// What the loop of a table kernel needs to know of its pair: the loop is compiled per entry
/// width, not per pair (the pair decides a few branches per chunk).
#[derive(Clone, Copy)]
struct Pair {
    from: DType,
    to: DType,
    index: Index,
    rounded: Option<Rounded16>,
}

/// A table entry.
trait Entry: bytemuck::Pod + Default + Into<u64> {}
impl Entry for u8 {}
impl Entry for u16 {}
impl Entry for u32 {}
impl Entry for u64 {}

/// Converts `n` elements (a multiple of [`CHUNK`]) by looking each up in `table`: the chunk's
/// indices first (a loop LLVM vectorises), then the lookups, then the chunk's output.
///
/// Streaming stores read their 16 bytes from a register, so a chunk's output is assembled in a
/// buffer and loaded from it. Loaded at once, those 16 bytes come from several narrower stores
/// still in flight, which the CPU cannot forward: each load waits for the stores to retire
/// (streaming a chunk straight after assembling it ran at a third of the speed). So the buffers
/// take turns: a chunk is streamed out while the next one is being assembled.
fn run<E: Entry, const STREAM: bool>(
    pair: Pair,
    s: &[u8],
    d: &mut [u8],
    n: usize,
    table: &[E; ENTRIES],
) {
    let (sb, db, index) = (pair.from.bits(), pair.to.bits(), pair.index);
    let (in_bytes, out_bytes) = (CHUNK * sb / 8, CHUNK * db / 8);
    // Two chunks' output (8 bytes per element at most), and the destination of the one waiting.
    let mut staged = Staged([[0u64; CHUNK]; 2]);
    let staged = &mut staged.0;
    let mut waiting: Option<(usize, &mut [u8])> = None;
    for (k, (s, d)) in s[..n * sb / 8]
        .chunks_exact(in_bytes)
        .zip(d[..n * db / 8].chunks_exact_mut(out_bytes))
        .enumerate()
    {
        if cfg!(target_endian = "little") && index == Index::Bits16 && pair.to.is_packed() {
            // 16-bit elements index the table straight from the source, each code packed as it
            // is looked up, without a pass through a chunk of indices. (float32 is folded
            // through the chunk: folding it inside the packing loop was slower.)
            //
            // float4 codes go straight into the destination, with ordinary stores even where
            // the caller asked for streaming ones: staged and streamed (or copied), the outputs
            // cost more than their read for ownership saves, a quarter of the source's bytes.
            // And they are computed where the pair's arithmetic covers the chunk
            // (`Rounded16::chunk4`). (float6 codes keep the staging: stored so, eight-byte
            // stores every six bytes straddle cache lines.)
            let at = s.as_chunks::<2>().0;
            if db == 4 {
                let computed = pair.rounded.is_some_and(|rounded| {
                    let (Ok(at), Ok(out)) = (at.try_into(), d.try_into()) else {
                        return false;
                    };
                    rounded.chunk4(at, out)
                });
                if !computed {
                    packed(|i| u16::from_le_bytes(at[i]), table, db, d);
                }
                continue;
            }
            packed(
                |i| u16::from_le_bytes(at[i]),
                table,
                db,
                bytemuck::cast_slice_mut(&mut staged[k % 2]),
            );
        } else if cfg!(target_endian = "little")
            && matches!(index, Index::Code | Index::Pairs | Index::Quads)
        {
            // Codes, or pairs of codes, index the table straight from the source, and each entry
            // (the outputs' bytes as a little-endian number) goes straight into the staged
            // output, without a pass through a chunk of indices.
            let out: &mut [E] = bytemuck::cast_slice_mut(&mut staged[k % 2]);
            if sb == 6 {
                // Eight float6 codes in six bytes: four 12-bit indices of one little-endian
                // word, read eight bytes at a time (the chunk's last six through a copy: the two
                // bytes after them may lie past the source) — fewer instructions an element than
                // three bytes a word, two indices each.
                let groups = s.len() / 6;
                for (g, four) in out.as_chunks_mut::<4>().0[..groups].iter_mut().enumerate() {
                    let word = if g + 1 < groups {
                        u64::from_le_bytes(*s[6 * g..].first_chunk::<8>().unwrap())
                    } else {
                        let mut eight = [0u8; 8];
                        eight[..6].copy_from_slice(&s[6 * g..6 * g + 6]);
                        u64::from_le_bytes(eight)
                    };
                    let entry = |k: u32| table[(word >> (12 * k) & 0xFFF) as usize];
                    *four = [entry(0), entry(1), entry(2), entry(3)];
                }
            } else if (sb == 8 && index == Index::Pairs) || index == Index::Quads {
                // Two float8 codes, or four float4 codes: a little-endian u16; two entries of
                // four bytes a store (half the stores of one entry each).
                look_up(s.as_chunks::<2>().0, table, bytemuck::cast_slice_mut(out));
            } else {
                // A byte: one float8 code, or two float4 codes; entries joined into eight-byte
                // words as [`look_up`] does (fewer stores than one per entry).
                look_up(s, table, bytemuck::cast_slice_mut(out));
            }
        } else {
            fill(&pair, &indices(index, sb, s), table, &mut staged[k % 2]);
        }
        if !STREAM {
            d.copy_from_slice(&bytemuck::cast_slice(&staged[k % 2])[..out_bytes]);
            continue;
        }
        if let Some((j, w)) = waiting.replace((k % 2, d)) {
            stream(&staged[j], w);
        }
    }
    if STREAM {
        if let Some((j, w)) = waiting {
            stream(&staged[j], w);
        }
        super::x86::store_fence();
    }
}

/// A chunk's table indices, read from its source bytes `s` as `index` says (`sb`: the source's
/// bits per element).
#[inline(always)]
fn indices(index: Index, sb: usize, s: &[u8]) -> [u16; CHUNK] {
    let mut at = [0u16; CHUNK];
    match (index, sb) {
        (Index::Pairs, 8) | (Index::Quads, _) => {
            for (i, b) in at.iter_mut().zip(s.as_chunks::<2>().0) {
                *i = u16::from_le_bytes(*b);
            }
        }
        (Index::Pairs, 4) => {
            for (i, &b) in at.iter_mut().zip(s) {
                *i = u16::from(b);
            }
        }
        (Index::Pairs, _) => {
            for (two, group) in at.chunks_exact_mut(2).zip(s.chunks_exact(3)) {
                let word =
                    u32::from(group[0]) | u32::from(group[1]) << 8 | u32::from(group[2]) << 16;
                two[0] = (word & 0xFFF) as u16;
                two[1] = (word >> 12) as u16;
            }
        }
        (Index::Code, _) => {
            for (i, &b) in at.iter_mut().zip(s) {
                *i = u16::from(b);
            }
        }
        (Index::Bits16, _) => {
            for (i, b) in at.iter_mut().zip(s.as_chunks::<2>().0) {
                *i = u16::from_le_bytes(*b);
            }
        }
        (Index::Folded32, _) => {
            for (i, b) in at.iter_mut().zip(s.as_chunks::<4>().0) {
                *i = super::words::fold32(u32::from_le_bytes(*b));
            }
        }
    }
    at
}

/// [`run`]'s two output slots, on a cache line boundary: where they fell on the stack otherwise
/// followed the code around them, and float6 destinations (eight-byte stores every six bytes,
/// some straddling two lines) lost a quarter of their speed when the slots moved by 16 bytes.
#[repr(C, align(64))]
struct Staged([[u64; CHUNK]; 2]);

/// One chunk's output, in the destination's bytes, into the front of `slot`: the chunk's entries
/// in `table` (packed for a packed destination), or computed where the pair's [`Rounded16`] can.
#[inline(always)]
fn fill<E: Entry>(pair: &Pair, at: &[u16; CHUNK], table: &[E; ENTRIES], slot: &mut [u64; CHUNK]) {
    if pair.index == Index::Bits16 {
        // (Byte entries only: the other widths' loops do without the code.)
        if let Some(rounded) = pair.rounded.filter(|_| size_of::<E>() == 1) {
            if rounded.chunk(at, bytemuck::cast_slice_mut(slot)) {
                return;
            }
        }
    }
    if pair.to.is_packed() {
        packed(
            |i| at[i],
            table,
            pair.to.bits(),
            bytemuck::cast_slice_mut(slot),
        );
    } else {
        // The entries hold the destination's bytes (`build`).
        let indices = CHUNK / pair.index.per_entry();
        look_up(
            &at[..indices],
            table,
            &mut slot[..indices * size_of::<E>() / 8],
        );
    }
}

/// The entries of indices `at` (16-bit indices, or codes read straight from the source) in
/// `table` into `out`, eight bytes of entries per store: memory operations, not arithmetic, bound
/// this loop, and a store per entry was slower.
#[inline(always)]
fn look_up<E: Entry, I: Index16>(at: &[I], table: &[E; ENTRIES], out: &mut [u64]) {
    let per_word = 8 / size_of::<E>();
    for (word, indices) in out.iter_mut().zip(at.chunks_exact(per_word)) {
        let mut bytes = 0u64;
        for (k, &i) in indices.iter().enumerate() {
            bytes |= table[i.index()].into() << (8 * size_of::<E>() * k);
        }
        *word = bytes.to_le();
    }
}

/// A table index as [`look_up`] reads it: a 16-bit index, a byte, or two bytes of the source
/// (little-endian).
trait Index16: Copy {
    fn index(self) -> usize;
}

impl Index16 for u16 {
    #[inline(always)]
    fn index(self) -> usize {
        usize::from(self)
    }
}

impl Index16 for u8 {
    #[inline(always)]
    fn index(self) -> usize {
        usize::from(self)
    }
}

impl Index16 for [u8; 2] {
    #[inline(always)]
    fn index(self) -> usize {
        usize::from(u16::from_le_bytes(self))
    }
}

/// The codes of a chunk's indices `at`, looked up in `table` and packed as the destination stores
/// them (6 or 4 bits each) into the front of `bytes`: a chunk's output (float4), or a slot
/// (float6: see [`pack_words`]). The layout is `dtcast_dtype::packing`'s,
/// written here for a fixed-size chunk (a call of `packing::pack` per chunk costs more than the
/// chunk's lookups), each word assembled straight from its elements' entries (not through an
/// array of codes).
#[inline(always)]
fn packed<E: Entry>(
    index: impl Fn(usize) -> u16,
    table: &[E; ENTRIES],
    bits: usize,
    bytes: &mut [u8],
) {
    if bits == 6 {
        pack_words::<E, 6>(index, table, bytes);
    } else {
        pack_words::<E, 4>(index, table, bytes);
    }
}

/// [`packed`] for codes of `BITS` bits: as many codes as fill whole bytes of a word (float4
/// 16, float6 8), one store of eight bytes each. A float6 word has two spare bytes, which the
/// next word's store overwrites; `bytes` reaches past the chunk's output there (a slot holds
/// eight bytes per element).
#[inline(always)]
fn pack_words<E: Entry, const BITS: usize>(
    index: impl Fn(usize) -> u16,
    table: &[E; ENTRIES],
    bytes: &mut [u8],
) {
    let per_word = 64 / BITS / 8 * 8;
    let used = per_word * BITS / 8;
    for k in 0..CHUNK / per_word {
        let mut word = 0u64;
        for j in 0..per_word {
            word |= table[usize::from(index(k * per_word + j))].into() << (BITS * j);
        }
        bytes[k * used..k * used + 8].copy_from_slice(&word.to_le_bytes());
    }
}

/// Streams the first `d.len()` bytes of `staged` into `d`.
#[inline(always)]
fn stream(staged: &[u64; CHUNK], d: &mut [u8]) {
    let bytes: &[u8] = bytemuck::cast_slice(staged);
    // SAFETY: `d` holds `d.len()` bytes, a multiple of 16 (a chunk's output, at most 8 bytes per
    // element), aligned to 16: `drive` aligns the destination to 64 bytes when it streams, and
    // every chunk's output is a multiple of 16 bytes.
    unsafe { super::x86::stream(d.as_mut_ptr(), &bytes[..d.len()]) }
}
