//! Float4 codes of 16-bit float elements (bfloat16 or float16) found by comparing each element
//! with its group's thresholds, for groups whose factor is one of at most 256 values picked by
//! the scale byte (compressed-tensors' NVFP4: a float8_e4m3fn scale over a tensor-wide global
//! scale; its MX: an E8M0 power of two).
//!
//! For a fixed factor `f`, the float4 magnitude of `x / f` (or `x · f`; rounded to float32, to
//! the weight's dtype where the reference computes there, then to float4 nearest-even,
//! saturating at 6) never decreases as `|x|` grows, and neither do "the scaled value is not
//! zero" and "the scaled value is inf or NaN". Both 16-bit formats order their magnitudes as
//! their bits do, so each is decided by the smallest magnitude's bits at which it holds: a scale
//! byte's *row* of thresholds, found once per tensor by binary search over the scalar
//! arithmetic itself ([`Table`]). The comparisons do not know which format they compare: only
//! the search does. An element's code is then three comparisons (a binary
//! search over the seven code thresholds, picked from the row by an in-lane byte shuffle), two
//! more for the sign and the inf/NaN report (the report skipped where the caller knows that no
//! element can scale to inf or NaN) — about 27 instructions per 32 elements, where dividing,
//! rounding and encoding take about 45 and two divisions. On AVX2 the same binary search runs
//! a group of 16 per register; elsewhere the comparisons run as a loop over each group that
//! LLVM vectorises for the chosen instruction set. The bytes are the same by construction; the
//! tests hold them to the general path's.

use std::cell::RefCell;

use dtcast_dtype::DType;

use crate::arith::{f16_bits, half_inf_bits, half_value, round_in};
use crate::encode4::Rules;

/// A row's length: 16 magnitudes, two rows to a 512-bit register.
pub(crate) const ROW: usize = 16;
/// Where a row keeps its thresholds: the scaled value is nonzero at `NONZERO`, its float4
/// magnitude is `k` or more at `k` (1 ..= 7), and it is inf or NaN at `INF_NAN`.
pub(crate) const NONZERO: usize = 0;
pub(crate) const INF_NAN: usize = 8;

/// Where an element's sign bit is kept (the x86 comparisons' choice of test).
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) enum ZeroSign {
    /// Always.
    Keep,
    /// Unless the scaled value is zero (compressed-tensors), where every row of the table
    /// makes that the zero magnitude alone (`Table::nonzero_at_one`): one test of the magnitude.
    DropAtZero,
    /// Unless the scaled value is zero, found by the row's `NONZERO` threshold.
    DropBelowNonzero,
}

/// The rows of 256 scale bytes for one set of factors, input dtype and arithmetic.
pub(crate) struct Table {
    /// The factor of each scale byte, as bits, the elements' dtype and the arithmetic the rows
    /// were found for.
    factors: [u32; 256],
    input: DType,
    rules: Rules,
    rows: Box<[[u16; ROW]; 256]>,
    /// The portable loop's form of the rows ([`by_groups`]).
    rows_in_lanes: Box<RowsInLanes>,
    /// Whether every row of a finite, positive factor scales each nonzero magnitude to a
    /// nonzero value (its `NONZERO` threshold is 1): true unless some factor is extreme (a
    /// division by an enormous one, or a product with a tiny one, takes the smallest
    /// magnitudes to zero).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    nonzero_at_one: bool,
}

/// Lanes of 16 bits a [`RowsInLanes`] entry repeats each threshold over: a 128-bit vector, the
/// narrowest that every SIMD target has.
const LANES: usize = 8;

/// Each scale byte's thresholds less one, as i16 (`m >= t` is `m > t - 1` on signed lanes:
/// every magnitude and threshold is below 0x8000), each repeated over [`LANES`] lanes, so that
/// the portable loop reads a threshold's vector where it would otherwise broadcast a scalar per
/// group: SSE2 has no broadcast (four instructions from a row's scalar), nor an unsigned or a
/// greater-or-equal compare (an unsigned `>=` took it a saturating subtract, a compare and a
/// mask).
type RowsInLanes = [[[i16; LANES]; INF_NAN + 1]; 256];

