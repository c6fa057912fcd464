//! One tensor's quantization ([`Job`]): its checks, its bands of rows — planned, prefetched and
//! encoded one by one on each thread — and which form encodes a band's elements: a one-pass
//! form where one serves (`encode4`, `encode8`, `thresholds`), else the general path.

use super::*;

/// One tensor's quantization: its checked shape and scheme, and what its elements are clamped to.
pub(crate) struct Job<'a> {
    pub(super) dtype: DType,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) scheme: &'a Scheme,
    pub(super) element_max: f32,
    /// Whether the one-pass forms may serve (`amax16`, `encode4`); the tests turn them off to
    /// hold them to the general path.
    pub(super) one_pass: bool,
}

impl<'a> Job<'a> {
    /// The checks every entry point makes: an input dtype the scheme's reference quantizes, a
    /// valid scheme, a shape it accepts.
    pub(crate) fn new(
        dtype: DType,
        shape: &[usize],
        scheme: &'a Scheme,
    ) -> Result<Job<'a>, QuantError> {
        scheme.check_input(dtype)?;
        scheme.check()?;
        if !scheme.quantizes() {
            return Err(QuantError::Scheme {
                reason: "ModelOpt's NVFP4 (modelopt_nvfp4) is read, not written: quantize with \
                         ct_nvfp4 (compressed-tensors' rule) or ao_nvfp4_two_level"
                    .to_owned(),
            });
        }
        let (rows, cols) = rows_cols(shape)?;
        scheme.scale_bytes(rows, cols)?;
        if scheme.element.is_packed() && cols % 2 != 0 {
            return Err(QuantError::Shape {
                reason: format!("columns {cols} are odd; float4 elements are stored two per byte"),
            });
        }
        let element_max = if scheme.element == DType::Float8E4M3Fn {
            448.0
        } else {
            6.0
        };
        let job = Job {
            dtype,
            rows,
            cols,
            scheme,
            element_max,
            one_pass: true,
        };
        // The convention's refusal, and its scales' size, before any work.
        let stored = job.plan(&[1.0], 0.0)?.scales.len();
        if Some(stored) != scheme.scale.byte_size() {
            return Err(QuantError::Scheme {
                reason: format!(
                    "the scheme stores {} scales, but the {:?} convention stores a {dtype} weight's scales in {stored} bytes (compressed-tensors keeps FP8 scales in the weight's dtype: name the scheme for the weight's dtype)",
                    scheme.scale, scheme.convention
                ),
            });
        }
        Ok(job)
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    pub(crate) fn scheme(&self) -> &'a Scheme {
        self.scheme
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    /// The element format's largest magnitude (448 or 6).
    pub(crate) fn element_max(&self) -> f32 {
        self.element_max
    }

    /// The bytes of `rows` rows of input.
    pub(super) fn input_bytes(&self, rows: usize) -> Result<usize, QuantError> {
        rows.checked_mul(self.cols)
            .and_then(|n| n.checked_mul(self.dtype.byte_size().unwrap_or(4)))
            .ok_or_else(|| QuantError::Shape {
                reason: format!(
                    "{rows} rows of {} columns have more bytes than memory can hold",
                    self.cols
                ),
            })
    }

    /// The stored bytes of `rows` rows of elements (`Job::new` checked the shape).
    pub(super) fn element_bytes(&self, rows: usize) -> usize {
        self.scheme
            .element
            .storage_bytes(rows * self.cols)
            .unwrap_or(0)
    }

    /// The stored bytes of rows `start..end`'s scales.
    pub(super) fn scale_bytes(&self, start: usize, end: usize) -> usize {
        self.scheme.scale_range(start, end, self.cols).len()
            * self.scheme.scale.byte_size().unwrap_or(1)
    }

    /// The whole tensor's amax where a scale depends on it (a per-tensor scale, a global
    /// scale): a first pass over the input, a reduction that reads at memory speed. 0 where
    /// nothing needs it. (It once kept every group's maximum for the bands too: writing those
    /// and reading them back cost more than finding them again from the core's cache.)
    pub(super) fn tensor_amax(&self, src: &[u8]) -> f32 {
        if !self.scheme.uses_tensor_amax() {
            return 0.0;
        }
        tensor_amax_pass(
            &Input::new(src, self.dtype, self.scheme),
            self.rows * self.cols,
        )
    }

