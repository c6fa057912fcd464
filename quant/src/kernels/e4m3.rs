//! float8_e4m3fn elements dequantized to bfloat16, float16 or float32 in one pass (FP8 per
//! tensor, per channel, in 128×128 blocks; MXFP8): each element decoded, times its run's factor,
//! rounded — in registers, stored once (on AVX-512 the rounding to bfloat16 by AVX512_BF16's
//! instruction where the CPU has it and every nonzero product is a normal float32; to float16
//! by `vcvtps2ph`; float32 is the product itself). The general path (element cast, product, output cast over a float32 buffer) is
//! the definition: the decoding is exact, the product is the same x86 product ([`scale_entry`]'s
//! rule), and the rounding is the cast's — every NaN to bfloat16's `0xFFFF`, to float16 quieted
//! with its top payload bits, which for a NaN code is the code's own NaN (a float32 product
//! keeps its first operand's NaN) — so the bytes are the general path's (a unit test holds the
//! SIMD form to the loop on every code).

use dtcast_dtype::DType;

use crate::arith::{bf16_bits, f16_bits};
use crate::lookup4::{avx2, avx512, scale_entry};

/// The codes' float32 values (as the dequantization plan makes them: torch's cast) and the
/// dtype they are dequantized into.
#[derive(Clone, Copy)]
pub(crate) struct Codes<'a> {
    pub values: &'a [f32; 256],
    /// bfloat16, float16 or float32.
    pub out: DType,
}

impl Codes<'_> {
    /// Code `c`'s output with factor `f`: the product, rounded as the cast rounds (float32: the
    /// product's bits), in the low bytes.
    #[inline(always)]
    pub(crate) fn output(&self, c: u8, f: f32) -> u32 {
        let y = scale_entry(self.values[usize::from(c)], f);
        match self.out {
            DType::Float16 => u32::from(f16_bits(y)),
            DType::BFloat16 => u32::from(bf16_bits(y)),
            _ => y.to_bits(),
        }
    }

    /// Bytes per output.
    #[inline(always)]
    pub(crate) fn size(&self) -> usize {
        if self.out == DType::Float32 {
            4
        } else {
            2
        }
    }
}

/// Whether this path serves: float8_e4m3fn elements to bfloat16 or float16 — on AVX-512 and
/// AVX2 (with F16C, which converts the float16 the codes are moved into) in registers, elsewhere
/// (the portable set: Arm, the x86-64 baseline) by [`Tables`] of each factor's 256 outputs — or
/// to float32 in registers (the portable set's tables are 16-bit: the general path serves it).
pub(crate) fn supports(element: DType, out: DType) -> bool {
    element == DType::Float8E4M3Fn
        && match out {
            DType::BFloat16 | DType::Float16 => true,
            DType::Float32 => avx512() || avx2(),
            _ => false,
        }
}

/// Slots of [`Tables`]: 64 tables of 512 bytes, an L1 cache's worth.
const SLOTS: usize = 64;

/// A run this long (one factor) is worth a table of its own: building one costs 256 products and
/// roundings, which the loop would spend on 256 elements.
const RUN_WORTH_A_TABLE: usize = 1024;

/// The 16-bit outputs of the 256 codes under the factors seen last, for CPUs without the SIMD
/// forms: an element is then one load where the loop spends a product and a rounding (its
/// rule, [`portable`], fills each table, so the bytes are the loop's). Factors recur: MXFP8's
/// come from 256 scale bytes, a 128×128 block's factor serves 128 rows of runs, a channel's a
/// whole row. A slot is picked by the factor's bits and replaced on a miss.
struct Tables {
    /// The code values the tables were made from, as bits, and their output dtype.
    values: [u32; 256],
    out: DType,
    /// Each slot's factor bits, and whether it holds a table.
    keys: [Option<u32>; SLOTS],
    entries: Box<[[u16; 256]; SLOTS]>,
    /// Tables made, and elements looked up, since this call began (see [`Tables::worth_it`]).
    made: usize,
    looked_up: usize,
}

impl Tables {
    fn new() -> Tables {
        Tables {
            values: [0; 256],
            out: DType::BFloat16,
            keys: [None; SLOTS],
            entries: Box::new([[0; 256]; SLOTS]),
            made: 0,
            looked_up: 0,
        }
    }

    /// Starts a call with `codes`: tables of other values or outputs are dropped.
    fn begin(&mut self, codes: Codes) {
        let bits = codes.values.map(f32::to_bits);
        if bits != self.values || codes.out != self.out {
            (self.values, self.out) = (bits, codes.out);
            self.keys = [None; SLOTS];
        }
        (self.made, self.looked_up) = (0, 0);
    }