impl Table {
    /// The rows of `factors` (a scale byte's factor) for `input` elements under `rules`; a
    /// byte whose factor is not finite and positive gets a row that reports every element (the
    /// general path's business).
    fn new(factors: &[f32; 256], input: DType, rules: Rules) -> Table {
        let mut rows = Box::new([[0u16; ROW]; 256]);
        for (row, &f) in rows.iter_mut().zip(factors) {
            if f.is_finite() && f > 0.0 {
                *row = row_of(f, input, rules);
            }
        }
        let mut rows_in_lanes: Box<RowsInLanes> = Box::new([[[0; LANES]; INF_NAN + 1]; 256]);
        for (splat, row) in rows_in_lanes.iter_mut().zip(rows.iter()) {
            for (lanes, &t) in splat.iter_mut().zip(row) {
                *lanes = [(t as i16).wrapping_sub(1); LANES];
            }
        }
        let nonzero_at_one = (rows.iter().zip(factors))
            .all(|(row, &f)| !(f.is_finite() && f > 0.0) || row[NONZERO] == 1);
        Table {
            factors: factors.map(f32::to_bits),
            input,
            rules,
            rows,
            rows_in_lanes,
            nonzero_at_one,
        }
    }

    fn serves(&self, factors: &[f32; 256], input: DType, rules: Rules) -> bool {
        self.input == input
            && self.rules.divide == rules.divide
            && self.rules.arithmetic == rules.arithmetic
            && self
                .factors
                .iter()
                .zip(factors)
                .all(|(a, b)| *a == b.to_bits())
    }
}

/// The thresholds of one factor `f` (finite, positive) for `input` elements. A threshold never
/// reached by a finite element is the input's infinity (`never`): inf and NaN elements are
/// reported by `INF_NAN`, at most that.
fn row_of(f: f32, input: DType, rules: Rules) -> [u16; ROW] {
    let never = half_inf_bits(input);
    let scaled = |m: u16| scaled(m, f, input, rules);
    // Where each fact starts, roughly: the scaled value `y` at which it starts, scaled back.
    let near = |y: f32| {
        let x = if rules.divide { y * f } else { y / f };
        let bits = if input == DType::Float16 {
            f16_bits(x)
        } else {
            (x.to_bits() >> 16) as u16
        };
        if x.is_finite() {
            bits.min(never)
        } else {
            never
        }
    };
    let first_near = |holds: &dyn Fn(u16) -> bool, guess: u16| first_near(holds, guess, never);
    let mut row = [never; ROW];
    row[NONZERO] = first_near(&|m| scaled(m) != 0.0, near(f32::from_bits(1)));
    for (k, t) in row.iter_mut().enumerate().take(8).skip(1) {
        let y = MAGNITUDE_STEPS[k - 1].0;
        *t = first_near(&|m| magnitude(scaled(m)) >= k as u8, near(y));
    }
    row[INF_NAN] = first_near(&|m| !scaled(m).is_finite(), near(f32::MAX));
    row
}

/// [`first_in`] over `0..=never`, looked for around `guess` first: where it falls within two
/// steps of the guess, four tries find it instead of fifteen (a table of 255 rows took 40 µs
/// instead of 310).
fn first_near(holds: &dyn Fn(u16) -> bool, guess: u16, never: u16) -> u16 {
    let (low, high) = (
        guess.saturating_sub(2).min(never),
        guess.saturating_add(2).min(never),
    );
    if holds(low) || (high < never && !holds(high)) {
        // Not bracketed: at or below `low` (0 included), or above `high`.
        return first_in(holds, 0, never);
    }
    // `holds` fails at `low` and holds at `high` (or nowhere below `never`).
    first_in(holds, low + 1, high)
}

/// The magnitude bits `m` of an `input` element scaled by `f` as `rules` say: in float32, then
/// rounded to the weight's dtype where the reference computes there.
fn scaled(m: u16, f: f32, input: DType, rules: Rules) -> f32 {
    let x = half_value(m, input);
    round_in(if rules.divide { x / f } else { x * f }, rules.arithmetic)
}

