//! Writes `examples/tiny.safetensors`, the small checkpoint the README's main command converts:
//! a model built with `#[derive(Layer)]` — float32 weights, int64 buffers, a keep-dtype scale.
//!
//! `cargo run --example make_checkpoint [OUT]`

use dtcast::layer::checkpoint::save;
use dtcast::{Layer, Tensor};

#[derive(Layer)]
struct Block {
    #[param]
    weight: Tensor,
    #[param]
    bias: Tensor,
    #[buffer]
    steps: Tensor,
    #[buffer]
    #[keep_dtype]
    scale: Tensor,
}

#[derive(Layer)]
struct Net {
    #[param]
    embed: Tensor,
    #[buffer]
    position_ids: Tensor,
    #[layer]
    blocks: Vec<Block>,
}

/// Deterministic weights: a spread of magnitudes with both signs.
fn weights(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.7 + seed).sin() * 0.05) * (1.0 + (i % 7) as f32))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dim = 16;
    let block = |k: usize| -> Result<Block, dtcast::TensorError> {
        Ok(Block {
            weight: Tensor::from_vec(weights(dim * dim, k as f32), &[dim, dim])?,
            bias: Tensor::from_vec(weights(dim, 10.0 + k as f32), &[dim])?,
            steps: Tensor::from_vec(vec![1000i64 + k as i64], &[1])?,
            scale: Tensor::from_vec(vec![0.125f32], &[1])?,
        })
    };
    let net = Net {
        embed: Tensor::from_vec(weights(64 * dim, 0.5), &[64, dim])?,
        position_ids: Tensor::from_vec((0..32i64).collect(), &[32])?,
        blocks: vec![block(0)?, block(1)?],
    };
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/tiny.safetensors".to_owned());
    let metadata = [
        ("format".to_owned(), "pt".to_owned()),
        (
            "generator".to_owned(),
            "dtcast examples/make_checkpoint.rs".to_owned(),
        ),
    ];
    save(std::path::Path::new(&out), &net.named_tensors(), &metadata)?;
    println!("wrote {out} ({} tensors)", net.named_tensors().len());
    Ok(())
}