    /// Whether tables still pay in this call: each one made costs about what 256 lookups save, so
    /// where factors hardly recur (a made-up scheme of short runs, all different) the loop
    /// takes over.
    fn worth_it(&self) -> bool {
        self.made * 256 <= self.looked_up + 4096
    }

    /// Run `src` with factor `f` into `dst` (16-bit outputs) by factor `f`'s table.
    fn run(&mut self, codes: Codes, src: &[u8], f: f32, dst: &mut [u8]) {
        let key = f.to_bits();
        let slot = (key.wrapping_mul(0x9E37_79B1) >> 26) as usize;
        if self.keys[slot] != Some(key) {
            let table = &mut self.entries[slot];
            let all: [u8; 256] = core::array::from_fn(|c| c as u8);
            portable(&all, codes, f, bytemuck::cast_slice_mut(table));
            // (bytemuck wrote little-endian pairs: on a big-endian CPU, swap them back.)
            for e in table.iter_mut() {
                *e = u16::from_le(*e);
            }
            self.keys[slot] = Some(key);
            self.made += 1;
        }
        let table = &self.entries[slot];
        for (&c, out) in src.iter().zip(dst.as_chunks_mut::<2>().0) {
            *out = table[usize::from(c)].to_le_bytes();
        }
        self.looked_up += src.len();
    }
}

thread_local! {
    /// Each thread's [`Tables`] (the pieces of a tensor run on the thread pool).
    static TABLES: core::cell::RefCell<Tables> = core::cell::RefCell::new(Tables::new());
}

/// Consecutive runs of `run` codes (`src`, `dst`: whole runs), run `g` with factor `factors[g]`,
/// by [`Tables`] while they pay, else by the loop.
fn by_tables(src: &[u8], codes: Codes, run: usize, factors: &[f32], dst: &mut [u8]) {
    debug_assert_eq!(codes.size(), 2, "the tables hold 16-bit outputs");
    TABLES.with_borrow_mut(|tables| {
        tables.begin(codes);
        for ((s, d), &f) in src
            .chunks_exact(run)
            .zip(dst.chunks_exact_mut(2 * run))
            .zip(factors)
        {
            if tables.worth_it() {
                tables.run(codes, s, f, d);
            } else {
                portable(s, codes, f, d);
            }
        }
    });
}

/// Whether a factor takes the SIMD forms' float16 route (finite and below 2^119, so that `f·2^8`
/// is still finite); the others (NaN, inf, huge) take the loop's or x86's plain product.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn by_float16(f: f32) -> bool {
    f.abs() < f32::from_bits(0x7B00_0000)
}

/// Whether a factor the float16 route takes may have its products rounded by AVX512_BF16's
/// instruction: zero, or at least 2^-117, so that no product of a nonzero code (2^-9 at least)
/// is a float32 subnormal, which the instruction would read as zero.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn products_normal(f: f32) -> bool {
    f == 0.0 || f.abs() >= f32::from_bits(0x0500_0000)
}

/// Dequantizes one run of `src` (float8_e4m3fn codes) with factor `f` into `dst` (`codes.out`,
/// little-endian).
pub(crate) fn run(src: &[u8], codes: Codes, f: f32, dst: &mut [u8]) {
    let size = codes.size();
    debug_assert_eq!(src.len() * size, dst.len());
    #[cfg(target_arch = "x86_64")]
    if dtcast_cast::isa() == dtcast_cast::Isa::Avx512 {
        let steps = src.len() / 32;
        let (s, s_tail) = src.split_at(32 * steps);
        let (d, d_tail) = dst.split_at_mut(32 * size * steps);
        x86::groups_avx512(s, 32 * steps, &[f], codes, d);
        portable(s_tail, codes, f, d_tail);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        let steps = src.len() / 16;
        let (s, s_tail) = src.split_at(16 * steps);
        let (d, d_tail) = dst.split_at_mut(16 * size * steps);
        // SAFETY: `isa()` names AVX2 (with F16C) only when this CPU runs it.
        unsafe { x86::groups_avx2(s, 16 * steps, &[f], codes, d) };
        portable(s_tail, codes, f, d_tail);
        return;
    }
    if src.len() >= RUN_WORTH_A_TABLE && size == 2 {
        by_tables(src, codes, src.len(), &[f], dst);
    } else {
        portable(src, codes, f, dst);
    }
}

