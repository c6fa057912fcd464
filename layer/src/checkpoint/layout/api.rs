//! What a layout is ([`Layout`]) and what reading one finds ([`QuantizedWeight`]).

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::{Bnb4Scheme, IntScheme, Scheme};
use serde_json::Value;

use super::shared::quantize_matrix;
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::checkpoint::reader::Checkpoint;
use crate::error::LayerError;

/// Reads the whole of a small tensor (quantization metadata a layout stores as a tensor:
/// compressed-tensors' `weight_shape`, bitsandbytes' `quant_state`) by its index among the
/// entries a [`Reader`] is given; larger than [`METADATA_BYTES`] is an error.
pub(crate) type TensorData<'a> = &'a dyn Fn(usize) -> Result<Vec<u8>, LayerError>;

/// The most bytes a tensor read as metadata ([`TensorData`]) may hold.
pub(crate) const METADATA_BYTES: usize = 1 << 16;

/// `read(i, buf)` (tensor `entries[i]` from byte 0 into `buf`) as [`TensorData`]: checked
/// against [`METADATA_BYTES`] before anything is allocated.
pub(crate) fn metadata_reader<'a>(
    entries: &'a [Entry],
    read: impl Fn(usize, &mut [u8]) -> Result<(), LayerError> + 'a,
) -> impl Fn(usize) -> Result<Vec<u8>, LayerError> + 'a {
    move |i| {
        let e = &entries[i];
        let len = e.range.len();
        if len > METADATA_BYTES {
            return Err(LayerError::Quantized(format!(
                "`{}` is {len} bytes; as quantization metadata it holds at most {METADATA_BYTES}",
                quote(&e.name)
            )));
        }
        let mut buf = vec![0; len];
        read(i, &mut buf)?;
        Ok(buf)
    }
}

/// A tensor a quantized weight is written as: name, dtype, shape.
pub(crate) type Part = (String, DType, Vec<usize>);

/// How a checkpoint layout for quantized weights is read: every layout dtcast reads.
pub(crate) trait Reader: Sync {
    /// The layout's name in messages (`--format`'s, where dtcast writes it).
    fn name(&self) -> &'static str;
    /// The `quant_method` of `config.json`'s `quantization_config` for this layout.
    fn quant_method(&self) -> &'static str;
    /// Whether a `config.json` whose `quant_method` is `method` may hold `weight`, read by this
    /// layout: by default, its own method and [`other_methods`](Reader::other_methods).
    fn read_under(&self, method: &str, weight: &QuantizedWeight) -> bool {
        let _ = weight;
        method == self.quant_method() || self.other_methods().contains(&method)
    }
    /// Other tools' `quant_method`s whose checkpoints hold this layout's tensors (AutoRound's
    /// `auto-round`, for GPTQ's and AWQ's).
    fn other_methods(&self) -> &'static [&'static str] {
        &[]
    }
    /// Where `e` is one of this layout's scale tensors, the prefix its weight's tensors share.
    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str>;
    /// The quantized weight whose scales are `entries[scales]` (named from `prefix`), read and
    /// checked; `None` where the weight beside them is stored dense (compressed-tensors' "frozen"
    /// state, dense weights that carry their scales along: the weight reads as it is) or is
    /// another layout's.
    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        config: Option<&Value>,
        data: TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError>;
    /// The keys of `quantization_config` that list modules the checkpoint stores dense (its
    /// loaders leave them unquantized): where a conversion dequantizes some weights and keeps
    /// others quantized, the dequantized weights' modules are added to each.
    fn dense_modules_keys(&self) -> &'static [&'static str];
}

