//! Converting a model directory (a Hugging Face model: `config.json`, the weights as one
//! `model.safetensors` or shards with their index, tokenizer and other files): the weights are
//! converted, (de)quantized, every other file is copied, and `config.json` is updated — its
//! `quantization_config` removed when the weights are dequantized, written as compressed-tensors
//! writes it when they are quantized — all into a new directory that appears in one step.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use super::convert::{read_config_file, ConvertOptions, Summary};
use super::layout::{list_modules, mark_dense, reader_of_method};
use super::quantized::HF_QUANT_CONFIG;
use super::sharded::{check_output_dir, Shards};
use crate::error::LayerError;
use crate::input::{copy_regular, read_small, Inputs};
use crate::output::{AtomicFile, FileMode, StagedDir, Target, Want};

/// The weights of a model directory.
enum Weights {
    /// A sharded checkpoint's index.
    Index(PathBuf),
    /// One safetensors file.
    File(PathBuf),
}

/// The checkpoint in `dir`: `model.safetensors.index.json`, else `model.safetensors`, else the one
/// index or the one safetensors file there.
fn find_weights(dir: &Path) -> Result<Weights, LayerError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        return Ok(Weights::Index(index));
    }
    let file = dir.join("model.safetensors");
    if file.is_file() {
        return Ok(Weights::File(file));
    }
    let io = |source| LayerError::Io {
        path: dir.to_owned(),
        source,
    };
    let (mut indexes, mut files) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.to_string_lossy().into_owned();
        if name.ends_with(".safetensors.index.json") {
            indexes.push(path);
        } else if name.ends_with(".safetensors") {
            files.push(path);
        }
    }
    match (indexes.len(), files.len()) {
        (1, _) => Ok(Weights::Index(indexes.remove(0))),
        (0, 1) => Ok(Weights::File(files.remove(0))),
        (0, 0) => Err(LayerError::Output(format!(
            "{} holds no safetensors checkpoint (model.safetensors or an index)",
            dir.display()
        ))),
        _ => Err(LayerError::Output(format!(
            "{} holds several checkpoints; give the file or the index",
            dir.display()
        ))),
    }
}

/// The weights of the model directory `dir`, as [`convert_dir`] finds them: its
/// `model.safetensors.index.json`, else its `model.safetensors`, else the one index or the one
/// safetensors file it holds; an error names the directory where there is none, or several.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("dtcast-doc-model-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("config.json"), "{}")?;
/// std::fs::write(dir.join("model.safetensors"), b"")?;
/// let weights = dtcast_layer::checkpoint::model_weights(&dir)?;
/// assert_eq!(weights, dir.join("model.safetensors"));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn model_weights(dir: &Path) -> Result<PathBuf, LayerError> {
    match find_weights(dir)? {
        Weights::Index(path) | Weights::File(path) => Ok(path),
    }
}

/// What a model directory's entry is to its conversion.
enum Role {
    /// Read as the weights (the checkpoint, its index and shards).
    Weights,
    /// A regular file (through any links: a Hugging Face cache snapshot is all links), copied.
    Copied,
    /// Not copied, and why ([`Summary::not_copied`]).
    NotCopied(String),
}

/// What the entry `name` of a model directory is to a conversion of `weights`.
fn role(dir: &Path, name: &std::ffi::OsStr, weights: &Weights, shards: &[String]) -> Role {
    let path = dir.join(name);
    let text = name.to_string_lossy();
    let is_checkpoint = text.ends_with(".safetensors") || text.ends_with(".safetensors.index.json");
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() && is_checkpoint => match weights {
            Weights::File(f) if path == *f => Role::Weights,
            Weights::Index(i) if path == *i || shards.iter().any(|s| **s == *name) => Role::Weights,
            Weights::Index(i) => Role::NotCopied(format!(
                "a safetensors file `{}` does not list",
                i.file_name().unwrap_or_default().to_string_lossy()
            )),
            Weights::File(_) => Role::Weights,
        },
        Ok(m) if m.is_file() => Role::Copied,
        Ok(m) => Role::NotCopied(crate::input::describe(m.file_type()).to_owned()),
        Err(_) if std::fs::symlink_metadata(&path).is_ok() => {
            Role::NotCopied("a symbolic link to nothing".to_owned())
        }
        Err(e) => Role::NotCopied(format!("unreadable: {e}")),
    }
}

