// A field that is a parameter and a buffer at once.
use dtcast_device::Tensor;
use dtcast_layer::Layer;

#[derive(Layer)]
struct Block {
    #[param]
    #[buffer]
    weight: Tensor,
}

fn main() {}