/// How a checkpoint layout for quantized weights is written: the layouts `--format` names.
pub(crate) trait Layout: Reader {
    /// The reference scheme (`dtcast_quant::Scheme::named`) this layout stores for a
    /// `--quantize` name (or a reference's own name), or why it stores no such thing.
    fn scheme_name(&self, requested: &str) -> Result<String, String>;
    /// Whether the layout quantizes `e` unless `--ignore` says otherwise (the format's own tools'
    /// defaults).
    fn targets(&self, e: &Entry) -> bool;
    /// What [`targets`](Layout::targets) takes, in words.
    fn targets_described(&self) -> &'static str;
    /// The matrix `dtcast_quant::quantize` is given for `e`: rows and columns.
    fn rows_cols(&self, e: &Entry) -> (usize, usize) {
        (e.shape[0], e.shape[1])
    }
    /// The tensors `e` becomes, in the order [`quantize`](Layout::quantize) returns their bytes.
    fn parts(&self, e: &Entry, scheme: &Scheme) -> Vec<Part>;
    /// Writes the bytes of each of [`parts`](Layout::parts) to `out`, quantizing `e` (read from
    /// `ckpt`) a band of whole rows at a time, so that memory stays bounded whatever the weight's
    /// size ([`super::shared::quantize_bands`]): by default the elements, the scales and the global scale where
    /// the scheme has one. `progress` is given each band's input bytes.
    fn quantize(
        &self,
        ckpt: &Checkpoint,
        e: &Entry,
        scheme: &Scheme,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), LayerError> {
        quantize_matrix(ckpt, e, self.rows_cols(e), scheme, out, progress)
    }
    /// `config.json`'s `quantization_config` for the requested scheme, as the format's own tools
    /// write it; the weights left dense are added with [`mark_dense`].
    fn config(&self, requested: &str, group_size: Option<usize>) -> Value;
}

/// One quantized weight: the tensors it is stored in and how to read them.
#[derive(Clone, Debug)]
pub struct QuantizedWeight {
    /// The dense tensor's name (`….weight`; gpt-oss: the parameter name without `_blocks`).
    pub name: String,
    /// The entry holding the elements.
    pub elements: usize,
    /// The entry holding the scales.
    pub scales: usize,
    /// The entry holding the global scale, if the scheme has one.
    pub global: Option<usize>,
    /// The reference scheme (`ct_fp8_block`, `gpt_oss_mxfp4`, ...).
    pub scheme_name: &'static str,
    /// How the elements and scales are read.
    pub scheme: WeightScheme,
    /// The logical shape `dtcast_quant::dequantize` takes.
    pub shape: Vec<usize>,
    /// The dense tensor's shape (gpt-oss: transposed).
    pub dense_shape: Vec<usize>,
    /// The entries of the weight's module's activation quantization parameters
    /// (compressed-tensors' `input_scale`, `input_global_scale`, `input_zero_point`,
    /// `output_scale`, `output_zero_point`: [`ACTIVATION_PARAMETERS`]). They mean something only
    /// under the checkpoint's quantization config, so they go with the weight when it is
    /// dequantized (and stay with it when it is kept).
    pub activation: Vec<usize>,
    /// Entries that describe the stored weight and mean nothing without it (compressed-tensors'
    /// `weight_shape`): they go with it as its scales do.
    pub metadata: Vec<usize>,
}

/// How a quantized weight's tensors are read.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum WeightScheme {
    /// Narrow float elements with scales (FP8, MX, NVFP4): `QuantizedWeight::elements`,
    /// `scales` and `global`.
    Scaled(Scheme),
    /// Integer codes with scales and zero points (GPTQ, AWQ, compressed-tensors' integers):
    /// `elements` holds the codes, `scales` the scales.
    Integer {
        /// How the codes, scales and zero points are stored.
        scheme: IntScheme,
        /// The entry holding the zero points, where the scheme stores them.
        zeros: Option<usize>,
        /// The entry holding a group per column (`g_idx`), where there is one.
        group_index: Option<usize>,
    },
    /// bitsandbytes 4-bit (NF4, FP4): `elements` holds the packed codes, `scales` the absmax.
    Bnb4 {
        /// The block sizes, double quantization's offset, the weight's dtype.
        scheme: Bnb4Scheme,
        /// The entry holding the codes' sixteen values.
        quant_map: usize,
        /// Double quantization: the entries of the nested absmax and the nested quant map.
        nested: Option<(usize, usize)>,
    },
    /// bitsandbytes' LLM.int8: `elements` holds the int8 weight, `scales` its SCB.
    Int8Rows,
}

