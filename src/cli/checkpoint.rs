//! `dtcast inspect` and `dtcast convert`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use dtcast_dtype::DType;
use dtcast_layer::checkpoint::{
    convert_dir, convert_file, convert_index, detect_quantized, model_weights, read_config,
    unread_quantized, Checkpoint, ConvertOptions, Entry, Quantize, QuantizedFormat,
    QuantizedWeight, ShardedCheckpoint, Summary, QUANTIZE_SCHEMES,
};

use dtcast_layer::text::escape;

use super::args::{ConvertArgs, InspectArgs};
use super::CmdError;

pub(crate) fn inspect(args: &InspectArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    if super::gguf::is_gguf_file(&args.file) {
        return super::gguf::inspect(&args.file, out);
    }
    // A model directory: its weights, as `convert` finds them.
    let file = if args.file.is_dir() {
        model_weights(&args.file)?
    } else {
        args.file.clone()
    };
    if is_index(&file) {
        let ck = ShardedCheckpoint::open(&file)?;
        let shards: Vec<(&str, &Checkpoint)> =
            ck.shards().iter().map(|(n, c)| (n.as_str(), c)).collect();
        print_inspection(&shards, &[], out)?;
        let found = read_config(file.parent()).and_then(|c| ck.quantized_weights(c.as_ref()));
        // Each weight in the shard that stores its elements, its scales' shard named where
        // another shard stores them.
        let shards = &shards;
        let weights = found.as_ref().map(|per_shard| {
            (shards.iter().zip(per_shard))
                .flat_map(|(&(name, _), f)| {
                    f.written().map(move |w| {
                        let scales =
                            (w.scales.checked_sub(f.own)).map(|b| shards[f.borrowed_from[b]].0);
                        let place = match scales {
                            Some(other) => format!(" [{name}, scales in {other}]"),
                            None => format!(" [{name}]"),
                        };
                        (place, &f.entries[..], w)
                    })
                })
                .collect()
        });
        print_quantized(weights.map_err(|e| e.to_string()), out)?;
        return print_unread(ck.shards().iter().map(|(_, c)| c.entries()), out);
    }
    let ck = Checkpoint::open(&file)?;
    print_inspection(&[("", &ck)], ck.metadata(), out)?;
    let found = read_config(file.parent()).and_then(|c| detect_quantized(&ck, c.as_ref()));
    let weights = found.as_ref().map(|w| {
        (w.iter())
            .map(|w| (String::new(), ck.entries(), w))
            .collect()
    });
    print_quantized(weights.map_err(|e| e.to_string()), out)?;
    print_unread([ck.entries()], out)
}

/// The modules quantized in a layout dtcast does not read, each with its layout.
fn print_unread<'a>(
    shards: impl IntoIterator<Item = &'a [Entry]>,
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    let unread: Vec<(&str, &str)> = shards.into_iter().flat_map(unread_quantized).collect();
    if !unread.is_empty() {
        writeln!(
            out,
            "quantized in a layout dtcast does not read: {} modules; `convert` leaves them only \
             with --keep 'MODULE.*'",
            unread.len()
        )?;
        for (module, layout) in unread {
            writeln!(out, "  {}  {layout}", escape(module))?;
        }
    }
    Ok(())
}

/// A quantized weight to list: where it is stored (` [shard]`, empty for a single file), the
/// tensors its indices are into, and the weight.
type Listed<'a> = (String, &'a [Entry], &'a QuantizedWeight);

