//! The small vocabulary every conversion algorithm is written in: a vector of 32-bit lanes.
//!
//! The algorithms (`steps.rs`) are written once over [`Vector`]; each instruction set is one
//! implementation of it (`portable.rs`, `x86/avx2.rs`, `x86/avx512.rs`), in the shape of memchr's
//! `Vector` trait. A few methods have a provided body — an algorithm in terms of the others — that
//! an instruction set overrides where it has an instruction giving the same bits (x86's F16C
//! conversions); the property tests hold every implementation to the scalar rules.
//!
//! Every method is `unsafe` and `#[inline(always)]` in the implementations: the CPU must have the
//! instruction set (the caller checked it once), and everything must inline into the one
//! `#[target_feature]` loop per instruction set so that the intrinsics compile to instructions.

/// `LANES` 32-bit lanes, most often holding f32 bits or 32-bit integers.
///
/// Lanes are numbered in memory order: `load` puts the element at the lowest address in lane 0.
/// Masks are `Self::Mask`: what a compare gives and [`select`](Vector::select) takes.
pub(crate) trait Vector: Copy {
    /// Lanes per vector.
    const LANES: usize;
    /// The result of a lane-wise compare.
    type Mask: Copy;

    // ---- memory: `p` must be valid for the bytes named, alignment not needed except for streams.

