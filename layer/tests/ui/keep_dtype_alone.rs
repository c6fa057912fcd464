// #[keep_dtype] without #[param] or #[buffer].
use dtcast::prelude::*;

#[derive(Layer)]
struct Block {
    #[keep_dtype]
    scale: Tensor,
}

fn main() {}
