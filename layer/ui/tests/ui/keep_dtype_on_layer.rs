// #[keep_dtype] on a child layer: it applies to tensors only.
use dtcast_layer::{Layer, Linear};

#[derive(Layer)]
struct Model {
    #[layer]
    #[keep_dtype]
    proj: Linear,
}

fn main() {}
