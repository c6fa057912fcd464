//! NumPy's five casting levels, which `can_cast` takes in every policy.

use core::fmt;
use core::str::FromStr;

/// How much a cast may change values: NumPy's `casting=` argument, from the strictest level to
/// the loosest. A cast allowed at one level is allowed at every looser one.
///
/// [`Policy::can_cast_with`](crate::Policy::can_cast_with) takes it. NumPy defines each level by
/// its own tables ([`NumPy`](crate::NumPy)); for the other policies the levels are read off their
/// lattice: `no` and `equiv` allow a dtype to itself only (dtcast's dtypes have no byte orders),
/// `safe` allows `from → to` when `promote_types(from, to) == to`, `same_kind` is the policy's
/// own [`can_cast`](crate::Policy::can_cast) (torch's `can_cast` is NumPy's `same_kind` over
/// torch's categories: never to a lower category, any width within one), and `unsafe` allows
/// every cast between the policy's dtypes.
///
/// ```
/// use dtcast_promote::Casting;
/// assert_eq!("same_kind".parse::<Casting>()?, Casting::SameKind);
/// assert_eq!(Casting::Unsafe.to_string(), "unsafe");
/// assert!(Casting::Safe < Casting::SameKind);
/// # Ok::<(), dtcast_promote::ParseCastingError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Casting {
    /// Only a dtype to itself.
    No,
    /// Only a dtype to itself or to the same dtype in another byte order.
    Equiv,
    /// Only casts that keep every value.
    Safe,
    /// Safe casts, and casts within a kind or to a higher kind (float64 → float32, int64 → int8).
    SameKind,
    /// Any cast that exists.
    Unsafe,
}

impl Casting {
    /// Every level, strictest first.
    pub const ALL: [Casting; 5] = [
        Casting::No,
        Casting::Equiv,
        Casting::Safe,
        Casting::SameKind,
        Casting::Unsafe,
    ];

    /// NumPy's spelling: `no`, `equiv`, `safe`, `same_kind`, `unsafe`.
    pub const fn name(self) -> &'static str {
        match self {
            Casting::No => "no",
            Casting::Equiv => "equiv",
            Casting::Safe => "safe",
            Casting::SameKind => "same_kind",
            Casting::Unsafe => "unsafe",
        }
    }
}

impl fmt::Display for Casting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no casting level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseCastingError;

impl fmt::Display for ParseCastingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("casting must be one of no, equiv, safe, same_kind, unsafe")
    }
}

impl core::error::Error for ParseCastingError {}

impl FromStr for Casting {
    type Err = ParseCastingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Casting::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or(ParseCastingError)
    }
}
