// #[keep_dtype] without #[param] or #[buffer].
use dtcast_device::Tensor;
use dtcast_layer::Layer;

#[derive(Layer)]
struct Block {
    #[keep_dtype]
    scale: Tensor,
}

fn main() {}
