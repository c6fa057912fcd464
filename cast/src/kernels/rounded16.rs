//! float16/bfloat16 → a signed float of at most a byte (float8, float4) by integer arithmetic on
//! 16-bit lanes, for the portable table kernels (`lookup.rs`): a chunk whose elements all lie
//! where the arithmetic has been checked against the pair's table is computed instead of looked
//! up.
//!
//! A lookup costs two loads and a store per element, about two cycles on the x86-64 baseline;
//! the arithmetic is a dozen operations on eight 16-bit lanes at a time (SSE2 has every one of
//! them: shifts by a uniform count, adds, signed 16-bit compares, min and max). It covers what
//! real data holds — zeros, the destination's subnormals and its normal range, and overflow
//! where it saturates (float4 in every mode) — and leaves the rest (infinities and overflow
//! where the rules give NaN or inf, NaNs, where the rules differ by mode and format) to the
//! table.
//!
//! Nothing here restates a rule: the parameters come from the two formats' rows of the dtype
//! table, and [`Rounded16::derive`] compares the arithmetic with the pair's table entry (the
//! scalar rules' bytes) on every source bit pattern it will be used on, both signs, before any
//! chunk is computed. Where the two would differ, the chunk is looked up.

use dtcast_dtype::DType;

use super::lookup::CHUNK;

/// The most destination codes below the smallest normal magnitude that the arithmetic counts by
/// thresholds (float8 formats have at most 16 codes below their smallest normal).
const STEPS: usize = 16;

/// The arithmetic of one 16-bit float → signed float8 or float4 pair.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rounded16 {
    /// Subtracted from a source magnitude: the destination's exponent bias in place.
    rebias: i16,
    /// Mantissa bits the rounding drops (at least 1).
    drop: u32,
    /// `2^(drop - 1) - 1`: with the kept part's lowest bit added, rounding to nearest-even.
    half: i16,
    /// Source magnitudes above this are computed as this one: where every larger magnitude up to
    /// infinity has the same code (overflow saturating to the largest finite value), the
    /// smallest magnitude with that code; else `i16::MAX`.
    top: i16,
    /// `below[k]`: the largest source magnitude whose code is at most `k`, for the codes under the
    /// smallest normal (`i16::MAX` past them: no magnitude exceeds it).
    below: [i16; STEPS],
    /// How many of `below` are in use (at most 2, 4, 8 or 16: the chunk compares with that
    /// many).
    steps: usize,
    /// From this source magnitude up, the rounding alone gives the code (no count needed).
    normal_from: u16,
    /// Magnitudes below this are computed; a chunk holding a larger one is looked up.
    cover: u16,
    /// The destination's bits (4 or 8): its sign is the top one.
    bits: u32,
    /// Whether a zero code keeps the source's sign: formats without a negative zero (fnuz:
    /// their sign bit alone is NaN) write zero unsigned.
    signed_zero: bool,
    /// Whether the code below the smallest normal is the larger of the rounding and the count
    /// (float4: see [`code`](Rounded16::code)), else the count there, chosen by a compare.
    larger: bool,
}

