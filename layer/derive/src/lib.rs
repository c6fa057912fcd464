//! `#[derive(Layer)]`: generates `dtcast_layer::Layer` for a struct from its field attributes.
//!
//! - `#[param]` — a parameter (`Tensor` or `Option<Tensor>`), named after the field;
//! - `#[buffer]` — a buffer (same types);
//! - `#[keep_dtype]` (with `#[param]` or `#[buffer]`) — never changes dtype in `astype`;
//! - `#[layer]` — a child layer (any `Layer`: a struct, `Vec<T>`, `Option<T>`, `Box<dyn Layer>`);
//! - `#[skip]` — a field that holds a tensor but is not part of the layer (without it, such a field
//!   is an error: it would silently be left out of `state_dict`, `astype` and checkpoints).
//!
//! Own tensors are visited first, in field order, then children — PyTorch's registration order.
//! Other fields without an attribute are not part of the layer. Errors are spanned compile errors.
use proc_macro::TokenStream;

mod codegen;

/// Derives `Layer`; see the crate documentation for the field attributes.
#[proc_macro_derive(Layer, attributes(param, buffer, layer, keep_dtype, skip))]
pub fn derive_layer(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    codegen::layer(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
