//! NumPy 2's promotion and casting (NEP 50), with ml_dtypes 0.7's dtypes.
//!
//! Everything here is derived from a few facts per dtype ([`NumPy::DTYPES`]: NumPy's type number,
//! kind character and item size, and which library defines it), from the dtype table's
//! [`DType::holds_every_value_of`] (ml_dtypes 0.7 registers a cast between two of its dtypes as
//! safe exactly when it loses no value), and from the algorithms of NumPy's
//! `convert_datatype.c`, `dtypemeta.c`, `abstractdtypes.c` and `common_dtype.c`.
//!
//! ml_dtypes 0.7 registers a cast for every pair, each with its level: safe as above (and, with
//! NumPy's own dtypes, the casts 0.6 registered: its floats safely to float32 and wider, bool,
//! uint8 and int8 safely to its floats); `same_kind` where the number kind does not go down
//! (bool, unsigned, signed, float, complex); `unsafe` otherwise. Its DTypes answer promotion
//! themselves (`ml_dtypes.rs`: its `common_dtype` functions, rule for rule): a float meets a
//! wider integer as float32 does (`float8_e4m3fn ∨ int32` is float64), two floats meet in the
//! one that holds the other or in float32, two of its integers in int8 or uint8 (`int1 ∨ int4`
//! is int8, though int1 casts safely to int4); NumPy's own dtypes leave every pair with one of
//! them to it.

use dtcast_dtype::DType;

mod ml_dtypes;

use crate::casting::Casting;
use crate::error::PromoteError;
use crate::operand::{Operand, ScalarKind};
use crate::policy::Policy;

use DType as D;

/// numpy 2.4's `np.promote_types`, `np.result_type` and `np.can_cast` (NEP 50), with bfloat16,
/// the float8/6/4 types, int1..int4, uint1..uint4, complex32 and bcomplex32 as ml_dtypes 0.7
/// defines them (every dtcast dtype but torch's float4_e2m1fn_x2).
///
/// **Promotion** is NumPy's "common DType": when one dtype casts safely to the other, the other;
/// else the smallest builtin type of the higher number kind (bool, unsigned, signed, float,
/// complex), or of a higher kind, that both cast to safely (`uint64 ∨ int8` is float64,
/// `bfloat16 ∨ float16` float32, `float8_e4m3fn ∨ float8_e5m2` float32). Every two dtypes of the
/// policy promote. The relation is not associative (`(int8 ∨ uint8) ∨ float16` is float32,
/// `int8 ∨ (uint8 ∨ float16)` float16), and `result_type` over three or more operands follows
/// NumPy's own reduction (`PyArray_PromoteDTypeSequence`), so its answer can depend on the
/// operands' order, exactly as NumPy's does.
///
/// **Python scalars are weak** (NEP 50): an `int`, `float` or `complex` takes the other operands'
/// dtype when that dtype is of its kind or higher (`int8 array + 3` is int8, `float16 array +
/// 2.5` is float16, `int4 array + 3` is int4, `int8 array + 2.5` is float64, `bfloat16 array +
/// 1j` complex64); a Python `bool` is a strong bool; scalars alone give int64, float64,
/// complex128. 0-dim arrays are arrays: nothing like torch's precedence. Values matter only for
/// Python ints whose value is known ([`Operand::IntLiteral`]) and a result that is one of
/// NumPy's integer types: NumPy's ufuncs convert them to it, so `uint8 array + 300` and `uint8
/// array + -1` are errors (`np.result_type` itself, and [`Operand::WrappedScalar`], ignore
/// values).
///
/// **Casting**: [`Policy::can_cast_with`] is `np.can_cast` at each [`Casting`] level;
/// [`Policy::can_cast`] (may a result be written to an output?) is `same_kind`, NumPy's default
/// for ufunc outputs.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_promote::{Casting, NumPy, Operand, Policy, ScalarKind};
/// let np = NumPy;
/// assert_eq!(np.promote_types(DType::UInt64, DType::Int8)?, DType::Float64);
/// assert_eq!(np.promote_types(DType::Int16, DType::Float16)?, DType::Float32);
/// assert_eq!(np.promote_types(DType::BFloat16, DType::Float16)?, DType::Float32);
/// assert_eq!(np.promote_types(DType::Float8E4M3Fn, DType::Int32)?, DType::Float64);
/// let ops = [Operand::Tensor(DType::UInt8), Operand::WrappedScalar(ScalarKind::Int)];
/// assert_eq!(np.result_type(&ops)?, DType::UInt8);
/// let ops = [Operand::Tensor(DType::UInt8), Operand::IntLiteral(300)];
/// assert!(np.result_type(&ops).is_err()); // Python integer 300 out of bounds for uint8
/// let ops = [Operand::Tensor(DType::Float16), Operand::ZeroDim(DType::Float64)];
/// assert_eq!(np.result_type(&ops)?, DType::Float64); // torch says float16
/// assert!(np.can_cast_with(DType::Int64, DType::Float64, Casting::Safe));
/// assert!(!np.can_cast_with(DType::Float64, DType::Float32, Casting::Safe));
/// assert!(np.can_cast_with(DType::Float64, DType::Float32, Casting::SameKind));
/// # Ok::<(), dtcast_promote::PromoteError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NumPy;