/// The smallest magnitude bits in `low..=high` at which `holds` (false, then true, as the
/// magnitude grows; `high`: where it holds, or the input's infinity, where nothing finite
/// does).
fn first_in(holds: &dyn Fn(u16) -> bool, mut low: u16, mut high: u16) -> u16 {
    while low < high {
        let mid = low + (high - low) / 2;
        if holds(mid) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low
}

/// The float4_e2m1fn magnitude code of `y` (not negative, not NaN): nearest-even among 0, 0.5,
/// 1, 1.5, 2, 3, 4, 6, saturating at 6 — ties go to the even code (0.25 to 0, 0.75 to 1.0).
fn magnitude(y: f32) -> u8 {
    (MAGNITUDE_STEPS.iter()).fold(0, |code, &(t, inclusive)| {
        code + u8::from(if inclusive { y >= t } else { y > t })
    })
}

/// Where float4's magnitude code steps up from `k - 1` to `k` (entry `k - 1`): the midpoints of
/// its grid, and whether the midpoint itself goes up (its upper neighbour's code is even).
const MAGNITUDE_STEPS: [(f32, bool); 7] = [
    (0.25, false),
    (0.75, true),
    (1.25, false),
    (1.75, true),
    (2.5, false),
    (3.5, true),
    (5.0, false),
];

thread_local! {
    /// The last table each thread used: a tensor's bands share their factors.
    static LAST: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// Whether the comparisons serve: float4 groups of 16 or 32 (on AVX-512 by register permutes,
/// elsewhere by a loop over each group that LLVM vectorises for the chosen instruction set).
pub(crate) fn supports(element: DType, group: usize) -> bool {
    element == DType::Float4E2M1Fn && matches!(group, 16 | 32)
}

/// Where the comparisons find each group's scale byte.
pub(crate) enum ScaleBytes<'a> {
    /// One per group.
    Given(&'a [u8]),
    /// Looked up by the group's largest magnitude bits, `codes[maxima[g]]`, and written to
    /// `stored[g]` as the groups are encoded (on AVX-512 and AVX2 the lookups ride along with the
    /// vector work instead of taking a pass of their own).
    ByMaxima {
        maxima: &'a [u16],
        codes: &'a [u8; 0x8000],
        stored: &'a mut [u8],
    },
}

/// `$run` with `$pick` a closure giving group `g`'s scale byte from `$scales` (a
/// [`ScaleBytes`]), one instantiation per source. The caller's `unsafe` block vouches that every
/// group picked lies inside the source (`get_unchecked`).
#[cfg(target_arch = "x86_64")]
macro_rules! with_pick {
    ($scales:expr, |$pick:ident| $run:expr) => {
        match $scales {
            ScaleBytes::Given(bytes) => {
                let $pick = |g: usize| *bytes.get_unchecked(g);
                $run
            }
            ScaleBytes::ByMaxima {
                maxima,
                codes,
                stored,
            } => {
                let $pick = |g: usize| {
                    let code = codes[usize::from(*maxima.get_unchecked(g) & 0x7FFF)];
                    *stored.get_unchecked_mut(g) = code;
                    code
                };
                $run
            }
        }
    };
}

/// Quantizes `src` (whole groups of `group` `input` elements — bfloat16 or float16,
/// little-endian; group `g`'s factor
/// `factors[byte]`, its scale byte found as `scales` says, applied by `rules`) into `out`
/// (packed, the first element of each byte in its low nibble). False, with `out` unspecified,
/// where an element is inf or NaN or its scaled value is, or a used factor is not finite and
/// positive (the general path's business), or the scale bytes do not match the groups.
/// `bounded`: the caller knows that none of these can happen (every element and factor finite,
/// every factor positive, every group's amax over its factor finite), so on AVX-512 the
/// comparisons skip that check. `next`: the input the caller quantizes after this one (a
/// thread's next band), prefetched as `src` is read, where `src` is in the core's cache
/// already; empty where it is not (then `src`'s own lines are prefetched ahead).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode(
    src: &[u8],
    input: DType,
    group: usize,
    scales: ScaleBytes,
    factors: &[f32; 256],
    rules: Rules,
    bounded: bool,
    out: &mut [u8],
    next: &[u8],
) -> bool {
    debug_assert!(supports(DType::Float4E2M1Fn, group));
    debug_assert!(matches!(input, DType::BFloat16 | DType::Float16));
    let groups = out.len() * 2 / group;
    let matched = match &scales {
        ScaleBytes::Given(bytes) => bytes.len() == groups,
        ScaleBytes::ByMaxima { maxima, stored, .. } => {
            maxima.len() == groups && stored.len() == groups
        }
    };
    if !matched || src.len() != out.len() * 4 || !(out.len() * 2).is_multiple_of(group) {
        return false;
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if !last
            .as_ref()
            .is_some_and(|t| t.serves(factors, input, rules))
        {
            *last = Some(Table::new(factors, input, rules));
        }
        let Some(table) = last.as_ref() else {
            return false;
        };
        let (rows, unsigned_zero) = (&*table.rows, rules.unsigned_zero);
        #[cfg(target_arch = "x86_64")]
        let ahead = crate::simd::prefetch_base(src, next);
        // (The rows, the bound and the next input serve the x86 forms.)
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (next, rows, bounded);
        #[cfg(target_arch = "x86_64")]
        let zero = match (unsigned_zero, table.nonzero_at_one) {
            (false, _) => ZeroSign::Keep,
            (true, true) => ZeroSign::DropAtZero,
            (true, false) => ZeroSign::DropBelowNonzero,
        };
        #[cfg(target_arch = "x86_64")]
        if crate::lookup4::avx512() {
            // SAFETY: `avx512()` says this CPU runs AVX-512 F, BW, VL and DQ; every pick is of
            // a group below `groups`, which each source holds (checked above).
            return unsafe {
                with_pick!(scales, |pick| {
                    x86::encode_any(src, group, bounded, pick, rows, zero, out, ahead)
                })
            };
        }
        #[cfg(target_arch = "x86_64")]
        if crate::lookup4::avx2() {
            // SAFETY: `avx2()` says this CPU runs AVX2; every pick is of a group below
            // `groups`, which each source holds (checked above).
            return unsafe {
                with_pick!(scales, |pick| {
                    x86::avx2::encode_any(src, group, bounded, pick, rows, zero, out, ahead)
                })
            };
        }
        let bytes: &[u8] = match scales {
            ScaleBytes::Given(bytes) => bytes,
            ScaleBytes::ByMaxima {
                maxima,
                codes,
                stored,
            } => {
                for (s, &m) in stored.iter_mut().zip(maxima) {
                    *s = codes[usize::from(m & 0x7FFF)];
                }
                stored
            }
        };
        crate::simd::with_best_isa(
            #[inline(always)]
            || match group {
                16 => by_groups::<16>(src, bytes, &table.rows_in_lanes, unsigned_zero, out),
                _ => by_groups::<32>(src, bytes, &table.rows_in_lanes, unsigned_zero, out),
            },
        )
    })
}