impl Rounded16 {
    /// The arithmetic of `from` → `to`, checked against `table` (the pair's code per source bit
    /// pattern); `None` where the pair is not a 16-bit float into a signed float8 or float4, or
    /// where the arithmetic would cover too little to be worth a chunk's check.
    pub(super) fn derive(from: DType, to: DType, table: &[u8]) -> Option<Rounded16> {
        let (src, dst) = (from.float_format()?, to.float_format()?);
        let bits = to.bits() as u32;
        // (float6 keeps its table: its eight codes below 1.0 would cost eight compares a lane.)
        if from.bits() != 16 || !matches!(bits, 4 | 8) || !dst.signed {
            return None;
        }
        if table.len() != 1 << 16 {
            return None;
        }
        let drop = src.mantissa_bits.checked_sub(dst.mantissa_bits)?;
        if drop == 0 {
            return None;
        }
        let sign = 1u8 << (bits - 1);
        // The source's biased exponent of the destination's smallest normal (2^(1 - bias)), and
        // no lower than the source's own smallest normal.
        let exponent = (1 - dst.bias + src.bias).max(1);
        let normal_from = u16::try_from(exponent << src.mantissa_bits).ok()?;
        let magnitude = |i: usize| table[i] & (sign - 1);
        let mut arithmetic = Rounded16 {
            rebias: i16::try_from((src.bias - dst.bias) << src.mantissa_bits).ok()?,
            drop,
            half: (1 << (drop - 1)) - 1,
            top: i16::MAX,
            below: [i16::MAX; STEPS],
            steps: 0,
            normal_from,
            cover: 0,
            bits,
            signed_zero: table[0x8000] == sign,
            larger: bits == 4,
        };
        // The codes below the smallest normal, by thresholds (the table's codes must not
        // decrease as the magnitude grows, which the check below holds them to). Where the
        // rounding of normal magnitudes also gives the codes below them (float16 →
        // float8_e5m2: the same exponent bias, so the top byte rounded), none.
        let steps = usize::from(magnitude(usize::from(normal_from)));
        if steps > STEPS {
            return None;
        }
        for m in 0..normal_from {
            for k in usize::from(magnitude(usize::from(m)))..steps {
                arithmetic.below[k] = m as i16;
            }
        }
        arithmetic.steps = steps;
        let mut uncounted = arithmetic;
        uncounted.steps = 0;
        let rounds_all = |m: u16| {
            [m, m | 0x8000]
                .into_iter()
                .all(|x| uncounted.any_code(x) == u16::from(table[usize::from(x)]))
        };
        if (0..normal_from).all(rounds_all) {
            arithmetic.steps = 0;
            arithmetic.normal_from = 0;
            arithmetic.below = [i16::MAX; STEPS];
        }
        // Covered up to the first magnitude where either sign differs from the table.
        let cover = |a: &Rounded16| {
            let agrees = |m: u16| {
                [m, m | 0x8000]
                    .into_iter()
                    .all(|x| a.any_code(x) == u16::from(table[usize::from(x)]))
            };
            (0..0x8000).find(|&m| !agrees(m)).unwrap_or(0x8000)
        };
        arithmetic.cover = cover(&arithmetic);
        // Overflow that saturates (every magnitude from the first with the largest code up to
        // infinity has that code: float4; float8 in `Saturate`) is computed too, as the
        // magnitudes clamped there; kept where it covers more.
        let largest = (0..0x8000u16).map(|m| magnitude(usize::from(m))).max()?;
        if let Some(first) = (0..0x8000u16).find(|&m| magnitude(usize::from(m)) == largest) {
            let clamped = Rounded16 {
                top: first as i16,
                ..arithmetic
            };
            let covered = cover(&clamped);
            if covered > arithmetic.cover {
                arithmetic.top = clamped.top;
                arithmetic.cover = covered;
            }
        }
        (arithmetic.cover > normal_from).then_some(arithmetic)
    }

    /// [`code`](Rounded16::code) of `x` by the arithmetic's own fields, whatever they are (for
    /// [`derive`](Rounded16::derive)'s check: every form the chunks use).
    fn any_code(&self, x: u16) -> u16 {
        match (self.steps, self.signed_zero, self.larger) {
            (0, true, true) => self.code::<0, true, true>(x),
            (0, true, false) => self.code::<0, true, false>(x),
            (0, false, true) => self.code::<0, false, true>(x),
            (0, false, false) => self.code::<0, false, false>(x),
            (_, true, true) => self.code::<STEPS, true, true>(x),
            (_, true, false) => self.code::<STEPS, true, false>(x),
            (_, false, true) => self.code::<STEPS, false, true>(x),
            (_, false, false) => self.code::<STEPS, false, false>(x),
        }
    }

