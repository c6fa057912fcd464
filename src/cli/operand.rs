//! Operand literals: the spelling of the reference fixtures and of `dtcast promote`.

use dtcast_dtype::DType;
use dtcast_promote::{Operand, ScalarKind};

use super::quote;

/// Parses one operand: `int8[2]` / `float32[2,3]` / `int8[0]` (a tensor with dimensions),
/// `int8[]` (a 0-dim tensor), `True`/`False`, an integer (`3`, `-7`: an
/// [`Operand::IntLiteral`], value kept), a float (`2.5`, `1e3`, `inf`, `nan`) or a complex
/// literal (`(1+2j)`, `2j`, `(-1.5e3-0.5j)`).
///
/// ```
/// use dtcast::cli::parse_operand;
/// use dtcast::{DType, Operand, ScalarKind};
/// assert_eq!(parse_operand("int8[2]"), Ok(Operand::Tensor(DType::Int8)));
/// assert_eq!(parse_operand("f16[]"), Ok(Operand::ZeroDim(DType::Float16)));
/// assert_eq!(parse_operand("(1+2j)"), Ok(Operand::WrappedScalar(ScalarKind::Complex)));
/// assert_eq!(parse_operand("-3"), Ok(Operand::IntLiteral(-3)));
/// assert!(parse_operand("int8[2").is_err());
/// ```
pub fn parse_operand(s: &str) -> Result<Operand, String> {
    if let Some(open) = s.find('[') {
        return parse_tensor(s, open);
    }
    if is_int(s) {
        // Python's ints are unbounded; dtcast keeps 128 bits, beyond every dtype's range.
        return s.parse::<i128>().map(Operand::IntLiteral).map_err(|_| {
            format!(
                "invalid operand `{}`: integer literals must lie within ±1.7e38 (128 bits)",
                quote(s)
            )
        });
    }
    let kind = match s {
        "True" | "False" => Some(ScalarKind::Bool),
        _ if is_float(s) => Some(ScalarKind::Float),
        _ if is_complex(s) => Some(ScalarKind::Complex),
        _ => None,
    };
    kind.map(Operand::WrappedScalar).ok_or_else(|| {
        format!(
            "invalid operand `{}`: expected a tensor (`int8[2]`, `float32[2,3]`), a 0-dim tensor (`int8[]`), \
             True/False, an integer (`3`), a float (`2.5`, `1e3`, `inf`, `nan`) or a complex literal (`(1+2j)`, `2j`)",
            quote(s)
        )
    })
}

fn parse_tensor(s: &str, open: usize) -> Result<Operand, String> {
    let name = &s[..open];
    let dtype: DType = name
        .parse()
        .map_err(|e| format!("invalid operand `{}`: {e}", quote(s)))?;
    let dims = s[open + 1..]
        .strip_suffix(']')
        .ok_or_else(|| {
            format!(
                "invalid operand `{}`: a tensor's shape must end with `]`, as in `{}[2]`",
                quote(s),
                quote(name)
            )
        })?
        .trim();
    if dims.is_empty() {
        return Ok(Operand::ZeroDim(dtype));
    }
    for d in dims.split(',') {
        d.trim().parse::<usize>().map_err(|_| {
            format!(
                "invalid operand `{}`: `{}` is not a dimension (expected non-negative integers, as in `{}[2,3]`)",
                quote(s),
                quote(d.trim()),
                quote(name)
            )
        })?;
    }
    Ok(Operand::Tensor(dtype))
}

fn is_int(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_float(s: &str) -> bool {
    // Rust's grammar is Python's for these literals (`inf`, `nan`, `1e3`, `.5`, `5.`), but Rust
    // also reads `infinity` in any case; Python's `float()` does too, so that is fine.
    s.parse::<f64>().is_ok()
}

/// A Python complex literal: `2j`, `(1+2j)`, `(1.5e-3-2j)`, `-2J`.
fn is_complex(s: &str) -> bool {
    let body = match s.strip_prefix('(') {
        Some(rest) => match rest.strip_suffix(')') {
            Some(inner) => inner.trim(),
            None => return false,
        },
        None => s,
    };
    let Some(body) = body.strip_suffix(['j', 'J']) else {
        return false;
    };
    if is_float(body) || is_int(body) {
        return true;
    }
    // real ± imag: split at a sign that does not start the string or follow an exponent.
    let bytes = body.as_bytes();
    (1..bytes.len()).rev().any(|i| {
        matches!(bytes[i], b'+' | b'-')
            && !matches!(bytes[i - 1], b'e' | b'E')
            && is_float(&body[..i])
            && is_float(&body[i + 1..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars() {
        let kind = |s| match parse_operand(s) {
            Ok(Operand::WrappedScalar(k)) => Some(k),
            Ok(Operand::IntLiteral(_)) => Some(ScalarKind::Int),
            _ => None,
        };
        assert_eq!(kind("True"), Some(ScalarKind::Bool));
        assert_eq!(kind("False"), Some(ScalarKind::Bool));
        assert_eq!(kind("300"), Some(ScalarKind::Int));
        assert_eq!(kind("2.5"), Some(ScalarKind::Float));
        assert_eq!(kind("1e3"), Some(ScalarKind::Float));
        assert_eq!(kind("-inf"), Some(ScalarKind::Float));
        assert_eq!(kind("nan"), Some(ScalarKind::Float));
        assert_eq!(kind("2j"), Some(ScalarKind::Complex));
        assert_eq!(kind("(1+2j)"), Some(ScalarKind::Complex));
        assert_eq!(kind("(1e-3-2.5j)"), Some(ScalarKind::Complex));
        assert_eq!(kind("(1+2j"), None);
        assert_eq!(kind("j"), None);
        assert_eq!(kind("(1+j)"), None);
        assert_eq!(kind("true"), None);
        assert_eq!(parse_operand("-300"), Ok(Operand::IntLiteral(-300)));
        assert_eq!(
            parse_operand("170141183460469231731687303715884105727"),
            Ok(Operand::IntLiteral(i128::MAX))
        );
        assert!(parse_operand("170141183460469231731687303715884105728")
            .unwrap_err()
            .contains("128 bits"));
        assert_eq!(kind(""), None);
    }

    #[test]
    fn tensors() {
        assert_eq!(parse_operand("int8[2]"), Ok(Operand::Tensor(DType::Int8)));
        assert_eq!(parse_operand("int8[0]"), Ok(Operand::Tensor(DType::Int8)));
        assert_eq!(
            parse_operand("torch.float32[2, 3]"),
            Ok(Operand::Tensor(DType::Float32))
        );
        assert_eq!(parse_operand("bool[]"), Ok(Operand::ZeroDim(DType::Bool)));
        assert!(parse_operand("int8[x]")
            .unwrap_err()
            .contains("`x` is not a dimension"));
        assert!(parse_operand("float65[2]")
            .unwrap_err()
            .contains("did you mean `float64`?"));
        assert!(parse_operand("int8[2]]").is_err());
    }
}
