//! The conversion pipeline: what each tensor of a file becomes ([`Conversion`]: its output
//! dtype, the header's entries, the chunks and the summary, all decided before a byte is
//! written), then three stages over those chunks at once — a reader thread filling buffers with
//! positioned reads, the caster converting them (the cast itself spread over the rayon pool),
//! and a writer thread appending them to the output. Buffers come from two small pools, so
//! memory stays at a few tens of MiB whatever the checkpoint's size, and the disk is kept busy
//! while the CPU casts.
//!
//! A chunk is a piece of at most [`CHUNK_BYTES`] of one tensor, a run of small tensors of one
//! dtype pair stored one after the other (read, cast and written as one buffer), or a band of
//! whole rows of a quantized weight with its scales (dequantized into a pooled buffer).

use std::io::Write;
use std::sync::mpsc::sync_channel;

use dtcast_cast::{cast_into_scratch, CastError};
use dtcast_device::{Device, Tensor, TensorError, ToOptions};
use dtcast_dtype::DType;
use dtcast_quant::{IntPart, Strided};

use super::convert::{ConvertOptions, Selection, Summary};
use super::header::{self, Entry};
use super::json::quote;
use super::layout::WeightScheme;
use super::quantized::{self, QuantizedWeight};
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::output::AtomicFile;

/// The largest chunk (input or output bytes) that moves through the pipeline at once.
pub const CHUNK_BYTES: usize = 8 << 20;

/// Buffers per pool (one pool for reads, one for casts).
const POOL: usize = 3;

/// The tensors a conversion reads: the file's own (`ckpt`, written), then — of a sharded
/// checkpoint — tensors of other shards that its quantized weights need (a weight's scales stored
/// in another shard than its elements), `other_shards[j]` storing `all[ckpt.entries().len() + j]`.
pub(crate) struct Tensors<'a> {
    pub(crate) ckpt: &'a Checkpoint,
    pub(crate) all: &'a [Entry],
    pub(crate) other_shards: &'a [&'a Checkpoint],
}

impl Tensors<'_> {
    /// Reads `buf.len()` bytes of tensor `all[i]` from `offset` into it, from the checkpoint that
    /// stores it.
    fn read_part(&self, i: usize, offset: usize, buf: &mut [u8]) -> Result<(), LayerError> {
        match i.checked_sub(self.ckpt.entries().len()) {
            Some(b) => self.other_shards[b].read_into(&self.all[i], offset, buf),
            None => self.ckpt.read_into(&self.all[i], offset, buf),
        }
    }
}

/// Writes the converted checkpoint (header and data) into `out`; `progress` gets input bytes
/// done. Quantized weights are found among all of `tensors` (their parts may be in other shards);
/// the tensors written are the file's own.
pub(crate) fn write_converted(
    tensors: &Tensors,
    selection: &Selection,
    options: &ConvertOptions,
    config: Option<&serde_json::Value>,
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, LayerError> {
    let ckpt = tensors.ckpt;
    debug_assert_eq!(
        tensors.all.len(),
        ckpt.entries().len() + tensors.other_shards.len()
    );
    // Quantizing writes a new layout: a config.json beside the input describes the input's old
    // one at best, so only the tensors say whether it is quantized already.
    let config = if options.quantize.is_some() {
        None
    } else {
        config
    };
    let data = super::layout::metadata_reader(tensors.all, |i, buf| tensors.read_part(i, 0, buf));
    let quantized = quantized::detect_part(tensors.all, config, &data)?;
    if let Some(q) = &options.quantize {
        if let Some(w) = quantized.first() {
            return Err(w.already_quantized());
        }
        return super::quantize::write_quantized(ckpt, q, out, progress);
    }
    let conversion = Conversion::of(tensors, &quantized, selection, options)?;
    let head = header::build(&conversion.specs, ckpt.metadata())?;
    out.write_all(&(head.len() as u64).to_le_bytes())?;
    out.write_all(&head)?;
    run(
        tensors,
        &quantized,
        &conversion.chunks,
        options,
        out,
        progress,
    )?;
    Ok(conversion.summary)
}

/// What a file's conversion writes, decided before anything is: the header's tensors (name,
/// dtype, shape), the chunks in file order, and the summary.
struct Conversion<'a> {
    specs: Vec<(&'a str, DType, &'a [usize])>,
    chunks: Vec<Chunk>,
    summary: Summary,
}

