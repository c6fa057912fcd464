//! `convert --quantize`: the weights a layout targets (compressed-tensors': the linear weights)
//! quantized with a scaled scheme and written in that layout ([`super::layout`]); the other
//! tensors are copied as they are. Everything is checked before anything is written.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::{Granularity, Scheme};

use super::convert::{Quantize, Summary};
use super::header::{self, Entry};
use super::json::quote;
use super::layout::check_whole_modules;
use super::pipeline::CHUNK_BYTES;
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::output::AtomicFile;

/// Writes `ckpt` with the weights `q`'s layout targets quantized into `out`.
pub(crate) fn write_quantized(
    ckpt: &Checkpoint,
    q: &Quantize,
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, LayerError> {
    let names = ckpt.entries().iter().map(|e| e.name.as_str());
    let ignore = ignore_patterns(q, names)?;
    let schemes = schemes(ckpt.entries(), q, &ignore)?;
    check_targets(q, [(ckpt.entries(), schemes.as_slice())])?;
    write_with_schemes(ckpt, q, &schemes, out, progress)
}

/// `q`'s `--ignore` globs, each of which must match a tensor of the checkpoint (`names`: every
/// tensor of every shard).
pub(crate) fn ignore_patterns<'a>(
    q: &Quantize,
    names: impl Iterator<Item = &'a str> + Clone,
) -> Result<Vec<glob::Pattern>, LayerError> {
    let mut ignore = Vec::with_capacity(q.ignore.len());
    for g in &q.ignore {
        let p = glob::Pattern::new(g).map_err(|e| {
            LayerError::Output(format!("--ignore `{g}` is not a valid glob pattern: {e}"))
        })?;
        if !names.clone().any(|n| p.matches(n)) {
            return Err(LayerError::Output(format!(
                "--ignore `{g}` matches no tensor of the checkpoint"
            )));
        }
        ignore.push(p);
    }
    Ok(ignore)
}

/// An error unless some tensor of the checkpoint (`files`: one per file, with its entries) is
/// quantized, or where a module would hold a weight `--ignore` leaves dense and one quantized.
pub(crate) fn check_targets<'a>(
    q: &Quantize,
    files: impl IntoIterator<Item = (&'a [Entry], &'a [Option<Scheme>])> + Clone,
) -> Result<(), LayerError> {
    let layout = q.format.layout();
    let each =
        || (files.clone().into_iter()).flat_map(|(entries, schemes)| entries.iter().zip(schemes));
    check_whole_modules(
        each()
            .filter(|(e, s)| s.is_none() && layout.targets(e))
            .map(|(e, _)| e.name.as_str()),
        each()
            .filter(|(_, s)| s.is_some())
            .map(|(e, _)| e.name.as_str()),
        "--ignore",
    )?;
    if each().all(|(_, s)| s.is_none()) {
        return Err(LayerError::Quantized(format!(
            "--format {}: no tensor of the checkpoint is one it quantizes ({})",
            q.format,
            q.format.layout().targets_described()
        )));
    }
    Ok(())
}

