//! The code `#[derive(Layer)]` generates.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident};

/// The path of the `dtcast_layer` crate as the deriving crate sees it: `dtcast_layer` itself, or
/// the facade's re-export `dtcast::layer`.
fn layer_crate() -> TokenStream {
    match crate_name("dtcast-layer") {
        // Itself: inside dtcast-layer, or one of its doctests / examples, which see it as an
        // external crate; dtcast-layer declares `extern crate self as dtcast_layer` for the former.
        Ok(FoundCrate::Itself) => quote!(::dtcast_layer),
        Ok(FoundCrate::Name(name)) => {
            let id = Ident::new(&name, Span::call_site());
            quote!(::#id)
        }
        Err(_) => match crate_name("dtcast") {
            Ok(FoundCrate::Name(name)) => {
                let id = Ident::new(&name, Span::call_site());
                quote!(::#id::layer)
            }
            Ok(FoundCrate::Itself) => quote!(::dtcast::layer),
            Err(_) => quote!(::dtcast_layer),
        },
    }
}

enum Role {
    Tensor { buffer: bool },
    Child,
}

pub(crate) fn layer(input: &DeriveInput) -> syn::Result<TokenStream> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Layer)] works on structs only",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Layer)] needs a struct with named fields",
        ));
    };
    let krate = layer_crate();
    let (mut own, mut own_mut, mut children, mut children_mut) = (vec![], vec![], vec![], vec![]);
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        let mut role: Option<Role> = None;
        let mut keep = false;
        let mut skip = false;
        for attr in &field.attrs {
            let path = attr.path();
            if path.is_ident("skip") {
                skip = true;
            }
            let next = if path.is_ident("param") {
                Some(Role::Tensor { buffer: false })
            } else if path.is_ident("buffer") {
                Some(Role::Tensor { buffer: true })
            } else if path.is_ident("layer") {
                Some(Role::Child)
            } else if path.is_ident("keep_dtype") {
                keep = true;
                None
            } else {
                None
            };
            if let Some(next) = next {
                if role.is_some() {
                    return Err(syn::Error::new_spanned(
                        attr,
                        "a field is one of #[param], #[buffer] or #[layer], not several",
                    ));
                }
                role = Some(next);
            }
        }
        let name = ident.to_string();
        if skip && (role.is_some() || keep) {
            return Err(syn::Error::new_spanned(
                ident,
                "#[skip] leaves a field out of the layer; it does not go with #[param], #[buffer], #[layer] or #[keep_dtype]",
            ));
        }
        if role.is_none() && !keep && !skip && mentions_tensor(&field.ty) {
            return Err(syn::Error::new_spanned(
                &field.ty,
                format!(
                    "field `{name}` holds a Tensor but has no #[param] or #[buffer]: it would be left out of state_dict, astype and checkpoints; mark it, or #[skip] it"
                ),
            ));
        }
        match role {
            Some(Role::Tensor { buffer }) => {
                let kind = if buffer {
                    quote!(#krate::TensorKind::Buffer)
                } else {
                    quote!(#krate::TensorKind::Parameter)
                };
                // Spanned at the field's type: a type that is not a tensor is reported there.
                let ty = &field.ty;
                own.push(quote_spanned! {ty.span()=>
                    #krate::TensorField::visit_field(&self.#ident, #name, #kind, #keep, visitor);
                });
                own_mut.push(quote_spanned! {ty.span()=>
                    #krate::TensorField::visit_field_mut(&mut self.#ident, #name, #kind, #keep, visitor);
                });
            }
            Some(Role::Child) => {
                if keep {
                    return Err(syn::Error::new_spanned(
                        ident,
                        "#[keep_dtype] applies to #[param] or #[buffer] fields, not to #[layer]",
                    ));
                }
                let ty = &field.ty;
                children.push(quote_spanned! {ty.span()=>
                    visitor.enter(#name);
                    #krate::Layer::visit(&self.#ident, visitor);
                    visitor.exit();
                });
                children_mut.push(quote_spanned! {ty.span()=>
                    visitor.enter(#name);
                    #krate::Layer::visit_mut(&mut self.#ident, visitor);
                    visitor.exit();
                });
            }
            None if keep => {
                return Err(syn::Error::new_spanned(
                    ident,
                    "#[keep_dtype] needs #[param] or #[buffer] on the same field",
                ));
            }
            None => {}
        }
    }
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #krate::Layer for #name #ty_generics #where_clause {
            fn visit(&self, visitor: &mut dyn #krate::Visitor) {
                #(#own)*
                #(#children)*
            }
            fn visit_mut(&mut self, visitor: &mut dyn #krate::VisitorMut) {
                #(#own_mut)*
                #(#children_mut)*
            }
        }
    })
}

/// Whether a field's type names `Tensor` anywhere (`Tensor`, `Option<Tensor>`, `Vec<Tensor>`):
/// a tensor the derive would silently leave out without an attribute.
fn mentions_tensor(ty: &syn::Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "Tensor",
            proc_macro2::TokenTree::Group(g) => walk(g.stream()),
            proc_macro2::TokenTree::Punct(_) | proc_macro2::TokenTree::Literal(_) => false,
        })
    }
    walk(quote!(#ty))
}
