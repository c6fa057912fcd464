//! Converting a checkpoint: what to convert ([`ConvertOptions`]), and the streaming pipeline
//! that reads, casts and writes at once.
//!
//! Three stages run concurrently over chunks of at most [`CHUNK_BYTES`]: a reader thread fills
//! buffers with positioned reads, the caster converts them (the cast itself spread over the
//! rayon pool), and a writer thread appends them to the output. Buffers come from two small
//! pools, so memory stays at a few tens of MiB whatever the checkpoint's size, and the disk is
//! kept busy while the CPU casts.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use dtcast_cast::{cast_into_scratch, CastError, CastMode};
use dtcast_device::{Device, Tensor, TensorError, ToOptions};
use dtcast_dtype::DType;

use super::header::{self, Entry};
use super::json::quote;
use super::layout::{check_whole_modules, is_attention_parameter, QuantizedFormat};
use super::quantized::{self, QuantizedWeight};
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::input::{read_small, Inputs};
use crate::output::{check_not_input, AtomicFile, FileMode, Target};

/// The largest chunk (input or output bytes) that moves through the pipeline at once.
pub const CHUNK_BYTES: usize = 8 << 20;

/// Buffers per pool (one pool for reads, one for casts).
const POOL: usize = 3;

/// What a conversion does.
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// The dtype to convert to.
    pub dtype: DType,
    /// Convert every tensor, not only the floating ones.
    pub all: bool,
    /// Names or glob patterns (`*.norm.weight`) of tensors to leave as they are. Each must match
    /// at least one tensor. One that matches a quantized weight (or any of its tensors) keeps
    /// it quantized; `config.json` then keeps `quantization_config`, listing the dequantized
    /// weights' modules as dense.
    pub keep: Vec<String>,
    /// The cast mode.
    pub mode: CastMode,
    /// Where the casts run (`cuda:0`: upload, cast, download, chunk by chunk).
    pub device: Device,
    /// Replace an existing output.
    pub force: bool,
    /// Quantize the linear weights instead of casting (`dtype`, `all` and `mode` then do not
    /// apply; the other tensors are copied as they are).
    pub quantize: Option<Quantize>,
}

/// What `--quantize` does: the scheme, and which weights it leaves alone.
#[derive(Clone, Debug)]
pub struct Quantize {
    /// The scheme: `fp8-tensor`, `fp8-channel`, `fp8-block`, `mxfp8`, `mxfp4`, `nvfp4`
    /// (the format's rules), or a reference's name (`ao_mxfp4_rceil`: torchao's scale rule,
    /// written in the format's layout).
    pub scheme: String,
    /// Names or globs of weights to leave unquantized (each must match a tensor; `config.json`
    /// lists their modules as dense); the embeddings and `lm_head` are always left, as
    /// compressed-tensors leaves them.
    pub ignore: Vec<String>,
    /// The layout written: compressed-tensors (every scheme), DeepSeek-V3 (`fp8-block`) or
    /// gpt-oss (`mxfp4`, the MoE experts).
    pub format: QuantizedFormat,
}

impl ConvertOptions {
    /// Floating tensors to `dtype`, Torch mode, on the CPU.
    pub fn new(dtype: DType) -> ConvertOptions {
        ConvertOptions {
            dtype,
            all: false,
            keep: Vec::new(),
            mode: CastMode::Torch,
            device: Device::Cpu,
            force: false,
            quantize: None,
        }
    }

    /// The keep patterns, checked: each is a valid glob that matches at least one of `names`.
    pub(crate) fn selection<'a>(
        &self,
        names: impl Iterator<Item = &'a str> + Clone,
    ) -> Result<Selection, LayerError> {
        let mut patterns = Vec::with_capacity(self.keep.len());
        for k in &self.keep {
            let p = glob::Pattern::new(k).map_err(|e| {
                LayerError::Output(format!("--keep `{k}` is not a valid glob pattern: {e}"))
            })?;
            if !names.clone().any(|n| p.matches(n)) {
                let close = closest(k, names.clone());
                return Err(LayerError::Output(if close.is_empty() {
                    format!("--keep `{k}` matches no tensor of the checkpoint")
                } else {
                    format!(
                        "--keep `{k}` matches no tensor of the checkpoint; the closest names are {}",
                        close.join(", ")
                    )
                }));
            }
            patterns.push(p);
        }
        Ok(Selection {
            dtype: self.dtype,
            all: self.all,
            patterns,
            removes_quantization: false,
            foreign: std::collections::HashMap::new(),
        })
    }
}

