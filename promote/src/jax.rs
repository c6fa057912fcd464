//! JAX's promotion: the lattice of `jax._src.dtypes` (jax 0.10), weak Python scalars included.

use dtcast_dtype::DType;

use crate::error::PromoteError;
use crate::operand::{Operand, ScalarKind};
use crate::policy::Policy;

/// jax 0.10's `jnp.promote_types` / `jnp.result_type`, with `jax_enable_x64` on by default.
///
/// Promotion is the least upper bound in JAX's type lattice ([`Jax::LATTICE`], the "standard"
/// mode): bool below the weak Python `int`, which is below the 8-bit and sub-byte integers;
/// unsigned `n`-bit below signed `2n`-bit; 64-bit integers below the weak Python `float`, which
/// is below every floating type (so `int64 + float16` is float16); bfloat16 and float16 meet at
/// float32; the 8-, 6- and 4-bit floats and the 1-, 2- and 4-bit integers have nothing above
/// them, so they promote with nothing but themselves and bool (and weak scalars of their kind).
///
/// Python scalars are *weak* ([`Operand::WrappedScalar`] of `Int`, `Float`, `Complex`; a Python
/// bool is a strong bool): they join the lattice at the weak node of their kind, so
/// `int8 array + 3` stays int8 and `bfloat16 array + 2.5` stays bfloat16; scalars alone take
/// the default dtype of the widest kind. Values do not matter (`uint8 + 300` is uint8 and wraps,
/// unlike NumPy). 0-dim arrays are arrays: no torch-style precedence.
///
/// With x64 off ([`Jax::without_x64`]), 64-bit dtypes become 32-bit where `result_type` takes
/// and returns them (JAX cannot make an int64 array then), the default dtypes are int32,
/// float32 and complex64, and uint32 meets int32 at int32 (the one edge of the lattice that
/// would otherwise form a 64-bit type); `promote_types` on explicit dtypes is unchanged.
///
/// complex32, bcomplex32 and torch's float4_e2m1fn_x2 are not JAX dtypes: promoting them is an
/// error naming the dtype.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_promote::{Jax, Operand, Policy, ScalarKind};
/// let jax = Jax::default();
/// assert_eq!(jax.promote_types(DType::Int64, DType::Float16)?, DType::Float16);
/// assert_eq!(jax.promote_types(DType::UInt64, DType::Int64)?, DType::Float64);
/// assert_eq!(jax.promote_types(DType::BFloat16, DType::Float16)?, DType::Float32);
/// assert!(jax.promote_types(DType::Float8E4M3Fn, DType::Float16).is_err());
/// let ops = [Operand::Tensor(DType::Int8), Operand::WrappedScalar(ScalarKind::Int)];
/// assert_eq!(jax.result_type(&ops)?, DType::Int8);
/// let ops = [Operand::Tensor(DType::Int8), Operand::WrappedScalar(ScalarKind::Float)];
/// assert_eq!(jax.result_type(&ops)?, DType::Float64);
/// assert_eq!(Jax::without_x64().result_type(&ops)?, DType::Float32);
/// # Ok::<(), dtcast_promote::PromoteError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jax {
    x64: bool,
}

impl Default for Jax {
    /// `jax_enable_x64` on (what the fixtures and most numerical code use).
    fn default() -> Self {
        Jax { x64: true }
    }
}

/// A node of the lattice: a dtype, or the weak type of a Python scalar kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// A JAX dtype.
    DType(DType),
    /// A Python `int` (weakly typed).
    WeakInt,
    /// A Python `float` (weakly typed).
    WeakFloat,
    /// A Python `complex` (weakly typed).
    WeakComplex,
}

use DType as D;
use Node::{WeakComplex, WeakFloat, WeakInt};

const fn d(dtype: DType) -> Node {
    Node::DType(dtype)
}