    /// compressed-tensors' NVFP4 scales of bfloat16 or float16 groups as a table by maximum (see
    /// [`ScaleCodes`]) under the plan's global scale, where the scheme is that, the tensor's
    /// amax finite, and `scales` (how many the rows have) at least half the table's entries:
    /// building it costs about as much as planning that many scales.
    pub(super) fn scale_codes(
        &self,
        tensor_amax: f32,
        global: Option<f32>,
        scales: usize,
    ) -> Option<ScaleCodes> {
        let scheme = self.scheme;
        let serves = self.one_pass
            && matches!(self.dtype, DType::BFloat16 | DType::Float16)
            && scheme.convention == Convention::CompressedTensors
            && scheme.rule == ScaleRule::AbsMax
            && scheme.global_scale
            && scheme.granularity == Granularity::Group(16);
        let top = ScaleCodes::top(tensor_amax, self.dtype)?;
        let entries = usize::from(top) + 1;
        if !serves || scales * 2 < entries {
            return None;
        }
        ScaleCodes::new(top, global?, self.dtype)
    }

    /// The plan for a run of consecutive scales, from their amax (and the tensor's).
    pub(crate) fn plan(&self, amax: &[f32], tensor_amax: f32) -> Result<Plan, QuantError> {
        let (scheme, dtype, element_max) = (self.scheme, self.dtype, self.element_max);
        if self.one_pass {
            if let Some(plan) = self.plan_finite(amax, tensor_amax) {
                return Ok(plan);
            }
        }
        Ok(match (scheme.convention, scheme.rule) {
            (Convention::CompressedTensors, ScaleRule::AbsMax) if scheme.global_scale => {
                compressed_tensors_nvfp4(amax, tensor_amax, dtype)
            }
            (Convention::CompressedTensors, ScaleRule::AbsMax) => {
                compressed_tensors_fp8(amax, dtype)
            }
            (Convention::CompressedTensors, ScaleRule::PowerOfTwo(_)) => {
                compressed_tensors_mx(amax, dtype, scheme)
            }
            (Convention::TorchAo, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                torchao_mx_rceil(amax, element_max)
            }
            (Convention::TorchAo, ScaleRule::PowerOfTwo(rounding)) => {
                torchao_mx(amax, rounding, scheme)
            }
            (Convention::TorchAo, ScaleRule::AbsMax) => torchao_nvfp4(amax, tensor_amax, scheme),
            (Convention::DeepSeek, ScaleRule::AbsMax) if !scheme.global_scale => {
                compressed_tensors_fp8(amax, DType::Float32)
            }
            (Convention::GptOss, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                torchao_mx_rceil(amax, element_max)
            }
            (convention, _) => {
                return Err(QuantError::Scheme {
                    reason: format!(
                        "quantizing with the {convention:?} convention is not supported"
                    ),
                })
            }
        })
    }

    /// [`Job::plan`] for the hot schemes — compressed-tensors' MX and NVFP4 — where every amax
    /// is finite (nearly every band): the same arithmetic as one loop over the scales that LLVM
    /// vectorises, instead of a pass per step. `None` where it does not serve.
    pub(super) fn plan_finite(&self, amax: &[f32], tensor_amax: f32) -> Option<Plan> {
        let scheme = self.scheme;
        // Below this, an amax rounded at float4's mantissa width stays finite: in float32 (and
        // bfloat16) up to 0x7F60_0000; float16's MX rounds its amax to a power of two in float16,
        // which is inf from 1.75 * 2^15 (the general rule's business). (The largest bits by a
        // fold, which LLVM vectorises: `all` stops early, one scale at a time.)
        let limit = match scheme.rule {
            ScaleRule::PowerOfTwo(_) if self.dtype == DType::Float16 => 0x4760_0000,
            ScaleRule::PowerOfTwo(_) | ScaleRule::AbsMax => 0x7F60_0000,
        };
        if scheme.convention != Convention::CompressedTensors
            || amax.is_empty()
            || (amax.iter()).fold(0, |top, a| top.max(a.to_bits())) >= limit
        {
            return None;
        }
        match scheme.rule {
            ScaleRule::PowerOfTwo(_) => {
                let offset = if scheme.element == DType::Float8E4M3Fn {
                    8
                } else {
                    2
                };
                Some(with_best_isa(
                    #[inline(always)]
                    || compressed_tensors_mx_finite(amax, offset, self.dtype),
                ))
            }
            ScaleRule::AbsMax if scheme.global_scale => {
                let g = compressed_tensors_nvfp4(&[], tensor_amax, self.dtype).global?;
                Some(with_best_isa(
                    #[inline(always)]
                    || compressed_tensors_nvfp4_finite(amax, g, self.dtype),
                ))
            }
            ScaleRule::AbsMax => None,
        }
    }

