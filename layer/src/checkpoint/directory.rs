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

use super::convert::{convert_to_unnamed, read_config_file, ConvertOptions, Summary};
use super::layout::{list_modules, mark_dense, reader_of_method};
use super::quantized::HF_QUANT_CONFIG;
use super::sharded::{check_output_dir, commit_all, convert_shards};
use crate::error::LayerError;
use crate::output::{AtomicFile, FileMode, Target, Want};

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

/// Converts the model in `input` (a directory) into the directory `out_dir`, as
/// [`convert_file`](super::convert_file) / [`convert_index`](super::convert_index) convert its
/// weights, copying every other regular file (subdirectories are not copied) and updating
/// `config.json`. `out_dir` must not exist or be empty, or — with `force` — hold only files a
/// conversion of this directory writes; on any failure it is as it was.
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
    let mut names: Vec<OsString> = Vec::new();
    let mut others: Vec<PathBuf> = Vec::new();
    let weights = find_weights(input)?;
    for entry in std::fs::read_dir(input).map_err(io(input))? {
        let entry = entry.map_err(io(input))?;
        names.push(entry.file_name());
        let path = entry.path();
        let looks_like_weights = {
            let n = path.to_string_lossy();
            n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")
        };
        let is_weights = match &weights {
            Weights::File(f) if looks_like_weights && &path != f => {
                // Another checkpoint beside model.safetensors would be copied unconverted.
                return Err(LayerError::Output(format!(
                    "{} holds {} besides {}; give the file to convert",
                    input.display(),
                    path.display(),
                    f.display()
                )));
            }
            Weights::File(_) | Weights::Index(_) => looks_like_weights,
        };
        if !is_weights && entry.file_type().map_err(io(&path))?.is_file() {
            others.push(path);
        }
    }
    others.sort();
    let anchor = match &weights {
        Weights::Index(p) | Weights::File(p) => p.clone(),
    };
    check_output_dir(&target, &anchor, options.force, &names)?;
    let (mut files, mut summary) = match &weights {
        Weights::Index(index) => convert_shards(index, &target, out_dir, options, progress)?,
        Weights::File(file) => {
            let name = file.file_name().unwrap_or_default().to_owned();
            let (out, s) = convert_to_unnamed(file, target.dir(), options, progress)
                .map_err(|e| e.at(&out_dir.join(&name)))?;
            (vec![(name, out)], s)
        }
    };
    for path in &others {
        let name = path.file_name().unwrap_or_default().to_owned();
        let bytes = if name == "config.json" {
            updated_config(path, options, &summary)?
        } else if name == HF_QUANT_CONFIG && options.quantize.is_none() {
            match updated_hf_quant_config(path, &summary)? {
                Some(bytes) => bytes,
                None => continue,
            }
        } else {
            std::fs::read(path).map_err(io(path))?
        };
        let mut out = AtomicFile::create(target.dir(), FileMode::like(path))?;
        out.write_all(&bytes)
            .map_err(|e| LayerError::from(e).at(&out_dir.join(&name)))?;
        files.push((name, out));
    }
    commit_all(&target, files)?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// [`HF_QUANT_CONFIG`] after a dequantization: none where every quantized weight is dequantized
/// (it would describe weights the output no longer has); where `--keep` keeps some, the
/// dequantized weights' modules added to its `quantization.exclude_modules`.
fn updated_hf_quant_config(path: &Path, summary: &Summary) -> Result<Option<Vec<u8>>, LayerError> {
    let bytes = std::fs::read(path).map_err(|source| LayerError::Io {
        path: path.to_owned(),
        source,
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
            let mut quantization = layout.config(&q.scheme);
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
