//! Which form encodes a band's elements ([`Job::encode`]): float8 runs by `encode8`'s one pass,
//! float4 groups by `encode4`'s or the thresholds' comparisons, and otherwise — or where a band
//! holds inf or NaN — the general path, the definition every other form is tested against.

use super::*;

impl Job<'_> {
    /// Input rows from `at.local`, as many as fill `out`, into `out`'s elements: in one pass
    /// where a one_pass form serves, else [`Job::encode_general`].
    pub(super) fn encode(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> Result<(), QuantError> {
        // (Each takes what it reads: `encode8` every input dtype, `encode_one_pass` float16 by the
        // float4 comparisons only.)
        if self.one_pass {
            let done = if encode8::supports(self.scheme.element, plan.clamp) {
                self.encode_float8(input, at, plan, out)
            } else {
                self.encode_one_pass(input, at, plan, out, buf)
            };
            if done {
                return Ok(());
            }
        }
        self.encode_general(input, at, plan, out, buf)
    }

    /// A band of float4 groups (the input's rows from `at.local`, as many as fill `out`; the
    /// plan the band's) in one pass (`encode4`), where it serves: false where it does not, or
    /// where an element is inf or NaN, for the general path to do.
    pub(super) fn encode_one_pass(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> bool {
        let scheme = self.scheme;
        let Granularity::Group(k) = scheme.granularity else {
            return false;
        };
        let groups = out.len() * 2 / k;
        let unsigned_zero = scheme.convention == Convention::CompressedTensors;
        // Factors picked by one-byte scales (compressed-tensors' NVFP4 and MX): each element
        // compared with its scale byte's thresholds instead of scaled and rounded.
        let sixteen_bits = matches!(self.dtype, DType::BFloat16 | DType::Float16);
        if let Some(by_byte) = plan.byte_factors.as_deref() {
            if sixteen_bits
                && plan.scales.len() == groups
                && thresholds::supports(scheme.element, k)
            {
                let rules = encode4::Rules {
                    divide: matches!(plan.apply, Apply::Divide),
                    arithmetic: plan.arithmetic,
                    unsigned_zero,
                };
                let src = input.bytes(at.local * self.cols, groups * k);
                let scales = thresholds::ScaleBytes::Given(&plan.scales);
                let next = (at.next).map_or(&[][..], |n| input.bytes(n * self.cols, groups * k));
                let bounded = plan.bounded;
                let dtype = self.dtype;
                return thresholds::encode(
                    src, dtype, k, scales, by_byte, rules, bounded, out, next,
                );
            }
        }
        // (`encode4` reads float32 and bfloat16.)
        let read = matches!(self.dtype, DType::Float32 | DType::BFloat16);
        if !read || !encode4::supports(scheme.element, k) || plan.factors.len() != groups {
            return false;
        }
        if self.dtype == DType::BFloat16 {
            // Every factor a power of two (MX scales): the product is an exponent shift.
            let shifts: Option<Vec<i32>> = (plan.factors.iter())
                .map(|&f| {
                    let k = encode4::power_of_two_exponent(f)?;
                    Some(if matches!(plan.apply, Apply::Divide) {
                        -k
                    } else {
                        k
                    })
                })
                .collect();
            if let Some(shifts) = shifts.filter(|s| s.iter().all(|k| k.abs() <= 127)) {
                let src = input.bytes(at.local * self.cols, groups * k);
                if encode4::encode_pow2(src, k, &shifts, unsigned_zero, out) {
                    return true;
                }
            }
        }
        // (A fold rather than `all`, so that the check is vectorised.)
        let usable = (plan.factors.iter()).fold(true, |ok, f| ok & f.is_finite() & (*f != 0.0));
        if !usable {
            return false;
        }
        // Dividing by a normal power of two is multiplying by its reciprocal (as `scale_run`).
        let (divide, factors) = match plan.apply {
            Apply::Multiply => (false, &plan.factors[..]),
            Apply::Divide if plan.factors.iter().all(|&f| normal_power_of_two(f)) => {
                buf.clear();
                buf.extend(plan.factors.iter().map(|f| 1.0 / f));
                (false, &buf[..])
            }
            Apply::Divide => (true, &plan.factors[..]),
        };
        let rules = encode4::Rules {
            divide,
            arithmetic: plan.arithmetic,
            unsigned_zero,
        };
        let src = input.bytes(at.local * self.cols, groups * k);
        encode4::encode(src, self.dtype == DType::BFloat16, k, factors, rules, out)
    }

    /// The input's rows from `rows.local` (as many as fill `out`) to float8_e4m3fn in one pass
    /// (`encode8`), a run of elements that share a factor at a time: false where an element is
    /// inf or NaN or a factor is not finite and nonzero, for the general path to do.
    pub(super) fn encode_float8(
        &self,
        input: &Input,
        rows: &Rows,
        plan: &Plan,
        out: &mut [u8],
    ) -> bool {
        let (cols, scheme) = (self.cols, self.scheme);
        let usable = (plan.factors.iter()).fold(true, |ok, f| ok & f.is_finite() & (*f != 0.0));
        if !usable || cols == 0 {
            return false;
        }
        let bf16 = self.dtype == DType::BFloat16;
        let sixteen_bits = bf16 || self.dtype == DType::Float16;
        let divide = matches!(plan.apply, Apply::Divide);
        if sixteen_bits && scheme.granularity == Granularity::Group(32) {
            // MX: every factor a power of two, so each group is an exponent shift, and the
            // rounding runs on 16-bit lanes (the runs below where an element needs them).
            let first = (rows.first_row + rows.local) * (cols / 32) - rows.first_scale;
            let factors = plan.factors.get(first..first + out.len() / 32);
            let shifts: Option<Vec<i32>> = factors.and_then(|factors| {
                (factors.iter())
                    .map(|&f| {
                        encode4::power_of_two_exponent(f).map(|k| if divide { -k } else { k })
                    })
                    .collect()
            });
            if let Some(shifts) = shifts {
                let src = input.bytes(rows.local * cols, out.len());
                if encode8::pow2_groups(src, self.dtype, &shifts, out) {
                    return true;
                }
            }
        }
        let rules = |divide| encode4::Rules {
            divide,
            arithmetic: plan.arithmetic,
            unsigned_zero: false,
        };
        // Dividing by a normal power of two is multiplying by its reciprocal (as `scale_run`),
        // and so is dividing a bfloat16 by a bfloat16 where the quotient is rounded to bfloat16
        // (`reciprocal_serves_bf16`).
        let (by_division, by_product) = (
            encode8::kernel(self.dtype, rules(divide)),
            encode8::kernel(self.dtype, rules(false)),
        );
        let bf16_quotients = bf16 && plan.arithmetic == DType::BFloat16;
        for (j, row) in out.chunks_exact_mut(cols).enumerate() {
            let local = rows.local + j;
            for (start, end, g) in scheme.runs(rows.first_row + local, cols) {
                let f = plan.factors[g - rows.first_scale];
                let (kernel, f) = match encode4::power_of_two_exponent(f) {
                    Some(k) if divide && (-126..=127).contains(&k) => (by_product, 1.0 / f),
                    _ if divide && bf16_quotients && reciprocal_serves_bf16(f) => {
                        (by_product, 1.0 / f)
                    }
                    _ => (by_division, f),
                };
                let src = input.bytes(local * cols + start, end - start);
                if let Some(next) = rows.next {
                    // The same run of the next piece: its amax then reads it from the cache, and
                    // this thread's reads from memory overlap its arithmetic.
                    prefetch(input.bytes((next + j) * cols + start, end - start));
                }
                // SAFETY: `supports` said this CPU runs the kernels' instruction set; `src`
                // holds the run's elements, one per byte of the run's output.
                if !unsafe { kernel(src, f, &mut row[start..end]) } {
                    return false;
                }
            }
        }
        true
    }

    /// [`Job::encode`] for every scheme: the elements scaled and clamped into a float32 buffer,
    /// then encoded by dtcast_cast's SIMD cast and, for float4, the references' codes where they
    /// differ from the cast.
    pub(super) fn encode_general(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> Result<(), QuantError> {
        let (cols, scheme) = (self.cols, self.scheme);
        let limit = if plan.clamp {
            self.element_max
        } else {
            f32::INFINITY
        };
        let piece_rows = (PIECE_ELEMENTS / cols).max(1);
        for (p, out) in out.chunks_mut(self.element_bytes(piece_rows)).enumerate() {
            let count = out.len() * 8 / scheme.element.bits();
            buf.resize(count, 0.0);
            let rows = Rows {
                local: at.local + p * piece_rows,
                next: None,
                ..*at
            };
            let special = with_best_isa(
                #[inline(always)]
                || input.scaled(&rows, cols, scheme, plan, limit, buf),
            );
            let wide: &[u8] = bytemuck::cast_slice(buf.as_slice());
            cast(wide, DType::Float32, out, scheme.element, CastMode::Torch).map_err(internal)?;
            if scheme.element == DType::Float4E2M1Fn {
                // float4 by the SIMD cast (nearest-even on the clamped magnitudes, as both
                // references round), then the references' own codes where they differ from it:
                // NaN, and compressed-tensors' -0 (its `x * sign(x)` is +0).
                let code = match scheme.convention {
                    Convention::CompressedTensors => compressed_tensors_fp4_code,
                    Convention::TorchAo
                    | Convention::DeepSeek
                    | Convention::GptOss
                    | Convention::ModelOpt => torchao_fp4_code,
                };
                if special {
                    for (i, &v) in buf.iter().enumerate().filter(|(_, v)| is_special(**v)) {
                        let shift = 4 * (i % 2);
                        out[i / 2] = out[i / 2] & !(0xF << shift) | code(v) << shift;
                    }
                }
            }
        }
        Ok(())
    }
}