/// [`encode`] as a loop over groups of `G` elements, the same comparisons per element, which
/// LLVM vectorises over [`LANES`] elements at a time, each threshold a vector of its row's
/// [`RowsInLanes`] (16-bit lanes, compared signed). The loop runs over 16 elements at a time
/// whatever the group, a group of 32 being two runs with one scale byte: written for 32 at a
/// time, LLVM left it as scalar code.
///
/// (The loop before broadcast each scalar threshold per group and compared unsigned, reducing
/// `bad` per group: SSE2 has no unsigned 16-bit compare, and this form ran much faster there.)
#[inline(always)]
fn by_groups<const G: usize>(
    src: &[u8],
    bytes: &[u8],
    rows_in_lanes: &RowsInLanes,
    unsigned_zero: bool,
    out: &mut [u8],
) -> bool {
    // Per lane, reduced once at the end: one `u16` reduced after every group cost a horizontal
    // or of the group's vectors.
    let mut bad = [0u16; LANES];
    // Without compressed-tensors' zero rule every negative element keeps its sign.
    let any_sign = u16::from(!unsigned_zero);
    let sixteens = src.as_chunks::<2>().0.as_chunks::<16>().0;
    let outs = out.as_chunks_mut::<8>().0;
    for (k, (x, o)) in sixteens.iter().zip(outs).enumerate() {
        let t = &rows_in_lanes[usize::from(bytes[k / (G / 16)])];
        let mut codes = [0u16; 16];
        for (c, x) in codes
            .as_chunks_mut::<LANES>()
            .0
            .iter_mut()
            .zip(x.as_chunks::<LANES>().0)
        {
            for l in 0..LANES {
                let x = u16::from_le_bytes(x[l]);
                let m = (x & 0x7FFF) as i16;
                let above = |k: usize| u16::from(m > t[k][l]);
                bad[l] |= above(INF_NAN);
                let low = above(1) + above(2) + above(3);
                let high = above(4) + above(5) + above(6);
                let sign = (x >> 15) & (above(NONZERO) | any_sign);
                c[l] = low + high + above(7) + (sign << 3);
            }
        }
        for (o, pair) in o.iter_mut().zip(codes.as_chunks::<2>().0) {
            *o = (pair[0] | pair[1] << 4) as u8;
        }
    }
    bad == [0; LANES]
}

