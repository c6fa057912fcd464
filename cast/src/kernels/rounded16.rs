//! float16/bfloat16 → a byte-wide float by integer arithmetic on 16-bit lanes, for the portable
//! table kernels (`lookup.rs`): a chunk whose elements all lie where the arithmetic has been
//! checked against the pair's table is computed instead of looked up.
//!
//! A lookup costs two loads and a store per element, about two cycles on the x86-64 baseline;
//! the arithmetic is a dozen operations on eight 16-bit lanes at a time (SSE2 has every one of
//! them: shifts by a uniform count, adds, signed 16-bit compares, min and max). It covers what
//! real data holds — zeros, the destination's subnormals and its normal range — and leaves the
//! rest (overflow, infinities, NaNs, where the rules differ by mode and format) to the table.
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

/// The arithmetic of one 16-bit float → byte-wide signed float pair.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rounded16 {
    /// Subtracted from a source magnitude (wrapping): the destination's exponent bias in place.
    rebias: u16,
    /// Mantissa bits the rounding drops (at least 1).
    drop: u32,
    /// `2^(drop - 1) - 1`: with the kept part's lowest bit added, rounding to nearest-even.
    half: u16,
    /// From this source magnitude up, a code is the rebiased magnitude rounded; below it, the
    /// number of `below` entries the magnitude exceeds.
    normal_from: u16,
    /// `below[k]`: the largest source magnitude whose code is at most `k`, for the codes under the
    /// smallest normal (`i16::MAX` past them: no magnitude exceeds it).
    below: [i16; STEPS],
    /// How many of `below` are in use (at most 4, 8 or 16: the chunk compares with that many).
    steps: usize,
    /// Magnitudes below this are computed; a chunk holding a larger one is looked up.
    cover: u16,
    /// The destination's sign bit where a code is zero: the sign bit, or 0 for formats without a
    /// negative zero (fnuz: their 0x80 is NaN).
    zero_sign: u16,
}

impl Rounded16 {
    /// The arithmetic of `from` → `to`, checked against `table` (the pair's entry per source bit
    /// pattern); `None` where the pair is not a 16-bit float into a signed byte-wide float, or
    /// where the arithmetic would cover too little to be worth a chunk's check.
    pub(super) fn derive(from: DType, to: DType, table: &[u8]) -> Option<Rounded16> {
        let (src, dst) = (from.float_format()?, to.float_format()?);
        if from.bits() != 16 || to.bits() != 8 || to.is_packed() || !dst.signed {
            return None;
        }
        if table.len() != 1 << 16 {
            return None;
        }
        let drop = src.mantissa_bits.checked_sub(dst.mantissa_bits)?;
        if drop == 0 {
            return None;
        }
        // The source's biased exponent of the destination's smallest normal (2^(1 - bias)), and
        // no lower than the source's own smallest normal.
        let exponent = (1 - dst.bias + src.bias).max(1);
        let normal_from = u16::try_from(exponent << src.mantissa_bits).ok()?;
        let magnitude = |i: usize| u16::from(table[i] & 0x7F);
        let mut arithmetic = Rounded16 {
            rebias: ((src.bias - dst.bias) << src.mantissa_bits) as u16,
            drop,
            half: (1 << (drop - 1)) - 1,
            normal_from,
            below: [i16::MAX; STEPS],
            steps: 0,
            cover: 0,
            zero_sign: u16::from(table[0x8000] & 0x80),
        };
        // The codes below the smallest normal, by thresholds (the table's codes must not
        // decrease as the magnitude grows, which the check below holds them to).
        let steps = usize::from(magnitude(usize::from(normal_from)));
        if steps > STEPS {
            return None;
        }
        arithmetic.steps = steps;
        for m in 0..normal_from {
            for k in usize::from(magnitude(usize::from(m)))..steps {
                arithmetic.below[k] = m as i16;
            }
        }
        // Where the rounding of normal magnitudes also gives the codes below them (float16 →
        // float8_e5m2: the same exponent bias, so the top byte rounded), no thresholds at all.
        let rounds_all = |m: u16| {
            [m, m | 0x8000]
                .into_iter()
                .all(|x| arithmetic.code::<0>(x) == table[usize::from(x)])
        };
        if (0..normal_from).all(rounds_all) {
            arithmetic.normal_from = 0;
        }
        // Covered up to the first magnitude where either sign differs from the table.
        let agrees = |m: u16| {
            [m, m | 0x8000].into_iter().all(|x| {
                let code = match steps {
                    0..=4 => arithmetic.code::<4>(x),
                    5..=8 => arithmetic.code::<8>(x),
                    _ => arithmetic.code::<STEPS>(x),
                };
                code == table[usize::from(x)]
            })
        };
        arithmetic.cover = (0..0x8000).find(|&m| !agrees(m)).unwrap_or(0x8000);
        (arithmetic.cover > normal_from).then_some(arithmetic)
    }