/// Which tensors a conversion converts.
#[derive(Debug)]
pub(crate) struct Selection {
    dtype: DType,
    all: bool,
    patterns: Vec<glob::Pattern>,
    /// The conversion dequantizes every quantized weight of the checkpoint (`config.json` loses
    /// its `quantization_config`): the attention quantization parameters go too.
    removes_quantization: bool,
    /// The checkpoint's modules of quantized layouts dtcast does not read, each with the tensor
    /// that shows it and the layout ([`quantized::foreign`]): their tensors may only stay as
    /// they are.
    foreign: std::collections::HashMap<String, (String, &'static str)>,
}

impl Selection {
    /// Takes note of the modules of layouts dtcast does not read among `entries` (the whole
    /// checkpoint: a module's tensors may be in several shards).
    pub(crate) fn note_foreign<'a>(&mut self, entries: impl IntoIterator<Item = &'a Entry>) {
        for (module, shows, layout) in quantized::foreign(entries) {
            (self.foreign).insert(module.to_owned(), (shows.name.clone(), layout));
        }
    }

    /// An error where the conversion would change `e`, a tensor of a module of a layout dtcast
    /// does not read ([`note_foreign`](Selection::note_foreign)).
    pub(crate) fn check_foreign(&self, e: &Entry) -> Result<(), LayerError> {
        let to = self.dtype_of(e);
        if self.foreign.is_empty() || to == e.dtype {
            return Ok(());
        }
        let found = (e.name.match_indices('.')).find_map(|(at, _)| {
            let module = &e.name[..at];
            self.foreign.get(module).map(|f| (module, f))
        });
        match found {
            Some((module, (shows, layout))) => Err(quantized::foreign_error(
                module,
                shows,
                layout,
                &format!(
                    "converting its `{}` to {to} would change it without its weight; leave the \
                     module as it is with --keep '{}.*', or dequantize it with its own tools \
                     first",
                    quote(&e.name),
                    quote(module)
                ),
            )),
            None => Ok(()),
        }
    }

    /// Which of a whole checkpoint's quantized weights (each with the entries its indices are
    /// into) are dequantized and which kept: a module is dequantized or kept as a whole
    /// ([`check_whole_modules`]), and where none is kept the checkpoint stops being quantized.
    pub(crate) fn plan_dequantizing<'a>(
        &mut self,
        weights: impl IntoIterator<Item = (&'a QuantizedWeight, &'a [Entry])>,
    ) -> Result<(), LayerError> {
        let (kept, dequantized): (Vec<_>, Vec<_>) = weights
            .into_iter()
            .partition(|(w, entries)| self.keeps_weight(w, entries));
        check_whole_modules(
            dequantized.iter().map(|(w, _)| w.name.as_str()),
            kept.iter().map(|(w, _)| w.name.as_str()),
            "--keep",
        )?;
        self.removes_quantization = kept.is_empty() && !dequantized.is_empty();
        Ok(())
    }

    /// Whether the tensor `name` is dropped: an attention quantization parameter
    /// ([`ATTENTION_PARAMETERS`](super::ATTENTION_PARAMETERS): `self_attn.k_scale`, ...) of a
    /// checkpoint whose quantization the conversion removes, unless a keep pattern keeps it.
    pub(crate) fn drops(&self, name: &str) -> bool {
        self.removes_quantization && is_attention_parameter(name) && !self.keeps(name)
    }

    /// Whether a keep pattern matches `name`.
    pub(crate) fn keeps(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(name))
    }

    /// Whether the quantized weight `q` (its indices into `entries`) stays as it is: a keep
    /// pattern matches its dense name or any of its parts, which keeps all of them.
    pub(crate) fn keeps_weight(&self, q: &QuantizedWeight, entries: &[Entry]) -> bool {
        self.keeps(&q.name) || q.parts().any(|p| self.keeps(&entries[p].name))
    }

    /// The dtype `entry` gets.
    pub(crate) fn dtype_of(&self, entry: &Entry) -> DType {
        let wanted = self.all || entry.dtype.is_floating_point();
        let kept = self.patterns.iter().any(|p| p.matches(&entry.name));
        if wanted && !kept {
            self.dtype
        } else {
            entry.dtype
        }
    }
}

