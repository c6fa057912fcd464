//! `dtcast inspect` of a GGUF file: its version, architecture and parameter count, its metadata
//! (long arrays summarised), its tensors (ggml type, row-major shape, bytes) and the totals per
//! type. Names and strings are printed escaped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use dtcast_layer::gguf::{group_thousands, read_gguf, GgufValue};
use dtcast_layer::text::escape;

use super::CmdError;

/// Whether the file at `path` starts as a GGUF file does (an unreadable one: no).
pub(crate) fn is_gguf_file(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && dtcast_layer::gguf::is_gguf(&magic)
}

pub(crate) fn inspect(path: &Path, out: &mut dyn Write) -> Result<(), CmdError> {
    let gguf = read_gguf(path)?;
    let parameters: u64 = gguf.tensors.iter().map(|t| t.elements()).sum();
    let text = |key: &str| gguf.get(key).and_then(GgufValue::as_text);
    writeln!(
        out,
        "GGUF version {}, {} tensors, {} metadata entries, data aligned to {} bytes",
        gguf.version,
        gguf.tensors.len(),
        gguf.metadata.len(),
        gguf.alignment
    )?;
    let architecture = text("general.architecture").unwrap_or_else(|| "(not given)".to_owned());
    writeln!(
        out,
        "architecture {}, {} parameters",
        escape(&architecture),
        group_thousands(parameters)
    )?;
    writeln!(out)?;
    for (key, value) in &gguf.metadata {
        writeln!(out, "metadata {} = {value}", escape(key))?;
    }
    writeln!(out)?;
    let width = (gguf.tensors.iter())
        .map(|t| escape(&t.name).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "{:<width$}  {:<8} {:<20} {:>14}",
        "name", "type", "shape", "bytes"
    )?;
    let mut totals: BTreeMap<u32, (&str, usize, u64)> = BTreeMap::new();
    for t in &gguf.tensors {
        let shape = format!("{:?}", t.shape());
        writeln!(
            out,
            "{:<width$}  {:<8} {shape:<20} {:>14}",
            escape(&t.name),
            t.ggml.name(),
            t.bytes
        )?;
        let total = totals.entry(t.ggml.id()).or_insert((t.ggml.name(), 0, 0));
        total.1 += 1;
        total.2 += t.bytes;
    }
    writeln!(out)?;
    let mut all = (0, 0);
    for (name, n, bytes) in totals.values() {
        writeln!(out, "{name:<14} {n:>6} tensors {bytes:>16} bytes")?;
        all = (all.0 + n, all.1 + bytes);
    }
    writeln!(
        out,
        "{:<14} {:>6} tensors {:>16} bytes",
        "total", all.0, all.1
    )?;
    Ok(())
}
