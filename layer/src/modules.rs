//! Plain parameter containers for examples and tests: `Linear`, `Embedding`, `LayerNorm`,
//! `Sequential`. They hold tensors only (dtcast does not compute with them).

use dtcast_device::Tensor;

use crate::layer::Layer;
use crate::visit::{TensorField, TensorKind, Visitor, VisitorMut};

/// `nn.Linear`'s parameters: `weight` `[out, in]` and an optional `bias` `[out]`.
#[derive(Clone, Debug)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A linear layer from its tensors.
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear { weight, bias }
    }
}

/// `nn.Embedding`'s parameter: `weight` `[num_embeddings, dim]`.
#[derive(Clone, Debug)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor,
}

/// `nn.LayerNorm`'s parameters: `weight` and `bias` `[dim]`.
#[derive(Clone, Debug)]
pub struct LayerNorm {
    /// `[dim]`.
    pub weight: Tensor,
    /// `[dim]`.
    pub bias: Tensor,
}

/// `nn.Sequential`: children named `0`, `1`, ...
#[derive(Debug, Default)]
pub struct Sequential {
    /// The children, in order.
    pub layers: Vec<Box<dyn Layer>>,
}

impl std::fmt::Debug for dyn Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Layer({} tensors)", self.tensors().len())
    }
}

impl Sequential {
    /// An empty sequence.
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a child (builder style).
    pub fn push(mut self, layer: impl Layer + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }
}

/// Parameters named after the fields, in field order.
macro_rules! params {
    ($ty:ty { $($field:ident),* }) => {
        impl Layer for $ty {
            fn visit(&self, visitor: &mut dyn Visitor) {
                $(self.$field.visit_field(stringify!($field), TensorKind::Parameter, false, visitor);)*
            }
            fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
                $(self.$field.visit_field_mut(stringify!($field), TensorKind::Parameter, false, visitor);)*
            }
        }
    };
}

params!(Linear { weight, bias });
params!(Embedding { weight });
params!(LayerNorm { weight, bias });

impl Layer for Sequential {
    fn visit(&self, visitor: &mut dyn Visitor) {
        self.layers.visit(visitor);
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        self.layers.visit_mut(visitor);
    }
}