/// Converts the model in `input` (a directory) into the directory `out_dir`, as
/// [`convert_file`](super::convert_file) / [`convert_index`](super::convert_index) convert its
/// weights, copying every other regular file — symbolic links followed, as in a Hugging Face
/// cache snapshot, where every file is one — and updating `config.json`. What is not copied
/// (subdirectories, special files, safetensors files the index does not list) is named in
/// [`Summary::not_copied`]. `out_dir` must not exist or be empty, or — with `force` — hold only
/// files a conversion of this directory writes, and must not hold an input; on any failure it is
/// as it was.
pub fn convert_dir(
    input: &Path,
    out_dir: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, LayerError> {
    let start = Instant::now();
    let target = Target::resolve(out_dir, options.force, Want::Dir)?;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| LayerError::Io { path, source }
    };
    let weights = find_weights(input)?;
    let mut inputs = Inputs::new();
    let (Weights::Index(anchor) | Weights::File(anchor)) = &weights;
    inputs.add_path(anchor).map_err(io(anchor))?;
    target.refuse_inputs(&inputs)?;
    let source = match &weights {
        Weights::Index(index) => Source::Shards(Shards::open(index, options, &mut inputs)?),
        Weights::File(file) => {
            Source::File(super::convert::Source::open(file, options, &mut inputs)?)
        }
    };
    let shards: Vec<String> = match &source {
        Source::Shards(s) => s.shard_names().map(str::to_owned).collect(),
        Source::File(_) => Vec::new(),
    };
    let mut names: Vec<OsString> = Vec::new();
    let mut others: Vec<PathBuf> = Vec::new();
    let mut not_copied: Vec<(PathBuf, String)> = Vec::new();
    for entry in std::fs::read_dir(input).map_err(io(input))? {
        let name = entry.map_err(io(input))?.file_name();
        match role(input, &name, &weights, &shards) {
            Role::Weights => {
                if let Weights::File(f) = &weights {
                    if input.join(&name) != *f {
                        // Another checkpoint beside model.safetensors would be copied unconverted.
                        return Err(LayerError::Output(format!(
                            "{} holds {} besides {}; give the file to convert",
                            input.display(),
                            input.join(&name).display(),
                            f.display()
                        )));
                    }
                }
            }
            Role::Copied => others.push(input.join(&name)),
            Role::NotCopied(why) => not_copied.push((PathBuf::from(&name), why)),
        }
        names.push(name);
    }
    others.sort();
    not_copied.sort();
    check_output_dir(&target, options.force, &names)?;
    for path in &others {
        inputs.add_path(path).map_err(io(path))?;
    }
    target.refuse_inputs(&inputs)?;
    let staged = StagedDir::create(&target)?;
    let mut summary = match &source {
        Source::Shards(s) => s.write(&staged, out_dir, options, progress)?,
        Source::File(file) => {
            let name = file.path().file_name().unwrap_or_default().to_owned();
            let (out, s) = file
                .write_unnamed(staged.path(), options, progress)
                .map_err(|e| e.at(&out_dir.join(&name)))?;
            staged.add(out, &name)?;
            s
        }
    };
    for path in &others {
        let name = path.file_name().unwrap_or_default().to_owned();
        let at = |e: LayerError| e.at(&out_dir.join(&name));
        let mut out = AtomicFile::create(staged.path(), FileMode::like(path))?;
        if name == "config.json" {
            let bytes = updated_config(path, options, &summary)?;
            out.write_all(&bytes).map_err(|e| at(e.into()))?;
        } else if name == HF_QUANT_CONFIG && options.quantize.is_none() {
            match updated_hf_quant_config(path, &summary)? {
                Some(bytes) => out.write_all(&bytes).map_err(|e| at(e.into()))?,
                None => continue,
            }
        } else {
            copy_regular(path, &mut out).map_err(at)?;
        }
        staged.add(out, &name)?;
    }
    staged.commit(&target)?;
    summary.not_copied = not_copied;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// A model directory's weights, opened.
enum Source {
    Shards(Shards),
    File(super::convert::Source),
}

/// [`HF_QUANT_CONFIG`] after a dequantization: none where every quantized weight is dequantized
/// (it would describe weights the output no longer has); where `--keep` keeps some, the
/// dequantized weights' modules added to its `quantization.exclude_modules`.
fn updated_hf_quant_config(path: &Path, summary: &Summary) -> Result<Option<Vec<u8>>, LayerError> {
    let bytes = read_small(path, &mut Inputs::new())?.ok_or_else(|| LayerError::Changed {
        path: path.to_owned(),
    })?;
    if summary.dequantized == 0 {
        return Ok(Some(bytes));
    }
    if summary.kept_quantized.is_empty() {
        return Ok(None);
    }
    let mut json: Value = serde_json::from_slice(&bytes)
        .map_err(|e| LayerError::Quantized(format!("{}: {e}", path.display())))?;
    let Some(quantization) = json.get_mut("quantization") else {
        return Err(LayerError::Quantized(format!(
            "{} has no `quantization` object to list the dequantized modules in",
            path.display()
        )));
    };
    list_modules(quantization, &["exclude_modules"], &summary.dense_weights)?;
    let mut text =
        serde_json::to_vec_pretty(&json).map_err(|e| LayerError::Output(e.to_string()))?;
    text.push(b'\n');
    Ok(Some(text))
}

/// `config.json` after the conversion: where every quantized weight is dequantized,
/// `quantization_config` goes; where `--keep` keeps some, it stays and lists the dequantized
/// weights' modules as dense; the dtype becomes `torch_dtype`. Quantized weights gain the
/// format's `quantization_config`, listing the modules `--ignore` leaves dense.
fn updated_config(
    path: &Path,
    options: &ConvertOptions,
    summary: &Summary,
) -> Result<Vec<u8>, LayerError> {
    let mut config = read_config_file(path.parent())?.unwrap_or(Value::Null);
    let method = super::quantized::config_method(Some(&config));
    let Some(obj) = config.as_object_mut() else {
        return Err(LayerError::Quantized(format!(
            "{} is not a JSON object",
            path.display()
        )));
    };
    match &options.quantize {
        Some(q) => {
            let layout = q.format.layout();
            let mut quantization = layout.config(&q.scheme, q.group_size);
            mark_dense(layout, &mut quantization, &summary.dense_weights)?;
            obj.insert("quantization_config".to_owned(), quantization);
        }
        None => {
            if summary.dequantized > 0 && summary.kept_quantized.is_empty() {
                obj.remove("quantization_config");
            }
            let layout = method.as_deref().and_then(reader_of_method);
            if let (Some(layout), Some(quantization), false) = (
                layout,
                obj.get_mut("quantization_config"),
                summary.kept_quantized.is_empty(),
            ) {
                mark_dense(layout, quantization, &summary.dense_weights)?;
            }
            if options.dtype.is_floating_point() {
                obj.insert("torch_dtype".to_owned(), options.dtype.name().into());
            }
        }
    }
    let mut text =
        serde_json::to_vec_pretty(&config).map_err(|e| LayerError::Output(e.to_string()))?;
    text.push(b'\n');
    Ok(text)
}
