// #[skip] and #[param] contradict each other.
use dtcast::prelude::*;

#[derive(Layer)]
struct Block {
    #[param]
    #[skip]
    weight: Tensor,
}

fn main() {}