    /// Rows `rows` (`src`: their bytes, checked by the caller) into `elements` and their scales
    /// into `scales`; returns the global scale.
    pub(super) fn rows_into(
        &self,
        src: &[u8],
        rows: std::ops::Range<usize>,
        tensor_amax: f32,
        elements: &mut [u8],
        scales: &mut [u8],
    ) -> Result<Option<f32>, QuantError> {
        let (cols, scheme) = (self.cols, self.scheme);
        let (first_row, end) = (rows.start, rows.end);
        let count = end - first_row;
        check_len("elements", self.element_bytes(count), elements.len())?;
        check_len("scales", self.scale_bytes(first_row, end), scales.len())?;
        let global_scale = self.plan(&[], tensor_amax)?.global;
        let input = Input::new(src, self.dtype, scheme);
        let storage = |rows: usize| self.element_bytes(rows);
        if scheme.granularity == Granularity::Tensor {
            // One scale, the tensor's (whatever rows these are): elementwise after it, so pieces
            // of rows on the thread pool.
            let plan = self.plan(&[tensor_amax], tensor_amax)?;
            let piece_rows = (PIECE_ELEMENTS / cols.max(1)).max(1);
            if count > 0 && cols > 0 {
                elements
                    .par_chunks_mut(storage(piece_rows))
                    .enumerate()
                    .try_for_each_init(Vec::new, |buf, (p, out)| {
                        let at = Rows {
                            local: p * piece_rows,
                            first_row,
                            first_scale: 0,
                            next: None,
                        };
                        self.encode(&input, &at, &plan, out, buf)
                    })?;
            }
            scales.copy_from_slice(&plan.scales);
            return Ok(global_scale);
        }
        if count == 0 || cols == 0 {
            // No elements: each scale of the rows is the scale of an all-zero block, planned
            // once (the rows may be many: 2^40 rows of no columns have 2^40 channel scales).
            let zero = self.plan(&[0.0], tensor_amax)?.scales;
            if !zero.is_empty() {
                scales
                    .chunks_exact_mut(zero.len())
                    .for_each(|s| s.copy_from_slice(&zero));
            }
            return Ok(global_scale);
        }
        // Bands of rows whose scales no other rows share, on the thread pool: each band's amax,
        // its plan, then its elements while the band's input is still in the core's cache — the
        // input is read from memory once.
        let band = match scheme.granularity {
            Granularity::Block(br, _) => br,
            Granularity::Tensor | Granularity::Channel | Granularity::Group(_) => {
                (BAND_ELEMENTS / cols).max(1)
            }
        };
        let scale_size = scheme.scale.byte_size().unwrap_or(1);
        let first_scale = scheme.scale_range(first_row, end, cols).start;
        let band_scales = scheme.scale_range(0, band.min(self.rows), cols).len();
        // compressed-tensors' NVFP4 scales by each band's group maxima, looked up.
        let scale_count = scheme.scale_range(first_row, end, cols).len();
        let codes = self.scale_codes(tensor_amax, global_scale, scale_count);
        // Last band first: each thread then starts where the tensor pass (first band first)
        // ended, on input still in the shared cache.
        elements
            .par_chunks_mut(storage(band))
            .zip(scales.par_chunks_mut(band_scales * scale_size))
            .enumerate()
            .rev()
            .try_for_each_init(Default::default, |(buf, maxima), (b, (out, stored))| {
                let local = b * band;
                let band_first_scale = first_scale + b * band_scales;
                let band_groups = stored.len() / scale_size;
                let band_rows = local..(local + band).min(count);
                let at = Rows {
                    local,
                    first_row,
                    first_scale: band_first_scale,
                    // The bands run last first: a thread's next band is the one before. It is
                    // read ahead while this one is encoded from the cache, where finding this
                    // band's amax brought it there: its reads from memory overlap this band's
                    // arithmetic.
                    next: local.checked_sub(band),
                };
                let src = input.bytes(local * cols, band_rows.len() * cols);
                let mut known = None;
                if let Some(codes) = &codes {
                    // The band's group maxima, then its scale bytes looked up as the groups are
                    // encoded from the cache (else the steps below, from those maxima).
                    let maxima: &mut Vec<u16> = maxima;
                    maxima.resize(band_groups, 0);
                    amax16::group_maxima(src, 16, maxima);
                    let elements = band_rows.len() * cols;
                    let next = (at.next).map_or(&[][..], |n| input.bytes(n * cols, elements));
                    if codes.encode(src, maxima, stored, out, next) {
                        return Ok(());
                    }
                    known = Some(&maxima[..]);
                }
                let mut amax = vec![0f32; band_groups];
                self.band_amax(&input, band_rows, &at, known, &mut amax);
                let plan = self.plan(&amax, tensor_amax)?;
                stored.copy_from_slice(&plan.scales);
                self.encode(&input, &at, &plan, out, buf)
            })?;
        Ok(global_scale)
    }

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