/// A dtype's NumPy kind character: what NumPy's casting rules look at besides the size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `b`.
    Bool,
    /// `u`.
    UInt,
    /// `i`.
    Int,
    /// `f` (NumPy's floats and ml_dtypes' float8_e5m2).
    Float,
    /// `c`.
    Complex,
    /// `V`: ml_dtypes' bfloat16, float8 (but e5m2), float6, float4, int1..uint4 and bcomplex32
    /// (ml_dtypes' complex32 is `c`). The kind character is what NumPy reports; how a dtype
    /// promotes is its [number kind](Entry::number_kind).
    Void,
}

impl Kind {
    /// The number kinds in NumPy's order (`dtype_kind_to_simplified_ordering`): `same_kind`
    /// casts do not go down it, and a common type is searched for in [`SEARCH`] from the higher
    /// of two kinds up. `None` for `V`, which is no number kind.
    const fn order(self) -> Option<usize> {
        match self {
            Kind::Bool => Some(0),
            Kind::UInt => Some(1),
            Kind::Int => Some(2),
            Kind::Float => Some(3),
            Kind::Complex => Some(4),
            Kind::Void => None,
        }
    }
}

/// Which library defines a dtype, and so which safe casts it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// NumPy itself: safe casts from NumPy's table (`_npy_can_cast_safely_table`).
    Builtin,
    /// An ml_dtypes float (`RegisterFloatDtype`): safe to float32, float64, complex64,
    /// complex128; safe from bool, uint8, int8.
    MlFloat,
    /// An ml_dtypes complex (`RegisterComplexDtype`): safe to complex64, complex128; safe from
    /// bool, uint8, int8.
    MlComplex,
    /// An ml_dtypes integer (`RegisterIntNDtype`): safe to every builtin signed integer (and
    /// unsigned one, if unsigned itself), float and complex; safe from bool.
    MlInt,
}

/// One dtype as NumPy knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The dtype.
    pub dtype: DType,
    /// NumPy's type number (ml_dtypes' are given out in the order it registers its dtypes, the
    /// same in every process). When two dtypes meet, the one with the larger number decides.
    pub num: u16,
    /// The kind character.
    pub kind: Kind,
    /// The item size in bytes as NumPy stores the dtype (ml_dtypes' sub-byte types take a byte).
    pub itemsize: u8,
    /// Who defines it.
    pub origin: Origin,
}

