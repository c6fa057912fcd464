//! Float4 elements in groups (MXFP4: 32, NVFP4: 16) dequantized in one pass: a group's element
//! has one of 16 codes and the group one factor, so its 16 possible outputs are computed once —
//! the same product ([`scale_entry`]: `mul`'s rule) and the same rounding as the general path
//! (torch's vectorised float32 → bfloat16 or float16, or none for float32) — and every element is
//! looked up by its code. On AVX-512 (BW) the lookup is a register permute of 32 entries (two
//! groups of 16, or one group of 32), written as whole cache lines with streaming stores
//! (`lines::Lines`); on AVX2, byte shuffles (16-bit outputs) or lane permutes (float32); the
//! loop over the bytes is the definition they are held to.
//!
//! Unit tests hold the SIMD forms to the loop and the loop's roundings to the cast; the
//! references' vectors hold all to the references.

use dtcast_dtype::DType;

use crate::arith::{bf16_bits, f16_bits, mul, scaled_as_on_x86};

/// Whether the one-pass form serves: float4 groups of 16 or 32 into bfloat16, float16 or
/// float32. Without AVX-512 or AVX2 (the portable set: Arm, the x86-64 baseline) the loop over
/// the bytes serves: a table entry per element, against the general path's three passes over a
/// float32 buffer.
pub(crate) fn supports(element: DType, group: usize, out: DType) -> bool {
    element == DType::Float4E2M1Fn
        && matches!(group, 16 | 32)
        && matches!(out, DType::BFloat16 | DType::Float16 | DType::Float32)
}

/// Whether dtcast's casts run AVX2 (with F16C) here, and not AVX-512: the one-pass forms'
/// second instruction set (float4 into bfloat16 by byte shuffles, `e4m3`'s float16 route).
pub(crate) fn avx2() -> bool {
    cfg!(target_arch = "x86_64") && dtcast_cast::isa() == dtcast_cast::Isa::Avx2
}

/// Orders the one-pass forms' streaming stores before whatever follows (once per piece written:
/// a fence per short run would stall on every one).
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
}

/// Whether dtcast's casts run AVX-512 here (the instruction set of the one-pass forms).
pub(crate) fn avx512() -> bool {
    cfg!(target_arch = "x86_64") && dtcast_cast::isa() == dtcast_cast::Isa::Avx512
}

/// Whether the AVX-512 one-pass forms may round float32 to bfloat16 by AVX512_BF16's
/// `vcvtne2ps2bf16` (nearest-even, two vectors into one): [`avx512`] and a CPU that has it. The
/// instruction reads a float32 subnormal as a zero of its sign; each user says why that gives
/// its bytes.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return avx512() && std::arch::is_x86_feature_detected!("avx512bf16");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// What a code's value times the group's factor `f` is (the general path's `scale_run`: a NaN
/// factor gives the whole group `mul(0, f)`).
#[inline(always)]
pub(crate) fn scale_entry(value: f32, f: f32) -> f32 {
    if f.is_nan() {
        mul(0.0, f)
    } else {
        scaled_as_on_x86(value * f, value)
    }
}

/// The 16 outputs of a group with factor `f` (`values`: the codes' float32 values), as the
/// output dtype's little-endian bits in the low bytes of each entry.
#[inline(always)]
fn table(values: &[f32; 16], f: f32, out: DType) -> [u32; 16] {
    let mut t = [0u32; 16];
    for (e, &v) in t.iter_mut().zip(values) {
        let y = scale_entry(v, f);
        *e = match out {
            DType::BFloat16 => u32::from(bf16_bits(y)),
            DType::Float16 => u32::from(f16_bits(y)),
            _ => y.to_bits(),
        };
    }
    t
}

/// Where each group's 16 outputs come from: computed from its factor ([`ByFactor`]), or, for
/// one-byte scales, looked up by the scale's byte among 256 tables made once ([`ByByte`]).
pub(crate) trait Groups {
    /// Group `g`'s 16 outputs, as [`table`] makes them.
    fn table(&self, g: usize) -> [u32; 16];

    /// [`table`](Groups::table) in a register's 32-bit lanes.
    ///
    /// # Safety
    /// The CPU runs AVX-512 F and BW.
    #[cfg(target_arch = "x86_64")]
    unsafe fn lanes32(&self, g: usize) -> core::arch::x86_64::__m512i;

    /// Groups `g0`'s and `g1`'s outputs as 16-bit entries in one register (`g1`'s in lanes
    /// 16..32; `g1 == g0` for groups of 32, whose upper half is then unused).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F and BW.
    #[cfg(target_arch = "x86_64")]
    unsafe fn lanes16(&self, g0: usize, g1: usize) -> core::arch::x86_64::__m512i;

