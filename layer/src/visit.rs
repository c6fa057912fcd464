//! Visitors: the two traversal primitives every `Layer` implements.

use dtcast_device::Tensor;

/// Whether a tensor is a parameter (trained weights) or a buffer (running statistics, position
/// ids, counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// A parameter.
    Parameter,
    /// A buffer.
    Buffer,
}

/// Reads a layer's tensors. `enter` / `exit` bracket each child layer (a field name, or an index
/// in a `Vec`); every hook but `tensor` is a no-op by default.
pub trait Visitor {
    /// A child layer named `name` begins.
    fn enter(&mut self, name: &str) {
        let _ = name;
    }
    /// The current child layer ends.
    fn exit(&mut self) {}
    /// One tensor of the current layer.
    fn tensor(&mut self, name: &str, kind: TensorKind, keep_dtype: bool, tensor: &Tensor);
}

/// Replaces a layer's tensors in place; same hooks as [`Visitor`].
pub trait VisitorMut {
    /// A child layer named `name` begins.
    fn enter(&mut self, name: &str) {
        let _ = name;
    }
    /// The current child layer ends.
    fn exit(&mut self) {}
    /// One tensor of the current layer.
    fn tensor(&mut self, name: &str, kind: TensorKind, keep_dtype: bool, tensor: &mut Tensor);
}

/// A field that holds a tensor: `Tensor`, or `Option<Tensor>` (absent tensors are skipped, as
/// torch skips `None` parameters). The derive macro calls these.
pub trait TensorField {
    /// Shows the tensor, if any, to `visitor`.
    fn visit_field(
        &self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn Visitor,
    );
    /// Lets `visitor` replace the tensor, if any.
    fn visit_field_mut(
        &mut self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn VisitorMut,
    );
}

impl TensorField for Tensor {
    fn visit_field(
        &self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn Visitor,
    ) {
        visitor.tensor(name, kind, keep_dtype, self);
    }
    fn visit_field_mut(
        &mut self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn VisitorMut,
    ) {
        visitor.tensor(name, kind, keep_dtype, self);
    }
}

impl TensorField for Option<Tensor> {
    fn visit_field(
        &self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn Visitor,
    ) {
        if let Some(t) = self {
            visitor.tensor(name, kind, keep_dtype, t);
        }
    }
    fn visit_field_mut(
        &mut self,
        name: &str,
        kind: TensorKind,
        keep_dtype: bool,
        visitor: &mut dyn VisitorMut,
    ) {
        if let Some(t) = self {
            visitor.tensor(name, kind, keep_dtype, t);
        }
    }
}

/// The dotted name of the current position (`blocks.0.weight`), kept by visitors from the
/// `enter` / `exit` calls.
#[derive(Clone, Debug, Default)]
pub struct Path {
    segments: Vec<String>,
}

impl Path {
    /// Enters a child.
    pub fn push(&mut self, name: &str) {
        self.segments.push(name.to_owned());
    }
    /// Leaves the current child.
    pub fn pop(&mut self) {
        self.segments.pop();
    }
    /// The full name of `leaf` at the current position.
    pub fn name(&self, leaf: &str) -> String {
        let mut s = String::new();
        for seg in &self.segments {
            s.push_str(seg);
            s.push('.');
        }
        s.push_str(leaf);
        s
    }
}
