//! Parsing dtype names: canonical names, torch aliases, short forms and library prefixes.

use core::fmt;
use core::str::FromStr;

use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;

use crate::dtype::DType;

/// Prefixes stripped before a name is looked up (`torch.float32`, `paddle.int64`, `np.float16`).
const PREFIXES: [&str; 4] = ["torch.", "paddle.", "numpy.", "np."];

/// NumPy spellings that differ from torch's (`np.bool_`, `np.half`, ...).
const NUMPY_EXTRA: [(&str, DType); 3] = [
    ("bool_", DType::Bool),
    ("single", DType::Float32),
    ("csingle", DType::Complex64),
];

/// A dtype name that is not one dtcast accepts.
///
/// Its message is one line; when names are close it suggests them (a typo's nearest name, or
/// every name that starts with what was typed):
///
/// ```
/// use dtcast_dtype::DType;
/// let err = "float65".parse::<DType>().unwrap_err();
/// assert_eq!(err.to_string(), "unknown dtype `float65`; did you mean `float64`?");
/// let err = "float8".parse::<DType>().unwrap_err();
/// assert!(err.to_string().starts_with("unknown dtype `float8`; did you mean one of `float8_e4m3fn`, `float8_e5m2`"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDTypeError {
    input: String,
    suggestions: Vec<DType>,
}

impl ParseDTypeError {
    /// The rejected input.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The dtype whose name is nearest to the input, if one is near enough to be a likely typo.
    pub fn suggestion(&self) -> Option<DType> {
        self.suggestions.first().copied()
    }

    /// Every dtype suggested, best first.
    pub fn suggestions(&self) -> &[DType] {
        &self.suggestions
    }
}

/// The most characters of a rejected name (escaped) that a message quotes.
const QUOTED: usize = 40;

