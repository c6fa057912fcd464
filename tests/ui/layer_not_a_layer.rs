// #[layer] on a field that is not a layer.
use dtcast::prelude::*;

#[derive(Layer)]
struct Model {
    #[layer]
    name: String,
}

fn main() {}