    /// `LANES` little-endian u32 at `p`.
    unsafe fn load(p: *const u8) -> Self;
    /// `LANES` little-endian u16 at `p`, zero-extended.
    unsafe fn load_u16(p: *const u8) -> Self;
    /// `LANES` bytes at `p`, zero-extended.
    unsafe fn load_u8(p: *const u8) -> Self;
    /// Writes the vector's `4 * LANES` bytes at `p`: a streaming (non-temporal) store when
    /// `STREAM`, which needs `p` aligned to the vector's size.
    unsafe fn store<const STREAM: bool>(self, p: *mut u8);
    /// Writes two vectors of values below 2^16 as `2 * LANES` little-endian u16 at `p`, in lane
    /// order (streaming as [`store`](Vector::store)).
    unsafe fn store_u16<const STREAM: bool>(a: Self, b: Self, p: *mut u8);
    /// Writes two vectors of values in i16's range (each lane a 16-bit value sign-extended) as
    /// `2 * LANES` little-endian u16 at `p`, as [`store_u16`](Vector::store_u16) does; where
    /// narrowing with signed saturation is one instruction and truncation is not (SSE2's
    /// `packssdw`), an instruction set says so by overriding this.
    #[inline(always)]
    unsafe fn store_i16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe { Self::store_u16::<STREAM>(a, b, p) }
    }
    /// Writes four vectors of values below 2^8 as `4 * LANES` bytes at `p`, in lane order.
    unsafe fn store_u8<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8);

    // ---- packed sub-byte codes (LSB first: element 0 in the lowest bits of the first byte, the
    // layout of `dtcast_dtype::packing`).

    /// `2 * LANES` 4-bit codes from `LANES` bytes at `p`, two per byte (the earlier element in
    /// the low nibble): elements `0..LANES` and `LANES..2 * LANES`.
    unsafe fn load_u4(p: *const u8) -> [Self; 2];
    /// `4 * LANES` 6-bit codes from `3 * LANES` bytes at `p` (four codes in three bytes):
    /// elements `k * LANES..(k + 1) * LANES` in vector `k`.
    unsafe fn load_u6(p: *const u8) -> [Self; 4];
    /// Writes four vectors of codes below 16 as `2 * LANES` bytes at `p`, two per byte (streaming
    /// as [`store`](Vector::store), which needs `p` aligned to `2 * LANES` bytes).
    unsafe fn store_u4<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8);
    /// Writes four vectors of codes below 64 as `3 * LANES` bytes at `p`, four codes in three
    /// bytes. Never streams: `3 * LANES` bytes are not a whole vector.
    unsafe fn store_u6(a: Self, b: Self, c: Self, d: Self, p: *mut u8);

    // ---- 64-bit elements.

    /// `LANES` f64 at `p` as f32 bits, rounded to nearest-even; a NaN is quieted and keeps its
    /// sign and top payload bits (x86's `cvtpd2ps`, the scalar `formats::f64_to_f32`).
    unsafe fn load_f64_as_f32(p: *const u8) -> Self;
    /// `LANES` f64 at `p` as f32 bits rounded to odd (truncated, the last bit set where inexact;
    /// overflow gives the largest finite value), NaN as in [`load_f64_as_f32`](Vector::load_f64_as_f32):
    /// one more rounding to a format of at most 22 mantissa bits is then a single correct rounding.
    unsafe fn load_f64_as_f32_odd(p: *const u8) -> Self;
    /// Writes the lanes (f32 bits) as `LANES` f64: exact; a NaN is quieted with its payload kept.
    unsafe fn store_f32_as_f64<const STREAM: bool>(self, p: *mut u8);
    /// The low halves of `LANES` little-endian i64 at `p`.
    unsafe fn load_i64_low(p: *const u8) -> Self;
    /// The high halves of `LANES` little-endian i64 at `p`.
    unsafe fn load_i64_high(p: *const u8) -> Self;
    /// Writes the lanes, sign-extended, as `LANES` i64.
    unsafe fn store_i32_as_i64<const STREAM: bool>(self, p: *mut u8);

    // ---- lane-wise integer operations.

    /// Every lane `x`.
    unsafe fn splat(x: u32) -> Self;
    /// Wrapping addition.
    unsafe fn add(self, o: Self) -> Self;
    /// Wrapping subtraction.
    unsafe fn sub(self, o: Self) -> Self;
    /// Bitwise and.
    unsafe fn and(self, o: Self) -> Self;
    /// Bitwise or.
    unsafe fn or(self, o: Self) -> Self;
    /// Bitwise exclusive or.
    unsafe fn xor(self, o: Self) -> Self;
    /// Logical shift left by `K`.
    unsafe fn shl<const K: i32>(self) -> Self;
    /// Arithmetic (sign-filling) shift right by `K`.
    unsafe fn sra<const K: i32>(self) -> Self;
    /// Logical shift right by `K`.
    unsafe fn shr<const K: i32>(self) -> Self;
    /// Signed minimum (cheaper than unsigned where SIMD has only signed compares, as SSE2).
    unsafe fn min_i32(self, o: Self) -> Self;
    /// Signed maximum.
    unsafe fn max_i32(self, o: Self) -> Self;
    /// Lanes where `self > o` as signed integers.
    unsafe fn gt_i32(self, o: Self) -> Self::Mask;
    /// Lanes where `self == o`.
    unsafe fn eq(self, o: Self) -> Self::Mask;
    /// `yes` in the lanes of `m`, `no` elsewhere.
    unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self;
    /// Whether no lane of `m` is set: a branch that skips what only rare lanes need.
    unsafe fn none(m: Self::Mask) -> bool;

    // ---- lane-wise float32 operations on the bits.

    /// f32 addition (round to nearest-even, subnormals kept).
    unsafe fn f32_add(self, o: Self) -> Self;
    /// f32 multiplication (round to nearest-even, subnormals kept).
    unsafe fn f32_mul(self, o: Self) -> Self;
    /// f32 maximum as x86's `maxps` takes it: `self` where `self > o`, else `o` (so `o` where
    /// either is NaN, and for equal zeros).
    unsafe fn f32_max(self, o: Self) -> Self;
    /// f32 → i32 by truncation; NaN and values outside the i32 range give `i32::MIN` (x86's
    /// `cvttps2dq`, torch's scalar path).
    unsafe fn cvtt_f32_i32(self) -> Self;
    /// i32 → f32, rounded to nearest-even.
    unsafe fn i32_to_f32(self) -> Self;

    // ---- codes looked up

    /// The widest codes (4, 6 or 8 bits) that [`lookup_u16`](Vector::lookup_u16) looks up by
    /// shuffling or permuting registers (a few instructions for `4 * LANES` codes), so that
    /// looking narrow codes up beats computing their values; 0 where it is the plain loop
    /// ([`plain_lookup_u16`], the provided body).
    const LOOKUP_BITS: usize = 0;

    /// Reads `4 * LANES` codes of `BITS` (4, 6 or 8) bits packed at `s` (the layout of
    /// `dtcast_dtype::packing`) and writes each one's entry of `table` as a little-endian u16 at
    /// `d` (streaming as [`store`](Vector::store)); an 8-bit code's entry is its low 7 bits'
    /// with its top bit in the entry's (a sign: see [`Codes`]).
    #[inline(always)]
    unsafe fn lookup_u16<const BITS: usize, const STREAM: bool>(
        s: *const u8,
        d: *mut u8,
        table: &Codes,
    ) {
        // SAFETY: the caller's contract.
        unsafe { plain_lookup_u16::<BITS>(4 * Self::LANES, s, d, table) }
    }

    // ---- float16, with the algorithm as the provided body.

    /// `LANES` float8_e5m2 codes at `p` as f32 bits. Each code is the top byte of a float16 (the
    /// same sign, exponent width and bias), so this is float16's widening of `code << 8`: exact,
    /// a NaN quieted with its payload kept — how torch decodes float8_e5m2
    /// (`rules::NanToF32::ViaFloat16`).
    #[inline(always)]
    unsafe fn load_e5m2_as_f32(p: *const u8) -> Self {
        // SAFETY: the caller's contract.
        unsafe { Self::load_u8(p).shl::<8>().f16_to_f32() }
    }

    /// `LANES` float16 at `p` as f32 bits: exact; a NaN is quieted with its payload kept (x86's
    /// `vcvtph2ps`, the scalar `formats::f16_to_f32`).
    #[inline(always)]
    unsafe fn load_f16_as_f32(p: *const u8) -> Self {
        // SAFETY: the caller's contract.
        unsafe { Self::load_u16(p).f16_to_f32() }
    }

    /// float16 bits (the low 16 bits of each lane) → f32 bits. The sign in f32's place and the
    /// magnitude's bits moved up to f32's exponent position (the bits moved up 16, shifted back
    /// 3 with the sign copied, the copies cleared) are the value times 2^-112 — exactly,
    /// subnormals included — so one multiplication by 2^112 rebiases, the sign riding along. It
    /// leaves an infinity's or a NaN's mantissa in place under an exponent field of 143, all of
    /// whose bits the all-ones field covers: or-ing that in (and a NaN's quiet bit) finishes them
    /// without a select — and a vector without either (nearly every one) skips even that.
    #[inline(always)]
    unsafe fn f16_to_f32(self) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            let moved = self.shl::<16>().sra::<3>().and(Self::splat(0x8FFF_E000));
            let value = moved.f32_mul(Self::splat(0x7780_0000)); // 2^112
            let magnitude = self.and(Self::splat(0x7FFF));
            let special = magnitude.gt_i32(Self::splat(0x7BFF));
            if Self::none(special) {
                return value;
            }
            let zero = Self::splat(0);
            let exponent = Self::select(special, Self::splat(0x7F80_0000), zero);
            let nan = magnitude.gt_i32(Self::splat(0x7C00));
            let quiet = Self::select(nan, Self::splat(0x0040_0000), zero);
            value.or(exponent).or(quiet)
        }
    }

    /// Writes two vectors of f32 bits as `2 * LANES` float16 at `p`: nearest-even, overflow to
    /// ±inf, a NaN quieted with its top payload bits (x86's `vcvtps2ph`, the scalar
    /// `formats::f32_to_f16`).
    ///
    /// Where every lane of both has |x| in [2^-14, 2^16) (float16's smallest normal up to where
    /// every value rounds to infinity: most weights and activations), the rounding is integer
    /// arithmetic on the bits ([`f32_to_normal_f16`](Vector::f32_to_normal_f16)), which takes
    /// fewer instructions than [`f32_to_f16`](Vector::f32_to_f16)'s general case.
    #[inline(always)]
    unsafe fn store_f16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
        // SAFETY: the caller's contract.
        unsafe {
            let (abs_a, abs_b) = (
                a.and(Self::splat(0x7FFF_FFFF)),
                b.and(Self::splat(0x7FFF_FFFF)),
            );
            // |x| in [2^-14, 2^16): |x| - 2^-14 below 0x0F00_0000 unsigned, which is a signed
            // compare once i32::MIN is added (SSE2 has no unsigned one). (No closure, as in
            // every helper of the steps: `steps::Widened` says why.)
            let shift = Self::splat(0x8000_0000u32.wrapping_sub(0x3880_0000));
            let last = Self::splat(0x8000_0000 + 0x0F00_0000 - 1);
            if Self::none(abs_a.add(shift).gt_i32(last))
                && Self::none(abs_b.add(shift).gt_i32(last))
            {
                return Self::store_i16::<STREAM>(
                    Self::f32_to_normal_f16(a, abs_a),
                    Self::f32_to_normal_f16(b, abs_b),
                    p,
                );
            }
            Self::store_i16::<STREAM>(a.f32_to_f16(), b.f32_to_f16(), p)
        }
    }

    /// f32 bits `x` (with `abs`, its magnitude's bits, in [2^-14, 2^16)) → float16 bits as
    /// [`f32_to_f16`](Vector::f32_to_f16) gives them: float16's exponent is f32's less 112, so
    /// taking 112 off the exponent field and adding `0xFFF`, plus one where the last mantissa
    /// bit float16 keeps is odd, carries into that bit exactly when the 13 bits dropped are more
    /// than half of it, or half with that bit odd — nearest-even; a carry out of the mantissa
    /// steps the exponent, and from float16's largest finite value on into infinity's code.
    #[inline(always)]
    unsafe fn f32_to_normal_f16(x: Self, abs: Self) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            let odd = abs.shr::<13>().and(Self::splat(1));
            let rounded = abs
                .add(Self::splat(0x0FFFu32.wrapping_sub(112 << 23)))
                .add(odd)
                .shr::<13>();
            rounded.or(x.sra::<16>().and(Self::splat(0xFFFF_8000)))
        }
    }

    /// f32 bits → float16 bits in the low 16 bits of each lane, sign-extended (bit 15 copied into
    /// the high half, for [`store_i16`](Vector::store_i16)). Two exact multiplications scale |x|
    /// by 4, except that from 2^16 up (past every value that rounds to a finite float16) the
    /// first overflows to infinity. Adding a power of two whose f32 ulp is float16's quantum at
    /// |x|'s exponent (clamped at float16's smallest normal exponent) is then the one rounding, to
    /// nearest-even, and leaves the rounded magnitude in the sum's low bits: its exponent field,
    /// taken mod 32, is float16's exponent less one, which the implicit bit of the count makes up.
    /// A NaN's sum is |x| quieted, so shifting it down keeps the top payload bits: the masks pick
    /// that for NaN lanes instead of a select (and a vector without NaN, nearly every one, skips
    /// them).
    #[inline(always)]
    unsafe fn f32_to_f16(self) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            let a = self.and(Self::splat(0x7FFF_FFFF));
            let scaled = a
                .f32_mul(Self::splat(0x7780_0000))
                .f32_mul(Self::splat(0x0880_0000)); // 2^112, 2^-110
                                                    // The power of two: |x|'s exponent field plus 15, at least float16's smallest normal
                                                    // exponent's (113 + 15), compared as floats (one instruction on SSE2, which has no
                                                    // 32-bit integer maximum). From |x| = 2^113 up the field overflows into the sign, or
                                                    // reads as inf; either way `scaled` is inf there, and so is the sum.
            let sum = a
                .and(Self::splat(0x7F80_0000))
                .add(Self::splat(15 << 23))
                .f32_max(Self::splat((113 + 15) << 23))
                .f32_add(scaled);
            let nan = a.gt_i32(Self::splat(0x7F80_0000));
            let (high, low) = if Self::none(nan) {
                (Self::splat(0x7C00), Self::splat(0x0FFF))
            } else {
                let nan = Self::select(nan, Self::splat(!0), Self::splat(0));
                (
                    nan.and(Self::splat(0x3FF)).or(Self::splat(0x7C00)),
                    nan.xor(Self::splat(!0)).and(Self::splat(0x0FFF)),
                )
            };
            let code = sum.shr::<13>().and(high).add(sum.and(low));
            code.or(self.sra::<16>().and(Self::splat(0xFFFF_8000)))
        }
    }
}

