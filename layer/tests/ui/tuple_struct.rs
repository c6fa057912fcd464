// #[derive(Layer)] on a tuple struct: its tensors would have no names.
use dtcast::prelude::*;

#[derive(Layer)]
struct Pair(#[param] Tensor, #[param] Tensor);

fn main() {}