/// Each entry of one file: its scheme if `q` quantizes it. Everything is checked here, before
/// anything is written.
pub(crate) fn schemes(
    entries: &[Entry],
    q: &Quantize,
    ignore: &[glob::Pattern],
) -> Result<Vec<Option<Scheme>>, LayerError> {
    let layout = q.format.layout();
    let reference = layout
        .scheme_name(&q.scheme)
        .map_err(LayerError::Quantized)?;
    if let Some((module, shows, layout)) = super::quantized::foreign(entries).first() {
        return Err(super::quantized::foreign_error(
            module,
            &shows.name,
            layout,
            "it is quantized already; dequantize it with its own tools first",
        ));
    }
    let mut schemes: Vec<Option<Scheme>> = Vec::with_capacity(entries.len());
    for e in entries {
        if !layout.targets(e) || ignore.iter().any(|p| p.matches(&e.name)) {
            schemes.push(None);
            continue;
        }
        let bad = |reason: String| {
            LayerError::Quantized(format!(
                "`{}`: {reason}; leave it unquantized with --ignore {}",
                quote(&e.name),
                quote(&e.name)
            ))
        };
        let mut scheme = Scheme::named(&reference, e.dtype).map_err(|err| {
            LayerError::Quantized(format!(
                "--quantize `{}`: {err} (or fp8-tensor, fp8-channel, fp8-block, mxfp8, mxfp4, \
                 nvfp4, w4a16, w4a16-asym, w8a16, w2a16, w8a16-channel)",
                q.scheme
            ))
        })?;
        match (q.group_size, scheme.integer()) {
            (None, _) => {}
            (Some(k), Some(_)) if k > 0 && scheme.granularity != Granularity::Channel => {
                scheme.granularity = Granularity::Group(k)
            }
            (Some(k), _) => {
                return Err(LayerError::Quantized(format!(
                    "--group-size {k}: the group size is for the grouped integer schemes \
                     (w4a16, w4a16-asym, w8a16, w2a16), and is at least 1"
                )))
            }
        }
        scheme.check_input(e.dtype).map_err(|err| {
            let way_out = if e.dtype == DType::Float16 {
                "; `dtcast convert --dtype float32` makes a float16 checkpoint float32 exactly"
            } else {
                ""
            };
            bad(format!("{err}{way_out}"))
        })?;
        let (rows, cols) = layout.rows_cols(e);
        scheme
            .scale_count(rows, cols)
            .map_err(|err| bad(err.to_string()))?;
        if scheme.integer().is_none() && scheme.element.is_packed() && cols % 2 != 0 {
            return Err(bad(format!("{cols} columns do not pack two per byte")));
        }
        schemes.push(Some(scheme));
    }
    Ok(schemes)
}

/// The names of the tensors a file holds once quantized by `schemes`, in order.
pub(crate) fn output_names(
    entries: &[Entry],
    q: &Quantize,
    schemes: &[Option<Scheme>],
) -> Vec<String> {
    let layout = q.format.layout();
    entries
        .iter()
        .zip(schemes)
        .flat_map(|(e, scheme)| match scheme {
            Some(s) => layout.parts(e, s).into_iter().map(|p| p.0).collect(),
            None => vec![e.name.clone()],
        })
        .collect()
}

/// Writes `ckpt` into `out`, each tensor quantized by its scheme in `schemes` (from
/// [`schemes`]) or copied.
pub(crate) fn write_with_schemes(
    ckpt: &Checkpoint,
    q: &Quantize,
    schemes: &[Option<Scheme>],
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, LayerError> {
    let entries = ckpt.entries();
    let layout = q.format.layout();
    let mut specs = Vec::new();
    let mut summary = Summary::default();
    for (e, scheme) in entries.iter().zip(schemes) {
        summary.bytes_before += e.range.len() as u64;
        match scheme {
            Some(s) => {
                let parts = layout.parts(e, s);
                for (name, dtype, shape) in &parts {
                    let n: usize = shape.iter().product();
                    summary.bytes_after += dtype.storage_bytes(n).unwrap_or(0) as u64;
                    specs.push((name.clone(), *dtype, shape.clone()));
                }
                summary.converted += 1;
            }
            None => {
                if layout.targets(e) {
                    // (Left dense by --ignore: the config says so.)
                    summary.dense_weights.push(e.name.clone());
                }
                summary.kept += 1;
                summary.bytes_after += e.range.len() as u64;
                specs.push((e.name.clone(), e.dtype, e.shape.to_vec()));
            }
        }
    }
    let head = header::build(&specs, ckpt.metadata())?;
    out.write_all(&(head.len() as u64).to_le_bytes())?;
    out.write_all(&head)?;
    // One tensor at a time; a weight is read and quantized a band of rows at a time, any other
    // tensor copied a chunk at a time: memory stays bounded whatever the sizes.
    let mut done = 0u64;
    let mut buf = Vec::new();
    for (e, scheme) in entries.iter().zip(schemes) {
        match scheme {
            Some(s) => layout.quantize(ckpt, e, s, out, &mut |bytes| {
                done += bytes;
                progress(done);
            })?,
            None => {
                for offset in (0..e.range.len()).step_by(CHUNK_BYTES) {
                    buf.resize(CHUNK_BYTES.min(e.range.len() - offset), 0);
                    ckpt.read_into(e, offset, &mut buf)?;
                    out.write_all(&buf)?;
                    done += buf.len() as u64;
                    progress(done);
                }
            }
        }
    }
    Ok(summary)
}
