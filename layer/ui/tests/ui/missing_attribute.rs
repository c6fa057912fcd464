// A tensor field with no attribute would silently be left out of state_dict and checkpoints.
use dtcast_device::Tensor;
use dtcast_layer::Layer;

#[derive(Layer)]
struct Block {
    #[param]
    weight: Tensor,
    bias: Option<Tensor>,
}

fn main() {}
