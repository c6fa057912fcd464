//! What a layout is ([`Layout`]) and what reading one finds ([`QuantizedWeight`]).

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::Scheme;
use serde_json::Value;

use super::shared::{band_rows, quantize_bands};
use crate::checkpoint::header::Entry;
use crate::checkpoint::reader::Checkpoint;
use crate::error::LayerError;

/// A tensor a quantized weight is written as: name, dtype, shape.
pub(crate) type Part = (String, DType, Vec<usize>);

/// One checkpoint layout for quantized weights.
pub(crate) trait Layout: Sync {
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
    /// size ([`quantize_bands`]): by default the elements, the scales and the global scale where
    /// the scheme has one. `progress` is given each band's input bytes.
    fn quantize(
        &self,
        ckpt: &Checkpoint,
        e: &Entry,
        scheme: &Scheme,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), LayerError> {
        let (rows, cols) = self.rows_cols(e);
        let row_bytes = e.dtype.storage_bytes(cols).unwrap_or(0);
        let band = band_rows(row_bytes, scheme.row_alignment());
        let read = |first: usize, count: usize, buf: &mut Vec<u8>| {
            buf.resize(count * row_bytes, 0);
            ckpt.read_into(e, first * row_bytes, buf)
        };
        quantize_bands(e, scheme, [rows, cols], band, read, out, progress)
    }
    /// `config.json`'s `quantization_config` for the requested scheme and `--ignore` globs.
    fn config(&self, requested: &str, ignore: &[String]) -> Value;

    // ---- reading

    /// The `quant_method` of `config.json`'s `quantization_config` for this layout.
    fn quant_method(&self) -> &'static str;
    /// Where `e` is one of this layout's scale tensors, the prefix its weight's tensors share.
    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str>;
    /// The quantized weight whose scales are `entries[scales]` (named from `prefix`), read and
    /// checked; `None` where the weight beside them is stored dense (compressed-tensors' "frozen"
    /// state, dense weights that carry their scales along: the weight reads as it is).
    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        config: Option<&Value>,
    ) -> Result<Option<QuantizedWeight>, LayerError>;
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
    pub scheme: Scheme,
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
            crate::checkpoint::json::quote(&self.name),
            self.scheme_name
        ))
    }

    /// Every entry this weight is stored in.
    pub fn parts(&self) -> impl Iterator<Item = usize> + '_ {
        [self.elements, self.scales]
            .into_iter()
            .chain(self.global)
            .chain(self.activation.iter().copied())
    }
}