/// The entries a step looks codes up in (`lookup::codes`; 16, 64 or 128 of them), also as byte
/// tables: AVX2's byte shuffles index 16 bytes, so each row of 16 entries' low bytes and high
/// bytes is one shuffle's table, loaded as it is (splitting the entries there took 12 shuffles a
/// step).
///
/// 8-bit codes (float8) have 128 entries, those of the codes below 128: a code with its top bit
/// set is its low 7 bits' entry with the top bit set (the sign, where the format's negative
/// codes are the positive ones' negations), except for one such result that the rules write as
/// another value ([`recode`](Codes::recode); `lookup::codes` checks both).
pub(crate) struct Codes {
    /// Entry `i` of code `i`.
    pub(crate) entries: [u16; 128],
    /// An 8-bit code's entry with the sign set that stands for another value (`(from, to)`):
    /// torch writes every float8_e4m3fn and float8_e5m2 NaN as bfloat16 `0x7FC0` whatever its
    /// sign (the looked-up `0xFFC0` becomes `0x7FC0`); a fnuz format, whose one NaN is the code
    /// of negative zero, would need `0x8000` to become the NaN. `None` where the sign alone
    /// serves.
    pub(crate) recode: Option<(u16, u16)>,
    /// Entry `i`'s low byte at `i`.
    // Only AVX2 reads the byte tables.
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    pub(crate) low: [u8; 128],
    /// Entry `i`'s high byte at `i`.
    #[cfg_attr(
        not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
        allow(dead_code)
    )]
    pub(crate) high: [u8; 128],
}

