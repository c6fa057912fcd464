//! The layouts of quantized checkpoints, one module each behind [`Layout`] (`api.rs`): how a
//! quantized weight is recognised and read (its scale tensor, the tensors beside it, the scheme
//! they say), how one is written (names, dtypes, shapes, any transposition), and what
//! `config.json` says about it. Detection (`quantized.rs`) and quantizing (`quantize.rs`) are
//! written once, over every layout.

use std::fmt;
use std::str::FromStr;

mod api;
mod auto_round;
mod awq;
mod bitsandbytes;
pub(crate) mod compressed_tensors;
mod compressed_tensors_int;
mod deepseek;
mod gpt_oss;
mod gptq;
mod modelopt;
mod shared;

pub(crate) use api::{
    check_whole_modules, is_attention_parameter, list_modules, mark_dense, metadata_reader, module,
    Layout, Reader, TensorData,
};
pub use api::{QuantizedWeight, WeightScheme, ACTIVATION_PARAMETERS, ATTENTION_PARAMETERS};

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
        self.layout().name()
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

/// Every layout dtcast reads: those it writes (`--format`), and ModelOpt's NVFP4. Their scale
/// tensors' names tell them apart; where two share one (ModelOpt's `weight_scale` is named as
/// compressed-tensors'), the first whose [`Reader::read`] claims the weight reads it, so
/// ModelOpt, which tells its own by a `weight_scale_2` or its config, comes first.
pub(crate) const READERS: [&dyn Reader; 7] = [
    &modelopt::ModelOpt,
    &compressed_tensors::CompressedTensors,
    &deepseek::DeepSeek,
    &gpt_oss::GptOss,
    &gptq::Gptq,
    &awq::Awq,
    &bitsandbytes::BitsAndBytes,
];

/// The layout whose `config.json` says `quant_method` (`fp8`: DeepSeek's, whose config's keys
/// vLLM's per-tensor FP8 checkpoints share; `auto-round`: GPTQ's, whose tensors AutoRound's
/// format has unless its `packing_format` names AutoAWQ's).
pub(crate) fn reader_of_method(quant_method: &str) -> Option<&'static dyn Reader> {
    READERS
        .into_iter()
        .find(|r| r.quant_method() == quant_method || r.other_methods().contains(&quant_method))
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
