//! Writes a large float32 checkpoint for measuring conversion speed: TENSORS tensors of
//! SIDE × SIDE float32 values (default 16 × 4096 × 4096 = 1 GiB), values spread over many
//! exponents so the casts do real rounding work.
//!
//! `cargo run --release --example big_checkpoint -- OUT [TENSORS [SIDE]]`

use dtcast::layer::checkpoint::save;
use dtcast::Tensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or("usage: big_checkpoint OUT [TENSORS [SIDE]]")?;
    let tensors: usize = args.next().map_or(Ok(16), |s| s.parse())?;
    let side: usize = args.next().map_or(Ok(4096), |s| s.parse())?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let list: Vec<(String, Tensor)> = (0..tensors)
        .map(|i| {
            let values: Vec<f32> = (0..side * side)
                .map(|_| {
                    // xorshift: reproducible values of both signs over ~2^-20 .. 2^12.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let mantissa = (state >> 40) as f32 / (1u64 << 24) as f32;
                    let exponent = ((state >> 8) % 32) as i32 - 20;
                    let sign = if state & 1 == 0 { 1.0 } else { -1.0 };
                    sign * (1.0 + mantissa) * 2f32.powi(exponent)
                })
                .collect();
            Ok((
                format!("layers.{i}.weight"),
                Tensor::from_vec(values, &[side, side])?,
            ))
        })
        .collect::<Result<_, dtcast::TensorError>>()?;
    save(&out, &list, &[("format".to_owned(), "pt".to_owned())])?;
    Ok(())
}