/// [`run`] over consecutive groups of `group` codes, group `g` with factor `factors[g]` (MXFP8's
/// groups of 32: one call per piece of rows rather than one per group).
///
/// Both write with streaming stores where `dst` is aligned: call
/// [`store_fence`](crate::lookup4::store_fence) once the piece is written.
pub(crate) fn groups(src: &[u8], codes: Codes, group: usize, factors: &[f32], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), group * factors.len());
    #[cfg(target_arch = "x86_64")]
    if dtcast_cast::isa() == dtcast_cast::Isa::Avx512 && group.is_multiple_of(32) {
        x86::groups_avx512(src, group, factors, codes, dst);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() && group.is_multiple_of(16) {
        // SAFETY: `isa()` names AVX2 (with F16C) only when this CPU runs it; `src` is whole
        // groups, each a multiple of 16 codes.
        unsafe { x86::groups_avx2(src, group, factors, codes, dst) };
        return;
    }
    if avx512() || avx2() {
        // Groups the SIMD forms above do not take whole: each its own run.
        for ((s, d), &f) in src
            .chunks_exact(group)
            .zip(dst.chunks_exact_mut(codes.size() * group))
            .zip(factors)
        {
            run(s, codes, f, d);
        }
    } else if group > 0 {
        by_tables(src, codes, group, factors, dst);
    }
}