/// Bit `index` of a node in the sets below: dtypes by their table index, then the weak nodes.
const fn index(node: Node) -> usize {
    match node {
        Node::DType(dt) => dt.index(),
        WeakInt => DType::COUNT,
        WeakFloat => DType::COUNT + 1,
        WeakComplex => DType::COUNT + 2,
    }
}

const NODES: usize = DType::COUNT + 3;
// Node sets are bit sets of a u64.
const _: () = assert!(NODES <= 64);

/// Sets of nodes: for each node, every node at or above it.
type UpperSets = [u64; NODES];

impl Jax {
    /// JAX's lattice, as `_type_promotion_lattice` writes it: each node with the nodes directly
    /// above it. A dtype without a row is not a JAX dtype.
    pub const LATTICE: [(Node, &'static [Node]); 35] = [
        (d(D::Bool), &[WeakInt]),
        (
            WeakInt,
            &[
                d(D::UInt8),
                d(D::UInt2),
                d(D::UInt4),
                d(D::Int8),
                d(D::Int2),
                d(D::Int4),
                d(D::Int1),
                d(D::UInt1),
            ],
        ),
        (d(D::UInt1), &[]),
        (d(D::UInt2), &[]),
        (d(D::UInt4), &[]),
        (d(D::UInt8), &[d(D::Int16), d(D::UInt16)]),
        (d(D::UInt16), &[d(D::Int32), d(D::UInt32)]),
        (d(D::UInt32), &[d(D::Int64), d(D::UInt64)]),
        (d(D::UInt64), &[WeakFloat]),
        (d(D::Int1), &[]),
        (d(D::Int2), &[]),
        (d(D::Int4), &[]),
        (d(D::Int8), &[d(D::Int16)]),
        (d(D::Int16), &[d(D::Int32)]),
        (d(D::Int32), &[d(D::Int64)]),
        (d(D::Int64), &[WeakFloat]),
        (
            WeakFloat,
            &[
                d(D::Float4E2M1Fn),
                d(D::Float6E2M3Fn),
                d(D::Float6E3M2Fn),
                d(D::Float8E3M4),
                d(D::Float8E4M3),
                d(D::Float8E8M0Fnu),
                d(D::Float8E4M3B11Fnuz),
                d(D::Float8E4M3Fn),
                d(D::Float8E4M3Fnuz),
                d(D::Float8E5M2),
                d(D::Float8E5M2Fnuz),
                d(D::BFloat16),
                d(D::Float16),
                WeakComplex,
            ],
        ),
        (d(D::Float4E2M1Fn), &[]),
        (d(D::Float6E2M3Fn), &[]),
        (d(D::Float6E3M2Fn), &[]),
        (d(D::Float8E3M4), &[]),
        (d(D::Float8E4M3), &[]),
        (d(D::Float8E8M0Fnu), &[]),
        (d(D::Float8E4M3B11Fnuz), &[]),
        (d(D::Float8E4M3Fn), &[]),
        (d(D::Float8E4M3Fnuz), &[]),
        (d(D::Float8E5M2), &[]),
        (d(D::Float8E5M2Fnuz), &[]),
        (d(D::BFloat16), &[d(D::Float32)]),
        (d(D::Float16), &[d(D::Float32)]),
        (d(D::Float32), &[d(D::Float64), d(D::Complex64)]),
        (d(D::Float64), &[d(D::Complex128)]),
        (WeakComplex, &[d(D::Complex64)]),
        (d(D::Complex64), &[d(D::Complex128)]),
        (d(D::Complex128), &[]),
    ];

    /// Promotion with `jax_enable_x64` off (see the type's documentation).
    pub const fn without_x64() -> Jax {
        Jax { x64: false }
    }

    /// Whether `jax_enable_x64` is on.
    pub const fn x64(self) -> bool {
        self.x64
    }

    /// `true` for the dtypes JAX has (every dtcast dtype but complex32, bcomplex32 and
    /// float4_e2m1fn_x2).
    pub fn has(dtype: DType) -> bool {
        MEMBERS & (1 << dtype.index()) != 0
    }

    fn upper(self) -> &'static UpperSets {
        if self.x64 {
            &UPPER_X64
        } else {
            &UPPER_NO_X64
        }
    }

