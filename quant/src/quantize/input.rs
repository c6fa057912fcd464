//! The tensor being quantized as its reference reads it ([`Input`]): elements read as float32 in
//! the reference's arithmetic and NaN rules, amaxes, and the scaled and clamped values of the
//! general path.

use super::*;

/// Whether `scheme`'s reference reads a `dtype` input's NaNs as the default NaN: compressed-tensors
/// computes on bfloat16 tensors (torch: in float32, rounded back, a NaN coming back as 0x7FC0).
pub(crate) fn reads_nan_as_default(dtype: DType, scheme: &Scheme) -> bool {
    dtype == DType::BFloat16 && scheme.convention == Convention::CompressedTensors
}

/// Whether a scale's amax, where its elements hold a NaN, is the default NaN rather than the
/// first of them as the input reads: where the input's NaNs read as the default NaN, and for
/// float16 (torch's float16 reductions give the default NaN for any; compressed-tensors'
/// vectorised `maximum` with 0 then makes some of them 0xFFFF, which dtcast does not follow).
pub(crate) fn amax_nan_is_default(dtype: DType, scheme: &Scheme) -> bool {
    reads_nan_as_default(dtype, scheme) || dtype == DType::Float16
}

/// The tensor being quantized: its stored elements (float32, bfloat16 or float16), read as
/// float32.
pub(super) struct Input<'a> {
    pub(super) src: &'a [u8],
    pub(super) dtype: DType,
    /// Bytes per element (read once from the dtype table, not in the loops).
    pub(super) size: usize,
    /// NaN read as the positive default NaN (compressed-tensors' bfloat16 arithmetic).
    pub(super) canonical_nan: bool,
    /// An amax holding a NaN is the default NaN ([`amax_nan_is_default`]).
    pub(super) default_nan_amax: bool,
}