/// The three names nearest to `pattern` (edit distance), each quoted.
fn closest<'a>(pattern: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = names
        .map(|n| (strsim::levenshtein(pattern, n), n))
        .collect();
    scored.sort();
    scored.dedup_by_key(|s| s.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| format!("`{}`", quote(n)))
        .collect()
}

/// What a conversion did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Tensors converted.
    pub converted: usize,
    /// Quantized weights dequantized (each from its elements and scales, which are gone).
    pub dequantized: usize,
    /// Tensors left as they were.
    pub kept: usize,
    /// Activation quantization parameters dropped with their dequantized weights
    /// ([`QuantizedWeight::activation`]).
    pub activation_dropped: usize,
    /// Attention (key-value cache) quantization parameters dropped with the checkpoint's
    /// quantization config ([`ATTENTION_PARAMETERS`](super::ATTENTION_PARAMETERS)).
    pub attention_dropped: usize,
    /// The weights (dense names) the output stores dense where its quantization config would
    /// otherwise cover them: dequantized ones, or those `--ignore` leaves when quantizing.
    pub dense_weights: Vec<String>,
    /// The quantized weights (dense names) that `--keep` keeps quantized.
    pub kept_quantized: Vec<String>,
    /// Bytes of tensor data before.
    pub bytes_before: u64,
    /// Bytes of tensor data after.
    pub bytes_after: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// The entries of a model directory that were not copied (their names in it), each with
    /// why: a subdirectory, a special file, a safetensors file the index does not list.
    pub not_copied: Vec<(std::path::PathBuf, String)>,
}

impl Summary {
    pub(crate) fn add(&mut self, other: &Summary) {
        self.converted += other.converted;
        self.dequantized += other.dequantized;
        self.kept += other.kept;
        self.activation_dropped += other.activation_dropped;
        self.attention_dropped += other.attention_dropped;
        self.dense_weights.extend_from_slice(&other.dense_weights);
        self.kept_quantized.extend_from_slice(&other.kept_quantized);
        self.bytes_before += other.bytes_before;
        self.bytes_after += other.bytes_after;
    }
}