    /// The least upper bound of a set of nodes (given as the intersection of their upper
    /// sets), or `None` when no single node lies below every common upper bound.
    fn least(self, common: u64) -> Option<usize> {
        let upper = self.upper();
        (0..NODES).find(|&n| common & (1 << n) != 0 && upper[n] == common)
    }

    /// The dtype a weak node stands for: the default dtype of its kind.
    fn weak_dtype(self, node: usize) -> DType {
        match (node - DType::COUNT, self.x64) {
            (0, true) => D::Int64,
            (0, false) => D::Int32,
            (1, true) => D::Float64,
            (1, false) => D::Float32,
            (_, true) => D::Complex128,
            (_, false) => D::Complex64,
        }
    }

    /// A dtype as JAX holds it: with x64 off, 64-bit types are made 32-bit.
    fn canonical(self, dtype: DType) -> DType {
        /// What `jax.dtypes.canonicalize_dtype` does with x64 off.
        const WITHOUT_X64: [(DType, DType); 4] = [
            (D::Int64, D::Int32),
            (D::UInt64, D::UInt32),
            (D::Float64, D::Float32),
            (D::Complex128, D::Complex64),
        ];
        WITHOUT_X64
            .iter()
            .find(|row| !self.x64 && row.0 == dtype)
            .map_or(dtype, |row| row.1)
    }

    fn check(dtype: DType) -> Result<usize, PromoteError> {
        if Jax::has(dtype) {
            Ok(dtype.index())
        } else {
            Err(PromoteError::NotInPolicy {
                dtype,
                policy: "JAX",
            })
        }
    }

    /// The join of `nodes` (their least upper bound) as a dtype — a weak node as `names` names
    /// it — or JAX's error for `a`, `b`.
    fn join(self, nodes: u64, a: DType, b: DType, names: Jax) -> Result<DType, PromoteError> {
        let upper = self.upper();
        let common = (0..NODES)
            .filter(|&n| nodes & (1 << n) != 0)
            .fold(u64::MAX, |acc, n| acc & upper[n]);
        match self.least(common) {
            Some(n) if n >= DType::COUNT => Ok(names.weak_dtype(n)),
            Some(n) => Ok(DType::ALL[n]),
            None => Err(PromoteError::NoCommonDType {
                a,
                b,
                policy: "JAX",
            }),
        }
    }
}

/// Every node's upper set in [`Jax::LATTICE`], with `x64`'s one change (uint32's edge to int64 goes to
/// int32 instead when x64 is off).
const fn upper_sets(x64: bool) -> UpperSets {
    let mut up = [0u64; NODES];
    let rows = &Jax::LATTICE;
    let mut r = 0;
    while r < rows.len() {
        let (node, above) = rows[r];
        let n = index(node);
        up[n] |= 1 << n;
        let mut a = 0;
        while a < above.len() {
            let mut target = index(above[a]);
            if !x64 && n == D::UInt32.index() && target == D::Int64.index() {
                target = D::Int32.index();
            }
            up[n] |= 1 << target;
            a += 1;
        }
        r += 1;
    }
    // Transitive closure: NODES rounds of "add the upper sets of what is above" suffice.
    let mut round = 0;
    while round < NODES {
        let mut n = 0;
        while n < NODES {
            let mut m = 0;
            while m < NODES {
                if up[n] & (1 << m) != 0 {
                    up[n] |= up[m];
                }
                m += 1;
            }
            n += 1;
        }
        round += 1;
    }
    up
}

const UPPER_X64: UpperSets = upper_sets(true);
const UPPER_NO_X64: UpperSets = upper_sets(false);