#[cfg(target_arch = "x86_64")]
use crate::x86::thresholds as x86;

#[cfg(test)]
mod tests {
    use super::*;

    /// `magnitude` is the float4 cast's magnitude (dtcast_cast's Torch mode, ml_dtypes'
    /// `astype`), at every grid point, tie and neighbour, and saturates at 6.
    #[test]
    fn magnitude_is_the_float4_rounding() {
        use dtcast_cast::{cast, CastMode};
        let mut ys = vec![0.0f32, 7.0, 1e30];
        for t in [
            0.25f32, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0,
        ] {
            ys.extend([t, t.next_up(), t.next_down()]);
        }
        for y in ys {
            // Two float4 to a byte, the first in the low nibble.
            let mut code = [0u8];
            let pair = [y.min(6.0), 0.0];
            cast(
                bytemuck::cast_slice(&pair),
                DType::Float32,
                &mut code,
                DType::Float4E2M1Fn,
                CastMode::Torch,
            )
            .unwrap();
            assert_eq!(magnitude(y), code[0] & 7, "{y}");
        }
    }

    /// Each threshold is where its fact starts to hold: it holds there and fails one step of
    /// the input's magnitudes below, and the row gives every sampled magnitude its code —
    /// factors from tiny to huge (the guessed search and its fallback), bfloat16 and float16
    /// input, each arithmetic the references use on it.
    #[test]
    fn each_threshold_is_the_first_magnitude_where_its_fact_holds() {
        let f32_ = DType::Float32;
        let cases = [
            (DType::BFloat16, true, f32_),
            (DType::BFloat16, false, f32_),
            (DType::BFloat16, true, DType::BFloat16),
            (DType::Float16, true, f32_),
            (DType::Float16, false, f32_),
            (DType::Float16, true, DType::Float16),
            (DType::Float16, false, DType::Float16),
        ];
        for (input, divide, arithmetic) in cases {
            let never = half_inf_bits(input);
            let rules = Rules {
                divide,
                arithmetic,
                unsigned_zero: true,
            };
            let factors = [
                1.0f32,
                0.1,
                3.0e-5,
                7.5e4,
                1e-38,
                3e38,
                448.0 / 2688.0,
                1e-45,
            ];
            for f in factors {
                let row = row_of(f, input, rules);
                let facts = |m: u16| {
                    let y = scaled(m, f, input, rules);
                    let mut facts = [false; 9];
                    facts[NONZERO] = y != 0.0;
                    for (k, fact) in facts.iter_mut().enumerate().take(8).skip(1) {
                        *fact = magnitude(y) >= k as u8;
                    }
                    facts[INF_NAN] = !y.is_finite();
                    facts
                };
                let at = format!("{input}, divide {divide}, in {arithmetic}, f {f}");
                for (k, &t) in row.iter().enumerate().take(9) {
                    assert!(t <= never, "{at}, fact {k} at {t:#x}");
                    if t < never {
                        assert!(facts(t)[k], "{at}, fact {k} at {t:#x}");
                    }
                    if t > 0 {
                        assert!(!facts(t - 1)[k], "{at}, fact {k} below {t:#x}");
                    }
                }
                for m in (0..never).step_by(7).chain([never - 1]) {
                    let reached = (0..9).map(|k| m >= row[k]).collect::<Vec<_>>();
                    assert_eq!(reached, facts(m), "{at}, m {m:#x}");
                }
            }
        }
    }