impl WeightScheme {
    /// The scaled scheme, for a scaled weight.
    pub fn scaled(&self) -> Option<&Scheme> {
        match self {
            WeightScheme::Scaled(s) => Some(s),
            _ => None,
        }
    }

    /// The rows a band of a weight of `cols` columns starts at a multiple of.
    pub fn row_alignment(&self, cols: usize) -> usize {
        match self {
            WeightScheme::Scaled(s) => s.row_alignment(),
            WeightScheme::Integer { scheme, .. } => scheme.row_alignment(),
            WeightScheme::Bnb4 { scheme, .. } => {
                // Whole blocks (and nested blocks): elements `first · cols` a multiple of them.
                let align = scheme.element_alignment();
                align / gcd(align, cols.max(1))
            }
            WeightScheme::Int8Rows => 1,
        }
    }

    /// The entries besides the elements and scales that hold the weight.
    fn other_parts(&self) -> Vec<usize> {
        match *self {
            WeightScheme::Scaled(_) | WeightScheme::Int8Rows => Vec::new(),
            WeightScheme::Integer {
                zeros, group_index, ..
            } => zeros.into_iter().chain(group_index).collect(),
            WeightScheme::Bnb4 {
                quant_map, nested, ..
            } => std::iter::once(quant_map)
                .chain(nested.into_iter().flat_map(|(a, m)| [a, m]))
                .collect(),
        }
    }
}

/// The names (after the module's) of the activation quantization parameters a quantized
/// weight's module may hold (compressed-tensors registers `{input,output}_{scale,zero_point,
/// global_scale}` on a module whose inputs or outputs it quantizes).
pub const ACTIVATION_PARAMETERS: [&str; 6] = [
    "input_scale",
    "input_zero_point",
    "input_global_scale",
    "output_scale",
    "output_zero_point",
    "output_global_scale",
];

/// The names (after the attention module's) of the parameters compressed-tensors registers on
/// an attention module whose queries or key-value cache it quantizes (`kv_cache_scheme`, or a
/// config group that targets attention): `self_attn.k_scale`, `self_attn.v_scale` and the like,
/// and vLLM's older `kv_scale`. They belong to the checkpoint's quantization config, not to a
/// weight: a conversion that dequantizes every weight (and so removes the config) drops them.
pub const ATTENTION_PARAMETERS: [&str; 10] = [
    "q_scale",
    "q_zero_point",
    "q_global_scale",
    "k_scale",
    "k_zero_point",
    "k_global_scale",
    "v_scale",
    "v_zero_point",
    "v_global_scale",
    "kv_scale",
];

/// The module a tensor belongs to: its name up to the last dot (`a.b.weight` → `a.b`; gpt-oss's
/// `….mlp.experts.down_proj` → `….mlp.experts`), or up to `.weight.` (bitsandbytes' `a.b.weight.absmax` → `a.b`). A quantized weight's parts share their module in
/// every layout, and configs name modules.
pub(crate) fn module(name: &str) -> &str {
    // bitsandbytes names a weight's parts after the weight (`P.weight.absmax`,
    // `P.weight.quant_state.bitsandbytes__nf4`): they are module `P`'s.
    if let Some(at) = name.find(".weight.") {
        return &name[..at];
    }
    name.rsplit_once('.').map_or("", |(m, _)| m)
}

/// Adds the modules of `weights` (dense names) to the lists of modules that `layout`'s
/// `quantization_config` (`config`) says are stored dense ([`Reader::dense_modules_keys`]),
/// each once, in name order.
pub(crate) fn mark_dense(
    layout: &dyn Reader,
    config: &mut Value,
    weights: &[String],
) -> Result<(), LayerError> {
    if layout.dense_modules_keys().is_empty() && !weights.is_empty() {
        return Err(LayerError::Quantized(format!(
            "{}'s quantization_config has no list of modules stored dense, so `{}` cannot be              dequantized while other weights stay quantized: dequantize every weight, or keep              every one",
            layout.name(),
            quote(&weights[0])
        )));
    }
    list_modules(config, layout.dense_modules_keys(), weights)
}