impl<'a> Input<'a> {
    /// `src` as `scheme`'s reference reads it: compressed-tensors computes on bfloat16 tensors
    /// (torch: in float32, rounded back, a NaN coming back as 0x7FC0); the others convert them to
    /// float32 first, bits kept.
    pub(super) fn new(src: &'a [u8], dtype: DType, scheme: &Scheme) -> Input<'a> {
        Input {
            src,
            dtype,
            size: dtype.byte_size().unwrap_or(4),
            canonical_nan: reads_nan_as_default(dtype, scheme),
            default_nan_amax: amax_nan_is_default(dtype, scheme),
        }
    }

    /// The stored bytes of elements `first..first + count`.
    #[inline(always)]
    pub(super) fn bytes(&self, first: usize, count: usize) -> &[u8] {
        &self.src[first * self.size..(first + count) * self.size]
    }

    /// Element `i` of `bytes` as float32 (a bfloat16 is the top half of its float32, a float16
    /// exactly converted, NaN bits kept; the default NaN where the input's NaNs are canonical).
    #[inline(always)]
    pub(super) fn value(&self, bytes: &[u8], i: usize) -> f32 {
        let x = if self.dtype == DType::BFloat16 {
            f32::from_bits(u32::from(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])) << 16)
        } else if self.dtype == DType::Float16 {
            f16_value(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]))
        } else {
            f32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        };
        if self.canonical_nan && x.is_nan() {
            DEFAULT_NAN
        } else {
            x
        }
    }

    /// The largest magnitude of elements `first..first + count` after `a` (the running value),
    /// as the sequential rule gives it: a NaN already there stays, else the first NaN of the run
    /// is the result (the default NaN where [`amax_nan_is_default`]), else the maximum. The
    /// magnitudes' bits compare as integers straight from storage (a loop LLVM vectorises); a
    /// NaN is looked for only when one is there.
    #[inline(always)]
    pub(super) fn amax(&self, first: usize, count: usize, a: f32) -> f32 {
        if a.is_nan() {
            return a;
        }
        let bytes = self.bytes(first, count);
        let halves = || {
            (bytes.as_chunks::<2>().0.iter())
                .fold(0u16, |m, &b| m.max(u16::from_le_bytes(b) & 0x7FFF))
        };
        let m = if self.dtype == DType::BFloat16 {
            u32::from(halves()) << 16
        } else if self.dtype == DType::Float16 {
            f16_value(halves()).to_bits()
        } else {
            (bytes.as_chunks::<4>().0.iter())
                .fold(0u32, |m, &b| m.max(u32::from_le_bytes(b) & 0x7FFF_FFFF))
        };
        if m > 0x7F80_0000 {
            if self.default_nan_amax {
                return DEFAULT_NAN;
            }
            return (0..count)
                .map(|i| self.value(bytes, i))
                .find(|v| v.is_nan())
                .unwrap_or(a);
        }
        a.max(f32::from_bits(m))
    }

    /// The amax of every scale of the input's rows `band` (`at.first_scale` the first of them).
    #[inline(always)]
    pub(super) fn band_amax(
        &self,
        band: std::ops::Range<usize>,
        at: &Rows,
        cols: usize,
        scheme: &Scheme,
        amax: &mut [f32],
    ) {
        for local in band {
            let r = at.first_row + local;
            match scheme.granularity {
                // Group sizes the formats use, known to the compiler.
                Granularity::Group(16) => {
                    let first = r * (cols / 16) - at.first_scale;
                    for (g, s) in amax[first..first + cols / 16].iter_mut().enumerate() {
                        *s = self.amax(local * cols + g * 16, 16, *s);
                    }
                }
                Granularity::Group(32) => {
                    let first = r * (cols / 32) - at.first_scale;
                    for (g, s) in amax[first..first + cols / 32].iter_mut().enumerate() {
                        *s = self.amax(local * cols + g * 32, 32, *s);
                    }
                }
                Granularity::Tensor
                | Granularity::Channel
                | Granularity::Group(_)
                | Granularity::Block(..) => {
                    for (start, end, k) in scheme.runs(r, cols) {
                        let s = &mut amax[k - at.first_scale];
                        *s = self.amax(local * cols + start, end - start, *s);
                    }
                }
            }
        }
    }

    /// The input's rows from `rows.local` (as many as fill `out`) scaled by their scales' factors
    /// in the plan's arithmetic, clamped to `limit`: the float32 values the element encoder
    /// rounds.
    #[inline(always)]
    pub(super) fn scaled(
        &self,
        rows: &Rows,
        cols: usize,
        scheme: &Scheme,
        plan: &Plan,
        limit: f32,
        out: &mut [f32],
    ) -> bool {
        let mut special = false;
        for (j, row) in out.chunks_exact_mut(cols).enumerate() {
            let local = rows.local + j;
            let r = rows.first_row + local;
            special |= match scheme.granularity {
                // The group sizes the formats use, known to the compiler (each group's loop
                // unrolled).
                Granularity::Group(16) => self.groups::<16>(row, local, r, rows, plan, limit),
                Granularity::Group(32) => self.groups::<32>(row, local, r, rows, plan, limit),
                Granularity::Tensor
                | Granularity::Channel
                | Granularity::Group(_)
                | Granularity::Block(..) => {
                    let mut special = false;
                    for (start, end, g) in scheme.runs(r, cols) {
                        let f = plan.factors[g - rows.first_scale];
                        let src = self.bytes(local * cols + start, end - start);
                        special |= self.scale_run(src, f, plan, limit, &mut row[start..end]);
                    }
                    special
                }
            };
        }
        special
    }

    /// Row `r` (the input's row `local`) of groups of `K`.
    #[inline(always)]
    pub(super) fn groups<const K: usize>(
        &self,
        row: &mut [f32],
        local: usize,
        r: usize,
        rows: &Rows,
        plan: &Plan,
        limit: f32,
    ) -> bool {
        let cols = row.len();
        let first = r * (cols / K) - rows.first_scale;
        let (groups, _) = row.as_chunks_mut::<K>();
        let mut special = false;
        for (g, run) in groups.iter_mut().enumerate() {
            let src = self.bytes(local * cols + g * K, K);
            special |= self.scale_run(src, plan.factors[first + g], plan, limit, run);
        }
        special
    }

    /// `run`'s values (stored in `src`) scaled by `f` as the plan says, clamped to `limit`.
    #[inline(always)]
    pub(super) fn scale_run(
        &self,
        src: &[u8],
        f: f32,
        plan: &Plan,
        limit: f32,
        run: &mut [f32],
    ) -> bool {
        let bf16_in = self.dtype == DType::BFloat16;
        let round = plan.arithmetic == DType::BFloat16;
        let c = self.canonical_nan;
        // Dividing by a normal power of two is multiplying by its reciprocal, which is exact
        // (2^-127 ..= 2^126): both are the correctly rounded value of the same real number, and
        // a NaN element comes out of either quieted. A multiplication is much the cheaper.
        let (divide, f) = match plan.apply {
            Apply::Divide if normal_power_of_two(f) => (false, 1.0 / f),
            Apply::Divide => (true, f),
            Apply::Multiply => (false, f),
        };
        if self.dtype == DType::Float16 && !f.is_nan() {
            // compressed-tensors' float16 weights: FP8 and MX in float16 arithmetic, NVFP4's
            // float32 quotient.
            let round = plan.arithmetic == DType::Float16;
            return match (divide, round) {
                (true, true) => scale_halves::<true, true>(src, f, limit, run),
                (true, false) => scale_halves::<true, false>(src, f, limit, run),
                (false, true) => scale_halves::<false, true>(src, f, limit, run),
                (false, false) => scale_halves::<false, false>(src, f, limit, run),
            };
        }
        match (f.is_nan(), bf16_in, divide, round) {
            // A NaN factor (rare): `div` / `mul`'s rules one value at a time.
            (true, ..) => {
                let mut special = false;
                for (i, v) in run.iter_mut().enumerate() {
                    let x = self.value(src, i);
                    let y = match plan.apply {
                        Apply::Divide => div(x, f),
                        Apply::Multiply => mul(x, f),
                    };
                    *v = clamp_to(round_in(y, plan.arithmetic), limit);
                    special |= is_special(*v);
                }
                special
            }
            (false, true, true, true) => scale_values::<true, true, true>(src, f, c, limit, run),
            (false, true, true, false) => scale_values::<true, true, false>(src, f, c, limit, run),
            (false, true, false, true) => scale_values::<true, false, true>(src, f, c, limit, run),
            (false, true, false, false) => {
                scale_values::<true, false, false>(src, f, c, limit, run)
            }
            (false, false, true, true) => scale_values::<false, true, true>(src, f, c, limit, run),
            (false, false, true, false) => {
                scale_values::<false, true, false>(src, f, c, limit, run)
            }
            (false, false, false, true) => {
                scale_values::<false, false, true>(src, f, c, limit, run)
            }
            (false, false, false, false) => {
                scale_values::<false, false, false>(src, f, c, limit, run)
            }
        }
    }
}

