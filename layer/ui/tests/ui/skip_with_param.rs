// #[skip] and #[param] contradict each other.
use dtcast_device::Tensor;
use dtcast_layer::Layer;

#[derive(Layer)]
struct Block {
    #[param]
    #[skip]
    weight: Tensor,
}

fn main() {}
