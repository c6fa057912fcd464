//! Parsing dtype names: canonical names, torch aliases, short forms and library prefixes.

use core::fmt;
use core::str::FromStr;

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
/// Its message lists the accepted names and, when one is close, suggests it:
///
/// ```
/// use dtcast_dtype::DType;
/// let err = "float65".parse::<DType>().unwrap_err();
/// assert!(err.to_string().contains("did you mean `float64`?"));
/// assert!(err.to_string().contains("bfloat16"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDTypeError {
    input: String,
    suggestion: Option<DType>,
}

impl ParseDTypeError {
    /// The rejected input.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The dtype whose name is nearest to the input, if one is near enough to be a likely typo.
    pub fn suggestion(&self) -> Option<DType> {
        self.suggestion
    }
}

impl fmt::Display for ParseDTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown dtype `{}`", self.input)?;
        if let Some(s) = self.suggestion {
            write!(f, "; did you mean `{s}`?")?;
        }
        f.write_str(" Accepted names: ")?;
        for (i, dt) in DType::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(dt.name())?;
        }
        f.write_str("; aliases: ")?;
        let mut first = true;
        for dt in DType::ALL {
            for name in dt.aliases().iter().chain(dt.short_names()) {
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                f.write_str(name)?;
            }
        }
        f.write_str("; any of them may carry a `torch.`, `paddle.` or `np.` prefix")
    }
}

impl std::error::Error for ParseDTypeError {}

impl DType {
    /// Looks a name up without prefixes: canonical name, alias or short form. `None` if unknown.
    fn lookup(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|dt| {
            dt.name() == name || dt.aliases().contains(&name) || dt.short_names().contains(&name)
        })
    }
}

impl FromStr for DType {
    type Err = ParseDTypeError;

    /// Parses a canonical name (`float32`), a torch alias (`float`, `half`, `long`, `cfloat`), a
    /// short form (`f32`, `bf16`, `i64`, `u8`, `c64`, `f8e4m3fn`), each optionally prefixed with
    /// `torch.`, `paddle.` or `np.`/`numpy.`. Names are case-sensitive, as in torch.
    ///
    /// Paddle's `uint16` means uint16 here (it once stood for bfloat16 storage in Paddle).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!("torch.half".parse(), Ok(DType::Float16));
    /// assert_eq!("np.float32".parse(), Ok(DType::Float32));
    /// assert_eq!("paddle.uint16".parse(), Ok(DType::UInt16));
    /// assert_eq!("c64".parse(), Ok(DType::Complex64));
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
            suggestion: suggest(name),
        })
    }
}

/// The dtype with the nearest accepted name (case-insensitive edit distance), if it is at most a
/// third of the name's length away.
fn suggest(name: &str) -> Option<DType> {
    let lower = name.to_ascii_lowercase();
    let lower = lower.as_str();
    let (best, distance) = DType::ALL
        .into_iter()
        .flat_map(|dt| {
            core::iter::once(dt.name())
                .chain(dt.aliases().iter().copied())
                .chain(dt.short_names().iter().copied())
                .map(move |n| (dt, edit_distance(lower, n)))
        })
        .min_by_key(|&(_, d)| d)?;
    (distance <= lower.len().max(3) / 3).then_some(best)
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
            for n in core::iter::once(&dt.name())
                .chain(dt.aliases())
                .chain(dt.short_names())
            {
                assert!(seen.insert(*n), "{n} names two dtypes");
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
            "float8_e4m3".parse::<DType>().unwrap_err().suggestion(),
            Some(DType::Float8E4M3Fn)
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