impl Codes {
    /// The tables of `entries`, with 8-bit codes' [`recode`](Codes::recode).
    pub(crate) fn new(entries: [u16; 128], recode: Option<(u16, u16)>) -> Codes {
        Codes {
            entries,
            recode,
            low: entries.map(|e| e.to_le_bytes()[0]),
            high: entries.map(|e| e.to_le_bytes()[1]),
        }
    }

    /// The value of an 8-bit code whose low 7 bits' entry is `entry` and whose top bit is
    /// `sign` (`0x8000` or 0).
    #[inline(always)]
    pub(crate) fn signed(&self, entry: u16, sign: u16) -> u16 {
        let value = entry | sign;
        match self.recode {
            Some((from, to)) if value == from => to,
            Some(_) | None => value,
        }
    }
}

/// [`Vector::lookup_u16`] as a plain loop over `n` codes.
///
/// # Safety
/// `n * BITS / 8` bytes readable at `s`, `2 * n` writable at `d`.
#[inline(always)]
pub(crate) unsafe fn plain_lookup_u16<const BITS: usize>(
    n: usize,
    s: *const u8,
    d: *mut u8,
    table: &Codes,
) {
    // SAFETY: the caller's contract.
    let (s, d) = unsafe {
        (
            core::slice::from_raw_parts(s, n * BITS / 8),
            core::slice::from_raw_parts_mut(d, 2 * n),
        )
    };
    for (k, out) in d.as_chunks_mut::<2>().0.iter_mut().enumerate() {
        let code = if BITS == 6 {
            let g = &s[3 * (k / 4)..];
            let word = u32::from(g[0]) | u32::from(g[1]) << 8 | u32::from(g[2]) << 16;
            word >> (6 * (k % 4)) & 0x3F
        } else if BITS == 8 {
            let sign = u16::from(s[k] & 0x80) << 8;
            *out = table
                .signed(table.entries[usize::from(s[k] & 0x7F)], sign)
                .to_le_bytes();
            continue;
        } else {
            u32::from(s[k / 2] >> (4 * (k % 2)) & 0xF)
        };
        *out = table.entries[code as usize].to_le_bytes();
    }
}