impl Entry {
    /// The number kind NumPy's promotion sees: the kind of NumPy's own dtypes, and for
    /// ml_dtypes' the abstract DType it subclasses (float, complex, or a signed or unsigned
    /// integer).
    pub fn number_kind(&self) -> Kind {
        match self.origin {
            Origin::Builtin => self.kind,
            Origin::MlFloat => Kind::Float,
            Origin::MlComplex => Kind::Complex,
            Origin::MlInt if self.dtype.is_signed() => Kind::Int,
            Origin::MlInt => Kind::UInt,
        }
    }

    /// The place of [`number_kind`](Entry::number_kind) in NumPy's order.
    fn order(&self) -> usize {
        // A number kind always has its place; `V` never reaches here.
        self.number_kind().order().unwrap_or_default()
    }
}

const fn e(dtype: DType, num: u16, kind: Kind, itemsize: u8, origin: Origin) -> Entry {
    Entry {
        dtype,
        num,
        kind,
        itemsize,
        origin,
    }
}

use Kind::{Bool as B, Complex as C, Float as F, Int as I, UInt as U, Void as V};
use Origin::{Builtin as Np, MlComplex as MlC, MlFloat as MlF, MlInt as MlI};

impl NumPy {
    /// Every dtype of the policy (numpy 2.4 with ml_dtypes 0.7 imported).
    pub const DTYPES: [Entry; 35] = [
        e(D::Bool, 0, B, 1, Np),
        e(D::Int8, 1, I, 1, Np),
        e(D::UInt8, 2, U, 1, Np),
        e(D::Int16, 3, I, 2, Np),
        e(D::UInt16, 4, U, 2, Np),
        e(D::Int32, 5, I, 4, Np),
        e(D::UInt32, 6, U, 4, Np),
        e(D::Int64, 7, I, 8, Np),
        e(D::UInt64, 8, U, 8, Np),
        e(D::Float32, 11, F, 4, Np),
        e(D::Float64, 12, F, 8, Np),
        e(D::Complex64, 14, C, 8, Np),
        e(D::Complex128, 15, C, 16, Np),
        // Half comes after every other builtin type.
        e(D::Float16, 23, F, 2, Np),
        e(D::BFloat16, 256, V, 2, MlF),
        e(D::Float8E4M3, 257, V, 1, MlF),
        e(D::Float8E4M3B11Fnuz, 258, V, 1, MlF),
        e(D::Float8E4M3Fn, 259, V, 1, MlF),
        e(D::Float8E4M3Fnuz, 260, V, 1, MlF),
        e(D::Float8E5M2, 261, F, 1, MlF),
        e(D::Float8E5M2Fnuz, 262, V, 1, MlF),
        e(D::Float8E3M4, 263, V, 1, MlF),
        e(D::Float8E5M3Fnu, 264, V, 1, MlF),
        e(D::Float8E8M0Fnu, 265, V, 1, MlF),
        e(D::Float6E2M3Fn, 266, V, 1, MlF),
        e(D::Float6E3M2Fn, 267, V, 1, MlF),
        e(D::Float4E2M1Fn, 268, V, 1, MlF),
        e(D::Int1, 269, V, 1, MlI),
        e(D::UInt1, 270, V, 1, MlI),
        e(D::Int2, 271, V, 1, MlI),
        e(D::UInt2, 272, V, 1, MlI),
        e(D::Int4, 273, V, 1, MlI),
        e(D::UInt4, 274, V, 1, MlI),
        e(D::BComplex32, 275, V, 4, MlC),
        e(D::Complex32, 276, C, 4, MlC),
    ];

    /// How NumPy knows `dtype`, or `None` for torch's float4_e2m1fn_x2.
    pub fn entry(dtype: DType) -> Option<&'static Entry> {
        match ROW[dtype.index()] {
            NONE => None,
            row => Some(&NumPy::DTYPES[row as usize]),
        }
    }

    fn check(dtype: DType) -> Result<&'static Entry, PromoteError> {
        NumPy::entry(dtype).ok_or(PromoteError::NotInPolicy {
            dtype,
            policy: "NumPy",
        })
    }
}