/// The dtypes with a row in the lattice.
const MEMBERS: u64 = {
    let mut set = 0u64;
    let mut n = 0;
    while n < DType::COUNT {
        if UPPER_X64[n] != 0 {
            set |= 1 << n;
        }
        n += 1;
    }
    set
};

impl Policy for Jax {
    fn name(&self) -> &'static str {
        "JAX"
    }

    fn has_dtype(&self, dtype: DType) -> bool {
        Jax::has(dtype)
    }

    /// `jnp.promote_types`: the join; a weak node is named as NumPy names a Python type
    /// (`uint64 ∨ int64` is the weak float: float64, even with x64 off — jax does not
    /// canonicalize here).
    fn promote_types(&self, a: DType, b: DType) -> Result<DType, PromoteError> {
        let (ia, ib) = (Jax::check(a)?, Jax::check(b)?);
        self.join((1 << ia) | (1 << ib), a, b, Jax::default())
    }

    /// `jnp.result_type`: arrays (0-dim or not) are strong, Python int/float/complex scalars
    /// weak, a Python bool strong; with only weak operands, the join of their default dtypes.
    fn result_type(&self, operands: &[Operand]) -> Result<DType, PromoteError> {
        let first = operands.first().ok_or(PromoteError::NoOperands)?;
        let all_weak = operands.iter().all(
            |op| matches!(op.without_value(), Operand::WrappedScalar(k) if k != ScalarKind::Bool),
        );
        let mut nodes = 0u64;
        for op in operands {
            // Values play no part in JAX (`uint8 + 300` is uint8).
            let node = match op.without_value() {
                Operand::Tensor(dt) | Operand::ZeroDim(dt) => {
                    Jax::check(dt)?;
                    d(self.canonical(dt))
                }
                Operand::WrappedScalar(ScalarKind::Bool) => d(D::Bool),
                Operand::WrappedScalar(kind) if all_weak => d(self.scalar_dtype(kind)),
                Operand::WrappedScalar(ScalarKind::Int) | Operand::IntLiteral(_) => WeakInt,
                Operand::WrappedScalar(ScalarKind::Float) => WeakFloat,
                Operand::WrappedScalar(ScalarKind::Complex) => WeakComplex,
            };
            nodes |= 1 << index(node);
        }
        let named = |op: &Operand| match *op {
            Operand::Tensor(dt) | Operand::ZeroDim(dt) => dt,
            Operand::WrappedScalar(kind) => self.scalar_dtype(kind),
            Operand::IntLiteral(_) => self.scalar_dtype(ScalarKind::Int),
        };
        let last = operands.last().unwrap_or(first);
        self.join(nodes, named(first), named(last), *self)
            .map(|dt| self.canonical(dt))
    }

    /// `to` can hold what `from` promotes to: `promote_types(from, to) == to` in JAX's lattice
    /// (JAX's own `can_cast` is NumPy's; this is the lattice's "safe" order).
    fn can_cast(&self, from: DType, to: DType) -> bool {
        self.promote_types(from, to) == Ok(to)
    }

    /// float64 (float32 with x64 off).
    fn default_dtype(&self) -> DType {
        self.weak_dtype(index(WeakFloat))
    }

    /// complex128 (complex64 with x64 off).
    fn default_complex_dtype(&self) -> DType {
        self.weak_dtype(index(WeakComplex))
    }
}

impl Jax {
    /// The dtype a Python scalar of `kind` has on its own (its weak type's default dtype).
    fn scalar_dtype(self, kind: ScalarKind) -> DType {
        match kind {
            ScalarKind::Bool => D::Bool,
            ScalarKind::Int => self.weak_dtype(index(WeakInt)),
            ScalarKind::Float => self.weak_dtype(index(WeakFloat)),
            ScalarKind::Complex => self.weak_dtype(index(WeakComplex)),
        }
    }
}