    /// Group `g`'s 16 outputs (16-bit) as their 16 low bytes, then their 16 high bytes: the
    /// two tables a byte shuffle looks codes up in.
    // (Only x86's AVX2 form shuffles bytes.)
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn split16(&self, g: usize) -> [u8; 32];
}

/// A table of 16 16-bit outputs as its low bytes, then its high bytes.
fn split(t: &[u32; 16]) -> [u8; 32] {
    core::array::from_fn(|i| (t[i % 16] >> (8 * (i / 16))) as u8)
}

/// Each group's outputs computed from its factor.
pub(crate) struct ByFactor<'a> {
    /// The codes' float32 values.
    pub values: [f32; 16],
    /// One factor per group.
    pub factors: &'a [f32],
    /// The output dtype (bfloat16, float16 or float32).
    pub out: DType,
}

impl Groups for ByFactor<'_> {
    #[inline(always)]
    fn table(&self, g: usize) -> [u32; 16] {
        table(&self.values, self.factors[g], self.out)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes32(&self, g: usize) -> core::arch::x86_64::__m512i {
        // SAFETY: the caller's contract; a plain load of 16 floats.
        unsafe {
            let values = core::arch::x86_64::_mm512_loadu_ps(self.values.as_ptr());
            x86::table(values, self.factors[g], self.out)
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes16(&self, g0: usize, g1: usize) -> core::arch::x86_64::__m512i {
        // SAFETY: the caller's contract.
        unsafe {
            let a = self.lanes32(g0);
            let b = if g1 == g0 { a } else { self.lanes32(g1) };
            x86::u16_tables(a, b)
        }
    }
    #[inline(always)]
    fn split16(&self, g: usize) -> [u8; 32] {
        split(&self.table(g))
    }
}

/// The outputs of each of the 256 scale bytes' factors (E8M0 or float8 scales: a tensor's
/// groups share at most 256 tables, so they are made once per tensor instead of once per group).
pub(crate) struct ByteTables {
    /// Byte `b`'s table, as [`table`] makes it.
    u32s: Vec<[u32; 16]>,
    /// The same entries as 16-bit values (bfloat16 or float16 output), 32 bytes a table: one
    /// load.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    u16s: Vec<[u16; 16]>,
    /// The same entries' low bytes, then their high bytes ([`Groups::split16`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    split: Vec<[u8; 32]>,
}

impl ByteTables {
    /// The tables of `factors` (the factor of each byte, 256 of them).
    pub(crate) fn new(values: &[f32; 16], factors: &[f32], out: DType) -> ByteTables {
        debug_assert_eq!(factors.len(), 256);
        let u32s: Vec<[u32; 16]> = factors.iter().map(|&f| table(values, f, out)).collect();
        let u16s = u32s.iter().map(|t| t.map(|e| e as u16)).collect();
        let split = u32s.iter().map(split).collect();
        ByteTables { u32s, u16s, split }
    }
}

/// Each group's outputs looked up by its scale's byte.
pub(crate) struct ByByte<'a> {
    /// The 256 tables.
    pub tables: &'a ByteTables,
    /// One scale byte per group.
    pub scales: &'a [u8],
}

impl Groups for ByByte<'_> {
    #[inline(always)]
    fn table(&self, g: usize) -> [u32; 16] {
        self.tables.u32s[usize::from(self.scales[g])]
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes32(&self, g: usize) -> core::arch::x86_64::__m512i {
        let t = &self.tables.u32s[usize::from(self.scales[g])];
        // SAFETY: the caller's contract; `t` is 64 bytes.
        unsafe { core::arch::x86_64::_mm512_loadu_si512(t.as_ptr().cast()) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes16(&self, g0: usize, g1: usize) -> core::arch::x86_64::__m512i {
        use core::arch::x86_64::*;
        let (a, b) = (
            &self.tables.u16s[usize::from(self.scales[g0])],
            &self.tables.u16s[usize::from(self.scales[g1])],
        );
        // SAFETY: the caller's contract; `a` and `b` are 32 bytes each.
        unsafe {
            let a = _mm512_castsi256_si512(_mm256_loadu_si256(a.as_ptr().cast()));
            _mm512_inserti64x4::<1>(a, _mm256_loadu_si256(b.as_ptr().cast()))
        }
    }
    #[inline(always)]
    fn split16(&self, g: usize) -> [u8; 32] {
        self.tables.split[usize::from(self.scales[g])]
    }
}

/// Dequantizes `src` (packed float4 codes, the first of each byte in its low nibble; groups of
/// `group` codes, the `g`-th with `groups`' table `g`) into `dst` (`out`'s little-endian bytes).
pub(crate) fn dequantize<G: Groups>(
    src: &[u8],
    group: usize,
    groups: &G,
    out: DType,
    dst: &mut [u8],
) {
    let size = out.byte_size().unwrap_or(4);
    debug_assert_eq!(src.len() * 2 * size, dst.len());
    #[cfg(target_arch = "x86_64")]
    if dtcast_cast::isa() == dtcast_cast::Isa::Avx512 {
        // Whole steps of 32 codes on AVX-512; a last group of 16 by the loop.
        let steps = src.len() / 16;
        let (s, s_tail) = src.split_at(16 * steps);
        let (d, d_tail) = dst.split_at_mut(32 * steps * size);
        // SAFETY: `isa()` names AVX-512 (F, BW, VL, DQ) only when this CPU runs it.
        unsafe { x86::dequantize(s, group, groups, out, d) };
        portable(s_tail, group, groups, steps * 32 / group, out, d_tail);
        store_fence();
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // The same steps on AVX2: 16-bit outputs by byte shuffles, float32 by lane permutes.
        let steps = src.len() / 16;
        let (s, s_tail) = src.split_at(16 * steps);
        let (d, d_tail) = dst.split_at_mut(32 * steps * size);
        // SAFETY: `isa()` names AVX2 only when this CPU runs it.
        unsafe {
            if size == 2 {
                x86::dequantize_avx2::<G, false>(s, group, groups, d);
            } else {
                x86::dequantize_avx2::<G, true>(s, group, groups, d);
            }
        }
        portable(s_tail, group, groups, steps * 32 / group, out, d_tail);
        store_fence();
        return;
    }
    portable(src, group, groups, 0, out, dst);
}

/// The lookup as a loop over the bytes (the definition the SIMD form is held to); `src`'s first
/// group is `groups`' group `first`.
pub(crate) fn portable<G: Groups>(
    src: &[u8],
    group: usize,
    groups: &G,
    first: usize,
    out: DType,
    dst: &mut [u8],
) {
    if out.byte_size() == Some(2) {
        by_bytes::<G, 2>(src, group, groups, first, dst);
    } else {
        by_bytes::<G, 4>(src, group, groups, first, dst);
    }
}

/// [`portable`] for outputs of `SIZE` bytes (a constant, so that each byte's two outputs are one
/// store of `2 * SIZE` bytes).
#[inline(always)]
fn by_bytes<G: Groups, const SIZE: usize>(
    src: &[u8],
    group: usize,
    groups: &G,
    first: usize,
    dst: &mut [u8],
) {
    for (g, (codes, dst)) in src
        .chunks_exact(group / 2)
        .zip(dst.chunks_exact_mut(group * SIZE))
        .enumerate()
    {
        let t = groups.table(first + g);
        for (&b, pair) in codes.iter().zip(dst.chunks_exact_mut(2 * SIZE)) {
            let (lo, hi) = (
                u64::from(t[usize::from(b & 0xF)]),
                u64::from(t[usize::from(b >> 4)]),
            );
            let both = lo | hi << (8 * SIZE);
            pair.copy_from_slice(&both.to_le_bytes()[..2 * SIZE]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86::lookup4 as x86;

#[cfg(test)]
mod tests {
    use super::*;
    use dtcast_cast::{cast, CastMode};

    #[test]
    fn the_roundings_are_the_casts() {
        // Every sign and exponent with mantissas around bfloat16's and float16's rounding
        // points (ties, one either side, all ones), and NaNs with payloads.
        let mut xs = Vec::new();
        for top in 0..=0x1FFu32 {
            for low in [
                0u32, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001,
                0xFFFF, 0x1_7FFF, 0x1_8000, 0x40_0000, 0x7F_FFFF,
            ] {
                xs.push(f32::from_bits(top << 23 | low));
            }
        }
        // float16's largest, 65504, the tie above it (65520: inf) and their neighbours.
        for bits in [
            0x477F_DFFF,
            0x477F_E000,
            0x477F_E001,
            0x477F_EFFF,
            0x477F_F000,
            0x477F_F001,
        ] {
            xs.extend([f32::from_bits(bits), -f32::from_bits(bits)]);
        }
        let src: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
        for (out, rounding) in [
            (DType::BFloat16, bf16_bits as fn(f32) -> u16),
            (DType::Float16, f16_bits),
        ] {
            let mut want = vec![0u8; xs.len() * 2];
            cast(&src, DType::Float32, &mut want, out, CastMode::Torch).unwrap();
            let got: Vec<u8> = xs.iter().flat_map(|&x| rounding(x).to_le_bytes()).collect();
            let bad: Vec<String> = (0..xs.len())
                .filter(|&i| got[2 * i..2 * i + 2] != want[2 * i..2 * i + 2])
                .take(8)
                .map(|i| {
                    format!(
                        "{:#x}: {:#x?} not {:#x?}",
                        xs[i].to_bits(),
                        &got[2 * i..2 * i + 2],
                        &want[2 * i..2 * i + 2]
                    )
                })
                .collect();
            assert!(bad.is_empty(), "{out}: {bad:?}");
        }
    }

    /// [`Groups`] behind a `dyn`, for running one check over both kinds (of AVX2's form).
    #[cfg(target_arch = "x86_64")]
    trait Check {
        fn avx2(&self, src: &[u8], group: usize, out: DType, dst: &mut [u8]);
        fn portable(&self, src: &[u8], group: usize, out: DType, dst: &mut [u8]);
    }

    #[cfg(target_arch = "x86_64")]
    impl<G: Groups> Check for G {
        fn avx2(&self, src: &[u8], group: usize, out: DType, dst: &mut [u8]) {
            // SAFETY: the caller checked that this CPU runs AVX2.
            unsafe {
                if out.byte_size() == Some(2) {
                    x86::dequantize_avx2::<G, false>(src, group, self, dst);
                } else {
                    x86::dequantize_avx2::<G, true>(src, group, self, dst);
                }
            }
            store_fence();
        }
        fn portable(&self, src: &[u8], group: usize, out: DType, dst: &mut [u8]) {
            portable(src, group, self, 0, out, dst);
        }
    }

    #[test]
    fn simd_and_portable_agree() {
        // Random codes, factors of every kind (NaN, inf, zero, subnormal), both group sizes,
        // every output, unaligned destinations.
        let values: [f32; 16] = core::array::from_fn(|c| {
            let m = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][c % 8];
            if c >= 8 {
                -m
            } else {
                m
            }
        });
        let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let specials = [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7F80_0001),
            f32::INFINITY,
            0.0,
            -0.0,
            f32::from_bits(1),
            f32::MAX,
            2f32.powi(-127),
        ];
        // 256 factors: the first 64 the groups' own, all 256 a scale byte's.
        let factors: Vec<f32> = (0..256)
            .map(|i| {
                if i % 5 == 0 {
                    specials[i / 5 % specials.len()]
                } else {
                    f32::from_bits(next() as u32)
                }
            })
            .collect();
        let scale_bytes: Vec<u8> = (0..64).map(|_| next() as u8).collect();
        for group in [16, 32] {
            for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                let size = out.byte_size().unwrap();
                let tables = ByteTables::new(&values, &factors, out);
                // An odd number of groups: a group of 16 left for the loop after the SIMD steps.
                for groups in [1, 2, 47, 64] {
                    let src: Vec<u8> = (0..groups * group / 2).map(|_| next() as u8).collect();
                    let by_factor = ByFactor {
                        values,
                        factors: &factors[..groups],
                        out,
                    };
                    let scales = &scale_bytes[..groups];
                    let by_byte = ByByte {
                        tables: &tables,
                        scales,
                    };
                    // What the bytes' tables must give: each group's factor, its byte's.
                    let bytes_factors: Vec<f32> =
                        scales.iter().map(|&b| factors[usize::from(b)]).collect();
                    let bytes_as_factors = ByFactor {
                        values,
                        factors: &bytes_factors,
                        out,
                    };
                    // Every start within a cache line: streamed, re-cut into lines, or
                    // ordinary stores.
                    for skew in (0..64).step_by(2) {
                        let n = src.len() * 2 * size;
                        let mut a = vec![0u8; n + 128];
                        let mut b = a.clone();
                        let at = a.as_ptr().align_offset(64) + skew;
                        let what = format!("group {group}, {out}, {groups} groups, skew {skew}");
                        dequantize(&src, group, &by_factor, out, &mut a[at..at + n]);
                        portable(&src, group, &by_factor, 0, out, &mut b[at..at + n]);
                        assert_eq!(a, b, "by factor: {what}");
                        dequantize(&src, group, &by_byte, out, &mut a[at..at + n]);
                        portable(&src, group, &bytes_as_factors, 0, out, &mut b[at..at + n]);
                        assert_eq!(a, b, "by byte: {what}");
                        // AVX2's form, whatever set this machine's casts chose.
                        #[cfg(target_arch = "x86_64")]
                        if std::arch::is_x86_feature_detected!("avx2") {
                            let whole = 16 * (src.len() / 16);
                            let (src, n) = (&src[..whole], 2 * size * whole);
                            for groups in [&by_factor as &dyn Check, &by_byte] {
                                a.fill(0);
                                b.fill(0);
                                groups.avx2(src, group, out, &mut a[at..at + n]);
                                groups.portable(src, group, out, &mut b[at..at + n]);
                                assert_eq!(a, b, "AVX2: {what}");
                            }
                        }
                    }
                }
            }
        }
    }
}
