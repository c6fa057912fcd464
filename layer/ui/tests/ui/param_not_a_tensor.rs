// #[param] on a field that is not a tensor.
use dtcast_layer::Layer;

#[derive(Layer)]
struct Block {
    #[param]
    steps: u32,
}

fn main() {}