/// Adds the modules of `weights` (dense names) to the lists `keys` name in `config` (each made
/// where there is none), each once, in name order.
pub(crate) fn list_modules(
    config: &mut Value,
    keys: &[&str],
    weights: &[String],
) -> Result<(), LayerError> {
    if weights.is_empty() {
        return Ok(());
    }
    let Some(obj) = config.as_object_mut() else {
        return Err(LayerError::Quantized(format!(
            "the quantization config that lists {} is not a JSON object",
            keys.join(", ")
        )));
    };
    let mut modules: Vec<&str> = weights.iter().map(|w| module(w)).collect();
    modules.sort_unstable();
    for key in keys {
        let list = obj
            .entry(key.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if list.is_null() {
            *list = Value::Array(Vec::new());
        }
        let Some(list) = list.as_array_mut() else {
            return Err(LayerError::Quantized(format!(
                "the quantization config's `{key}` is not a list of modules"
            )));
        };
        for m in &modules {
            let m = Value::String((*m).to_owned());
            if !list.contains(&m) {
                list.push(m);
            }
        }
    }
    Ok(())
}

/// An error where one module would hold both a weight stored dense (`dense`, dense names) and
/// one stored quantized (`quantized`): a config marks whole modules dense ([`mark_dense`]), and
/// gpt-oss's experts hold two weights in one module. `flag` is the option that chooses (`--keep`,
/// `--ignore`).
pub(crate) fn check_whole_modules<'a>(
    dense: impl IntoIterator<Item = &'a str>,
    quantized: impl IntoIterator<Item = &'a str>,
    flag: &str,
) -> Result<(), LayerError> {
    let quantized: std::collections::HashMap<&str, &str> =
        quantized.into_iter().map(|q| (module(q), q)).collect();
    for d in dense {
        let m = module(d);
        if let Some(q) = quantized.get(m) {
            return Err(LayerError::Quantized(format!(
                "`{}` would be stored dense and `{}` quantized, but both are weights of the module \
                 `{}`, which a quantized checkpoint's config marks dense or quantized as a whole; \
                 {flag} both or neither ({flag} '{}.*')",
                quote(d),
                quote(q),
                quote(m),
                quote(m)
            )));
        }
    }
    Ok(())
}

/// Whether `name` is one of [`ATTENTION_PARAMETERS`] of a module.
pub(crate) fn is_attention_parameter(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, last)| ATTENTION_PARAMETERS.contains(&last))
}

impl QuantizedWeight {
    /// The name each entry of a file gets in a conversion: the dense name for a quantized weight's
    /// elements, none for its scales, its own for everything else.
    pub fn output_names(entries: &[Entry], weights: &[QuantizedWeight]) -> Vec<Option<String>> {
        let mut names: Vec<Option<String>> = entries.iter().map(|e| Some(e.name.clone())).collect();
        for w in weights {
            for p in w.parts() {
                names[p] = None;
            }
            names[w.elements] = Some(w.name.clone());
        }
        names
    }

    /// The error for quantizing a checkpoint that holds this weight.
    pub(crate) fn already_quantized(&self) -> LayerError {
        LayerError::Quantized(format!(
            "`{}` is already quantized ({}); dequantize the checkpoint first",
            quote(&self.name),
            self.scheme_name
        ))
    }

    /// Every entry this weight is stored in.
    pub fn parts(&self) -> impl Iterator<Item = usize> + '_ {
        [self.elements, self.scales]
            .into_iter()
            .chain(self.global)
            .chain(self.scheme.other_parts())
            .chain(self.metadata.iter().copied())
            .chain(self.activation.iter().copied())
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
