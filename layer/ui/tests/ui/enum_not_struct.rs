// #[derive(Layer)] on an enum.
use dtcast_layer::Layer;

#[derive(Layer)]
enum Choice {
    A,
    B,
}

fn main() {}