impl<'a> Conversion<'a> {
    /// Plans the conversion of `tensors`' own entries, given the quantized weights among them
    /// all: refuses what cannot be converted (a module of a layout dtcast does not read, a
    /// quantized weight read without its scales, a packed dtype that would not fill whole bytes).
    fn of(
        tensors: &Tensors<'a>,
        quantized: &'a [QuantizedWeight],
        selection: &Selection,
        options: &ConvertOptions,
    ) -> Result<Conversion<'a>, LayerError> {
        let entries = tensors.ckpt.entries();
        // A module of a quantized layout dtcast does not read may only stay as it is.
        for e in entries {
            selection.check_foreign(e)?;
        }
        // Each entry's quantized weight, if it is a part of one; a keep pattern that matches a weight
        // or any of its parts keeps all of them as they are.
        let mut part_of: Vec<Option<usize>> = vec![None; tensors.all.len()];
        for (k, q) in quantized.iter().enumerate() {
            for p in q.parts() {
                part_of[p] = Some(k);
            }
        }
        let kept: Vec<bool> = (quantized.iter())
            .map(|q| selection.keeps_weight(q, tensors.all))
            .collect();
        let mut summary = Summary::default();
        for (q, _) in quantized
            .iter()
            .zip(&kept)
            .filter(|(q, k)| **k && q.elements < entries.len())
        {
            summary.kept_quantized.push(q.name.clone());
        }
        if let Some(q) = quantized
            .iter()
            .zip(&kept)
            .find(|(_, k)| !**k)
            .map(|(q, _)| q)
        {
            if !matches!(
                options.dtype,
                DType::Float32 | DType::BFloat16 | DType::Float16
            ) {
                return Err(LayerError::Quantized(format!(
                    "`{}` is a quantized weight ({}); converting it to {} would read it without its \
                     scales. Dequantize with --dtype bfloat16, float16 or float32, or leave it as \
                     it is with --keep {}",
                    quote(&q.name),
                    q.scheme_name,
                    options.dtype,
                    quote(&q.name)
                )));
            }
        }
        // What each entry becomes: cast (or kept), dequantized (the elements entry of a weight), or
        // nothing (its scales).
        let out_dtypes: Vec<DType> = entries
            .iter()
            .zip(&part_of)
            .map(|(e, part)| match part {
                Some(k) if kept[*k] => e.dtype,
                _ => selection.dtype_of(e),
            })
            .collect();
        let dequantized_at = |i: usize| part_of[i].filter(|&k| !kept[k]);
        // A packed dtype stores whole bytes only (as safetensors requires): refuse before writing.
        for (i, (e, &to)) in entries.iter().zip(&out_dtypes).enumerate() {
            if dequantized_at(i).is_some() || selection.drops(&e.name) {
                continue;
            }
            let n = e.numel();
            if to.storage_bytes(n).is_err() {
                return Err(LayerError::Output(format!(
                    "tensor `{}` has {n} elements, which do not fill whole bytes of {to} ({} bits \
                     each); leave it as it is with --keep {}",
                    quote(&e.name),
                    to.bits(),
                    quote(&e.name)
                )));
            }
        }
        let mut specs: Vec<(&str, DType, &[usize])> = Vec::with_capacity(entries.len());
        let mut chunks: Vec<Chunk> = Vec::new();
        // Whether the last chunk holds whole tensors, the last of them `entries[i - 1]`.
        let mut open_run = false;
        for (i, (e, &to)) in entries.iter().zip(&out_dtypes).enumerate() {
            if dequantized_at(i).is_some() || selection.drops(&e.name) {
                open_run = false;
            }
            match dequantized_at(i) {
                Some(k) if quantized[k].elements == i => {
                    let q: &QuantizedWeight = &quantized[k];
                    let n: usize = q.dense_shape.iter().product();
                    specs.push((&q.name, options.dtype, &q.dense_shape));
                    summary.dequantized += 1;
                    summary.dense_weights.push(q.name.clone());
                    summary.activation_dropped += q.activation.len();
                    summary.bytes_before += q
                        .parts()
                        .map(|p| tensors.all[p].range.len() as u64)
                        .sum::<u64>();
                    summary.bytes_after += storage(options.dtype, n) as u64;
                    // Bands of whole rows (whole blocks of rows, whole experts for gpt-oss), each
                    // dequantized on its own into a buffer of about CHUNK_BYTES.
                    let (rows, cols) = Band::rows_cols(q);
                    let align = Band::alignment(q);
                    let row_bytes = storage(options.dtype, cols).max(1);
                    let per = (CHUNK_BYTES / row_bytes / align).max(1) * align;
                    let chunk = Chunk::of(i, e.dtype, options.dtype, Some(k));
                    // A dense tensor of no elements has nothing to read or write (its rows may be
                    // 2^60 of no columns: no chunk per few of them).
                    if n > 0 {
                        chunks.extend(chunk.split(rows, per));
                    }
                    continue;
                }
                Some(_) => continue,
                None if selection.drops(&e.name) => {
                    summary.attention_dropped += 1;
                    summary.bytes_before += e.range.len() as u64;
                    continue;
                }
                None => {}
            }
            specs.push((&e.name, to, &e.shape));
            let n = e.numel();
            if to == e.dtype {
                summary.kept += 1;
            } else {
                summary.converted += 1;
            }
            summary.bytes_before += e.range.len() as u64;
            // Whole bytes: checked above.
            summary.bytes_after += storage(to, n) as u64;
            // Chunks start at multiples of 8 elements: whole bytes for every packed dtype.
            let per = (CHUNK_BYTES * 8 / e.dtype.bits().max(to.bits())) & !7;
            let chunk = Chunk::of(i, e.dtype, to, None);
            // A tensor that fits in a chunk joins the chunk of the tensors before it where that
            // holds whole tensors of the same pair, stored just before it, and has room: one read,
            // one cast and one write for any number of small tensors.
            let joined = open_run
                && chunks.last_mut().is_some_and(|last| {
                    let fits = last.entry + last.more + 1 == i
                        && (last.from, last.to) == (chunk.from, chunk.to)
                        && last.count + n <= per;
                    if fits {
                        last.more += 1;
                        last.count += n;
                    }
                    fits
                });
            if !joined {
                chunks.extend(chunk.split(n, per));
                // (A tensor of no elements has no chunk to join.)
                open_run = n > 0 && n <= per;
            }
        }
        Ok(Conversion {
            specs,
            chunks,
            summary,
        })
    }
}

