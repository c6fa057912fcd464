// #[layer] on a field that is not a layer. (A local type: how rustc names a std type in the
// message depends on which crates are in the build.)
use dtcast_layer::Layer;

struct Tokenizer;

#[derive(Layer)]
struct Model {
    #[layer]
    tokenizer: Tokenizer,
}

fn main() {}