    /// The destination byte of source bits `x`, comparing with the first `STEPS_USED` of `below`
    /// (0: `x` does not lie below the smallest normal, which the caller has checked).
    #[inline(always)]
    fn code<const STEPS_USED: usize>(&self, x: u16) -> u8 {
        let m = x & 0x7FFF;
        let r = m.wrapping_sub(self.rebias);
        let odd = (r >> self.drop) & 1;
        let normal = r.wrapping_add(self.half).wrapping_add(odd) >> self.drop;
        let code = if STEPS_USED > 0 {
            let mut count = 0u16;
            for &t in &self.below[..STEPS_USED] {
                count += u16::from(m as i16 > t);
            }
            if m >= self.normal_from {
                normal
            } else {
                count
            }
        } else {
            normal
        };
        let sign = (x >> 8) & if code == 0 { self.zero_sign } else { 0x80 };
        (code | sign) as u8
    }

    /// A chunk's destination bytes into `out`; `false`, with `out` left as it may be, where an
    /// element lies outside what the arithmetic covers.
    #[inline(always)]
    pub(super) fn chunk(&self, at: &[u16; CHUNK], out: &mut [u8]) -> bool {
        // Magnitudes fit in i16: signed min and max are SSE2 instructions.
        let (mut top, mut low) = (0i16, i16::MAX);
        for &x in at {
            let m = (x & 0x7FFF) as i16;
            top = top.max(m);
            low = low.min(m);
        }
        if top as u16 >= self.cover {
            return false;
        }
        let out = &mut out[..CHUNK];
        match self.steps {
            _ if low as u16 >= self.normal_from => self.codes::<0>(at, out),
            0..=4 => self.codes::<4>(at, out),
            5..=8 => self.codes::<8>(at, out),
            _ => self.codes::<STEPS>(at, out),
        }
        true
    }

    /// [`code`](Rounded16::code) of every element of a chunk.
    #[inline(always)]
    fn codes<const STEPS_USED: usize>(&self, at: &[u16; CHUNK], out: &mut [u8]) {
        for (o, &x) in out.iter_mut().zip(at) {
            *o = self.code::<STEPS_USED>(x);
        }
    }
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;
    use crate::mode::Rounding;

    fn the_arithmetic_covers_every_finite_value_of_the_destination() {
        // Every value up to the destination's largest finite one is zero, subnormal or normal
        // there, which the arithmetic computes: whatever the rounding, the check against the
        // rules' table must not stop below it (above it, overflow is the table's).
        for from in [DType::Float16, DType::BFloat16] {
            let src: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
            for to in DType::ALL
                .into_iter()
                .filter(|d| d.bits() == 8 && d.float_format().is_some_and(|f| f.signed))
            {
                let max = to.float_format().unwrap().max_finite;
                // Exact in float32, float16 and bfloat16 (at most 4 mantissa bits, exponent
                // under 16): the fields moved.
                let b = (max as f32).to_bits();
                let max_bits = match from {
                    DType::Float16 => ((b >> 23) - 127 + 15) << 10 | (b & 0x7F_FFFF) >> 13,
                    _ => b >> 16,
                } as u16;
                for rounding in [Rounding::Torch, Rounding::Saturate] {
                    let mut table = vec![0u8; 1 << 16];
                    crate::dispatch::pair_fns(from, to)
                        .unwrap()
                        .scalar(rounding)(&src, &mut table);
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
