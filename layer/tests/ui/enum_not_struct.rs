// #[derive(Layer)] on an enum.
use dtcast::prelude::*;

#[derive(Layer)]
enum Choice {
    A,
    B,
}

fn main() {}
