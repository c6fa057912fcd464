// #[derive(Layer)] on a tuple struct: its tensors would have no names.
use dtcast_device::Tensor;
use dtcast_layer::Layer;

#[derive(Layer)]
struct Pair(#[param] Tensor, #[param] Tensor);

fn main() {}
