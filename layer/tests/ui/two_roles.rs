// A field that is a parameter and a buffer at once.
use dtcast::prelude::*;

#[derive(Layer)]
struct Block {
    #[param]
    #[buffer]
    weight: Tensor,
}

fn main() {}
