//! Cast modes.

use core::fmt;
use core::str::FromStr;

/// How a cast treats values the destination cannot hold exactly.
///
/// ```
/// use dtcast_cast::CastMode;
/// assert_eq!("saturate".parse(), Ok(CastMode::Saturate));
/// assert_eq!(CastMode::default(), CastMode::Torch);
/// assert!("bogus".parse::<CastMode>().unwrap_err().to_string().contains("torch, saturate, checked, exact"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CastMode {
    /// Bit-identical to PyTorch 2.15's CPU cast (`tensor.to(dtype)` on x86-64): float → int wraps
    /// the way x86 truncation does, float64 → bfloat16 / float16 / float8 rounds twice (through
    /// float32), float8 overflow follows torch's per-format rules, NaN bits as torch writes them.
    #[default]
    Torch,
    /// Saturating casts, for quantization. Float → int is XLA's `convert`: clamped to the target
    /// range, NaN → 0. Float → float (and int → float) is dtcast's own rule, not XLA's: one correct
    /// rounding from the source value; a finite value past the largest finite one gives that value
    /// (ml_dtypes' `kSaturate`); ±inf stays ±inf where the format has it and gives the largest
    /// finite value where it does not; a NaN stays a NaN, with its sign where the format's NaN has
    /// one and its top payload bits in float16, bfloat16, float32 and float64. XLA and ml_dtypes' default `astype` differ on every one of those: float8 overflow
    /// gives inf or NaN, ±inf becomes NaN in formats without inf, NaN payloads are canonicalised,
    /// and on CPU float64 → float16 / bfloat16 rounds twice, through float32.
    Saturate,
    /// Torch's values, but an error for any element the destination cannot represent: NaN, ±inf or
    /// out-of-range → integer, a nonzero imaginary part → real, a finite value past the largest
    /// finite → float. Rounding is allowed.
    Checked,
    /// An error for any element whose value changes at all (NumPy's `same_value`).
    Exact,
}

impl CastMode {
    /// Every mode, in the order the CLI lists them.
    pub const ALL: [CastMode; 4] = [
        CastMode::Torch,
        CastMode::Saturate,
        CastMode::Checked,
        CastMode::Exact,
    ];

    /// The mode's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            CastMode::Torch => "torch",
            CastMode::Saturate => "saturate",
            CastMode::Checked => "checked",
            CastMode::Exact => "exact",
        }
    }
}

impl CastMode {
    /// One line on what the mode does (for `--help`).
    ///
    /// ```
    /// use dtcast_cast::CastMode;
    /// assert!(CastMode::Exact.summary().contains("value changes"));
    /// ```
    pub fn summary(self) -> &'static str {
        match self {
            CastMode::Torch => "PyTorch's bytes (float->int wraps, float8 per torch's rules)",
            CastMode::Saturate => {
                "clamp float->int with NaN->0 (XLA), one rounding, overflow saturates to the max finite"
            }
            CastMode::Checked => {
                "error on NaN/inf/out of range->integer, a dropped imaginary part, overflow"
            }
            CastMode::Exact => "error on any element whose value changes",
        }
    }
}

/// How a mode rounds: what the conversion kernels need to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// Torch's rules (Torch, Checked and Exact modes).
    Torch,
    /// One correct rounding, saturating (Saturate mode).
    Saturate,
}

/// What a mode verifies before anything is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Every value the destination can represent, rounding allowed.
    Checked,
    /// Every value unchanged.
    Exact,
}

impl CastMode {
    /// The rounding the kernels apply.
    pub(crate) fn rounding(self) -> Rounding {
        match self {
            CastMode::Saturate => Rounding::Saturate,
            CastMode::Torch | CastMode::Checked | CastMode::Exact => Rounding::Torch,
        }
    }

    /// What is verified before writing, if anything.
    pub(crate) fn verify(self) -> Option<Verify> {
        match self {
            CastMode::Torch | CastMode::Saturate => None,
            CastMode::Checked => Some(Verify::Checked),
            CastMode::Exact => Some(Verify::Exact),
        }
    }
}

impl fmt::Display for CastMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A cast mode name that is not one of `torch`, `saturate`, `checked`, `exact`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseCastModeError(String);

impl fmt::Display for ParseCastModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown cast mode `{}`; expected one of torch, saturate, checked, exact",
            self.0
        )
    }
}

impl std::error::Error for ParseCastModeError {}

impl FromStr for CastMode {
    type Err = ParseCastModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CastMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| ParseCastModeError(s.to_owned()))
    }
}
