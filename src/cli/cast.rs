//! `dtcast cast`: raw elements in, converted elements out.

use std::io::{BufRead, Write};

use dtcast_cast::cast_to_vec;
use dtcast_dtype::DType;
use dtcast_layer::output::{check_not_input, write_file, FileMode, Target};

use super::args::CastArgs;
use super::{quote, CmdError};

pub(crate) fn run(
    args: &CastArgs,
    stdin: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    // Check the output before reading anything: a refused target should not cost a read.
    if let Some(path) = &args.output {
        if let Some(input) = &args.input {
            check_not_input(input, path)?;
        }
        Target::file(path, args.force)?;
    }
    let mut input = Vec::new();
    match &args.input {
        Some(path) => {
            input = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?
        }
        None => {
            stdin.read_to_end(&mut input)?;
        }
    }
    let src = if args.hex {
        parse_hex(&input, args.from)?
    } else {
        input
    };
    let converted = cast_to_vec(&src, args.from, args.to, args.mode)?;
    let bytes = if args.hex {
        to_hex(&converted, args.to).into_bytes()
    } else {
        converted
    };
    match &args.output {
        Some(path) => {
            let mode = args
                .input
                .as_deref()
                .map_or(FileMode::UmaskDefault, FileMode::like);
            write_file(path, args.force, mode, |w| {
                w.write_all(&bytes).map_err(|e| e.into())
            })?;
            Ok(())
        }
        None => Ok(out.write_all(&bytes)?),
    }
}

/// Whitespace-separated tokens, each the hex of one element's little-endian bytes.
fn parse_hex(text: &[u8], dtype: DType) -> Result<Vec<u8>, CmdError> {
    let text = std::str::from_utf8(text).map_err(|_| "--hex input is not text")?;
    let width = 2 * dtype.itemsize();
    let mut bytes = Vec::new();
    for (i, token) in text.split_whitespace().enumerate() {
        if token.len() != width || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "--hex token {i} (`{}`) is not one {dtype} element: expected {width} hex digits (its little-endian bytes)",
                quote(token)
            )
            .into());
        }
        for k in (0..width).step_by(2) {
            bytes.push(u8::from_str_radix(&token[k..k + 2], 16)?);
        }
    }
    Ok(bytes)
}

fn to_hex(bytes: &[u8], dtype: DType) -> String {
    let mut s = String::with_capacity(bytes.len() * 2 + bytes.len() / dtype.itemsize() + 1);
    for (i, elem) in bytes.chunks_exact(dtype.itemsize()).enumerate() {
        if i > 0 {
            s.push(' ');
        }
        for b in elem {
            s.push_str(&format!("{b:02x}"));
        }
    }
    s.push('\n');
    s
}
