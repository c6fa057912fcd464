//! The command line: every subcommand and flag, in one place.

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use dtcast_cast::CastMode;
use dtcast_dtype::DType;
use dtcast_promote::{Casting, Operand};

/// PyTorch's dtype semantics without libtorch.
#[derive(Debug, Parser)]
#[command(name = "dtcast", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print the dtype an operation over OPERANDs computes in (torch's result_type).
    ///
    /// Operands: `int8[2]` (a tensor with dimensions), `int8[]` (a 0-dim tensor), and Python
    /// scalars `True`/`False`, `3`, `2.5`/`1e3`/`inf`/`nan`, `(1+2j)`/`2j`. With no operands, reads
    /// one case per line from stdin (operands separated by spaces) and prints one result per line.
    Promote(PromoteArgs),
    /// Print whether can_cast(FROM, TO) holds under a policy (torch's by default): `true` or `false`.
    CanCast(CanCastArgs),
    /// Print the promotion table (promote_types of every pair of the policy's dtypes) as markdown.
    Table(TableArgs),
    /// Print the shape a tensor has when its bytes are read as another dtype.
    Bitcast(BitcastArgs),
    /// Convert raw little-endian elements from one dtype to another (stdin to stdout by default).
    Cast(CastArgs),
    /// Measure cast throughput per dtype pair beside a memcpy of the same bytes.
    Bench(BenchArgs),
    /// Print a device string as torch prints it (`cuda` stays `cuda`, `cpu:0` stays `cpu:0`;
    /// Paddle's `gpu:1` -> `cuda:1`), or an error naming what is wrong.
    Device(DeviceArgs),
    /// List the backends usable on this machine, and why CUDA is not.
    Devices,
    /// List every dtype: names and aliases, bits, category, float format, safetensors name.
    Dtypes(DtypesArgs),
    /// List a checkpoint's tensors (name, dtype, shape, bytes), totals per dtype, metadata; for a
    /// sharded checkpoint's index.json, per shard and for the whole.
    Inspect(InspectArgs),
    /// Convert a safetensors checkpoint (or a sharded one, via its index.json) to another dtype.
    Convert(ConvertArgs),
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// A .safetensors file, a sharded checkpoint's `*.safetensors.index.json`, a model
    /// directory (its `model.safetensors.index.json` or `model.safetensors`, as `convert` reads
    /// it), or a GGUF file.
    pub(crate) file: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct DtypesArgs {
    /// One JSON object per dtype, one per line.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    /// A .safetensors file, a sharded checkpoint's `*.safetensors.index.json`, or a model
    /// directory (its weights converted, its other files copied, `config.json` updated).
    pub(crate) input: PathBuf,
    /// The output file (for an index or a directory: the output directory).
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: PathBuf,
    /// The dtype to convert to (any name `dtcast dtypes` lists, safetensors' `BF16` too). On a
    /// quantized checkpoint (float32, bfloat16 or float16) the quantized weights are dequantized.
    #[arg(long, value_name = "DT", value_parser = parse_dtype, required_unless_present = "quantize")]
    pub(crate) dtype: Option<DType>,
    /// Quantize the linear weights (2-D `*.weight`, not embeddings or lm_head) instead: fp8-tensor,
    /// fp8-channel, fp8-block, mxfp8, mxfp4, nvfp4, or the integer presets w4a16, w4a16-asym,
    /// w8a16, w2a16, w8a16-channel, written as compressed-tensors writes them.
    #[arg(long, value_name = "SCHEME", conflicts_with_all = ["dtype", "all", "keep", "mode", "device"])]
    pub(crate) quantize: Option<String>,
    /// With --quantize: the layout to write: compressed-tensors (every scheme), deepseek
    /// (fp8-block: DeepSeek-V3's weight_scale_inv) or gpt-oss (mxfp4: the MoE experts' _blocks
    /// and _scales).
    #[arg(
        long,
        value_name = "LAYOUT",
        default_value = "compressed-tensors",
        requires = "quantize"
    )]
    pub(crate) format: String,
    /// With --quantize mxfp8 or mxfp4: torchao's E8M0 scale rule (floor, ceil, even, rceil)
    /// instead of the format's own (compressed-tensors' rule; gpt-oss: rceil).
    #[arg(long, value_name = "RULE", requires = "quantize")]
    pub(crate) scale_rounding: Option<String>,
    /// With --quantize w4a16, w4a16-asym, w8a16 or w2a16: the columns each scale covers
    /// (compressed-tensors' `group_size`; the presets' is 128).
    #[arg(long, value_name = "N", requires = "quantize")]
    pub(crate) group_size: Option<usize>,
    /// With --quantize: weights to leave unquantized (name or glob; repeat or separate with
    /// commas; each must match a tensor).
    #[arg(
        long,
        value_name = "NAME_OR_GLOB",
        value_delimiter = ',',
        requires = "quantize"
    )]
    pub(crate) ignore: Vec<String>,
    /// Convert every tensor (integer and bool ones too), not only the floating ones.
    #[arg(long)]
    pub(crate) all: bool,
    /// Leave tensors with this name or glob pattern (e.g. `*.norm.weight`) as they are; repeat the
    /// flag or separate patterns with commas. Each must match a tensor. On a quantized weight
    /// (or any of its tensors): keep it quantized.
    #[arg(long, value_name = "NAME_OR_GLOB", value_delimiter = ',')]
    pub(crate) keep: Vec<String>,
    /// How values that do not fit are treated.
    #[arg(long, default_value = "torch", value_parser = ModeParser)]
    pub(crate) mode: CastMode,
    /// Where the casts run: cpu, or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub(crate) device: dtcast_device::Device,
    /// Replace an existing output.
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct DeviceArgs {
    /// A device string: `cpu`, `cuda`, `cuda:N`, `gpu:N`.
    #[arg(allow_hyphen_values = true)]
    pub(crate) device: String,
}

