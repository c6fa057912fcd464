//! [`Isa`]: which set of kernels a cast runs, chosen once and passed down to every kernel and
//! screen.

use core::fmt;
use core::str::FromStr;

/// A set of cast kernels: the scalar rules, or SIMD kernels for the hot pairs built for one
/// instruction set (pairs without a SIMD kernel use the scalar rules in every set).
///
/// ```
/// use dtcast_cast::{isa, Isa};
/// assert!(Isa::Portable.is_available()); // plain Rust: every machine
/// assert!(isa().is_available());
/// assert_eq!("avx2".parse::<Isa>(), Ok(Isa::Avx2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Isa {
    /// The scalar rules alone: the reference every other set is tested against.
    Scalar,
    /// The SIMD algorithms in plain Rust that LLVM vectorises for the target (SSE2 on baseline
    /// x86-64, NEON on aarch64, SIMD128 on wasm): what CPUs without a dedicated set run.
    Portable,
    /// x86-64 AVX2 + F16C.
    Avx2,
    /// x86-64 AVX-512 (F, BW, VL, DQ).
    Avx512,
}

impl Isa {
    /// Every set, worst to best.
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The name the CLI uses (`scalar`, `portable`, `avx2`, `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this machine (and this build) can run the set.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar | Isa::Portable => true,
            Isa::Avx2 => crate::kernels::avx2_available(),
            Isa::Avx512 => crate::kernels::avx512_available(),
        }
    }
}

/// The sets this machine can run, worst to best.
pub fn isas() -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|i| i.is_available()).collect()
}

/// The set [`isa`] names: decided on first use (or by [`pin_isa`]) and never changed after.
static CHOSEN: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();

/// The best set this machine runs (what [`cast`](crate::cast) uses), detected once — or the set
/// [`pin_isa`] chose.
pub fn isa() -> Isa {
    *CHOSEN.get_or_init(|| isas().last().copied().unwrap_or(Isa::Scalar))
}

/// Makes [`isa`] name `set` for the rest of the process, so that [`cast`](crate::cast) and
/// everything built on it (dtcast-quant's one-pass forms, which need AVX-512, among them) run
/// what a machine whose best set is `set` runs: for measuring that machine's path on this one
/// (`dtcast bench --scheme … --backend avx2`). Call it before the first cast.
///
/// Errors if this machine cannot run `set`, or if [`isa`] already named another set (a cast
/// has run).
///
/// ```
/// use dtcast_cast::{isa, pin_isa, Isa};
/// pin_isa(Isa::Portable)?; // every machine runs it
/// assert_eq!(isa(), Isa::Portable);
/// assert!(pin_isa(Isa::Scalar).is_err()); // decided already
/// # Ok::<(), dtcast_cast::PinIsaError>(())
/// ```
pub fn pin_isa(set: Isa) -> Result<(), PinIsaError> {
    if !set.is_available() {
        return Err(PinIsaError::Unavailable(set));
    }
    let chosen = *CHOSEN.get_or_init(|| set);
    if chosen == set {
        Ok(())
    } else {
        Err(PinIsaError::Decided(chosen))
    }
}

/// Why [`pin_isa`] could not pin a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinIsaError {
    /// This machine (or this build) cannot run the set.
    Unavailable(Isa),
    /// [`isa`] has named this other set already.
    Decided(Isa),
}

impl fmt::Display for PinIsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinIsaError::Unavailable(set) => {
                let available: Vec<&str> = isas().into_iter().map(Isa::name).collect();
                write!(
                    f,
                    "the {set} kernels are not available on this machine (available: {})",
                    available.join(", ")
                )
            }
            PinIsaError::Decided(set) => write!(
                f,
                "the kernel set is decided already ({set}): pin one before the first cast"
            ),
        }
    }
}

impl std::error::Error for PinIsaError {}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A name that is not one of `scalar`, `portable`, `avx2`, `avx512`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseIsaError(String);

impl fmt::Display for ParseIsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown kernel set `{}`; expected one of scalar, portable, avx2, avx512",
            self.0
        )
    }
}

impl std::error::Error for ParseIsaError {}

impl FromStr for Isa {
    type Err = ParseIsaError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Isa::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| ParseIsaError(s.to_owned()))
    }
}
