//! `convert --quantize`: the weights a layout targets (compressed-tensors': the linear weights)
//! quantized with a scaled scheme and written in that layout ([`super::layout`]); the other
//! tensors are copied as they are. Everything is checked before anything is written.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::Scheme;

use super::convert::{Quantize, Summary};
use super::header;
use super::json::quote;
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
    let entries = ckpt.entries();
    let layout = q.format.layout();
    let reference = layout
        .scheme_name(&q.scheme)
        .map_err(LayerError::Quantized)?;
    let mut ignore = Vec::with_capacity(q.ignore.len());
    for g in &q.ignore {
        let p = glob::Pattern::new(g).map_err(|e| {
            LayerError::Output(format!("--ignore `{g}` is not a valid glob pattern: {e}"))
        })?;
        if !entries.iter().any(|e| p.matches(&e.name)) {
            return Err(LayerError::Output(format!(
                "--ignore `{g}` matches no tensor of the checkpoint"
            )));
        }
        ignore.push(p);
    }
    // Each tensor: its scheme if it is quantized. Everything is checked before anything is
    // written.
    let mut plan: Vec<Option<Scheme>> = Vec::with_capacity(entries.len());
    for e in entries {
        if !layout.targets(e) || ignore.iter().any(|p| p.matches(&e.name)) {
            plan.push(None);
            continue;
        }
        let bad = |reason: String| {
            LayerError::Quantized(format!(
                "`{}`: {reason}; leave it unquantized with --ignore {}",
                quote(&e.name),
                quote(&e.name)
            ))
        };
        if !matches!(e.dtype, DType::Float32 | DType::BFloat16) {
            return Err(bad(format!(
                "it is {}, and quantizing reads float32 or bfloat16 weights (as the references do)",
                e.dtype
            )));
        }
        let scheme = Scheme::named(&reference, e.dtype).map_err(|err| {
            LayerError::Quantized(format!(
                "--quantize `{}`: {err} (or fp8-tensor, fp8-channel, fp8-block, mxfp8, mxfp4, nvfp4)",
                q.scheme
            ))
        })?;
        let (rows, cols) = layout.rows_cols(e);
        scheme
            .scale_count(rows, cols)
            .map_err(|err| bad(err.to_string()))?;
        if scheme.element.is_packed() && cols % 2 != 0 {
            return Err(bad(format!("{cols} columns do not pack two per byte")));
        }
        plan.push(Some(scheme));
    }
    if plan.iter().all(Option::is_none) {
        return Err(LayerError::Quantized(format!(
            "--format {}: no tensor of the checkpoint is one it quantizes ({})",
            q.format,
            layout.targets_described()
        )));
    }
    let mut specs = Vec::new();
    let mut summary = Summary::default();
    for (e, scheme) in entries.iter().zip(&plan) {
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
                summary.kept += 1;
                summary.bytes_after += e.range.len() as u64;
                specs.push((e.name.clone(), e.dtype, e.shape.clone()));
            }
        }
    }
    let head = header::build(&specs, ckpt.metadata())?;
    out.write_all(&(head.len() as u64).to_le_bytes())?;
    out.write_all(&head)?;
    // One tensor at a time: a weight is quantized whole.
    let mut done = 0u64;
    for (e, scheme) in entries.iter().zip(&plan) {
        let bytes = ckpt.read(e)?;
        match scheme {
            Some(s) => {
                let parts = layout
                    .quantize(e, &bytes, s)
                    .map_err(|err| LayerError::Quantized(format!("`{}`: {err}", quote(&e.name))))?;
                for part in parts {
                    out.write_all(&part)?;
                }
            }
            None => out.write_all(&bytes)?,
        }
        done += e.range.len() as u64;
        progress(done);
    }
    Ok(summary)
}
