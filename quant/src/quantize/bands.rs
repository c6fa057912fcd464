//! A tensor's bands of rows on the rayon pool ([`Job::rows_into`]): the bands run last first,
//! so that each thread starts on input the tensor pass left in the shared cache, each band's
//! amaxes found from storage (`amax16`'s permute tree where it serves) and the next band read
//! ahead while this one is encoded.

use super::*;

impl Job<'_> {
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