const NONE: u8 = u8::MAX;

/// `DType::index()` → row of [`NumPy::DTYPES`].
const ROW: [u8; DType::COUNT] = {
    let mut row = [NONE; DType::COUNT];
    let mut i = 0;
    while i < NumPy::DTYPES.len() {
        row[NumPy::DTYPES[i].dtype.index()] = i as u8;
        i += 1;
    }
    row
};

/// NumPy's own safe casts between builtin types (`_npy_can_cast_safely_table`): bool to
/// anything; an integer to a wider one of its signedness or a signed one wider than it; an
/// integer of `n` bytes to a float (or complex component) wider than `n` bytes, and a 64-bit
/// integer to float64 / complex128; a float to a wider float or complex component.
fn builtin_safe(a: &Entry, b: &Entry) -> bool {
    let component = |x: &Entry| match x.kind {
        Kind::Complex => x.itemsize / 2,
        _ => x.itemsize,
    };
    match (a.kind, b.kind) {
        (Kind::Bool, _) => true,
        (Kind::UInt, Kind::UInt) | (Kind::Int, Kind::Int) => b.itemsize >= a.itemsize,
        (Kind::UInt, Kind::Int) => b.itemsize > a.itemsize,
        (Kind::UInt | Kind::Int, Kind::Float | Kind::Complex) => {
            component(b) > a.itemsize || (a.itemsize == 8 && component(b) == 8)
        }
        (Kind::Float, Kind::Float | Kind::Complex) | (Kind::Complex, Kind::Complex) => {
            component(b) >= component(a)
        }
        _ => false,
    }
}

/// The safe casts ml_dtypes registers between its dtypes and NumPy's: its floats to float32 and
/// wider and to NumPy's complex types, its complex types to NumPy's, its integers to every signed
/// integer, float and complex (and an unsigned one to the unsigned integers); from bool to all
/// of its dtypes and from uint8 and int8 to its floats and complex types (all as 0.6 registered
/// them); and from a NumPy dtype whose every value it holds (float16 → complex32).
fn registered_safe(a: &Entry, b: &Entry) -> bool {
    let small_number =
        |x: &Entry| matches!(x.kind, Kind::Bool | Kind::UInt | Kind::Int) && x.itemsize == 1;
    match (a.origin, b.origin) {
        (Origin::MlFloat, Origin::Builtin) => {
            b.kind == Kind::Complex || (b.kind == Kind::Float && b.itemsize >= 4)
        }
        (Origin::MlComplex, Origin::Builtin) => b.kind == Kind::Complex,
        (Origin::MlInt, Origin::Builtin) => match b.kind {
            Kind::Int | Kind::Float | Kind::Complex => true,
            Kind::UInt => !a.dtype.is_signed(),
            Kind::Bool | Kind::Void => false,
        },
        (Origin::Builtin, origin) => {
            a.kind == Kind::Bool
                || (small_number(a) && origin != Origin::MlInt)
                || b.dtype.holds_every_value_of(a.dtype)
        }
        // Between two of ml_dtypes' own: safe exactly when no value is lost.
        (_, _) => b.dtype.holds_every_value_of(a.dtype),
    }
}

/// NumPy's safe cast `a → b`.
fn safe(a: &Entry, b: &Entry) -> bool {
    if a.dtype == b.dtype {
        return true;
    }
    if a.origin == Origin::Builtin && b.origin == Origin::Builtin {
        return builtin_safe(a, b);
    }
    registered_safe(a, b)
}

/// `np.can_cast(a, b, casting)`. Every pair has a cast; `same_kind` is a safe one or one whose
/// number kind does not go down.
fn can_cast(a: &Entry, b: &Entry, casting: Casting) -> bool {
    match casting {
        // dtcast's dtypes are in native byte order, where `equiv` is `no`.
        Casting::No | Casting::Equiv => a.dtype == b.dtype,
        Casting::Safe => safe(a, b),
        Casting::SameKind => safe(a, b) || a.order() <= b.order(),
        Casting::Unsafe => true,
    }
}