/// The run as a loop over the elements (the definition the SIMD form is held to).
pub(crate) fn portable(src: &[u8], codes: Codes, f: f32, dst: &mut [u8]) {
    let size = codes.size();
    for (&c, out) in src.iter().zip(dst.chunks_exact_mut(size)) {
        out.copy_from_slice(&codes.output(c, f).to_le_bytes()[..size]);
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86::e4m3 as x86;

#[cfg(test)]
mod tests {
    use super::*;
    use dtcast_cast::{cast, CastMode};

    /// A form of [`run`] or of [`groups`] without its table: codes, factor or group size, out.
    type Form<'a, T> = &'a dyn Fn(&[u8], T, &mut [u8]);

    /// Each code's float32 value, as the dequantization plan makes them (torch's cast).
    fn code_values() -> [f32; 256] {
        let codes: Vec<u8> = (0..=255).collect();
        let mut values = [0f32; 256];
        cast(
            &codes,
            DType::Float8E4M3Fn,
            bytemuck::cast_slice_mut(&mut values),
            DType::Float32,
            CastMode::Torch,
        )
        .unwrap();
        values
    }

    #[test]
    fn the_tables_give_the_loops_bytes() {
        // The portable set's form, whatever set this machine's casts chose: every code under
        // factors of every kind, in runs of 32 and 128 whose factors recur (MXFP8, blocks) and
        // in runs whose factors never do (the tables stop paying and the loop takes over), and
        // one long run.
        let values = code_values();
        let specials = [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            -0.0,
            f32::from_bits(1),
            f32::MAX,
            2f32.powi(-130),
            448.0 * 1.9,
        ];
        let mut next = crate::xorshift(0x2545_F491_4F6C_DD1D);
        let fresh: Vec<f32> = (0..400).map(|_| f32::from_bits(next() as u32)).collect();
        for out in [DType::BFloat16, DType::Float16] {
            let codes = Codes {
                values: &values,
                out,
            };
            for (what, pool) in [
                ("recurring", &specials[..]),
                ("never recurring", &fresh[..]),
            ] {
                for run in [32, 128] {
                    let runs = 400;
                    let src: Vec<u8> = (0..run * runs).map(|i| (i * 7 + i / 256) as u8).collect();
                    let factors: Vec<f32> = (0..runs).map(|g| pool[g % pool.len()]).collect();
                    let (mut a, mut b) = (vec![0u8; 2 * src.len()], vec![0u8; 2 * src.len()]);
                    by_tables(&src, codes, run, &factors, &mut a);
                    for ((s, d), &f) in src.chunks(run).zip(b.chunks_mut(2 * run)).zip(&factors) {
                        portable(s, codes, f, d);
                    }
                    assert_eq!(a, b, "{out}: {what} factors, runs of {run}");
                }
            }
            let src: Vec<u8> = (0..4 * RUN_WORTH_A_TABLE).map(|i| (i * 13) as u8).collect();
            for f in specials.iter().chain(&fresh[..8]) {
                let (mut a, mut b) = (vec![0u8; 2 * src.len()], vec![0u8; 2 * src.len()]);
                by_tables(&src, codes, src.len(), &[*f], &mut a);
                portable(&src, codes, *f, &mut b);
                assert_eq!(a, b, "{out}: one run, factor {f:e}");
            }
        }
    }

    #[test]
    fn simd_and_portable_agree_on_every_code_and_kind_of_factor() {
        let all: Vec<u8> = (0..=255).collect();
        let values = code_values();
        // Every code twice over, with a tail the loop takes.
        let src: Vec<u8> = all.iter().chain(&all).chain(&all[..19]).copied().collect();
        // Every code again, with NaN codes of alternating signs every seven places, among codes
        // of both signs.
        let mixed: Vec<u8> = (0..src.len())
            .map(|i| match i % 7 {
                3 => [0x7F, 0xFF][i / 7 % 2],
                _ => (i * 37 + i / 256) as u8,
            })
            .collect();
        // torchao's values too: every NaN code reads as one NaN (here the negative quiet NaN,
        // so that a form that kept each code's sign would differ).
        let mut one_nan = values;
        one_nan
            .iter_mut()
            .filter(|v| v.is_nan())
            .for_each(|v| *v = -f32::NAN);
        for (values, out) in [
            (&values, DType::BFloat16),
            (&values, DType::Float16),
            (&values, DType::Float32),
            (&one_nan, DType::Float16),
            (&one_nan, DType::Float32),
        ] {
            if !supports(DType::Float8E4M3Fn, out) {
                // (float32 on the portable set: the general path's.)
                continue;
            }
            let codes = Codes { values, out };
            let size = codes.size();
            let factors = [
                1.0,
                0.37,
                -3.5e-3,
                f32::NAN,
                -f32::NAN,
                f32::INFINITY,
                0.0,
                -0.0,
                f32::from_bits(1),
                f32::MAX,
                2f32.powi(-130),
                448.0 * 1.9,
                // Where the products of the smallest codes stop being normal (AVX512_BF16's
                // rounding would read them as zero): just above, at and below.
                -2f32.powi(-117) * 1.5,
                2f32.powi(-117),
                2f32.powi(-118) * 1.75,
            ];
            // A form of `run` against the loop: every code with every kind of factor, at every
            // start within a cache line (streamed, re-cut into lines, or ordinary stores).
            let check_runs = |form: &str, src: &[u8], run: Form<f32>| {
                for f in factors {
                    for skew in (0..64).step_by(2) {
                        let mut a = vec![0u8; size * src.len() + 128];
                        let mut b = a.clone();
                        let at = a.as_ptr().align_offset(64) + skew;
                        let n = size * src.len();
                        run(src, f, &mut a[at..at + n]);
                        crate::lookup4::store_fence();
                        portable(src, codes, f, &mut b[at..at + n]);
                        assert_eq!(a, b, "{form}, {out}: factor {f:e}, skew {skew}");
                    }
                }
            };
            // A form of `groups` against the loop: groups of `sizes` (one factor of each kind
            // apiece).
            let check_groups = |form: &str, sizes: &[usize], groups: Form<usize>| {
                for &group in sizes {
                    let src = &src[..group * factors.len()];
                    let mut a = vec![0u8; size * src.len()];
                    let mut b = a.clone();
                    groups(src, group, &mut a);
                    crate::lookup4::store_fence();
                    for ((s, d), &f) in src
                        .chunks(group)
                        .zip(b.chunks_mut(size * group))
                        .zip(&factors)
                    {
                        portable(s, codes, f, d);
                    }
                    assert_eq!(a, b, "{form}, {out}: groups of {group}");
                }
            };
            // The set this machine's casts chose (every code twice over, with a tail the loop takes).
            check_runs("chosen", &src, &|s, f, d| run(s, codes, f, d));
            check_runs("chosen, mixed", &mixed, &|s, f, d| run(s, codes, f, d));
            check_groups("chosen", &[16, 32], &|s, group, d| {
                groups(s, codes, group, &factors, d)
            });
            // AVX-512's form without AVX512_BF16, where this machine has AVX-512.
            #[cfg(target_arch = "x86_64")]
            if crate::lookup4::avx512() && out == DType::BFloat16 {
                check_runs("AVX-512 without BF16", &src[..512], &|s, f, d| {
                    // SAFETY: `avx512()` says this CPU runs AVX-512 F, BW, VL and DQ; 512 codes
                    // are a multiple of 32.
                    unsafe { x86::groups::<false, { x86::TO_BF16 }>(s, s.len(), &[f], codes, d) }
                });
                check_groups("AVX-512 without BF16", &[32], &|s, group, d| {
                    // SAFETY: as above.
                    unsafe { x86::groups::<false, { x86::TO_BF16 }>(s, group, &factors, codes, d) }
                });
            }
            // AVX2's form, whatever set this machine's casts chose.
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                for (form, src) in [("AVX2", &src[..512]), ("AVX2, mixed", &mixed[..512])] {
                    check_runs(form, src, &|s, f, d| {
                        // SAFETY: this CPU runs AVX2 and F16C (checked above).
                        unsafe { x86::groups_avx2(s, s.len(), &[f], codes, d) }
                    });
                }
                check_groups("AVX2", &[16, 32], &|s, group, d| {
                    // SAFETY: as above.
                    unsafe { x86::groups_avx2(s, group, &factors, codes, d) }
                });
            }
        }
    }
}
