//! The category of a dtype.

use core::fmt;

/// The kind of value a dtype holds, ordered the way PyTorch's promotion orders categories:
/// `Bool < SignedInt = UnsignedInt < Floating < Complex` (see [`Category::rank`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// `bool`.
    Bool,
    /// Two's-complement integers: `int8` … `int64`.
    SignedInt,
    /// Unsigned integers: `uint8` … `uint64`.
    UnsignedInt,
    /// Real floating-point types, float8 included.
    Floating,
    /// Complex types (a pair of floating-point components).
    Complex,
}

impl Category {
    /// The rank of the category in PyTorch's precedence: bool 0, integers 1, floating 2, complex 3.
    ///
    /// A `result_type` never has a lower rank than any of its operands.
    ///
    /// ```
    /// use dtcast_dtype::Category;
    /// assert!(Category::Bool.rank() < Category::UnsignedInt.rank());
    /// assert_eq!(Category::UnsignedInt.rank(), Category::SignedInt.rank());
    /// assert!(Category::Floating.rank() < Category::Complex.rank());
    /// ```
    pub const fn rank(self) -> u8 {
        match self {
            Category::Bool => 0,
            Category::SignedInt | Category::UnsignedInt => 1,
            Category::Floating => 2,
            Category::Complex => 3,
        }
    }

    /// `true` for both integer categories.
    pub const fn is_integer(self) -> bool {
        matches!(self, Category::SignedInt | Category::UnsignedInt)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Category::Bool => "bool",
            Category::SignedInt => "signed integer",
            Category::UnsignedInt => "unsigned integer",
            Category::Floating => "floating point",
            Category::Complex => "complex",
        })
    }
}