/// The builtin types of each scalar kind, smallest first (`_npy_smallest_type_of_kind_table` and
/// `_npy_next_larger_type_table`; long double, which dtcast lacks, would follow float64 and
/// complex128, and no two dtypes of the policy need it).
const SEARCH: [&[DType]; 5] = [
    &[D::Bool],
    &[D::UInt8, D::UInt16, D::UInt32, D::UInt64],
    &[D::Int8, D::Int16, D::Int32, D::Int64],
    &[D::Float16, D::Float32, D::Float64],
    &[D::Complex64, D::Complex128],
];

fn entry(dtype: DType) -> &'static Entry {
    // Only called on dtypes of the policy's own tables.
    &NumPy::DTYPES[ROW[dtype.index()] as usize]
}

/// The common dtype of two of NumPy's own dtypes as `cls` sees it, where `cls` has the larger
/// type number (`default_builtin_common_dtype`'s table, which these rules generate); `None` when
/// `cls` does not know one.
fn common_concrete(cls: &Entry, other: &Entry) -> Option<DType> {
    if safe(cls, other) {
        return Some(other.dtype);
    }
    if safe(other, cls) {
        return Some(cls.dtype);
    }
    SEARCH[cls.order().max(other.order())..]
        .iter()
        .flat_map(|chain| chain.iter())
        .map(|&dt| entry(dt))
        .find(|t| safe(cls, t) && safe(other, t))
        .map(|t| t.dtype)
}

/// A DType in NumPy's promotion: a dtype, or the abstract DType of a Python int, float or
/// complex (NEP 50's weak scalars).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    DType(DType),
    PyInt,
    PyFloat,
    PyComplex,
}

impl Node {
    fn of(operand: Operand) -> Result<Node, PromoteError> {
        Ok(match operand {
            Operand::Tensor(dt) | Operand::ZeroDim(dt) => {
                NumPy::check(dt)?;
                Node::DType(dt)
            }
            Operand::WrappedScalar(ScalarKind::Bool) => Node::DType(D::Bool),
            Operand::WrappedScalar(ScalarKind::Int) | Operand::IntLiteral(_) => Node::PyInt,
            Operand::WrappedScalar(ScalarKind::Float) => Node::PyFloat,
            Operand::WrappedScalar(ScalarKind::Complex) => Node::PyComplex,
        })
    }

    /// The dtype of the node: a Python scalar's default (`np.result_type(3)` is int64).
    fn dtype(self) -> DType {
        match self {
            Node::DType(dt) => dt,
            Node::PyInt => D::Int64,
            Node::PyFloat => D::Float64,
            Node::PyComplex => D::Complex128,
        }
    }
}

