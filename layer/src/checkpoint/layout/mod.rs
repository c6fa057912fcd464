//! The layouts `convert --quantize` writes: how one quantized weight is stored (tensor names,
//! dtypes, shapes, any transposition) and what `config.json` says about it, one module per
//! layout behind [`Layout`]. The quantizing, the plan and the streaming are written once
//! (`quantize.rs`); the layouts' readers are in `quantized.rs`.

use std::fmt;
use std::str::FromStr;

use dtcast_dtype::DType;
use dtcast_quant::{QuantError, Scheme};
use serde_json::Value;

use super::header::Entry;

pub(crate) mod compressed_tensors;
mod deepseek;
mod gpt_oss;

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
    /// The bytes of each of [`parts`](Layout::parts), from `e`'s stored `bytes`: by default the
    /// elements, the scales and the global scale where the scheme has one.
    fn quantize(
        &self,
        e: &Entry,
        bytes: &[u8],
        scheme: &Scheme,
    ) -> Result<Vec<Vec<u8>>, QuantError> {
        let q = dtcast_quant::quantize(bytes, e.dtype, &e.shape, scheme)?;
        let mut out = vec![q.elements, q.scales];
        out.extend(q.global_scale.map(|g| g.to_le_bytes().to_vec()));
        Ok(out)
    }
    /// `config.json`'s `quantization_config` for the requested scheme and `--ignore` globs.
    fn config(&self, requested: &str, ignore: &[String]) -> Value;
}

/// The layouts `convert --quantize` can write (`--format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantizedFormat {
    /// compressed-tensors (what vLLM loads): `weight` + `weight_scale`, `weight_packed` for
    /// float4, `weight_global_scale` for NVFP4; every scheme.
    #[default]
    CompressedTensors,
    /// DeepSeek-V3's native FP8: `weight` float8_e4m3fn + `weight_scale_inv` float32 per
    /// 128×128 block; `fp8-block` only.
    DeepSeek,
    /// gpt-oss MXFP4: the MoE experts' `*_blocks` and `*_scales` (E8M0 bytes), transposed to
    /// `[experts, rows, cols]`; `mxfp4` only.
    GptOss,
}

impl QuantizedFormat {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [QuantizedFormat; 3] = [
        QuantizedFormat::CompressedTensors,
        QuantizedFormat::DeepSeek,
        QuantizedFormat::GptOss,
    ];

    /// The `--format` name.
    pub fn name(self) -> &'static str {
        match self {
            QuantizedFormat::CompressedTensors => "compressed-tensors",
            QuantizedFormat::DeepSeek => "deepseek",
            QuantizedFormat::GptOss => "gpt-oss",
        }
    }

    pub(crate) fn layout(self) -> &'static dyn Layout {
        match self {
            QuantizedFormat::CompressedTensors => &compressed_tensors::CompressedTensors,
            QuantizedFormat::DeepSeek => &deepseek::DeepSeek,
            QuantizedFormat::GptOss => &gpt_oss::GptOss,
        }
    }

    /// The reference scheme this format stores for a `--quantize` name, or a message naming
    /// what it stores.
    pub fn scheme_name(self, requested: &str) -> Result<String, String> {
        self.layout().scheme_name(requested)
    }
}

impl fmt::Display for QuantizedFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QuantizedFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        QuantizedFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = QuantizedFormat::ALL.iter().map(|f| f.name()).collect();
                format!("--format {s}: the formats are {}", names.join(", "))
            })
    }
}

/// The module a weight name or glob names: the glob less its parameter name (`a.*.weight` →
/// `a.*`), as configs list modules left unquantized.
pub(crate) fn module_of<'a>(glob: &'a str, params: &[&str]) -> &'a str {
    params
        .iter()
        .find_map(|p| glob.strip_suffix(p))
        .unwrap_or(glob)
}

/// Whether compressed-tensors' default targets include `e`: a 2-D floating `*.weight` that is
/// not an embedding or the output head.
pub(crate) fn is_linear_weight(e: &Entry) -> bool {
    let name = e.name.as_str();
    e.dtype.is_floating_point()
        && e.shape.len() == 2
        && name.ends_with(".weight")
        && !name.contains("embed")
        && !name.starts_with("lm_head")
        && !name.contains(".lm_head")
}