/// The quantized weights of a checkpoint (as the `config.json` beside it says): scheme, element
/// and scale dtypes, and what shares a scale; or why the layout cannot be told.
fn print_quantized(
    found: Result<Vec<Listed>, String>,
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    use dtcast::layer::checkpoint::WeightScheme;
    use dtcast::quant::{Granularity, IntGroups};
    let weights = match found {
        Ok(w) if w.is_empty() => return Ok(()),
        Ok(w) => w,
        Err(e) => {
            writeln!(out, "quantized: cannot be read: {}", escape(&e))?;
            return Ok(());
        }
    };
    let mut schemes: Vec<&str> = Vec::new();
    for (_, _, w) in &weights {
        if !schemes.contains(&w.scheme_name) {
            schemes.push(w.scheme_name);
        }
    }
    writeln!(
        out,
        "quantized: {} weights ({}); `convert --dtype bf16` dequantizes them",
        weights.len(),
        schemes.join(", ")
    )?;
    for (place, entries, w) in &weights {
        let scales = &entries[w.scales];
        let described = match &w.scheme {
            WeightScheme::Scaled(scheme) => {
                let shared = match scheme.granularity {
                    Granularity::Tensor => "one scale".to_owned(),
                    Granularity::Channel => "a scale per row".to_owned(),
                    Granularity::Group(k) => format!("a scale per {k} elements of a row"),
                    Granularity::Block(r, c) => format!("a scale per {r}x{c} block"),
                };
                format!(
                    "{} elements, {} scales {:?} ({shared}){}",
                    scheme.element,
                    scales.dtype,
                    scales.shape,
                    if w.global.is_some() {
                        ", a global scale"
                    } else {
                        ""
                    }
                )
            }
            WeightScheme::Integer {
                scheme,
                group_index,
                ..
            } => {
                let shared = match scheme.groups {
                    IntGroups::Tensor => "one scale".to_owned(),
                    IntGroups::Channel => "a scale per row".to_owned(),
                    IntGroups::Size(k) => format!("a scale per {k} elements of a row"),
                };
                format!(
                    "{}-bit integers {}, {} scales {:?} ({shared}{})",
                    scheme.bits,
                    if scheme.stores_zeros() {
                        "with zero points"
                    } else {
                        "symmetric"
                    },
                    scales.dtype,
                    scales.shape,
                    if group_index.is_some() {
                        "; groups by its g_idx"
                    } else {
                        ""
                    }
                )
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "  {}{}  {}  {described}",
            escape(&w.name),
            escape(place),
            w.scheme_name,
        )?;
    }
    Ok(())
}

fn is_index(path: &std::path::Path) -> bool {
    path.to_string_lossy().ends_with(".json")
}

/// The tensors of every shard (with a shard heading when there is more than a single file), the
/// totals per dtype and overall, and the metadata.
fn print_inspection(
    shards: &[(&str, &Checkpoint)],
    metadata: &[(String, String)],
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    let mut totals: BTreeMap<DType, (usize, usize)> = BTreeMap::new();
    let width = shards
        .iter()
        .flat_map(|(_, c)| c.entries())
        .map(|e| escape(&e.name).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let sharded = shards.iter().any(|(n, _)| !n.is_empty());
    for (name, ck) in shards {
        if sharded {
            let bytes: usize = ck.entries().iter().map(|e| e.range.len()).sum();
            writeln!(
                out,
                "shard {}: {} tensors, {bytes} bytes",
                escape(name),
                ck.entries().len()
            )?;
        }
        writeln!(
            out,
            "{:<width$}  {:<14} {:<20} {:>14}",
            "name", "dtype", "shape", "bytes"
        )?;
        for e in ck.entries() {
            writeln!(
                out,
                "{:<width$}  {:<14} {:<20} {:>14}",
                escape(&e.name),
                e.dtype.name(),
                format!("{:?}", e.shape),
                e.range.len()
            )?;
            let t = totals.entry(e.dtype).or_default();
            t.0 += 1;
            t.1 += e.range.len();
        }
        writeln!(out)?;
    }
    let mut all = (0, 0);
    for (dt, (n, bytes)) in &totals {
        writeln!(out, "{:<14} {n:>6} tensors {bytes:>16} bytes", dt.name())?;
        all = (all.0 + n, all.1 + bytes);
    }
    let files = if sharded {
        format!(" in {} shards", shards.len())
    } else {
        String::new()
    };
    writeln!(
        out,
        "{:<14} {:>6} tensors {:>16} bytes{files}",
        "total", all.0, all.1
    )?;
    for (k, v) in metadata {
        writeln!(out, "metadata {} = {}", escape(k), escape(v))?;
    }
    Ok(())
}

/// `--quantize` with its `--format`, `--scale-rounding` and `--ignore`.
fn quantize_options(args: &ConvertArgs, scheme: &str) -> Result<Quantize, CmdError> {
    let format: QuantizedFormat = args.format.parse()?;
    let known: Vec<&str> = QUANTIZE_SCHEMES.iter().map(|(cli, _)| *cli).collect();
    if !known.contains(&scheme) {
        return Err(format!("--quantize {scheme}: the schemes are {}", known.join(", ")).into());
    }
    let scheme = match (&args.scale_rounding, scheme) {
        (None, s) => s.to_owned(),
        (Some(r), "mxfp8" | "mxfp4") => {
            if !["floor", "ceil", "even", "rceil"].contains(&r.as_str()) {
                return Err(format!(
                    "--scale-rounding {r}: the rules are floor, ceil, even, rceil"
                )
                .into());
            }
            format!("ao_{}_{r}", scheme.replace('-', ""))
        }
        (Some(_), s) => {
            return Err(format!("--scale-rounding applies to mxfp8 and mxfp4, not {s}").into())
        }
    };
    // A scheme the format cannot store is refused before anything is read.
    format.scheme_name(&scheme)?;
    Ok(Quantize {
        scheme,
        ignore: args.ignore.clone(),
        format,
        group_size: args.group_size,
    })
}

pub(crate) fn convert(args: &ConvertArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let quantize = args
        .quantize
        .as_ref()
        .map(|scheme| quantize_options(args, scheme))
        .transpose()?;
    let options = ConvertOptions {
        dtype: args.dtype.unwrap_or(DType::BFloat16),
        all: args.all,
        keep: args.keep.clone(),
        mode: args.mode,
        device: args.device,
        force: args.force,
        quantize,
    };
    // A progress bar on stderr when it is a terminal; nothing otherwise (scripts, CI).
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let summary: Summary = if args.input.is_dir() {
        convert_dir(&args.input, &args.output, &options, &progress)?
    } else if is_index(&args.input) {
        convert_index(&args.input, &args.output, &options, &progress)?
    } else {
        convert_file(&args.input, &args.output, &options, &progress)?
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let what = match &args.quantize {
        Some(scheme) => format!(
            "quantized {} weights with {scheme} ({})",
            summary.converted, args.format
        ),
        None => {
            let mut dequantized = if summary.dequantized > 0 {
                format!(", dequantized {} quantized weights", summary.dequantized)
            } else {
                String::new()
            };
            if summary.activation_dropped > 0 {
                // Their quantization config is gone with the weights' (a dense model has no
                // use for them); said, since they are tensors of the input.
                dequantized += &format!(
                    " (and dropped their {} activation quantization parameters)",
                    summary.activation_dropped
                );
            }
            if summary.attention_dropped > 0 {
                dequantized += &format!(
                    ", dropped {} key-value cache (attention) quantization parameters",
                    summary.attention_dropped
                );
            }
            if !summary.kept_quantized.is_empty() {
                dequantized += &format!(
                    ", kept {} quantized weights quantized",
                    summary.kept_quantized.len()
                );
            }
            let dtype = args.dtype.unwrap_or(DType::BFloat16);
            format!(
                "converted {} tensors to {dtype}{dequantized}",
                summary.converted
            )
        }
    };
    writeln!(
        out,
        "{what}, kept {}; {} -> {} bytes in {:.2} s; wrote {}",
        summary.kept,
        summary.bytes_before,
        summary.bytes_after,
        summary.seconds,
        escape(&args.output.display().to_string())
    )?;
    if !summary.not_copied.is_empty() {
        let skipped: Vec<String> = (summary.not_copied.iter())
            .map(|(name, why)| format!("{} ({why})", escape(&name.display().to_string())))
            .collect();
        writeln!(out, "not copied: {}", skipped.join(", "))?;
    }
    Ok(())
}