    /// Both forms of [`encode`] — the loop over groups and, where this CPU has it, the AVX-512
    /// one — give each element the code of its scaled value (`magnitude`, the sign unless
    /// compressed-tensors' zero drops it), and report exactly the groups holding an element or
    /// scaled value that is inf or NaN: random bits and weight-like values of bfloat16 and
    /// float16, random scale bytes, groups of 16 and 32, both zero rules, each arithmetic.
    #[test]
    fn both_forms_give_each_element_the_code_of_its_scaled_value() {
        let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let g = 2688.0f32 / 3.7;
        let mut factors = [0f32; 256];
        for (c, f) in factors.iter_mut().enumerate() {
            // float8_e4m3fn's values over the global scale (byte 0x7F: NaN; 0x80 up: negative).
            let (e, m) = ((c >> 3) & 15, (c & 7) as f32);
            let v = if e == 0 {
                m / 512.0
            } else {
                (8.0 + m) * 2f32.powi(e as i32 - 10)
            };
            *f = if c == 0x7F {
                f32::NAN
            } else if c >= 0x80 {
                -v / g
            } else {
                v / g
            };
        }
        for (input, group) in [DType::BFloat16, DType::Float16]
            .into_iter()
            .flat_map(|input| [(input, 16usize), (input, 32)])
        {
            let never = half_inf_bits(input);
            for unsigned_zero in [true, false] {
                for round in 0..40 {
                    let rules = Rules {
                        divide: round % 2 == 0,
                        arithmetic: if round % 3 == 0 {
                            input
                        } else {
                            DType::Float32
                        },
                        unsigned_zero,
                    };
                    // An odd count too: a last group of 16 alone in a vector.
                    let groups = 64 + round % 3;
                    let n = groups * group;
                    let bytes: Vec<u8> = (0..groups)
                        .map(|_| {
                            if round < 20 {
                                (next() % 0x7E) as u8 + 1
                            } else {
                                next() as u8
                            }
                        })
                        .collect();
                    let src: Vec<u16> = (0..n)
                        .map(|_| {
                            let r = next();
                            match r % 4 {
                                0 => (r >> 16) as u16,
                                1 => (r >> 20) as u16 & 0x807F,
                                _ => {
                                    let x = f32::from_bits(0x3C00_0000 | (r as u32 & 0x807F_FFFF));
                                    if input == DType::Float16 {
                                        f16_bits(x * 3.0)
                                    } else {
                                        ((x * 3.0).to_bits() >> 16) as u16
                                    }
                                }
                            }
                        })
                        .filter(|x| round >= 10 || x & never != never)
                        .chain(std::iter::repeat(0))
                        .take(n)
                        .collect();
                    // The input, and the same with every element that the checks report
                    // (inf, NaN, a scaled overflow) made a zero of its sign: a clean input,
                    // whose bytes every form is held to, wherever the scale bytes are valid.
                    let table = Table::new(&factors, input, rules);
                    let cleaned: Vec<u16> = (src.iter().enumerate())
                        .map(|(i, &x)| {
                            let f = factors[usize::from(bytes[i / group])];
                            let m = x & 0x7FFF;
                            let fine = f.is_finite()
                                && f > 0.0
                                && m < never
                                && scaled(m, f, input, rules).is_finite();
                            if fine {
                                x
                            } else {
                                x & 0x8000
                            }
                        })
                        .collect();
                    for (variant, src) in [src.clone(), cleaned].iter().enumerate() {
                        let mut want = vec![0u8; n / 2];
                        let mut clean = true;
                        for (i, &x) in src.iter().enumerate() {
                            let f = factors[usize::from(bytes[i / group])];
                            let m = x & 0x7FFF;
                            let y = if f.is_finite() && f > 0.0 {
                                scaled(m, f, input, rules)
                            } else {
                                f32::NAN
                            };
                            clean &= m < never && y.is_finite();
                            let signed = x >= 0x8000 && (!unsigned_zero || y != 0.0);
                            let code = magnitude(y.min(7.0)) | u8::from(signed) << 3;
                            want[i / 2] |= code << (4 * (i % 2));
                        }
                        let raw: &[u8] = bytemuck::cast_slice(src);
                        let mut lanes = vec![0u8; n / 2];
                        let ok = match group {
                            16 => by_groups::<16>(
                                raw,
                                &bytes,
                                &table.rows_in_lanes,
                                unsigned_zero,
                                &mut lanes,
                            ),
                            _ => by_groups::<32>(
                                raw,
                                &bytes,
                                &table.rows_in_lanes,
                                unsigned_zero,
                                &mut lanes,
                            ),
                        };
                        let at = format!(
                            "{input}, group {group}, round {round}, {unsigned_zero}, variant {variant}"
                        );
                        assert_eq!(ok, clean, "{at}");
                        if clean {
                            assert_eq!(lanes, want, "{at}");
                        }
                        // Each x86 form, checked, and (where the input allows it) bounded:
                        // nothing looked for.
                        #[cfg(target_arch = "x86_64")]
                        {
                            // The sign's tests that serve the rules and the table: the zero
                            // test only where every row's `NONZERO` threshold is 1.
                            let zeros = match (unsigned_zero, table.nonzero_at_one) {
                                (false, _) => &[ZeroSign::Keep][..],
                                (true, true) => {
                                    &[ZeroSign::DropAtZero, ZeroSign::DropBelowNonzero][..]
                                }
                                (true, false) => &[ZeroSign::DropBelowNonzero][..],
                            };
                            let check =
                                |form: &str, run: &dyn Fn(bool, ZeroSign, &mut [u8]) -> bool| {
                                    let zeros = zeros.iter().cycle();
                                    for (bounded, &zero) in [false, clean].into_iter().zip(zeros) {
                                        let mut wide = vec![0u8; n / 2];
                                        let ok = run(bounded, zero, &mut wide);
                                        assert_eq!(ok, clean, "{at} ({form}, bounded {bounded})");
                                        if clean {
                                            assert_eq!(
                                                wide, want,
                                                "{at} ({form}, bounded {bounded})"
                                            );
                                        }
                                    }
                                };
                            let (pick, rows) = (|g: usize| bytes[g], &table.rows);
                            let ahead = raw.as_ptr();
                            if crate::lookup4::avx512() {
                                // SAFETY: `avx512()` says this CPU runs AVX-512 F, BW, VL and
                                // DQ; `bytes` has a byte for every group.
                                check("AVX-512", &|bounded, zero, out| unsafe {
                                    x86::encode_any(
                                        raw, group, bounded, pick, rows, zero, out, ahead,
                                    )
                                });
                            }
                            if std::is_x86_feature_detected!("avx2") {
                                // SAFETY: this CPU runs AVX2; `bytes` has a byte for every group.
                                check("AVX2", &|bounded, zero, out| unsafe {
                                    let run = x86::avx2::encode_any;
                                    run(raw, group, bounded, pick, rows, zero, out, ahead)
                                });
                            }
                        }
                        // The scale bytes looked up by maxima (each group its own, `g`), written out
                        // as they are used.
                        let maxima: Vec<u16> = (0..groups as u16).collect();
                        let mut codes = Box::new([0u8; 0x8000]);
                        codes[..groups].copy_from_slice(&bytes);
                        let mut stored = vec![0u8; groups];
                        let mut looked_up = vec![0u8; n / 2];
                        let scales = ScaleBytes::ByMaxima {
                            maxima: &maxima,
                            codes: &codes,
                            stored: &mut stored,
                        };
                        // (With a next input to prefetch: where the loops look ahead changes no byte.)
                        let next = raw;
                        let ok = encode(
                            raw,
                            input,
                            group,
                            scales,
                            &factors,
                            rules,
                            false,
                            &mut looked_up,
                            next,
                        );
                        assert_eq!(ok, clean, "{at} (by maxima)");
                        if clean {
                            assert_eq!(
                                (looked_up, stored),
                                (want, bytes.clone()),
                                "{at} (by maxima)"
                            );
                        }
                    }
                }
            }
        }
    }
}