#[derive(Debug, Args)]
pub(crate) struct CastArgs {
    /// The dtype of the input elements.
    #[arg(long, value_name = "DT", value_parser = parse_dtype)]
    pub(crate) from: DType,
    /// The dtype to convert them to.
    #[arg(long, value_name = "DT", value_parser = parse_dtype)]
    pub(crate) to: DType,
    /// How values that do not fit are treated.
    #[arg(long, default_value = "torch", value_parser = ModeParser)]
    pub(crate) mode: CastMode,
    /// Read and write whitespace-separated hex, one token per element (its little-endian bytes).
    #[arg(long)]
    pub(crate) hex: bool,
    /// Input file; stdin when absent.
    pub(crate) input: Option<PathBuf>,
    /// Output file (written whole or not at all; the input's permission bits); stdout when absent.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: Option<PathBuf>,
    /// Replace an existing output file.
    #[arg(long, requires = "output")]
    pub(crate) force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Elements per buffer (1 to 2^32).
    #[arg(long, default_value_t = 1 << 24, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    pub(crate) elements: u64,
    /// Threads (default: all cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) threads: Option<u16>,
    /// Comma-separated pairs `FROM:TO` (default: the hot pairs).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair)]
    pub(crate) pairs: Vec<(DType, DType)>,
    /// The cast mode to measure; several, comma-separated, are measured in the same rounds.
    #[arg(long, default_value = "torch", value_delimiter = ',', value_parser = ModeParser)]
    pub(crate) mode: Vec<CastMode>,
    /// The kernels to use: scalar, portable, avx2 or avx512 (default: the best this machine has).
    /// Several, comma-separated, are measured in the same rounds, taking turns, and compared
    /// with the first. With --scheme, one set: every step runs what a machine whose best set it
    /// is runs (the one-pass forms' SIMD kernels need avx2 or avx512).
    #[arg(long, value_delimiter = ',', value_parser = parse_isa)]
    pub(crate) backend: Vec<dtcast_cast::Isa>,
    /// Measure the allocating path (`cast_to_vec`: a new buffer per cast, and in Checked and Exact
    /// mode one pass that checks and converts) instead of a cast into a buffer of the caller's.
    #[arg(long, conflicts_with = "scratch")]
    pub(crate) alloc: bool,
    /// Measure `cast_into_scratch` into a reused buffer (what checkpoint conversion does with its
    /// pooled buffers: one pass in Checked and Exact mode) instead of `cast`.
    #[arg(long)]
    pub(crate) scratch: bool,
    /// Timed repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) repeat: u32,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Scaled schemes to measure instead of casts: quantizing bfloat16 weights and dequantizing
    /// them back (fp8-tensor, fp8-channel, fp8-block, mxfp8, mxfp4, nvfp4 — compressed-tensors'
    /// — or a reference's name such as ao_mxfp4_rceil), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) scheme: Vec<String>,
    /// With --scheme: the dtype to dequantize into: bfloat16 (the default), float16 or float32.
    #[arg(long, value_name = "DT", value_parser = parse_dtype, requires = "scheme")]
    pub(crate) dequantize_to: Option<DType>,
    /// With --scheme: the dtype of the weight to quantize: bfloat16 (the default), float32, or
    /// float16 (compressed-tensors' schemes, in its float16 arithmetic).
    #[arg(long, value_name = "DT", value_parser = parse_dtype, requires = "scheme")]
    pub(crate) quantize_from: Option<DType>,
    /// Where the casts run: cpu, or cuda:N (the cast kernel beside a device-to-device copy of the
    /// same bytes, and the whole `Tensor::to` on the device; with --scheme, the whole quantize and
    /// dequantize calls on the device beside copies of their bytes, and their bytes compared with
    /// the CPU's).
    #[arg(long, default_value = "cpu")]
    pub(crate) device: dtcast_device::Device,
    /// With a CUDA device: also time host <-> device transfers (pinned against pageable) and
    /// moving a float32 tensor to the device as bfloat16 (cast before the bus against after it).
    #[arg(long)]
    pub(crate) transfers: bool,
    /// Bytes per transfer for --transfers.
    #[arg(long, default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(1 << 16..=1 << 36))]
    pub(crate) transfer_bytes: u64,
}

