//! The bodies of the `cargo fuzz` targets (`fuzz/fuzz_targets/`), here so that the normal test
//! suite replays the committed corpus (`fuzz/corpus/`) through exactly the same code on stable.
//! Each takes arbitrary bytes, must not panic, and checks the laws its parser promises.

use dtcast::cast::CastMode;
use dtcast::layer::checkpoint::{Header, Index};
use dtcast::{DType, Policy, Torch};

/// A whole safetensors file: refused, or its tensors cover the data exactly, in order — and the
/// `safetensors` crate (0.8), whose rules dtcast's are stricter than, reads the same tensors and
/// metadata from it (dtcast reads its header in one pass of its own).
pub fn safetensors_header(data: &[u8]) {
    let Ok(h) = Header::from_bytes(data) else {
        return;
    };
    let (_, theirs) = safetensors::SafeTensors::read_metadata(data)
        .unwrap_or_else(|e| panic!("dtcast accepts a header the safetensors crate refuses: {e}"));
    let tensors = theirs.tensors();
    assert_eq!(tensors.len(), h.entries.len(), "the same tensors");
    for e in &h.entries {
        let t = tensors
            .get(&e.name)
            .unwrap_or_else(|| panic!("`{}` is not a tensor to safetensors", e.name));
        assert_eq!(
            Some(format!("{:?}", t.dtype).as_str()),
            e.dtype.safetensors_name()
        );
        assert_eq!(t.shape, e.shape.as_slice(), "{}", e.name);
        let offsets = (e.range.start - h.data_start, e.range.end - h.data_start);
        assert_eq!(t.data_offsets, offsets, "{}", e.name);
    }
    let mut metadata: Vec<(String, String)> = theirs
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    metadata.sort();
    let mut ours = h.metadata.clone();
    ours.sort();
    assert_eq!(metadata, ours, "the same metadata");
    let mut at = h.data_start;
    for e in &h.entries {
        assert_eq!(e.range.start, at, "tensors are contiguous");
        let numel: usize = e.shape.iter().product();
        assert_eq!(
            Ok(e.range.len()),
            e.dtype.storage_bytes(numel),
            "size matches shape"
        );
        at = e.range.end;
    }
    assert_eq!(at, data.len(), "the data ends at the end of the file");
    assert!(h.entries.iter().all(|e| e.name != "__metadata__"));
}

/// An index file: refused, or every shard is a plain file name.
pub fn index(data: &[u8]) {
    let Ok(i) = Index::parse(data) else {
        return;
    };
    for s in &i.shards {
        assert!(!s.is_empty() && !s.contains('/') && s != ".." && s != ".");
    }
    assert!(i.weight_map.iter().all(|(_, s)| i.shards.contains(s)));
}

/// A dtype name: parsed and round-tripping, or refused with a one-line message.
pub fn dtype_name(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match text.parse::<DType>() {
        Ok(dt) => assert_eq!(dt.name().parse::<DType>(), Ok(dt)),
        Err(e) => {
            let m = e.to_string();
            assert!(!m.contains('\n') && m.len() < 400, "{m}");
        }
    }
}

/// One line of `dtcast promote` operands: each parses or is refused with one short line, and
/// promotion answers or errs, never panics.
pub fn promote_operands(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ops: Result<Vec<_>, _> = text
        .split_whitespace()
        .map(dtcast::cli::parse_operand)
        .collect();
    match ops {
        Ok(ops) if !ops.is_empty() => {
            let _ = Torch::default().result_type(&ops);
        }
        Ok(_) => {}
        Err(m) => assert!(!m.contains('\n') && m.len() < 500, "{m}"),
    }
}

