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
    fn output(&self, c: u8, f: f32) -> u32 {
        let y = scale_entry(self.values[usize::from(c)], f);
        match self.out {
            DType::Float16 => u32::from(f16_bits(y)),
            DType::BFloat16 => u32::from(bf16_bits(y)),
            _ => y.to_bits(),
        }
    }

    /// Bytes per output.
    #[inline(always)]
    fn size(&self) -> usize {
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
fn by_float16(f: f32) -> bool {
    f.abs() < f32::from_bits(0x7B00_0000)
}

/// Whether a factor the float16 route takes may have its products rounded by AVX512_BF16's
/// instruction: zero, or at least 2^-117, so that no product of a nonzero code (2^-9 at least)
/// is a float32 subnormal, which the instruction would read as zero.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn products_normal(f: f32) -> bool {
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
mod x86 {
    use core::arch::x86_64::*;

    use dtcast_dtype::DType;

    use crate::arith::mul;
    use crate::lines::Lines;

    /// 16 codes at `s` as float32 lanes: the magnitude's 7 bits moved to float32's exponent and
    /// mantissa are the value times 2^-120, exactly (subnormals included), so one product by
    /// 2^120 rebiases; code 0x7F (and 0xFF) is NaN.
    #[inline(always)]
    unsafe fn decode(s: *const u8) -> __m512 {
        // SAFETY: the caller's contract: 16 bytes at `s`; AVX-512 F.
        unsafe {
            let codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(s.cast()));
            let magnitude = _mm512_and_si512(codes, _mm512_set1_epi32(0x7F));
            let moved = _mm512_castsi512_ps(_mm512_slli_epi32::<20>(magnitude));
            let value = _mm512_mul_ps(moved, _mm512_set1_ps(f32::from_bits(0x7B80_0000))); // 2^120
            let sign = _mm512_slli_epi32::<24>(_mm512_and_si512(codes, _mm512_set1_epi32(0x80)));
            let signed = _mm512_or_si512(_mm512_castps_si512(value), sign);
            let nan = _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7F));
            _mm512_castsi512_ps(_mm512_mask_mov_epi32(
                signed,
                nan,
                _mm512_set1_epi32(0x7FC0_0000),
            ))
        }
    }

    /// Products to bfloat16 (nearest-even; every NaN 0xFFFF) in the low 16 bits of each lane.
    #[inline(always)]
    unsafe fn round(products: __m512) -> __m512i {
        // SAFETY: AVX-512 F by the caller's contract.
        unsafe {
            let bits = _mm512_castps_si512(products);
            let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            let bias = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF));
            let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(bits, bias));
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(products, products);
            _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0xFFFF))
        }
    }

    /// The odd 16-bit lanes of two vectors side by side: the top halves of 32 float32 lanes.
    const TOP_HALVES: [u16; 32] = {
        let mut t = [0u16; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = (2 * i + 1) as u16;
            i += 1;
        }
        t
    };

    /// The 32 codes at `s`, and the products of the first and last 16 with `f` (finite, below
    /// 2^119 in magnitude) by way of float16 (see [`step_half`]; NaN codes give numbers here).
    #[inline(always)]
    unsafe fn products(s: *const u8, f: f32) -> (__m256i, __m512, __m512) {
        // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
        unsafe {
            let codes = _mm256_loadu_si256(s.cast());
            let wide = _mm512_cvtepu8_epi16(codes);
            // Sign to bit 14 and magnitude to bits 7..14, then bit 14 doubled into bit 15.
            let moved = _mm512_slli_epi16::<7>(wide);
            let half = _mm512_add_epi16(moved, _mm512_and_si512(moved, _mm512_set1_epi16(0x4000)));
            let factor = _mm512_set1_ps(f * 256.0);
            let low = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), factor);
            let high = _mm512_mul_ps(
                _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(half)),
                factor,
            );
            (codes, low, high)
        }
    }

    /// 32 codes at `s` times `f` (finite, below 2^119 in magnitude) to bfloat16, one vector:
    /// each code's bits moved into a float16 (exactly its value times 2^-8, subnormals included)
    /// and converted by the hardware, then multiplied by `f * 2^8` — the same real product as the
    /// value's by `f`, so the same rounding — and rounded to nearest-even (by AVX512_BF16's
    /// instruction where `CPU_BF16`, for factors [`super::products_normal`] takes); NaN codes
    /// 0xFFFF.
    #[inline(always)]
    unsafe fn step_half<const CPU_BF16: bool>(s: *const u8, f: f32) -> __m512i {
        // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
        unsafe {
            let (codes, low, high) = products(s, f);
            let rounded = if CPU_BF16 {
                // The first 16 elements from the second operand.
                core::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(high, low))
            } else {
                let round = |p: __m512| {
                    let bits = _mm512_castps_si512(p);
                    let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                    _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)))
                };
                let top = _mm512_loadu_si512(TOP_HALVES.as_ptr().cast());
                _mm512_permutex2var_epi16(round(low), top, round(high))
            };
            let nan = _mm256_cmpeq_epi8_mask(
                _mm256_and_si256(codes, _mm256_set1_epi8(0x7F)),
                _mm256_set1_epi8(0x7F),
            );
            _mm512_mask_mov_epi16(rounded, nan, _mm512_set1_epi16(-1))
        }
    }

    /// Outputs of the forms below, as their const parameter: bfloat16, float16, float32.
    pub(super) const TO_BF16: u8 = 0;
    pub(super) const TO_F16: u8 = 1;
    pub(super) const TO_F32: u8 = 2;

    /// The same 32 codes to float16: the same moves and products, each rounded by `vcvtps2ph`
    /// (nearest-even, the cast's rule), NaN codes given `nan`'s outputs.
    #[inline(always)]
    unsafe fn step_f16(s: *const u8, f: f32, nan: [u32; 2]) -> __m512i {
        // SAFETY: the caller's contract: 32 bytes at `s`; AVX-512 F and BW.
        unsafe {
            let (codes, low, high) = products(s, f);
            nan_codes(to_f16(low, high), codes, nan)
        }
    }

    /// Two vectors of products rounded to float16 by `vcvtps2ph`, side by side.
    #[inline(always)]
    unsafe fn to_f16(low: __m512, high: __m512) -> __m512i {
        // SAFETY: AVX-512 F by the caller's contract.
        unsafe {
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm512_cvtps_ph::<NEAREST>(low)),
                _mm512_cvtps_ph::<NEAREST>(high),
            )
        }
    }

    /// Which of 32 codes are NaN (0x7F, 0xFF), and which negative.
    #[inline(always)]
    unsafe fn nan_and_sign(codes: __m256i) -> (__mmask32, __mmask32) {
        // SAFETY: AVX-512 BW and VL by the caller's contract.
        unsafe {
            let is_nan = _mm256_cmpeq_epi8_mask(
                _mm256_and_si256(codes, _mm256_set1_epi8(0x7F)),
                _mm256_set1_epi8(0x7F),
            );
            (is_nan, _mm256_movepi8_mask(codes))
        }
    }

    /// `v` (32 float16 outputs of `codes`) with each NaN code's lane set to `nan[0]` (code
    /// 0x7F's output) or `nan[1]` (0xFF's).
    #[inline(always)]
    unsafe fn nan_codes(v: __m512i, codes: __m256i, nan: [u32; 2]) -> __m512i {
        // SAFETY: AVX-512 F, BW and VL by the caller's contract.
        unsafe {
            let (is_nan, negative) = nan_and_sign(codes);
            let nans = _mm512_mask_mov_epi16(
                _mm512_set1_epi16(nan[0] as i16),
                negative,
                _mm512_set1_epi16(nan[1] as i16),
            );
            _mm512_mask_mov_epi16(v, is_nan, nans)
        }
    }

    /// The float32 products of 32 codes (the first 16 in `low`) with each NaN code's lane set
    /// to `nan[0]` (code 0x7F's output) or `nan[1]` (0xFF's).
    #[inline(always)]
    unsafe fn nan_codes32(
        low: __m512,
        high: __m512,
        codes: __m256i,
        nan: [u32; 2],
    ) -> [__m512i; 2] {
        // SAFETY: AVX-512 F, BW and VL by the caller's contract.
        unsafe {
            let (is_nan, negative) = nan_and_sign(codes);
            let nans = |negative: __mmask16| {
                let positive = _mm512_set1_epi32(nan[0] as i32);
                _mm512_mask_mov_epi32(positive, negative, _mm512_set1_epi32(nan[1] as i32))
            };
            let fix = |p: __m512, half: u32| {
                let (is_nan, negative) = ((is_nan >> half) as u16, (negative >> half) as u16);
                _mm512_mask_mov_epi32(_mm512_castps_si512(p), is_nan, nans(negative))
            };
            [fix(low, 0), fix(high, 16)]
        }
    }

    /// [`super::groups`] on AVX-512, for groups of a multiple of 32 codes: to float16 or
    /// float32, or to bfloat16 with AVX512_BF16's rounding where the CPU has it. Call it only
    /// where `isa()` names AVX-512.
    pub(super) fn groups_avx512(
        src: &[u8],
        group: usize,
        factors: &[f32],
        codes: super::Codes,
        dst: &mut [u8],
    ) {
        // The caller checked that `isa()` names AVX-512 (F, BW, VL, DQ).
        let plain = match codes.out {
            DType::Float16 => groups_plain::<TO_F16>,
            DType::Float32 => groups_plain::<TO_F32>,
            _ if crate::lookup4::avx512_bf16() => {
                // SAFETY: `avx512_bf16()` says this CPU runs AVX-512 F, BW, VL, DQ and BF16.
                unsafe { groups_bf16(src, group, factors, codes, dst) };
                return;
            }
            _ => groups_plain::<TO_BF16>,
        };
        // SAFETY: `isa()` names AVX-512 (F, BW, VL, DQ): the caller's check.
        unsafe { plain(src, group, factors, codes, dst) }
    }

    /// [`groups`] into `OUT`'s dtype (bfloat16 without AVX512_BF16): compiled for the AVX-512
    /// subsets it needs, as [`groups_bf16`] is for its own (inlined into `groups_avx512`, which
    /// has no target features, every intrinsic of the loop was a call).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    unsafe fn groups_plain<const OUT: u8>(
        src: &[u8],
        group: usize,
        factors: &[f32],
        codes: super::Codes,
        dst: &mut [u8],
    ) {
        // SAFETY: this function's contract covers `groups`'.
        unsafe { groups::<false, OUT>(src, group, factors, codes, dst) }
    }

    /// [`groups`] into bfloat16 where the CPU runs AVX512_BF16.
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL, DQ and BF16.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    unsafe fn groups_bf16(
        src: &[u8],
        group: usize,
        factors: &[f32],
        codes: super::Codes,
        dst: &mut [u8],
    ) {
        // SAFETY: this function's contract covers `groups`'.
        unsafe { groups::<true, TO_BF16>(src, group, factors, codes, dst) }
    }

    /// [`super::groups`] on AVX-512, for groups of a multiple of 32 codes, into `OUT`'s dtype
    /// (`codes.out`); into bfloat16 rounding by AVX512_BF16's instruction where `CPU_BF16` (for
    /// the factors that allow it).
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ, and BF16 where `CPU_BF16`.
    #[inline(always)]
    pub(super) unsafe fn groups<const CPU_BF16: bool, const OUT: u8>(
        src: &[u8],
        group: usize,
        factors: &[f32],
        codes: super::Codes,
        dst: &mut [u8],
    ) {
        // SAFETY: the writer gets each step's output bytes (64 or 128), in order, inside `dst`.
        let mut lines = unsafe { Lines::new(dst.as_mut_ptr()) };
        // Group by group, each a whole number of steps of 32 codes.
        let per_group = group / 32;
        // The NaN codes' outputs under any factor that is not NaN (their own bits: a NaN times a
        // number is that NaN), worked out once rather than per group.
        let nan_codes_out = [codes.output(0x7F, 1.0), codes.output(0xFF, 1.0)];
        for (g, &f) in factors.iter().enumerate() {
            // Finite and below 2^119 (times 2^8 still finite): by way of float16. Otherwise a
            // NaN factor gives the whole group `mul(0, f)` (a NaN: 0xFFFF in bfloat16), and the
            // rest x86's product.
            let fast = super::by_float16(f);
            let instruction = CPU_BF16 && super::products_normal(f);
            // float16 and float32: the NaN codes' outputs, and a NaN factor's one output.
            let nan = if f.is_nan() {
                [codes.output(0x7F, f), codes.output(0xFF, f)]
            } else {
                nan_codes_out
            };
            // SAFETY: AVX-512 F by this function's contract.
            let factor = unsafe { _mm512_set1_ps(if f.is_nan() { mul(0.0, f) } else { f }) };
            for k in g * per_group..(g + 1) * per_group {
                // SAFETY: step `k` reads bytes 32k..32k+32 of `src` and writes its 32 outputs
                // next, inside both (`src` holds `group` bytes per factor, `dst` an output per
                // byte of `src`).
                unsafe {
                    let s = src.as_ptr().add(32 * k);
                    // x86's products of the decoded codes (the factors the float16 route
                    // cannot take).
                    let decoded = || {
                        let low = _mm512_mul_ps(decode(s), factor);
                        (low, _mm512_mul_ps(decode(s.add(16)), factor))
                    };
                    if OUT == TO_F32 {
                        if f.is_nan() {
                            lines.push(_mm512_set1_epi32(nan[0] as i32));
                            lines.push(_mm512_set1_epi32(nan[0] as i32));
                            continue;
                        }
                        let (codes, low, high) = if fast {
                            products(s, f)
                        } else {
                            let (low, high) = decoded();
                            (_mm256_loadu_si256(s.cast()), low, high)
                        };
                        let [low, high] = nan_codes32(low, high, codes, nan);
                        lines.push(low);
                        lines.push(high);
                        continue;
                    }
                    if OUT == TO_F16 {
                        lines.push(if fast {
                            step_f16(s, f, nan)
                        } else if f.is_nan() {
                            _mm512_set1_epi16(nan[0] as i16)
                        } else {
                            let (low, high) = decoded();
                            nan_codes(to_f16(low, high), _mm256_loadu_si256(s.cast()), nan)
                        });
                        continue;
                    }
                    if fast {
                        lines.push(if instruction {
                            step_half::<CPU_BF16>(s, f)
                        } else {
                            step_half::<false>(s, f)
                        });
                        continue;
                    }
                    let (low, high) = decoded();
                    let (low, high) = (round(low), round(high));
                    lines.push(_mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm512_cvtepi32_epi16(low)),
                        _mm512_cvtepi32_epi16(high),
                    ));
                }
            }
        }
        // SAFETY: as above. No fence here: a run can be 32 elements; the caller fences once
        // per piece (`lookup4::store_fence`).
        unsafe { lines.finish() };
    }

    /// 16 codes at `s` (as loaded) and their products with `factor / 2^8` by way of float16, as
    /// [`products`] makes them, eight lanes at a time (AVX2 + F16C).
    #[inline(always)]
    unsafe fn products_avx2(s: *const u8, factor: __m256) -> (__m128i, __m256, __m256) {
        // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
        unsafe {
            let codes = _mm_loadu_si128(s.cast());
            let moved = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(codes));
            let half = _mm256_add_epi16(moved, _mm256_and_si256(moved, _mm256_set1_epi16(0x4000)));
            let products = |h: __m128i| _mm256_mul_ps(_mm256_cvtph_ps(h), factor);
            (
                codes,
                products(_mm256_castsi256_si128(half)),
                products(_mm256_extracti128_si256::<1>(half)),
            )
        }
    }

    /// Which of 16 codes are NaN (0x7F, 0xFF): all ones in their bytes.
    #[inline(always)]
    unsafe fn nan_bytes(codes: __m128i) -> __m128i {
        // SAFETY: SSE2, part of x86-64.
        unsafe {
            _mm_cmpeq_epi8(
                _mm_and_si128(codes, _mm_set1_epi8(0x7F)),
                _mm_set1_epi8(0x7F),
            )
        }
    }

    /// [`step_half`] on AVX2 (+ F16C), 16 codes: the same float16 moves, conversions and
    /// products, eight lanes at a time, rounded to float16 by `vcvtps2ph` where `F16` (NaN codes
    /// given `nan`'s outputs: code 0x7F's, 0xFF's), else to bfloat16.
    #[inline(always)]
    unsafe fn step_half_avx2<const F16: bool>(
        s: *const u8,
        factor: __m256,
        nan: [__m256i; 2],
    ) -> __m256i {
        // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
        unsafe {
            let (codes, low, high) = products_avx2(s, factor);
            let is_nan = _mm256_cvtepi8_epi16(nan_bytes(codes));
            if F16 {
                let rounded = _mm256_set_m128i(
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(high),
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(low),
                );
                let negative = _mm256_srai_epi16::<15>(_mm256_cvtepi8_epi16(codes));
                let nans = _mm256_blendv_epi8(nan[0], nan[1], negative);
                return _mm256_blendv_epi8(rounded, nans, is_nan);
            }
            let round = |p: __m256| {
                let bits = _mm256_castps_si256(p);
                let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
                let bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF));
                _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, bias))
            };
            // Packing works per 128-bit lane: elements 0-3, 8-11, 4-7, 12-15, put back in order.
            let rounded = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(
                round(low),
                round(high),
            ));
            _mm256_or_si256(rounded, is_nan)
        }
    }

    /// The same 16 codes' float32 products (AVX2 + F16C), NaN codes given `nan`'s outputs
    /// (32-bit lanes: code 0x7F's, 0xFF's).
    #[inline(always)]
    unsafe fn step_f32_avx2(s: *const u8, factor: __m256, nan: [__m256i; 2]) -> [__m256i; 2] {
        // SAFETY: the caller's contract: 16 bytes at `s`; AVX2 and F16C.
        unsafe {
            let (codes, low, high) = products_avx2(s, factor);
            let is_nan = nan_bytes(codes);
            // Eight products with the eight codes in the low bytes of `codes` and `is_nan`.
            let fix = |p: __m256, codes: __m128i, is_nan: __m128i| {
                let negative = _mm256_srai_epi32::<31>(_mm256_cvtepi8_epi32(codes));
                let nans = _mm256_blendv_epi8(nan[0], nan[1], negative);
                _mm256_blendv_epi8(_mm256_castps_si256(p), nans, _mm256_cvtepi8_epi32(is_nan))
            };
            [
                fix(low, codes, is_nan),
                fix(
                    high,
                    _mm_srli_si128::<8>(codes),
                    _mm_srli_si128::<8>(is_nan),
                ),
            ]
        }
    }

    /// [`super::groups`] on AVX2 (+ F16C), for groups of a multiple of 16 codes: groups whose
    /// factor the float16 route cannot take (NaN, inf, 2^119 or more) by the loop.
    ///
    /// # Safety
    /// The CPU runs AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn groups_avx2(
        src: &[u8],
        group: usize,
        factors: &[f32],
        codes: super::Codes,
        dst: &mut [u8],
    ) {
        // Streaming stores where the destination allows them (the caller fences).
        let stream = (dst.as_ptr() as usize).is_multiple_of(32);
        let size = codes.size();
        let store = |at: *mut u8, v: __m256i| {
            // SAFETY: the caller's 32 bytes at `at`, aligned to 32 where streaming.
            unsafe {
                if stream {
                    _mm256_stream_si256(at.cast(), v);
                } else {
                    _mm256_storeu_si256(at.cast(), v);
                }
            }
        };
        // The NaN codes' outputs: the NaN's own bits, whatever finite factor multiplies it (the
        // factors taken below are finite), worked out once rather than per group (MXFP8's groups
        // of 32 are short enough for two scalar products a group to show).
        let nan = [0x7F, 0xFF].map(|c| {
            let bits = codes.output(c, 1.0);
            if size == 4 {
                _mm256_set1_epi32(bits as i32)
            } else {
                _mm256_set1_epi16(bits as i16)
            }
        });
        for (g, &f) in factors.iter().enumerate() {
            let (s, d) = (
                &src[g * group..][..group],
                &mut dst[size * g * group..][..size * group],
            );
            if !super::by_float16(f) {
                super::portable(s, codes, f, d);
                continue;
            }
            let factor = _mm256_set1_ps(f * 256.0);
            for k in 0..group / 16 {
                // SAFETY: step `k` reads bytes 16k..16k+16 of the group's codes and writes its
                // 16 outputs at 16k * size of the group's output, inside both; AVX2 and F16C by
                // this function's contract.
                unsafe {
                    let (s, at) = (s.as_ptr().add(16 * k), d.as_mut_ptr().add(16 * size * k));
                    match codes.out {
                        DType::Float32 => {
                            let [low, high] = step_f32_avx2(s, factor, nan);
                            store(at, low);
                            store(at.add(32), high);
                        }
                        DType::Float16 => store(at, step_half_avx2::<true>(s, factor, nan)),
                        _ => store(at, step_half_avx2::<false>(s, factor, nan)),
                    }
                }
            }
        }
    }
}

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