/// Runs the three stages over `chunks` into `out`.
fn run(
    tensors: &Tensors,
    quantized: &[QuantizedWeight],
    chunks: &[Chunk],
    options: &ConvertOptions,
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(), LayerError> {
    let entries = tensors.ckpt.entries();
    // Two pools (0: read buffers, 1: cast buffers), so that no stage can starve another. Each
    // stage owns its own senders for returning buffers; when the stages downstream of a pool end,
    // its last sender goes and a stage waiting on it wakes with an error instead of hanging.
    let (read_ret, read_pool) = sync_channel::<Vec<u8>>(POOL);
    let (cast_ret, cast_pool) = sync_channel::<Vec<u8>>(POOL);
    for _ in 0..POOL {
        read_ret.send(Vec::new()).expect("the pool has room");
        cast_ret.send(Vec::new()).expect("the pool has room");
    }
    let writer_returns = [read_ret.clone(), cast_ret];
    let caster_return = read_ret;
    let (read_tx, read_rx) = sync_channel::<(Chunk, Buf)>(1);
    let (write_tx, write_rx) = sync_channel::<(Chunk, Buf)>(1);
    let (read_result, cast_result, write_result) = std::thread::scope(|s| {
        let reader = s.spawn(move || -> Result<(), LayerError> {
            for c in chunks {
                let Ok(mut bytes) = read_pool.recv() else {
                    return Ok(());
                };
                if let Some(k) = c.dequant {
                    let band = Band::of(&quantized[k], tensors.all, c.first, c.count);
                    band.read(tensors, &mut bytes)?;
                } else {
                    // The chunk's bytes, in one read: a piece of one tensor, or whole tensors
                    // stored one after the other.
                    bytes.resize(storage(c.from, c.count), 0);
                    let (first, last) = (&entries[c.entry], &entries[c.entry + c.more]);
                    let start = first.range.start + storage(c.from, c.first);
                    tensors.ckpt.read_span(
                        start..start + bytes.len(),
                        last.range.end,
                        &mut bytes,
                    )?;
                }
                if read_tx.send((*c, Buf { bytes, pool: 0 })).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        let writer = s.spawn(move || -> Result<(), LayerError> {
            let mut done = 0u64;
            for (c, buf) in write_rx {
                out.write_all(&buf.bytes)?;
                done += match c.dequant {
                    Some(k) => {
                        let q = &quantized[k];
                        Band::of(q, tensors.all, c.first, c.count).own_len(entries.len()) as u64
                    }
                    None => storage(c.from, c.count) as u64,
                };
                progress(done);
                let _ = writer_returns[buf.pool].send(buf.bytes);
            }
            Ok(())
        });
        let caster = move || -> Result<(), LayerError> {
            for (c, input) in read_rx {
                let buf = if let Some(k) = c.dequant {
                    let Ok(mut bytes) = cast_pool.recv() else {
                        return Ok(());
                    };
                    dequantize_band(&quantized[k], tensors.all, &input.bytes, &c, &mut bytes)?;
                    let _ = caster_return.send(input.bytes);
                    Buf { bytes, pool: 1 }
                } else if c.from == c.to {
                    input
                } else {
                    let Ok(mut bytes) = cast_pool.recv() else {
                        return Ok(());
                    };
                    bytes.resize(storage(c.to, c.count), 0);
                    cast_chunk(&input.bytes, &mut bytes, &c, options)
                        .map_err(|source| c.tensor_error(entries, source))?;
                    let _ = caster_return.send(input.bytes);
                    Buf { bytes, pool: 1 }
                };
                if write_tx.send((c, buf)).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        };
        // Ending the caster drops its channels, which ends the other two.
        let cast_result = caster();
        (
            reader.join().expect("the reader does not panic"),
            cast_result,
            writer.join().expect("the writer does not panic"),
        )
    });
    read_result.and(cast_result).and(write_result)
}

/// One piece of one tensor.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    entry: usize,
    /// How many tensors after `entry` the chunk holds too, whole (`first` is then 0 and `count`
    /// their elements and `entry`'s together): small tensors of one dtype pair, stored one after
    /// the other, read, cast and written as one buffer.
    more: usize,
    /// Index of its first element within the tensor.
    first: usize,
    count: usize,
    from: DType,
    to: DType,
    /// A band of a quantized weight (its index in the detected list; `first` and `count` then
    /// count rows): the read buffer holds the band's elements, scales and global scale, one after
    /// the other ([`Band`]).
    dequant: Option<usize>,
}

impl Chunk {
    /// A cast's error as the error of the tensor it is in, its element counted from that
    /// tensor's start (a chunk of several tensors counts from the first's).
    fn tensor_error(&self, entries: &[Entry], mut source: TensorError) -> LayerError {
        let mut entry = self.entry;
        match &mut source {
            TensorError::Cast(CastError::Value { index, .. }) => {
                *index += self.first;
                while entry < self.entry + self.more && *index >= entries[entry].numel() {
                    *index -= entries[entry].numel();
                    entry += 1;
                }
            }
            TensorError::Cast(e) => *e = e.clone().offset_by(self.first),
            _ => {}
        }
        LayerError::Tensor {
            name: entries[entry].name.clone(),
            source,
        }
    }

    /// The chunks of entry `entry` (`dequant`: its quantized weight) start from this, one
    /// [`split`](Chunk::split) off per chunk.
    fn of(entry: usize, from: DType, to: DType, dequant: Option<usize>) -> Chunk {
        Chunk {
            entry,
            more: 0,
            first: 0,
            count: 0,
            from,
            to,
            dequant,
        }
    }

    /// This chunk's tensor, `total` elements (or rows), in chunks of `per`.
    fn split(self, total: usize, per: usize) -> impl Iterator<Item = Chunk> {
        (0..total).step_by(per.max(1)).map(move |first| Chunk {
            first,
            count: per.min(total - first),
            ..self
        })
    }
}

/// A buffer and the pool it returns to.
struct Buf {
    bytes: Vec<u8>,
    pool: usize,
}

/// Where a band of rows of a quantized weight is stored: the pieces of its parts it reads, in
/// the order the buffer holds them (elements or codes first), and the band's logical shape.
struct Band {
    reads: Vec<(usize, Strided)>,
    shape: Vec<usize>,
}

impl Band {
    /// The weight's logical rows (leading dimensions flattened) and columns.
    fn rows_cols(q: &QuantizedWeight) -> (usize, usize) {
        match q.shape.split_last() {
            Some((&cols, lead)) => (lead.iter().product(), cols),
            None => (0, 0),
        }
    }

    /// The rows a band starts at a multiple of: whole scale blocks or packed words, or for
    /// gpt-oss (whose output is transposed per expert) whole experts.
    fn alignment(q: &QuantizedWeight) -> usize {
        match q.scheme {
            WeightScheme::Scaled(s)
                if s.convention == dtcast_quant::Convention::GptOss && q.shape.len() == 3 =>
            {
                q.shape[1].max(1)
            }
            scheme => scheme.row_alignment(Band::rows_cols(q).1),
        }
    }

    /// Rows `first..first + count` of `q`.
    fn of(q: &QuantizedWeight, entries: &[Entry], first: usize, count: usize) -> Band {
        let (rows, cols) = Band::rows_cols(q);
        let contiguous = |range: std::ops::Range<usize>| Strided {
            start: range.start,
            len: range.len(),
            stride: range.len(),
            count: 1,
        };
        match q.scheme {
            WeightScheme::Scaled(scheme) => {
                let element_bytes = |rows: usize| storage(scheme.element, rows * cols);
                let scale_size = entries[q.scales].dtype.byte_size().unwrap_or(1);
                let scales = scheme.scale_range(first, first + count, cols);
                let gpt_oss = scheme.convention == dtcast_quant::Convention::GptOss;
                let shape = if gpt_oss && q.shape.len() == 3 {
                    let per_expert = q.shape[1];
                    vec![count / per_expert, per_expert, cols]
                } else {
                    vec![count, cols]
                };
                let mut reads = vec![
                    (
                        q.elements,
                        contiguous(element_bytes(first)..element_bytes(first + count)),
                    ),
                    (
                        q.scales,
                        contiguous(scales.start * scale_size..scales.end * scale_size),
                    ),
                ];
                reads.extend(q.global.map(|g| (g, contiguous(0..4))));
                Band { reads, shape }
            }
            WeightScheme::Integer {
                scheme,
                zeros,
                group_index,
            } => {
                let parts = [
                    (Some(q.elements), IntPart::Codes),
                    (Some(q.scales), IntPart::Scales),
                    (zeros, IntPart::Zeros),
                    (group_index, IntPart::GroupIndex),
                ];
                // (The parts' shapes were checked when the weight was read.)
                let reads = (parts.into_iter())
                    .filter_map(|(entry, part)| {
                        let at = scheme.band(part, rows, cols, first, first + count).ok()?;
                        Some((entry?, at))
                    })
                    .collect();
                Band {
                    reads,
                    shape: vec![count, cols],
                }
            }
            WeightScheme::Bnb4 {
                scheme,
                quant_map,
                nested,
            } => {
                // Elements `first · cols ..`: whole blocks from a block (and nested block) start.
                let (e0, e1) = (first * cols, (first + count) * cols);
                let bs = scheme.blocksize;
                let (b0, b1) = (e0 / bs, e1.div_ceil(bs));
                let absmax_size = if nested.is_some() { 1 } else { 4 };
                let mut reads = vec![
                    (q.elements, contiguous(e0 / 2..e1.div_ceil(2))),
                    (quant_map, contiguous(0..64)),
                    (q.scales, contiguous(b0 * absmax_size..b1 * absmax_size)),
                ];
                if let (Some((absmax, map)), Some((n, _))) = (nested, scheme.nested) {
                    reads.push((absmax, contiguous(b0 / n * 4..b1.div_ceil(n) * 4)));
                    reads.push((map, contiguous(0..1024)));
                }
                Band {
                    reads,
                    shape: vec![count, cols],
                }
            }
            WeightScheme::Int8Rows => Band {
                reads: vec![
                    (q.elements, contiguous(first * cols..(first + count) * cols)),
                    (q.scales, contiguous(first * 4..(first + count) * 4)),
                ],
                shape: vec![count, cols],
            },
        }
    }

    /// The bytes the band reads.
    fn len(&self) -> usize {
        self.reads.iter().map(|(_, at)| at.bytes()).sum()
    }

    /// The bytes the band reads from the file being converted (of `own` tensors): not the parts
    /// it borrows from another shard, which that shard's progress counts.
    fn own_len(&self, own: usize) -> usize {
        (self.reads.iter())
            .filter(|(entry, _)| *entry < own)
            .map(|(_, at)| at.bytes())
            .sum()
    }

    /// Reads the band's pieces into `buf` (resized), one part after another.
    fn read(&self, tensors: &Tensors, buf: &mut Vec<u8>) -> Result<(), LayerError> {
        buf.resize(self.len(), 0);
        let mut rest = &mut buf[..];
        for (entry, at) in &self.reads {
            let (part, after) = rest.split_at_mut(at.bytes());
            for (k, piece) in part.chunks_exact_mut(at.len.max(1)).enumerate() {
                tensors.read_part(*entry, at.start + k * at.stride, piece)?;
            }
            rest = after;
        }
        Ok(())
    }
}

/// A band of a quantized weight dense in `out` (resized), from its parts' bytes as
/// [`Band::read`] laid them out.
fn dequantize_band(
    q: &QuantizedWeight,
    entries: &[Entry],
    parts: &[u8],
    c: &Chunk,
    out: &mut Vec<u8>,
) -> Result<(), LayerError> {
    let band = Band::of(q, entries, c.first, c.count);
    let mut rest = parts;
    let mut pieces = band.reads.iter().map(|(_, at)| {
        let (piece, after) = rest.split_at(at.bytes());
        rest = after;
        piece
    });
    let (_, cols) = Band::rows_cols(q);
    out.resize(storage(c.to, c.count * cols), 0);
    let named =
        |e: dtcast_quant::QuantError| LayerError::Quantized(format!("`{}`: {e}", quote(&q.name)));
    match q.scheme {
        WeightScheme::Scaled(scheme) => {
            let elements = pieces.next().unwrap_or_default();
            let scales = pieces.next().unwrap_or_default();
            let global_scale = pieces
                .next()
                .map(|g| f32::from_le_bytes([g[0], g[1], g[2], g[3]]));
            let view = dtcast_quant::Quantized {
                elements,
                shape: &band.shape,
                scales,
                global_scale,
            };
            dtcast_quant::dequantize_into(&view, &scheme, c.to, out).map_err(named)
        }
        WeightScheme::Integer {
            scheme,
            zeros,
            group_index,
        } => {
            let codes = pieces.next().unwrap_or_default();
            let scales = pieces.next().unwrap_or_default();
            let zeros = zeros.and_then(|_| pieces.next());
            let group_index = group_index.and_then(|_| pieces.next());
            let view = dtcast_quant::IntWeight {
                rows: c.count,
                cols,
                codes,
                scales,
                zeros,
                group_index,
            };
            dtcast_quant::dequantize_int_into(&view, &scheme, c.to, out).map_err(named)
        }
        WeightScheme::Bnb4 { scheme, .. } => {
            let codes = pieces.next().unwrap_or_default();
            let quant_map = pieces.next().unwrap_or_default();
            let absmax = pieces.next().unwrap_or_default();
            let nested = scheme
                .nested
                .and_then(|_| Some((pieces.next()?, pieces.next()?)));
            let view = dtcast_quant::Bnb4Weight {
                elements: c.count * cols,
                codes,
                quant_map,
                absmax,
                nested,
            };
            dtcast_quant::dequantize_bnb4_into(&view, &scheme, c.to, out).map_err(named)
        }
        WeightScheme::Int8Rows => {
            let codes = pieces.next().unwrap_or_default();
            let scb = pieces.next().unwrap_or_default();
            dtcast_quant::dequantize_int8_rows_into(codes, &[c.count, cols], scb, c.to, out)
                .map_err(named)
        }
    }
}

/// Casts one chunk, on the CPU or on `options.device`. Element indices in errors count from the
/// start of the chunk ([`Chunk::tensor_error`] places them in their tensor).
fn cast_chunk(
    src: &[u8],
    dst: &mut [u8],
    c: &Chunk,
    options: &ConvertOptions,
) -> Result<(), TensorError> {
    match options.device {
        // The output is a temporary file, discarded on error: one pass in Checked and Exact mode.
        Device::Cpu | Device::CpuIndexed(_) => {
            cast_into_scratch(src, c.from, dst, c.to, options.mode).map_err(Into::into)
        }
        device => {
            let opts = ToOptions {
                mode: options.mode,
                ..Default::default()
            };
            let converted = Tensor::from_bytes(src, c.from, &[c.count])
                .and_then(|t| t.to(device))
                .and_then(|t| t.to_with(c.to, opts))
                .and_then(|t| t.to_bytes())?;
            dst.copy_from_slice(&converted);
            Ok(())
        }
    }
}

/// The bytes of `elements` elements of a chunk (whole bytes: chunks start at multiples of 8
/// elements and end at a multiple of 8 or at the end of a tensor, whose size was checked).
fn storage(dtype: DType, elements: usize) -> usize {
    elements * dtype.bits() / 8
}