    /// The amax of every scale of the input's rows `band` into `amax`: bfloat16 or float16
    /// groups of 16 or 32 from their maxima (`known`: found already, else by `amax16`'s permute
    /// tree; a group holding a NaN by the sequential rule), the rest by [`Input::band_amax`].
    pub(super) fn band_amax(
        &self,
        input: &Input,
        band: std::ops::Range<usize>,
        at: &Rows,
        known: Option<&[u16]>,
        amax: &mut [f32],
    ) {
        let (cols, scheme, dtype) = (self.cols, self.scheme, self.dtype);
        let sixteen_bits = matches!(dtype, DType::BFloat16 | DType::Float16);
        let inf = half_inf_bits(dtype);
        if let Granularity::Group(k @ (16 | 32)) = scheme.granularity {
            if self.one_pass && sixteen_bits {
                let first = band.start * cols;
                let mut found = Vec::new();
                let maxima = known.unwrap_or_else(|| {
                    found.resize(amax.len(), 0);
                    amax16::group_maxima(input.bytes(first, amax.len() * k), k, &mut found);
                    &found
                });
                // The maxima as float32 (a loop LLVM vectorises), then any group with a NaN by
                // the sequential rule.
                let nan = (amax.iter_mut().zip(maxima)).fold(false, |nan, (a, &m)| {
                    *a = half_value(m, dtype);
                    nan | (m > inf)
                });
                if nan {
                    for (g, a) in amax.iter_mut().enumerate().filter(|(_, a)| a.is_nan()) {
                        *a = input.amax(first + g * k, k, 0.0);
                    }
                }
                return;
            }
        }
        if let Granularity::Block(block_rows, _) = scheme.granularity {
            let (first, last) = (at.first_row + band.start, at.first_row + band.end);
            // (Rows of one row of blocks: what a band of a 2-D-block scheme always is.)
            let one_row_of_blocks = first < last && first / block_rows == (last - 1) / block_rows;
            if self.one_pass && sixteen_bits && one_row_of_blocks {
                self.block_amax(input, band, at, amax);
                return;
            }
        }
        with_best_isa(
            #[inline(always)]
            || input.band_amax(band, at, cols, scheme, amax),
        );
    }

    /// [`Job::band_amax`] of bfloat16 or float16 rows `band` that lie in one row of 2-D blocks:
    /// each column's largest magnitude bits over the rows (a vertical maximum LLVM vectorises,
    /// with no reduction per row), then each block's over its columns. A block holding a NaN
    /// takes the sequential rule over its rows in order.
    pub(super) fn block_amax(
        &self,
        input: &Input,
        band: std::ops::Range<usize>,
        at: &Rows,
        amax: &mut [f32],
    ) {
        let cols = self.cols;
        let mut columns = vec![0u16; cols];
        with_best_isa(
            #[inline(always)]
            || {
                for local in band.clone() {
                    let row = input.bytes(local * cols, cols).as_chunks::<2>().0;
                    for (m, b) in columns.iter_mut().zip(row) {
                        *m = (*m).max(u16::from_le_bytes(*b) & 0x7FFF);
                    }
                }
            },
        );
        let (dtype, inf) = (self.dtype, half_inf_bits(self.dtype));
        for (start, end, k) in self.scheme.runs(at.first_row + band.start, cols) {
            let m = columns[start..end].iter().copied().max().unwrap_or(0);
            amax[k - at.first_scale] = if m > inf {
                band.clone().fold(0.0, |a, local| {
                    input.amax(local * cols + start, end - start, a)
                })
            } else {
                half_value(m, dtype)
            };
        }
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

/// Where a piece of rows is: its first row in the input (`local`), the tensor's row the input
/// starts at, the index of the plan's first scale, and where known the first row of the piece
/// this thread takes next (`next`, as many rows), whose input is prefetched as this one is
/// encoded.
#[derive(Clone, Copy)]
pub(super) struct Rows {
    pub(super) local: usize,
    pub(super) first_row: usize,
    pub(super) first_scale: usize,
    pub(super) next: Option<usize>,
}

/// Elements per band of rows that quantizing hands to a thread where every row has scales of
/// its own (its input stays in the core's cache between the amax and the element pass).
pub(super) const BAND_ELEMENTS: usize = 1 << 17;

/// Elements per piece of the element pass (whole rows, at least one): its buffers stay in the
/// core's cache.
pub(super) const PIECE_ELEMENTS: usize = 1 << 14;
