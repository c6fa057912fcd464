// Accepted: a #[skip]ped tensor and plain fields are not part of the layer.
use dtcast::prelude::*;

#[derive(Layer)]
struct Block {
    #[param]
    weight: Tensor,
    #[skip]
    cache: Option<Tensor>,
    steps: u32,
}

fn main() {
    let b = Block {
        weight: Tensor::from_vec(vec![1.0f32], &[1]).unwrap(),
        cache: None,
        steps: 0,
    };
    assert_eq!(b.state_dict().len(), 1);
    let _ = (b.cache, b.steps);
}