/// A run of stored values (`BF16` or float32; NaN canonical when `canonical`) divided by or
/// multiplied by its factor `f` (not a NaN: then the hardware's division or product is the rule,
/// x86 returning a NaN element quieted), rounded to bfloat16 when `ROUND`, clamped to `limit`:
/// one loop LLVM vectorises. Says whether it wrote a NaN or -0 ([`is_special`]; the compiler
/// drops that where nobody asks).
#[inline(always)]
pub(super) fn scale_values<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    canonical: bool,
    limit: f32,
    out: &mut [f32],
) -> bool {
    let scale = |x: f32| {
        let x = if canonical && x.is_nan() {
            DEFAULT_NAN
        } else {
            x
        };
        let y = if DIVIDE { x / f } else { x * f };
        finish(scaled_as_on_x86(y, x), ROUND, limit)
    };
    let mut special = false;
    if BF16 {
        for (v, &b) in out.iter_mut().zip(src.as_chunks::<2>().0) {
            *v = scale(f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16));
            special |= is_special(*v);
        }
    } else {
        for (v, &b) in out.iter_mut().zip(src.as_chunks::<4>().0) {
            *v = scale(f32::from_le_bytes(b));
            special |= is_special(*v);
        }
    }
    special
}

/// [`scale_values`] for float16 elements (compressed-tensors' rules): each quotient or product
/// in float32, rounded to float16 when `ROUND` (torch's float16 arithmetic: a NaN keeps its
/// sign), clamped to `limit`.
#[inline(always)]
pub(super) fn scale_halves<const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    limit: f32,
    out: &mut [f32],
) -> bool {
    let mut special = false;
    for (v, &b) in out.iter_mut().zip(src.as_chunks::<2>().0) {
        let x = f16_value(u16::from_le_bytes(b));
        let y = scaled_as_on_x86(if DIVIDE { x / f } else { x * f }, x);
        *v = clamp_to(if ROUND { round_f16(y) } else { y }, limit);
        special |= is_special(*v);
    }
    special
}

