//! `dtcast cast`: raw elements in, converted elements out.

use std::io::{BufRead, Write};

use dtcast_cast::{cast_to_vec, CastMode};
use dtcast_dtype::{packing, DType};
use dtcast_layer::input::Inputs;
use dtcast_layer::output::{write_file, FileMode, Target};

use super::args::CastArgs;
use super::{quote, CmdError};

pub(crate) fn run(
    args: &CastArgs,
    stdin: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), CmdError> {
    // Check the output before reading anything: a refused target should not cost a read.
    if let Some(path) = &args.output {
        let target = Target::file(path, args.force)?;
        let mut inputs = Inputs::new();
        match &args.input {
            Some(input) => inputs
                .add_path(input)
                .map_err(|e| format!("reading {}: {e}", input.display()))?,
            // `cast -o in.f32 --force < in.f32`: stdin is the file the output would replace.
            None => inputs.add_stdin(),
        }
        target.refuse_inputs(&inputs)?;
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
    let bytes = if args.hex {
        cast_hex(&input, args.from, args.to, args.mode)?.into_bytes()
    } else {
        cast_to_vec(&input, args.from, args.to, args.mode)?
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

/// Hex digits of one `--hex` output token: two per byte, or for a packed dtype the element's
/// bits (one digit for float4/int4/int2/int1, two for float6).
fn token_width(dtype: DType) -> usize {
    dtype.bits().div_ceil(4)
}

/// `--hex`: the tokens are elements, whatever their dtype, so nothing is packed and any number
/// of them casts. A packed side needs whole bytes; the elements are padded to a multiple of 8
/// with copies of the first (whose result, or error, is the first element's anyway), and only
/// the given elements are printed.
fn cast_hex(text: &[u8], from: DType, to: DType, mode: CastMode) -> Result<String, CmdError> {
    let mut elements = parse_hex(text, from)?;
    let n = elements.len();
    if n > 0 && (from.is_packed() || to.is_packed()) {
        let first = elements[0].clone();
        elements.resize(n.next_multiple_of(8), first);
    }
    let src = if from.is_packed() {
        let codes: Vec<u8> = elements.iter().map(|e| e[0]).collect();
        let mut packed = vec![0u8; from.storage_bytes(codes.len())?];
        packing::pack(from, &codes, &mut packed)?;
        packed
    } else {
        elements.concat()
    };
    let converted = cast_to_vec(&src, from, to, mode)?;
    to_hex(&converted, to, n)
}

/// Whitespace-separated tokens, each one element: the hex of its little-endian bytes (exactly
/// two digits a byte), or for a packed dtype its code, in any number of digits (`07` is float4
/// code 7) as long as the value fits the element's bits.
fn parse_hex(text: &[u8], dtype: DType) -> Result<Vec<Vec<u8>>, CmdError> {
    let text = std::str::from_utf8(text).map_err(|_| "--hex input is not text")?;
    let width = token_width(dtype);
    let bits = dtype.bits();
    let what = if dtype.is_packed() {
        format!(
            "a code of {bits} bits, 0 to {:x} in hex",
            (1u32 << bits) - 1
        )
    } else {
        format!("{width} hex digits (its little-endian bytes)")
    };
    let mut elements = Vec::new();
    for (i, token) in text.split_whitespace().enumerate() {
        let hex = token.bytes().all(|b| b.is_ascii_hexdigit());
        let element = if !hex {
            None
        } else if dtype.is_packed() {
            let digits = token.trim_start_matches('0');
            u32::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
                .ok()
                .filter(|v| v >> bits == 0)
                .map(|v| vec![v as u8])
        } else if token.len() == width {
            (0..width)
                .step_by(2)
                .map(|k| u8::from_str_radix(&token[k..k + 2], 16).ok())
                .collect()
        } else {
            None
        };
        match element {
            Some(e) => elements.push(e),
            None => {
                return Err(format!(
                    "--hex token {i} (`{}`) is not one {dtype} element: expected {what}",
                    quote(token)
                )
                .into())
            }
        }
    }
    Ok(elements)
}

/// The first `n` elements of `bytes` as `--hex` tokens.
fn to_hex(bytes: &[u8], dtype: DType, n: usize) -> Result<String, CmdError> {
    let width = token_width(dtype);
    let mut elements: Vec<Vec<u8>> = if dtype.is_packed() {
        let count = dtype.elements_in(bytes.len()).unwrap_or(0);
        let mut codes = vec![0u8; count];
        packing::unpack(dtype, bytes, &mut codes)?;
        codes.into_iter().map(|c| vec![c]).collect()
    } else {
        bytes.chunks_exact(width / 2).map(<[u8]>::to_vec).collect()
    };
    elements.truncate(n);
    let mut s = String::with_capacity(elements.len() * (width + 1) + 1);
    for (i, elem) in elements.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        if dtype.is_packed() {
            s.push_str(&format!("{:0width$x}", elem[0]));
        } else {
            for b in elem {
                s.push_str(&format!("{b:02x}"));
            }
        }
    }
    s.push('\n');
    Ok(s)
}