/// Converts one safetensors file: checks the output first ([`Target::file`]: `--force`, no
/// special files, the input never overwritten), then streams tensor data through the pipeline
/// into an [`AtomicFile`] that replaces `output` only when complete. Names, order and
/// `__metadata__` are kept; the output gets the input's permission bits. `progress` is called
/// with (input bytes done, input bytes total).
///
/// A quantized checkpoint (compressed-tensors, DeepSeek-V3 FP8, gpt-oss MXFP4; `config.json`
/// beside `input` is read when there is one) is dequantized: each quantized weight becomes the
/// dense tensor under its dense name, in `options.dtype` (float32, bfloat16 or float16), and its
/// scale tensors are gone. Anything that would read a quantized weight without its scales is an
/// error.
///
/// A checkpoint that changes while it is read is [`LayerError::Changed`]; nothing is written.
pub fn convert_file(
    input: &Path,
    output: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, LayerError> {
    let start = Instant::now();
    check_not_input(input, output)?;
    let target = Target::file(output, options.force)?;
    let mut inputs = Inputs::new();
    let source = Source::open(input, options, &mut inputs)?;
    target.refuse_inputs(&inputs)?;
    let (file, mut summary) = source
        .write_unnamed(target.dir(), options, progress)
        .map_err(|e| e.at(target.requested()))?;
    file.commit(&target)?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// One safetensors file opened for converting, with the configuration beside it and what the
/// conversion does to each tensor: everything [`convert_file`] checks before writing.
pub(crate) struct Source {
    ckpt: Checkpoint,
    config: Option<serde_json::Value>,
    selection: Selection,
}

impl Source {
    /// Opens `input` and the configuration beside it (each added to `inputs`) and plans the
    /// conversion.
    pub(crate) fn open(
        input: &Path,
        options: &ConvertOptions,
        inputs: &mut Inputs,
    ) -> Result<Source, LayerError> {
        let ckpt = Checkpoint::open(input)?;
        ckpt.add_to(inputs);
        let mut selection = options.selection(ckpt.entries().iter().map(|e| e.name.as_str()))?;
        let config = read_config_into(input.parent(), inputs)?;
        if options.quantize.is_none() {
            // The whole file: a config.json that calls it quantized must find quantized weights.
            let found = quantized::detect(ckpt.entries(), config.as_ref())?;
            selection.plan_dequantizing(found.iter().map(|w| (w, ckpt.entries())))?;
            selection.note_foreign(ckpt.entries());
        }
        Ok(Source {
            ckpt,
            config,
            selection,
        })
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        self.ckpt.path()
    }

    /// The converted file, unnamed in `dir`, and what was done.
    pub(crate) fn write_unnamed(
        &self,
        dir: &Path,
        options: &ConvertOptions,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(AtomicFile, Summary), LayerError> {
        let ckpt = &self.ckpt;
        let mut file = AtomicFile::create(dir, FileMode::like(ckpt.path()))?;
        let total = data_bytes(ckpt);
        let summary = write_converted(
            ckpt,
            ckpt.entries(),
            &[],
            &self.selection,
            options,
            self.config.as_ref(),
            &mut file,
            &|done| progress(done, total),
        )?;
        ckpt.check_unchanged()?;
        Ok((file, summary))
    }
}

/// The configuration a checkpoint in `dir` (the current directory for an empty path) is read
/// by: its `config.json`, parsed, if there is one. Where that has no `quantization_config` and
/// NVIDIA ModelOpt's `hf_quant_config.json` is beside it (older ModelOpt exports describe their
/// quantization there only; vLLM reads it), the `quantization_config` that file stands for is
/// added (`quant_method: modelopt`, as newer exports write it, and `dtcast_read_from:
/// hf_quant_config.json`, so that messages name the file), so that those checkpoints are read
/// as ModelOpt's. A directory conversion writes `config.json` from the file itself, not this.
///
/// Each file is read as every input is ([`crate::input`]): a regular file of at most
/// [`MAX_JSON_LEN`](crate::input::MAX_JSON_LEN) bytes, or an error naming what it is.
pub fn read_config(dir: Option<&Path>) -> Result<Option<serde_json::Value>, LayerError> {
    read_config_into(dir, &mut Inputs::new())
}

/// [`read_config`], the files read added to `inputs`.
pub(crate) fn read_config_into(
    dir: Option<&Path>,
    inputs: &mut Inputs,
) -> Result<Option<serde_json::Value>, LayerError> {
    let hf_path = config_path(dir, quantized::HF_QUANT_CONFIG);
    let hf = read_json(&hf_path, inputs)?;
    let config = read_json(&config_path(dir, "config.json"), inputs)?;
    quantized::with_hf_quant_config(config, hf, &hf_path)
}

/// `config.json` in `dir` (the current directory for an empty path), parsed, if there is one:
/// the file itself, which a directory conversion updates.
pub(crate) fn read_config_file(
    dir: Option<&Path>,
) -> Result<Option<serde_json::Value>, LayerError> {
    read_json(&config_path(dir, "config.json"), &mut Inputs::new())
}

/// The file `name` in `dir` (the current directory for an empty path).
fn config_path(dir: Option<&Path>, name: &str) -> std::path::PathBuf {
    match dir {
        Some(d) if !d.as_os_str().is_empty() => d.join(name),
        _ => Path::new(name).to_path_buf(),
    }
}

/// The JSON file at `path`, parsed, if there is one.
pub(crate) fn read_json(
    path: &Path,
    inputs: &mut Inputs,
) -> Result<Option<serde_json::Value>, LayerError> {
    let Some(text) = read_small(path, inputs)? else {
        return Ok(None);
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| LayerError::Quantized(format!("{} is not valid JSON: {e}", path.display())))
}

/// Bytes of tensor data in a checkpoint.
pub(crate) fn data_bytes(ckpt: &Checkpoint) -> u64 {
    ckpt.entries().iter().map(|e| e.range.len() as u64).sum()
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

/// Writes the converted checkpoint (header and data) into `out`. `progress` gets input bytes done.
/// `all`: `ckpt`'s tensors, then (of a sharded checkpoint) tensors of other shards that its
/// quantized weights may need (a weight's scales stored in another shard than its elements),
/// `lenders[j]` storing `all[ckpt.entries().len() + j]`; the tensors written are `ckpt`'s own.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_converted(
    ckpt: &Checkpoint,
    all: &[Entry],
    lenders: &[&Checkpoint],
    selection: &Selection,
    options: &ConvertOptions,
    config: Option<&serde_json::Value>,
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, LayerError> {
    let entries = ckpt.entries();
    debug_assert_eq!(all.len(), entries.len() + lenders.len());
    // Quantized weights are found among `all` (their indices are into it), each part read from
    // the checkpoint that stores it.
    let read_part = |i: usize, offset: usize, buf: &mut [u8]| match i.checked_sub(entries.len()) {
        Some(b) => lenders[b].read_into(&all[i], offset, buf),
        None => ckpt.read_into(&all[i], offset, buf),
    };
    // Quantizing writes a new layout: a config.json beside the input describes the input's old
    // one at best, so only the tensors say whether it is quantized already.
    let config = if options.quantize.is_some() {
        None
    } else {
        config
    };
    let quantized = quantized::detect_part(all, config)?;
    if let Some(q) = &options.quantize {
        if let Some(w) = quantized.first() {
            return Err(w.already_quantized());
        }
        return super::quantize::write_quantized(ckpt, q, out, progress);
    }
    // A module of a quantized layout dtcast does not read may only stay as it is.
    for e in entries {
        selection.check_foreign(e)?;
    }
    // Each entry's quantized weight, if it is a part of one; a keep pattern that matches a weight
    // or any of its parts keeps all of them as they are.
    let mut part_of: Vec<Option<usize>> = vec![None; all.len()];
    for (k, q) in quantized.iter().enumerate() {
        for p in q.parts() {
            part_of[p] = Some(k);
        }
    }
    let kept: Vec<bool> = (quantized.iter())
        .map(|q| selection.keeps_weight(q, all))
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
    let plan: Vec<DType> = entries
        .iter()
        .zip(&part_of)
        .map(|(e, part)| match part {
            Some(k) if kept[*k] => e.dtype,
            _ => selection.dtype_of(e),
        })
        .collect();
    let dequantized_at = |i: usize| part_of[i].filter(|&k| !kept[k]);
    // A packed dtype stores whole bytes only (as safetensors requires): refuse before writing.
    for (i, (e, &to)) in entries.iter().zip(&plan).enumerate() {
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
    for (i, (e, &to)) in entries.iter().zip(&plan).enumerate() {
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
                summary.bytes_before += q.parts().map(|p| all[p].range.len() as u64).sum::<u64>();
                summary.bytes_after += storage(options.dtype, n) as u64;
                // Bands of whole rows (whole blocks of rows, whole experts for gpt-oss), each
                // dequantized on its own into a buffer of about CHUNK_BYTES.
                let (rows, cols) = Band::rows_cols(q);
                let align = Band::alignment(q);
                let row_bytes = storage(options.dtype, cols).max(1);
                let per = (CHUNK_BYTES / row_bytes / align).max(1) * align;
                let chunk = Chunk {
                    entry: i,
                    more: 0,
                    first: 0,
                    count: 0,
                    from: e.dtype,
                    to: options.dtype,
                    dequant: Some(k),
                };
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
        summary.bytes_after += storage(to, n) as u64; // whole bytes: checked above
                                                      // Chunks start at multiples of 8 elements: whole bytes for every packed dtype.
        let per = (CHUNK_BYTES * 8 / e.dtype.bits().max(to.bits())) & !7;
        let chunk = Chunk {
            entry: i,
            more: 0,
            first: 0,
            count: 0,
            from: e.dtype,
            to,
            dequant: None,
        };
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
    let head = header::build(&specs, ckpt.metadata())?;
    out.write_all(&(head.len() as u64).to_le_bytes())?;
    out.write_all(&head)?;

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
    let chunks = &chunks;
    let quantized = &quantized;
    let (read_result, cast_result, write_result) = std::thread::scope(|s| {
        let reader = s.spawn(move || -> Result<(), LayerError> {
            for c in chunks {
                let Ok(mut bytes) = read_pool.recv() else {
                    return Ok(());
                };
                if let Some(k) = c.dequant {
                    let q = &quantized[k];
                    let band = Band::of(q, all, c.first, c.count);
                    bytes.resize(band.len(), 0);
                    let (elements, rest) = bytes.split_at_mut(band.elements.len());
                    read_part(q.elements, band.elements.start, elements)?;
                    let (scales, global) = rest.split_at_mut(band.scales.len());
                    read_part(q.scales, band.scales.start, scales)?;
                    if let Some(g) = q.global {
                        read_part(g, 0, global)?;
                    }
                } else {
                    // The chunk's bytes, in one read: a piece of one tensor, or whole tensors
                    // stored one after the other.
                    bytes.resize(storage(c.from, c.count), 0);
                    let (first, last) = (&entries[c.entry], &entries[c.entry + c.more]);
                    let start = first.range.start + storage(c.from, c.first);
                    ckpt.read_span(start..start + bytes.len(), last.range.end, &mut bytes)?;
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
                        Band::of(q, all, c.first, c.count).own_len(q, entries.len()) as u64
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
                    dequantize_band(&quantized[k], all, &input.bytes, &c, &mut bytes)?;
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
    read_result.and(cast_result).and(write_result)?;
    Ok(summary)
}

/// Where a band of rows of a quantized weight is stored: the byte ranges of its elements and
/// scales within their entries, whether the global scale follows, and the band's logical shape.
struct Band {
    elements: std::ops::Range<usize>,
    scales: std::ops::Range<usize>,
    global: usize,
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

    /// The rows a band starts at a multiple of: whole scale blocks, or for gpt-oss (whose output
    /// is transposed per expert) whole experts.
    fn alignment(q: &QuantizedWeight) -> usize {
        if q.scheme.convention == dtcast_quant::Convention::GptOss && q.shape.len() == 3 {
            q.shape[1].max(1)
        } else {
            q.scheme.row_alignment()
        }
    }

    /// Rows `first..first + count` of `q`.
    fn of(q: &QuantizedWeight, entries: &[Entry], first: usize, count: usize) -> Band {
        let (_, cols) = Band::rows_cols(q);
        let element_bytes = |rows: usize| storage(q.scheme.element, rows * cols);
        let scale_size = entries[q.scales].dtype.byte_size().unwrap_or(1);
        let scales = q.scheme.scale_range(first, first + count, cols);
        let gpt_oss = q.scheme.convention == dtcast_quant::Convention::GptOss;
        let shape = if gpt_oss && q.shape.len() == 3 {
            let per_expert = q.shape[1];
            vec![count / per_expert, per_expert, cols]
        } else {
            vec![count, cols]
        };
        Band {
            elements: element_bytes(first)..element_bytes(first + count),
            scales: scales.start * scale_size..scales.end * scale_size,
            global: if q.global.is_some() { 4 } else { 0 },
            shape,
        }
    }

    /// The bytes the band reads.
    fn len(&self) -> usize {
        self.elements.len() + self.scales.len() + self.global
    }

    /// The bytes the band reads from the file being converted (of `own` tensors): not the scales
    /// it borrows from another shard, which that shard's progress counts.
    fn own_len(&self, q: &QuantizedWeight, own: usize) -> usize {
        let borrowed = |i: usize, bytes: usize| if i < own { 0 } else { bytes };
        self.len()
            - borrowed(q.scales, self.scales.len())
            - q.global.map_or(0, |g| borrowed(g, self.global))
    }
}

/// A band of a quantized weight dense in `out` (resized), from its parts' bytes (elements,
/// scales, global scale, one after the other).
fn dequantize_band(
    q: &QuantizedWeight,
    entries: &[Entry],
    parts: &[u8],
    c: &Chunk,
    out: &mut Vec<u8>,
) -> Result<(), LayerError> {
    let band = Band::of(q, entries, c.first, c.count);
    let (elements, rest) = parts.split_at(band.elements.len());
    let (scales, global) = rest.split_at(band.scales.len());
    let global_scale = (global.len() == 4)
        .then(|| f32::from_le_bytes([global[0], global[1], global[2], global[3]]));
    let view = dtcast_quant::Quantized {
        elements,
        shape: &band.shape,
        scales,
        global_scale,
    };
    let (_, cols) = Band::rows_cols(q);
    out.resize(storage(c.to, c.count * cols), 0);
    dtcast_quant::dequantize_into(&view, &q.scheme, c.to, out)
        .map_err(|e| LayerError::Quantized(format!("`{}`: {e}", quote(&q.name))))
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