/// Four 6-bit codes in the four bytes of each lane (element order: the first in the low byte) →
/// the same four codes in the lane's low 24 bits, six bits each: the three bytes that
/// `store_u6` keeps of each lane.
///
/// # Safety
/// The CPU must have `V`'s instruction set.
#[inline(always)]
// Only the x86 instantiations pack 6-bit codes this way (the portable one looks them up).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) unsafe fn squeeze_u6<V: Vector>(x: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        x.and(V::splat(0x3F))
            .or(x.shr::<2>().and(V::splat(0xFC0)))
            .or(x.shr::<4>().and(V::splat(0x3_F000)))
            .or(x.shr::<6>().and(V::splat(0xFC_0000)))
    }
}

/// The inverse of [`squeeze_u6`]: four 6-bit codes in each lane's low 24 bits → one per byte.
///
/// # Safety
/// The CPU must have `V`'s instruction set.
#[inline(always)]
// Only the x86 instantiations pack 6-bit codes this way (the portable one looks them up).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) unsafe fn spread_u6<V: Vector>(y: V) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        y.and(V::splat(0x3F))
            .or(y.shl::<2>().and(V::splat(0x3F00)))
            .or(y.shl::<4>().and(V::splat(0x3F_0000)))
            .or(y.shl::<6>().and(V::splat(0x3F00_0000)))
    }
}