/// `cls.__common_dtype__(other)`: the common DType as `cls` sees it, or `None` for
/// `NotImplemented` (then `other` is asked).
fn common_dtype(cls: Node, other: Node) -> Option<Node> {
    use Node::{PyComplex, PyFloat, PyInt};
    if cls == other {
        return Some(cls);
    }
    if let Node::DType(a) = cls {
        let a = entry(a);
        if a.origin != Origin::Builtin {
            return ml_dtypes::common(a, other);
        }
    }
    let concrete = |n: Node| match n {
        Node::DType(dt) => Some(entry(dt)),
        _ => None,
    };
    // A Python scalar asked first about an ml_dtypes dtype (a legacy DType to NumPy) asks it
    // about these builtin types in turn (NumPy's "back-compat fallback" in `int_common_dtype` and
    // its siblings): `3 ∨ int4` is int16, where `int4 ∨ 3` is int4.
    let fallback = |other: &Entry, tries: &[DType]| {
        tries
            .iter()
            .find_map(|&t| common_dtype(Node::DType(other.dtype), Node::DType(t)))
    };
    match (cls, concrete(other)) {
        (Node::DType(a), Some(b)) => {
            let a = entry(a);
            (a.num >= b.num)
                .then(|| common_concrete(a, b))
                .flatten()
                .map(Node::DType)
        }
        (Node::DType(a), None) => {
            // `default_builtin_common_dtype` with a Python scalar: a number of the scalar's kind
            // or higher stays (Python complex makes floats complex).
            let a = entry(a);
            match (other, a.kind) {
                (PyComplex, Kind::Complex) => Some(cls),
                (PyComplex, Kind::Float) => Some(Node::DType(if a.itemsize <= 4 {
                    D::Complex64
                } else {
                    D::Complex128
                })),
                (PyFloat, Kind::Float | Kind::Complex) => Some(cls),
                (PyInt, kind) if kind != Kind::Bool => Some(cls),
                _ => None,
            }
        }
        (PyInt, Some(b)) if b.origin == Origin::Builtin => {
            (b.kind == Kind::Bool).then_some(Node::DType(D::Int64))
        }
        (PyInt, Some(b)) => fallback(b, &[D::UInt8, D::Int8, D::Int64]),
        (PyFloat | PyComplex, Some(b)) if b.origin == Origin::Builtin => {
            let default = if cls == PyFloat {
                D::Float64
            } else {
                D::Complex128
            };
            matches!(b.kind, Kind::Bool | Kind::UInt | Kind::Int).then_some(Node::DType(default))
        }
        (PyFloat, Some(b)) => fallback(b, &[D::Float16, D::Float64]),
        (PyComplex, Some(b)) => fallback(b, &[D::Complex64, D::Complex128]),
        (PyFloat, None) => (other == PyInt).then_some(PyFloat),
        (PyComplex, None) => matches!(other, PyInt | PyFloat).then_some(PyComplex),
        (PyInt, None) => None,
    }
}

/// `PyArray_CommonDType`: ask `a`, then `b`.
fn common_both(a: Node, b: Node) -> Option<Node> {
    common_dtype(a, b).or_else(|| common_dtype(b, a))
}

/// One slot of [`promote_sequence`]'s scratch list: a node, or cleared.
type Slot = Option<Node>;

/// `reduce_dtypes_to_most_knowledgeable`: pairs the list's ends, moves the more knowledgeable
/// one of each pair forward (clearing one that cannot change the result), and recurses on the
/// front half, until `list[0]` is the "main" DType. Returns the last pair's common DType, `None`
/// for `NotImplemented`.
fn most_knowledgeable(list: &mut [Slot]) -> Option<Node> {
    let len = list.len();
    let half = len / 2;
    let mut res = None;
    for low in 0..half {
        let high = len - 1 - low;
        let (l, h) = (list[low], list[high]);
        res = match (l, h) {
            (Some(l), Some(h)) if l == h => Some(l),
            (Some(l), Some(h)) => common_dtype(l, h),
            // A cleared slot is never compared: NumPy calls `common_dtype` on it only in
            // lists it has not cleared yet (the recursion looks at the front half only).
            _ => None,
        };
        match res {
            None => list.swap(low, high),
            Some(r) if Some(r) == l => list[high] = None,
            Some(_) => {}
        }
    }
    if len == 2 {
        return res;
    }
    most_knowledgeable(&mut list[..len - half])
}

/// `PyArray_PromoteDTypeSequence`: the common DType of `list`, or `Err` naming two of its
/// dtypes that have none.
fn promote_sequence(list: &mut [Slot]) -> Result<Node, (Node, Node)> {
    if let [Some(only)] = list {
        return Ok(*only);
    }
    let first = most_knowledgeable(list);
    let main = list[0].expect("the main DType is never cleared");
    let (mut result, start) = match first {
        None => (None, 1),
        Some(r) => (Some(r), 2),
    };
    for node in list[start..].iter().flatten() {
        // NumPy asks the main DType, which must know every other one.
        let promotion = common_dtype(main, *node).ok_or((main, *node))?;
        result = Some(match result {
            None => promotion,
            Some(r) => common_both(r, promotion).ok_or((r, promotion))?,
        });
    }
    Ok(result.unwrap_or(main))
}

