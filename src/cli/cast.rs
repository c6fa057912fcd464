//! `dtcast cast`: raw elements in, converted elements out.

use std::io::{BufRead, Write};

use dtcast_cast::cast_to_vec;
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
    let src = if args.hex {
        parse_hex(&input, args.from)?
    } else {
        input
    };
    let converted = cast_to_vec(&src, args.from, args.to, args.mode)?;
    let bytes = if args.hex {
        to_hex(&converted, args.to)?.into_bytes()
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

/// Hex digits of one `--hex` token: two per byte, or for a packed dtype the element's bits
/// (one digit for float4/int4/int2/int1, two for float6).
fn token_width(dtype: DType) -> usize {
    dtype.bits().div_ceil(4)
}

/// Whitespace-separated tokens, each the hex of one element's little-endian bytes (or, for a
/// packed dtype, of its bits); packed dtypes are packed after reading.
fn parse_hex(text: &[u8], dtype: DType) -> Result<Vec<u8>, CmdError> {
    let text = std::str::from_utf8(text).map_err(|_| "--hex input is not text")?;
    let width = token_width(dtype);
    let what = if dtype.is_packed() {
        format!("{width} hex digit(s) (its {} bits)", dtype.bits())
    } else {
        format!("{width} hex digits (its little-endian bytes)")
    };
    let mut bytes = Vec::new();
    for (i, token) in text.split_whitespace().enumerate() {
        let digits_ok = token.len() == width && token.bytes().all(|b| b.is_ascii_hexdigit());
        let value = if digits_ok && dtype.is_packed() {
            u8::from_str_radix(token, 16)
                .ok()
                .filter(|v| u32::from(*v) >> dtype.bits() == 0)
        } else {
            None
        };
        if !digits_ok || (dtype.is_packed() && value.is_none()) {
            return Err(format!(
                "--hex token {i} (`{}`) is not one {dtype} element: expected {what}",
                quote(token)
            )
            .into());
        }
        match value {
            Some(code) => bytes.push(code),
            None => {
                for k in (0..width).step_by(2) {
                    bytes.push(u8::from_str_radix(&token[k..k + 2], 16)?);
                }
            }
        }
    }
    if !dtype.is_packed() {
        return Ok(bytes);
    }
    let storage = dtype.storage_bytes(bytes.len()).map_err(|e| {
        format!(
            "--hex: {e}; packed {dtype} input needs a multiple of {} values",
            8 / gcd(8, dtype.bits())
        )
    })?;
    let mut packed = vec![0u8; storage];
    packing::pack(dtype, &bytes, &mut packed)?;
    Ok(packed)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn to_hex(bytes: &[u8], dtype: DType) -> Result<String, CmdError> {
    let width = token_width(dtype);
    let elements: Vec<Vec<u8>> = if dtype.is_packed() {
        let n = dtype.elements_in(bytes.len()).unwrap_or(0);
        let mut codes = vec![0u8; n];
        packing::unpack(dtype, bytes, &mut codes)?;
        codes.into_iter().map(|c| vec![c]).collect()
    } else {
        bytes.chunks_exact(width / 2).map(<[u8]>::to_vec).collect()
    };
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