    /// The destination code of source bits `x`, comparing with the first `STEPS_USED` of `below`
    /// (0: `x` does not lie below the smallest normal, which the caller has checked);
    /// `SIGNED_ZERO`, `LARGER`: the pair's `signed_zero` and `larger`.
    ///
    /// Below the smallest normal the code is counted. Where `LARGER`, without a select: the
    /// rounding of a normal magnitude, applied there as well, does not exceed the count for
    /// float4 (those magnitudes are read as if the exponent went on down, a finer grid than
    /// float4's subnormals), and the count stops at the smallest normal's code, so the code is
    /// the larger of the two. (Not so where the source's subnormals are the destination's
    /// normals, float16 → float8_e5m2fnuz: the check in `derive` holds each pair to its form.)
    #[inline(always)]
    fn code<const STEPS_USED: usize, const SIGNED_ZERO: bool, const LARGER: bool>(
        &self,
        x: u16,
    ) -> u16 {
        // Magnitudes fit in i16: signed min, max and compares are SSE2 instructions. (Wrapping:
        // past what `derive` covers, the codes are wrong but never a panic.)
        let m = (x & 0x7FFF) as i16;
        let r = m.min(self.top).wrapping_sub(self.rebias);
        let odd = (r >> self.drop) & 1;
        let normal = r.wrapping_add(self.half).wrapping_add(odd) >> self.drop;
        let mut count = 0i16;
        for &t in &self.below[..STEPS_USED] {
            count += i16::from(m > t);
        }
        let code = if LARGER {
            normal.max(count)
        } else if STEPS_USED > 0 && (m as u16) < self.normal_from {
            count
        } else {
            normal
        };
        let sign = x >> (16 - self.bits) & 1 << (self.bits - 1);
        let sign = if SIGNED_ZERO || code != 0 { sign } else { 0 };
        code as u16 | sign
    }

    /// How many of `below` a chunk's elements need (0: none lies below the smallest normal);
    /// `None` where one lies outside what the arithmetic covers.
    #[inline(always)]
    fn steps_for(&self, at: &[u16; CHUNK]) -> Option<usize> {
        let (mut top, mut low) = (0i16, i16::MAX);
        for &x in at {
            let m = (x & 0x7FFF) as i16;
            top = top.max(m);
            low = low.min(m);
        }
        if top as u16 >= self.cover {
            return None;
        }
        Some(if low as u16 >= self.normal_from {
            0
        } else {
            self.steps
        })
    }

    /// A chunk's destination bytes (whole-byte codes) into `out`; `false`, with `out` left as it
    /// may be, where an element lies outside what the arithmetic covers.
    #[inline(always)]
    pub(super) fn chunk(&self, at: &[u16; CHUNK], out: &mut [u8]) -> bool {
        let Some(steps) = self.steps_for(at).filter(|_| !self.larger) else {
            return false;
        };
        let out = &mut out[..CHUNK];
        match (steps, self.signed_zero) {
            (0, true) => self.codes::<0, true>(at, out),
            (0, false) => self.codes::<0, false>(at, out),
            (1..=4, true) => self.codes::<4, true>(at, out),
            (1..=4, false) => self.codes::<4, false>(at, out),
            (5..=8, true) => self.codes::<8, true>(at, out),
            (5..=8, false) => self.codes::<8, false>(at, out),
            (_, true) => self.codes::<STEPS, true>(at, out),
            (_, false) => self.codes::<STEPS, false>(at, out),
        }
        true
    }

    /// [`code`](Rounded16::code) of every element of a chunk.
    #[inline(always)]
    fn codes<const STEPS_USED: usize, const SIGNED_ZERO: bool>(
        &self,
        at: &[u16; CHUNK],
        out: &mut [u8],
    ) {
        for (o, &x) in out.iter_mut().zip(at) {
            *o = self.code::<STEPS_USED, SIGNED_ZERO, false>(x) as u8;
        }
    }