/// Whether `f` is a positive normal power of two: dividing by it is multiplying by its
/// reciprocal (also a normal power of two), bit for bit.
#[inline(always)]
pub(super) fn normal_power_of_two(f: f32) -> bool {
    let bits = f.to_bits();
    bits & 0x807F_FFFF == 0 && (1..=254).contains(&(bits >> 23))
}

/// A NaN or -0: where the references' float4 codes differ from the float4 cast's.
#[inline(always)]
pub(super) fn is_special(v: f32) -> bool {
    v.is_nan() | (v.to_bits() == 0x8000_0000)
}

/// A scaled value rounded to bfloat16 when `round` (torch's arithmetic on bfloat16 tensors:
/// to nearest even, a NaN the default NaN), then clamped to `±limit` (NaN stays).
#[inline(always)]
pub(super) fn finish(y: f32, round: bool, limit: f32) -> f32 {
    clamp_to(if round { round_bf16(y) } else { y }, limit)
}

/// `y` clamped to `±limit` (NaN stays).
#[inline(always)]
pub(super) fn clamp_to(y: f32, limit: f32) -> f32 {
    if y > limit {
        limit
    } else if y < -limit {
        -limit
    } else {
        y
    }
}

/// The largest magnitude of the whole tensor, by the sequential rule ([`Input::amax`]): partial
/// maxima of pieces on the thread pool, folded in order.
pub(super) fn tensor_amax_pass(input: &Input, n: usize) -> f32 {
    let parts: Vec<f32> = (0..n.div_ceil(PIECE_ELEMENTS))
        .into_par_iter()
        .map(|p| {
            let first = p * PIECE_ELEMENTS;
            with_best_isa(
                #[inline(always)]
                || input.amax(first, PIECE_ELEMENTS.min(n - first), 0.0),
            )
        })
        .collect();
    parts.into_iter().fold(0.0, fold_amax)
}

/// Whether `x / f`, rounded to float32 and then to bfloat16, equals `x * (1 / f)` (the
/// reciprocal rounded to float32), rounded the same way, for every bfloat16 `x`: where `f` is a
/// bfloat16 itself and its reciprocal a normal float32. The product is within about one float32
/// ulp (2^-23 relative) of the quotient; the quotient of two 8-bit significands is either a
/// bfloat16 itself (an odd part divides the other) or at least 2^-17 (relative) away from every
/// bfloat16 rounding midpoint — `|2^9 mx - (2n+1) ms| >= 1` over `2^9 ms` — so both round to the
/// same bfloat16 (subnormal quotients likewise, at least 2^-142 from a midpoint against an error
/// near 2^-149). A multiplication instead of a division per element: compressed-tensors' FP8 of
/// bfloat16 weights divides by a bfloat16 scale in bfloat16 arithmetic.
pub(super) fn reciprocal_serves_bf16(f: f32) -> bool {
    f.to_bits() & 0xFFFF == 0 && (pow2(-126)..=pow2(126)).contains(&f)
}

/// The running amax `a` after a later part's `p`: a NaN already there stays, else `p`'s NaN,
/// else the larger.
pub(crate) fn fold_amax(a: f32, p: f32) -> f32 {
    if a.is_nan() {
        a
    } else if p.is_nan() {
        p
    } else {
        a.max(p)
    }
}
