//! Converting a checkpoint: what to convert ([`ConvertOptions`], the keep [`Selection`]), one
//! file opened and planned before anything is written ([`Source`], [`convert_file`]), and the
//! configuration beside it ([`read_config`]). The pipeline that reads, casts and writes at once
//! is `pipeline.rs`.

use std::path::Path;
use std::time::Instant;

use dtcast_cast::CastMode;
use dtcast_device::Device;
use dtcast_dtype::DType;

use super::header::Entry;
use super::json::quote;
use super::layout::{check_whole_modules, is_attention_parameter, QuantizedFormat};
use super::pipeline::{write_converted, Tensors};
use super::quantized::{self, QuantizedWeight};
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::input::{read_small, Inputs};
use crate::output::{check_not_input, AtomicFile, FileMode, Target};

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
    /// The integer schemes' group size (`--group-size`), where it is not the preset's.
    pub group_size: Option<usize>,
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
            let found = quantized::detect(&ckpt, config.as_ref())?;
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
        let tensors = Tensors {
            ckpt,
            all: ckpt.entries(),
            other_shards: &[],
        };
        let summary = write_converted(
            &tensors,
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