/// The most operands one `result_type` takes: NumPy's `NPY_MAXARGS`, the most a ufunc has.
/// (dtcast keeps its scratch list on the stack, so that the crate needs no allocator.)
pub const MAX_OPERANDS: usize = 64;

/// The range of Python ints NumPy converts to `dtype` without an error: NumPy's integer types'
/// ranges (NEP 50's OverflowError); `None` for every other dtype.
fn python_int_range(dtype: &Entry) -> Option<(i128, i128)> {
    match (dtype.kind, dtype.origin) {
        (Kind::Int | Kind::UInt, Origin::Builtin) => dtype.dtype.integer_range(),
        _ => None,
    }
}

impl Policy for NumPy {
    fn name(&self) -> &'static str {
        "NumPy"
    }

    fn has_dtype(&self, dtype: DType) -> bool {
        NumPy::entry(dtype).is_some()
    }

    /// `np.promote_types`: `PyArray_CommonDType`, `a` asked first.
    fn promote_types(&self, a: DType, b: DType) -> Result<DType, PromoteError> {
        NumPy::check(a)?;
        NumPy::check(b)?;
        match common_both(Node::DType(a), Node::DType(b)) {
            Some(Node::DType(common)) => Ok(common),
            _ => Err(PromoteError::NoCommonDType {
                a,
                b,
                policy: "NumPy",
            }),
        }
    }

    /// `np.result_type`, and the dtype a ufunc such as `np.add` computes in: arrays (0-dim or
    /// not) and Python bools are strong, Python int/float/complex weak; a Python int whose value
    /// is known must fit a result that is one of NumPy's integer types.
    fn result_type(&self, operands: &[Operand]) -> Result<DType, PromoteError> {
        if operands.is_empty() {
            return Err(PromoteError::NoOperands);
        }
        if operands.len() > MAX_OPERANDS {
            return Err(PromoteError::TooManyOperands {
                count: operands.len(),
                max: MAX_OPERANDS,
            });
        }
        let mut list: [Slot; MAX_OPERANDS] = [None; MAX_OPERANDS];
        for (slot, &op) in list.iter_mut().zip(operands) {
            *slot = Some(Node::of(op)?);
        }
        let common = promote_sequence(&mut list[..operands.len()])
            .map_err(|(a, b)| PromoteError::NoCommonDType {
                a: a.dtype(),
                b: b.dtype(),
                policy: "NumPy",
            })?
            .dtype();
        if let Some((min, max)) = python_int_range(entry(common)) {
            for op in operands {
                if let Operand::IntLiteral(value) = *op {
                    if !(min..=max).contains(&value) {
                        return Err(PromoteError::PythonIntOutOfBounds {
                            value,
                            dtype: common,
                        });
                    }
                }
            }
        }
        Ok(common)
    }

    /// `np.can_cast(from, to, "same_kind")`: NumPy's default casting for a ufunc's output.
    fn can_cast(&self, from: DType, to: DType) -> bool {
        self.can_cast_with(from, to, Casting::SameKind)
    }

    /// `np.can_cast(from, to, casting)`; `false` for a dtype the policy lacks.
    fn can_cast_with(&self, from: DType, to: DType, casting: Casting) -> bool {
        match (NumPy::entry(from), NumPy::entry(to)) {
            (Some(a), Some(b)) => can_cast(a, b, casting),
            _ => false,
        }
    }

    /// float64.
    fn default_dtype(&self) -> DType {
        D::Float64
    }

    /// complex128.
    fn default_complex_dtype(&self) -> DType {
        D::Complex128
    }
}