    /// A chunk's 4-bit codes (source `at`: little-endian elements), packed two a byte (the
    /// first in the low nibble), into `out`; `false`, with `out` left as it may be, where an
    /// element lies outside what the arithmetic covers, and for a pair other than float16 or
    /// bfloat16 → float4_e2m1fn (the form below assumes a negative zero and at most 2 codes
    /// below the smallest normal, as float4 has).
    ///
    /// The elements are computed as they come, and the largest magnitude is checked at the end
    /// of the chunk, in place of a pass over it first (`chunk`'s): fewer instructions an element
    /// than the table, where each code is looked up and shifted into a word.
    #[inline(always)]
    pub(super) fn chunk4(&self, at: &[[u8; 2]; CHUNK], out: &mut [u8; CHUNK / 2]) -> bool {
        if !self.larger || !self.signed_zero || self.steps > 2 || cfg!(target_endian = "big") {
            return false;
        }
        // Each lane's largest magnitude so far (one per lane: a maximum across lanes in the
        // loop would cost a reduction every 16 elements).
        let mut tops = [0i16; 16];
        for (sixteen, eight) in at
            .as_chunks::<16>()
            .0
            .iter()
            .zip(out.as_chunks_mut::<8>().0)
        {
            let mut lanes = [0u16; 16];
            for ((code, &x), top) in lanes.iter_mut().zip(sixteen).zip(&mut tops) {
                let x = u16::from_le_bytes(x);
                *top = (*top).max((x & 0x7FFF) as i16);
                *code = self.code::<2, true, true>(x);
            }
            // Two codes a 32-bit lane (little-endian, checked above: the first is the low half),
            // a byte each.
            let pairs: [u32; 8] = bytemuck::cast(lanes);
            for (byte, two) in eight.iter_mut().zip(pairs) {
                *byte = (two | two >> 12) as u8;
            }
        }
        tops.into_iter()
            .max()
            .is_some_and(|top| (top as u16) < self.cover)
    }
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;
    use crate::CastMode;

    fn the_arithmetic_covers_every_finite_value_of_the_destination() {
        // Every value up to the destination's largest finite one is zero, subnormal or normal
        // there, which the arithmetic computes: whatever the rounding, the check against the
        // rules' table must not stop below it (above it, overflow is the table's).
        for from in [DType::Float16, DType::BFloat16] {
            let src: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
            for to in DType::ALL
                .into_iter()
                .filter(|d| matches!(d.bits(), 4 | 8) && d.float_format().is_some_and(|f| f.signed))
            {
                let max = to.float_format().unwrap().max_finite;
                // Exact in float32, float16 and bfloat16 (at most 4 mantissa bits, exponent
                // under 16): the fields moved.
                let b = (max as f32).to_bits();
                let max_bits = match from {
                    DType::Float16 => ((b >> 23) - 127 + 15) << 10 | (b & 0x7F_FFFF) >> 13,
                    _ => b >> 16,
                } as u16;
                for rounding in [CastMode::Torch, CastMode::Saturate] {
                    // One code a byte, as the table kernels keep them.
                    let mut stored = vec![0u8; to.storage_bytes(1 << 16).unwrap()];
                    crate::cast_reference(&src, from, &mut stored, to, rounding).unwrap();
                    let mut table = vec![0u8; 1 << 16];
                    dtcast_dtype::packing::unpack(to, &stored, &mut table).unwrap();
                    let rounded = Rounded16::derive(from, to, &table)
                        .unwrap_or_else(|| panic!("{from} -> {to} ({rounding:?}): no arithmetic"));
                    assert!(
                        rounded.cover > max_bits,
                        "{from} -> {to} ({rounding:?}): covered below {:#06x}, the largest finite value is {max_bits:#06x}",
                        rounded.cover
                    );
                }
            }
        }
    }

    crate::self_test::list!(the_arithmetic_covers_every_finite_value_of_the_destination);
}