/// `avx2` → the kernel set.
fn parse_isa(s: &str) -> Result<dtcast_cast::Isa, String> {
    s.parse()
        .map_err(|e: dtcast_cast::ParseIsaError| e.to_string())
}

/// `float32:bfloat16` → the pair.
fn parse_pair(s: &str) -> Result<(DType, DType), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not a pair: expected FROM:TO, like float32:bfloat16"))?;
    Ok((parse_dtype(a.trim())?, parse_dtype(b.trim())?))
}

/// A dtype name, with a pointer to the list of names when it is not one.
pub(crate) fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
        .map_err(|e| format!("{e} (`dtcast dtypes` lists every name)"))
}

/// `--mode`: the names of [`CastMode::ALL`], case-insensitive, listed with a line each in `--help`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModeParser;

impl TypedValueParser for ModeParser {
    type Value = CastMode;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<CastMode, clap::Error> {
        let text = value.to_string_lossy();
        text.to_ascii_lowercase().parse().map_err(|_| {
            let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            let arg = arg.map_or_else(|| "--mode".to_owned(), ToString::to_string);
            e.insert(
                clap::error::ContextKind::InvalidArg,
                clap::error::ContextValue::String(arg),
            );
            e.insert(
                clap::error::ContextKind::InvalidValue,
                clap::error::ContextValue::String(text.into_owned()),
            );
            e.insert(
                clap::error::ContextKind::ValidValue,
                clap::error::ContextValue::Strings(
                    CastMode::ALL.iter().map(|m| m.name().to_owned()).collect(),
                ),
            );
            e
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            CastMode::ALL
                .into_iter()
                .map(|m| PossibleValue::new(m.name()).help(m.summary())),
        ))
    }
}

/// Whose promotion rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyName {
    /// PyTorch 2.15 (`torch.promote_types`, `torch.result_type`, `torch.can_cast`).
    Torch,
    /// jax 0.10 with `jax_enable_x64` (weak Python scalars; `can-cast`: the lattice's order).
    Jax,
    /// jax 0.10 with `jax_enable_x64` off (64-bit results made 32-bit).
    JaxNoX64,
    /// numpy 2.4 with ml_dtypes 0.7 (NEP 50: weak Python scalars, an integer literal must fit
    /// the result as in `np.add`; `can-cast --casting`).
    Numpy,
    /// The Python Array API standard 2025.12, as array-api-strict 2.6.1 (within a kind only;
    /// Python scalars must match the arrays' kind).
    ArrayApi,
}