impl fmt::Display for ParseDTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Quoted short and escaped, so that the message stays one short line whatever came in.
        f.write_str("unknown dtype `")?;
        let mut written = 0;
        for c in self.input.chars() {
            let escaped = c.escape_default();
            written += escaped.len();
            if written > QUOTED {
                write!(f, "…` ({} characters)", self.input.chars().count())?;
                break;
            }
            write!(f, "{escaped}")?;
        }
        if written <= QUOTED {
            f.write_str("`")?;
        }
        match self.suggestions.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "; did you mean `{one}`?"),
            many => {
                f.write_str("; did you mean one of ")?;
                for (i, dt) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{dt}`")?;
                }
                f.write_str("?")
            }
        }
    }
}

impl core::error::Error for ParseDTypeError {}

impl DType {
    /// Looks a name up without prefixes: canonical name, alias, short form or safetensors name.
    /// `None` if unknown.
    fn lookup(name: &str) -> Option<DType> {
        DType::ALL
            .into_iter()
            .find(|dt| spellings(*dt).any(|n| n == name))
    }
}

impl FromStr for DType {
    type Err = ParseDTypeError;

    /// Parses a canonical name (`float32`), a torch alias (`float`, `half`, `long`, `cfloat`), a
    /// short form (`f32`, `bf16`, `i64`, `u8`, `c64`, `f8e4m3fn`), each optionally prefixed with
    /// `torch.`, `paddle.` or `np.`/`numpy.`, or a safetensors name (`BF16`, `F8_E4M3`).
    /// Names are case-sensitive, as in torch and safetensors.
    ///
    /// Paddle's `uint16` means uint16 here (it once stood for bfloat16 storage in Paddle).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!("torch.half".parse(), Ok(DType::Float16));
    /// assert_eq!("np.float32".parse(), Ok(DType::Float32));
    /// assert_eq!("paddle.uint16".parse(), Ok(DType::UInt16));
    /// assert_eq!("c64".parse(), Ok(DType::Complex64));
    /// assert_eq!("F8_E4M3".parse(), Ok(DType::Float8E4M3Fn));
    /// assert!("Float32".parse::<DType>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (prefix, name) = PREFIXES
            .iter()
            .find_map(|p| s.strip_prefix(p).map(|rest| (*p, rest)))
            .unwrap_or(("", s));
        let numpy = prefix.starts_with("n");
        let found = DType::lookup(name).or_else(|| {
            numpy
                .then(|| {
                    NUMPY_EXTRA
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, d)| *d)
                })
                .flatten()
        });
        found.ok_or_else(|| ParseDTypeError {
            input: s.to_owned(),
            suggestions: suggest(name),
        })
    }
}

/// Every name a dtype is known by (canonical, aliases, short forms, safetensors).
fn spellings(dt: DType) -> impl Iterator<Item = &'static str> {
    core::iter::once(dt.name())
        .chain(dt.aliases().iter().copied())
        .chain(dt.short_names().iter().copied())
        .chain(dt.safetensors_name())
}

/// At most this many suggestions.
const MAX_SUGGESTIONS: usize = 6;

/// The dtypes to suggest for an unknown name (case-insensitive): every dtype with a name that
/// starts with it (`float8` → the float8 formats), else those at the smallest edit distance if it
/// is at most a third of the name's length.
fn suggest(name: &str) -> Vec<DType> {
    // No name is near one this long (and edit distances over it would be slow).
    if name.len() > QUOTED {
        return Vec::new();
    }
    let lower = name.to_ascii_lowercase();
    let lower = lower.as_str();
    let first = |keep: &dyn Fn(DType) -> bool| -> Vec<DType> {
        DType::ALL
            .into_iter()
            .filter(|dt| keep(*dt))
            .take(MAX_SUGGESTIONS)
            .collect()
    };
    let exact = first(&|dt| spellings(dt).any(|n| n.eq_ignore_ascii_case(lower)));
    if !exact.is_empty() {
        return exact;
    }
    if lower.len() >= 2 {
        let prefixed =
            first(&|dt| spellings(dt).any(|n| n.to_ascii_lowercase().starts_with(lower)));
        if !prefixed.is_empty() {
            return prefixed;
        }
    }
    let distance = |dt: DType| {
        spellings(dt)
            .map(|n| edit_distance(lower, &n.to_ascii_lowercase()))
            .min()
            .unwrap_or(usize::MAX)
    };
    let best = DType::ALL
        .into_iter()
        .map(distance)
        .min()
        .unwrap_or(usize::MAX);
    if best <= lower.len().max(3) / 3 {
        first(&|dt| distance(dt) == best)
    } else {
        Vec::new()
    }
}

/// Levenshtein distance over bytes (names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_round_trips() {
        for dt in DType::ALL {
            assert_eq!(dt.name().parse(), Ok(dt));
            assert_eq!(dt.to_string().parse(), Ok(dt));
            for n in dt.aliases().iter().chain(dt.short_names()) {
                assert_eq!(n.parse(), Ok(dt), "{n}");
                for p in PREFIXES {
                    assert_eq!(format!("{p}{n}").parse(), Ok(dt), "{p}{n}");
                }
            }
        }
    }

    #[test]
    fn no_name_is_claimed_twice() {
        let mut seen = std::collections::HashSet::new();
        for dt in DType::ALL {
            for n in spellings(dt) {
                assert!(seen.insert(n), "{n} names two dtypes");
            }
        }
    }

    #[test]
    fn torch_aliases_from_get_dtype_names() {
        // c10 getDtypeNames: the only aliases torch has.
        for (alias, dt) in [
            ("half", DType::Float16),
            ("float", DType::Float32),
            ("double", DType::Float64),
            ("short", DType::Int16),
            ("int", DType::Int32),
            ("long", DType::Int64),
            ("chalf", DType::Complex32),
            ("cfloat", DType::Complex64),
            ("cdouble", DType::Complex128),
        ] {
            assert_eq!(alias.parse(), Ok(dt));
        }
        // torch has no `byte` or `char` alias.
        assert!("byte".parse::<DType>().is_err());
        assert!("char".parse::<DType>().is_err());
    }

    #[test]
    fn safetensors_names_parse_case_sensitively() {
        for dt in DType::ALL {
            if let Some(st) = dt.safetensors_name() {
                assert_eq!(st.parse(), Ok(dt), "{st}");
                assert_eq!(DType::from_safetensors_name(st), Some(dt));
            }
        }
        assert_eq!("BF16".parse(), Ok(DType::BFloat16));
        assert_eq!("F8_E8M0".parse(), Ok(DType::Float8E8M0Fnu));
        assert_eq!(
            "f8_e4m3".parse::<DType>().unwrap_err().suggestion(),
            Some(DType::Float8E4M3Fn)
        );
    }

    #[test]
    fn messages_are_one_line() {
        let long = "x".repeat(100_000);
        for bad in [
            "float8",
            "float65",
            "",
            "zzzzzzzz",
            "int",
            "BF17",
            "a\nb",
            long.as_str(),
        ] {
            if let Err(e) = bad.parse::<DType>() {
                let m = e.to_string();
                assert!(!m.contains('\n') && m.len() < 200, "{m}");
            }
        }
        assert_eq!(
            "a\nb".parse::<DType>().unwrap_err().to_string(),
            "unknown dtype `a\\nb`"
        );
        assert_eq!(
            long.parse::<DType>().unwrap_err().to_string(),
            format!("unknown dtype `{}…` (100000 characters)", "x".repeat(40))
        );
    }

    #[test]
    fn numpy_spellings_need_the_prefix() {
        assert_eq!("np.bool_".parse(), Ok(DType::Bool));
        assert!("bool_".parse::<DType>().is_err());
    }

    #[test]
    fn suggestions_for_typos() {
        let e = "float65".parse::<DType>().unwrap_err();
        assert_eq!(e.suggestion(), Some(DType::Float64));
        assert_eq!(e.input(), "float65");
        assert_eq!(
            "Float32".parse::<DType>().unwrap_err().suggestion(),
            Some(DType::Float32)
        );
        assert_eq!(
            "bfloat61".parse::<DType>().unwrap_err().suggestion(),
            Some(DType::BFloat16)
        );
        assert_eq!(
            "float8_e4m3f".parse::<DType>().unwrap_err().suggestion(),
            Some(DType::Float8E4M3Fn)
        );
        assert_eq!(
            "float8".parse::<DType>().unwrap_err().suggestions(),
            [
                DType::Float8E4M3Fn,
                DType::Float8E5M2,
                DType::Float8E4M3Fnuz,
                DType::Float8E5M2Fnuz,
                DType::Float8E8M0Fnu,
                DType::Float8E4M3
            ]
        );
        assert_eq!(
            "bf".parse::<DType>().unwrap_err().suggestions(),
            [DType::BFloat16]
        );
        assert_eq!(
            "FLOAT32".parse::<DType>().unwrap_err().suggestions(),
            [DType::Float32]
        );
        assert_eq!("zzzzzzzz".parse::<DType>().unwrap_err().suggestion(), None);
        assert_eq!("".parse::<DType>().unwrap_err().suggestion(), None);
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