/// `dtcast cast --hex` on arbitrary input, for a pair and mode picked by the first bytes: exit
/// 0 or 1 (never a panic), and on success one output token per input token.
pub fn cast_hex(data: &[u8]) {
    let [a, b, m, rest @ ..] = data else {
        return;
    };
    let from = DType::ALL[usize::from(*a) % DType::COUNT];
    let to = DType::ALL[usize::from(*b) % DType::COUNT];
    let mode = CastMode::ALL[usize::from(*m) % CastMode::ALL.len()];
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let args = [
        "dtcast",
        "cast",
        "--from",
        from.name(),
        "--to",
        to.name(),
        "--mode",
        mode.name(),
        "--hex",
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = dtcast::cli::run(args, &mut text.as_bytes(), &mut out, &mut err);
    assert!(code == 0 || code == 1, "exit {code}");
    if code == 0 {
        let tokens_in = text.split_whitespace().count();
        let out = String::from_utf8(out).expect("hex is text");
        assert_eq!(out.split_whitespace().count(), tokens_in);
    } else {
        assert!(err.len() < 400, "errors stay short: {} bytes", err.len());
    }
}

/// Fuzz input read front to back: a byte, a little-endian number, the rest (0 past the end).
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// A dimension: mostly small (the sizes groups and blocks come in), sometimes anything.
    fn dim(&mut self) -> usize {
        match self.byte() % 8 {
            0 => self.u32() as usize,
            1 => 1 << (self.byte() % 64),
            k => usize::from(self.byte()) * [1, 1, 2, 16, 32, 128][usize::from(k) - 2],
        }
    }

    /// A shape of 0 to 3 dimensions.
    fn shape(&mut self) -> Vec<usize> {
        (0..self.byte() % 4).map(|_| self.dim()).collect()
    }

    /// A scheme by name, for a float32, bfloat16 or float16 weight.
    fn scheme(&mut self) -> (dtcast::quant::Scheme, DType) {
        use dtcast::quant::Scheme;
        let name = Scheme::NAMES[usize::from(self.byte()) % Scheme::NAMES.len()];
        let weight =
            [DType::Float32, DType::BFloat16, DType::Float16][usize::from(self.byte() % 3)];
        (Scheme::named(name, weight).expect("a known name"), weight)
    }

    fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// A quantization error: one short line.
fn short(e: &dtcast::quant::QuantError) {
    let m = e.to_string();
    assert!(!m.contains('\n') && m.len() < 600, "{m}");
}

/// `dequantize` of arbitrary elements, scales, shape, scheme, global scale and output dtype:
/// refused with one short line (never a panic, an abort or an allocation the buffers do not
/// back), or the dense tensor's bytes, exactly.
pub fn dequantize(data: &[u8]) {
    use dtcast::quant::{dequantize, Quantized};
    let mut b = Bytes(data);
    let (scheme, _) = b.scheme();
    let out =
        [DType::Float32, DType::BFloat16, DType::Float16, DType::Int8][usize::from(b.byte() % 4)];
    let shape = b.shape();
    let global = (b.byte() % 2 == 1).then(|| f32::from_bits(b.u32()));
    let split = usize::from(b.byte()) * 4;
    let rest = b.rest();
    let (elements, scales) = rest.split_at(split.min(rest.len()));
    let q = Quantized {
        elements,
        shape: &shape,
        scales,
        global_scale: global,
    };
    match dequantize(&q, &scheme, out) {
        Ok(dense) => {
            let n: usize = shape.iter().product();
            assert_eq!(Ok(dense.len()), out.storage_bytes(n));
        }
        Err(e) => short(&e),
    }
}

/// The integer formats' and bitsandbytes' dequantization of arbitrary parts, shape, layout,
/// bits, groups, zero points, group index, block sizes and output dtype: refused with one short
/// line, or exactly the dense tensor's bytes.
pub fn dequantize_int(data: &[u8]) {
    use dtcast::quant::{
        dequantize_bnb4_into, dequantize_int8_rows_into, dequantize_int_into, Bnb4Scheme,
        Bnb4Weight, IntGroups, IntLayout, IntScheme, IntWeight, ZeroPoints,
    };
    let mut b = Bytes(data);
    let how = b.byte();
    let out = [DType::Float32, DType::BFloat16, DType::Float16, DType::Int8][usize::from(how % 4)];
    let (rows, cols) = (b.dim(), b.dim());
    let scale = [
        DType::Float32,
        DType::BFloat16,
        DType::Float16,
        DType::UInt8,
    ][usize::from(b.byte() % 4)];
    let cuts = [
        usize::from(b.byte()) * 4,
        usize::from(b.byte()) * 4,
        usize::from(b.byte()) * 4,
    ];
    let rest = b.0;
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    for cut in cuts {
        let end = (at + cut).min(rest.len());
        parts.push(&rest[at..end]);
        at = end;
    }
    parts.push(&rest[at..]);
    // (Sized as the shape needs where it can be: a buffer of exactly that length is filled.)
    let dense = |n: Option<usize>| {
        n.and_then(|n| out.storage_bytes(n).ok())
            .filter(|&n| n < 1 << 24)
    };
    let n = rows.checked_mul(cols);
    let Some(bytes) = dense(n) else { return };
    let mut dst = vec![0u8; bytes];
    let result = match how / 4 % 3 {
        0 => {
            let layout = [
                IntLayout::Gptq,
                IntLayout::Awq,
                IntLayout::CompressedTensors,
                IntLayout::Int8,
                IntLayout::AwqGemv,
            ][usize::from(how / 12 % 5)];
            let groups = match cuts[0] % 3 {
                0 => IntGroups::Tensor,
                1 => IntGroups::Channel,
                _ => IntGroups::Size(cuts[1] / 4),
            };
            let zeros = [
                ZeroPoints::Midpoint,
                ZeroPoints::Stored,
                ZeroPoints::StoredMinusOne,
            ][cuts[2] % 3];
            let scheme = IntScheme {
                layout,
                bits: u32::from(how / 48 % 10),
                groups,
                zeros,
                scale,
            };
            let w = IntWeight {
                rows,
                cols,
                codes: parts[0],
                scales: parts[1],
                zeros: (zeros != ZeroPoints::Midpoint).then_some(parts[2]),
                group_index: (how & 0x80 != 0).then_some(parts[3]),
            };
            dequantize_int_into(&w, &scheme, out, &mut dst)
        }
        1 => {
            let scheme = Bnb4Scheme {
                blocksize: cuts[0] / 4,
                nested: (how & 0x80 != 0).then_some((cuts[1] / 4, 0.5)),
                dtype: scale,
            };
            let w = Bnb4Weight {
                elements: rows.saturating_mul(cols),
                codes: parts[0],
                quant_map: parts[1],
                absmax: parts[2],
                nested: scheme.nested.map(|_| (parts[3], parts[3])),
            };
            dequantize_bnb4_into(&w, &scheme, out, &mut dst)
        }
        _ => dequantize_int8_rows_into(parts[0], &[rows, cols], parts[1], out, &mut dst),
    };
    if let Err(e) = result {
        short(&e);
    }
}

/// `quantize` of arbitrary input, shape and scheme: refused with one short line, or elements
/// and scales of exactly the sizes the shape needs, which dequantize back to the shape.
pub fn quantize(data: &[u8]) {
    use dtcast::quant::{dequantize, quantize};
    let mut b = Bytes(data);
    let (scheme, weight) = b.scheme();
    let dtype = [weight, DType::Float16][usize::from(b.byte() % 8 == 7)];
    let shape = b.shape();
    let src = b.rest();
    // Shapes of no columns and 2^30 rows are valid and have 2^30 channel scales: allocating them
    // is right, but not what a fuzzer's memory limit allows (the unit tests hold the shapes
    // whose scales cannot be allocated to an error).
    let matrix = shape.split_last().and_then(|(&c, lead)| {
        let rows = lead.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        Some((rows, c))
    });
    if matrix.is_some_and(|(rows, cols)| scheme.scale_bytes(rows, cols).is_ok_and(|b| b > 1 << 24))
    {
        return;
    }
    match quantize(src, dtype, &shape, &scheme) {
        Ok(q) => {
            let n: usize = shape.iter().product();
            assert_eq!(Ok(q.elements.len()), scheme.element.storage_bytes(n));
            let (rows, cols) = matrix.expect("a shape of no dimensions is refused");
            assert_eq!(Ok(q.scales.len()), scheme.scale_bytes(rows, cols));
            let dense = dequantize(&q.view(&shape), &scheme, dtype).expect("its own output reads");
            assert_eq!(dense.len(), src.len());
        }
        Err(e) => short(&e),
    }
}

/// The `config.json` files of the reference checkpoints, for [`convert`].
const CONFIGS: [&str; 13] = [
    include_str!("../fixtures/scaled/checkpoints/ct_fp8_block/config.json"),
    include_str!("../fixtures/scaled/checkpoints/ct_fp8_channel/config.json"),
    include_str!("../fixtures/scaled/checkpoints/ct_mxfp4/config.json"),
    include_str!("../fixtures/scaled/checkpoints/ct_mxfp8/config.json"),
    include_str!("../fixtures/scaled/checkpoints/ct_nvfp4/config.json"),
    include_str!("../fixtures/scaled/checkpoints/deepseek_fp8_block/config.json"),
    include_str!("../fixtures/scaled/checkpoints/gptoss_mxfp4/config.json"),
    include_str!("../fixtures/modelopt_nvfp4/config.json"),
    include_str!("../fixtures/intq/gptq_b4_g128_act/config.json"),
    include_str!("../fixtures/intq/awq_gemm_g128/config.json"),
    include_str!("../fixtures/intq/ct_w4a16_asym/config.json"),
    include_str!("../fixtures/intq/bnb_nf4_dq/config.json"),
    include_str!("../fixtures/intq/bnb_int8/config.json"),
];

/// ModelOpt's `hf_quant_config.json`, alone (how older ModelOpt exports describe their
/// quantization), for [`convert`].
const HF_QUANT_CONFIGS: [&str; 1] = [include_str!(
    "../fixtures/modelopt_fp8/hf_quant_config.json"
)];

/// `dtcast convert` (the library's `convert_file`) of an arbitrary safetensors file, beside one
/// of the reference checkpoints' `config.json`, a ModelOpt `hf_quant_config.json`, or none,
/// dequantizing (`--dtype bfloat16`, some tensors kept) or quantizing (`--quantize`, each scheme
/// and format): refused with an error and no output, or an output that opens and whose every
/// tensor reads.
pub fn convert(data: &[u8]) {
    use dtcast::layer::checkpoint::{
        convert_file, Checkpoint, ConvertOptions, Quantize, QuantizedFormat,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let [how, config, file @ ..] = data else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "dtcast-fuzz-convert-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let input = dir.join("model.safetensors");
    std::fs::write(&input, file).expect("the input written");
    if let Some(text) = CONFIGS.get(usize::from(*config)) {
        std::fs::write(dir.join("config.json"), text).expect("config.json written");
    }
    if let Some(text) = HF_QUANT_CONFIGS.get(usize::from(*config).wrapping_sub(CONFIGS.len())) {
        std::fs::write(dir.join("hf_quant_config.json"), text).expect("hf_quant_config written");
    }
    let mut options = ConvertOptions::new(DType::BFloat16);
    let schemes = [
        "fp8-tensor",
        "fp8-channel",
        "fp8-block",
        "mxfp8",
        "mxfp4",
        "nvfp4",
        "w4a16",
        "w4a16-asym",
    ];
    if let Some(scheme) = schemes.get(usize::from(how % 16)) {
        let format = QuantizedFormat::ALL[usize::from(how / 16 % 3)];
        options.quantize = Some(Quantize {
            scheme: (*scheme).to_owned(),
            ignore: Vec::new(),
            format,
            group_size: None,
        });
    }
    if how & 0x80 != 0 {
        // Some weights (quantized or not) and their tensors kept as they are.
        options.keep = vec!["*.layers.0.*".to_owned()];
    }
    let out = dir.join("out.safetensors");
    match convert_file(&input, &out, &options, &|_, _| {}) {
        Ok(_) => {
            let c = Checkpoint::open(&out).expect("the output opens");
            for e in c.entries() {
                c.read(e).expect("every tensor of the output reads");
            }
            // A plain cast (same tensors in, same out): each tensor is what a cast of it alone
            // gives, however the pipeline grouped them into chunks.
            let src = Checkpoint::open(&input).expect("the input opens");
            let same_names =
                (src.entries().iter().map(|e| &e.name)).eq(c.entries().iter().map(|e| &e.name));
            if options.quantize.is_none() && same_names {
                for (a, b) in src.entries().iter().zip(c.entries()) {
                    let bytes = src.read(a).expect("the input reads");
                    let want = if a.dtype == b.dtype {
                        bytes
                    } else {
                        dtcast::cast::cast_to_vec(&bytes, a.dtype, b.dtype, CastMode::Torch)
                            .expect("a Torch-mode cast of a tensor that converted")
                    };
                    assert_eq!(c.read(b).expect("reads"), want, "{}", a.name);
                }
            }
        }
        Err(e) => {
            assert!(!out.exists(), "an error left an output: {e}");
            assert!(e.to_string().len() < 2000, "{e}");
        }
    }
    std::fs::remove_dir_all(&dir).expect("the scratch folder removed");
}

/// `cargo fuzz run gguf_header`: any bytes as a GGUF file. Refused, or read with every
/// tensor's bytes those of its type and shape, laid out in order within the input, and every
/// name and value printable without a control character.
pub fn gguf_header(data: &[u8]) {
    use dtcast::layer::gguf::parse_gguf;
    let Ok(g) = parse_gguf(data) else {
        return;
    };
    let mut end = 0;
    for t in &g.tensors {
        let bytes = t.ggml.bytes_for(t.elements() as usize).map(|b| b as u64);
        assert_eq!(bytes, Some(t.bytes), "{}", t.name);
        assert!(
            t.offset >= end && t.offset.is_multiple_of(g.alignment),
            "{}",
            t.name
        );
        end = t.offset + t.bytes;
        assert!(g.data_start + end <= data.len() as u64, "{}", t.name);
        let name = dtcast::layer::text::escape(&t.name);
        assert!(!name.chars().any(char::is_control), "{name}");
    }
    for (_, v) in &g.metadata {
        let shown = v.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown}");
    }
}

/// A fuzz target's body.
pub type Body = fn(&[u8]);

/// Every target: its name (the folder of its corpus) and its body.
pub const TARGETS: [(&str, Body); 10] = [
    ("safetensors_header", safetensors_header),
    ("index", index),
    ("dtype_name", dtype_name),
    ("promote_operands", promote_operands),
    ("cast_hex", cast_hex),
    ("dequantize", dequantize),
    ("quantize", quantize),
    ("convert", convert),
    ("dequantize_int", dequantize_int),
    ("gguf_header", gguf_header),
];