/// The policy flags of `promote`, `can-cast` and `table`.
#[derive(Debug, Args)]
pub(crate) struct PolicyArgs {
    /// Whose promotion rules.
    #[arg(long, value_enum, default_value = "torch")]
    pub(crate) policy: PolicyName,
    /// torch's default dtype (torch.set_default_dtype): float16, bfloat16, float32 (when not
    /// given) or float64. JAX's follows x64; NumPy's is float64.
    #[arg(long, value_name = "DT", value_parser = parse_dtype)]
    pub(crate) default_dtype: Option<DType>,
}

#[derive(Debug, Args)]
pub(crate) struct PromoteArgs {
    /// The operands; none: read cases from stdin. Negative numbers are operands; put `--`
    /// before operands such as `-inf` or `-2j` that are not plain numbers. Integer literals keep
    /// their value: under `--policy numpy` one that does not fit the result is an error, as in
    /// `np.add` (`uint8[2] 300`).
    #[arg(value_parser = super::operand::parse_operand, allow_negative_numbers = true)]
    pub(crate) operands: Vec<Operand>,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CanCastArgs {
    /// The dtype cast from.
    #[arg(value_parser = parse_dtype)]
    pub(crate) from: DType,
    /// The dtype cast to.
    #[arg(value_parser = parse_dtype)]
    pub(crate) to: DType,
    /// NumPy's casting level: no, equiv, safe, same_kind (when not given: what an operation
    /// may write to its output) or unsafe. For torch and JAX, read off their lattice (see the
    /// docs of dtcast::promote::Casting).
    #[arg(long, value_name = "LEVEL", value_parser = parse_casting)]
    pub(crate) casting: Option<Casting>,
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

fn parse_casting(s: &str) -> Result<Casting, String> {
    s.parse::<Casting>()
        .map_err(|e| format!("invalid casting `{}`: {e}", super::quote(s)))
}

#[derive(Debug, Args)]
pub(crate) struct TableArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// `markdown`: promote_types of every pair; `dot`: the lattice's Hasse diagram for Graphviz
    /// (an edge a -> b when b = promote_types(a, b) != a and no dtype lies strictly between);
    /// `svg`: that diagram drawn, dtypes colored by category.
    #[arg(long, value_enum, default_value = "markdown")]
    pub(crate) format: TableFormat,
}

/// How `dtcast table` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum TableFormat {
    /// A markdown table of promote_types over every pair.
    Markdown,
    /// The Hasse diagram of the promotion order, in Graphviz's DOT language.
    Dot,
    /// The same diagram laid out and drawn as SVG in-process (layout-rs; no Graphviz needed).
    Svg,
}

#[derive(Debug, Args)]
pub(crate) struct BitcastArgs {
    /// The dtype the bytes hold.
    #[arg(long, value_name = "DT", value_parser = parse_dtype)]
    pub(crate) from: DType,
    /// The dtype to read them as.
    #[arg(long, value_name = "DT", value_parser = parse_dtype)]
    pub(crate) to: DType,
    /// The input shape, comma-separated (`2,3,4`); `""` is a 0-dim tensor.
    #[arg(long, value_parser = parse_shape, allow_hyphen_values = true)]
    pub(crate) shape: Shape,
    /// The shape rule: `view` (torch's view(dtype)) or `xla` (jax.lax.bitcast_convert_type).
    #[arg(long, value_enum, default_value_t = RuleName::View)]
    pub(crate) rule: RuleName,
}

/// A parsed `--shape` (a newtype so that clap does not read it as a list of values).
#[derive(Clone, Debug)]
pub(crate) struct Shape(pub(crate) Vec<usize>);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RuleName {
    /// torch's Tensor.view(dtype): scale the last dimension.
    View,
    /// XLA / JAX bitcast_convert_type: append or remove the minor dimension.
    Xla,
}

/// `2,3,4` → `[2, 3, 4]`; `""` → `[]`; surrounding brackets and spaces are allowed.
fn parse_shape(s: &str) -> Result<Shape, String> {
    let inner = s.trim();
    let inner = inner
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(inner)
        .trim();
    if inner.is_empty() {
        return Ok(Shape(Vec::new()));
    }
    inner
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{}` is not a dimension: expected comma-separated non-negative integers like `2,3,4`, or \"\" for a 0-dim tensor", d.trim()))
        })
        .collect::<Result<_, _>>()
        .map(Shape)
}
