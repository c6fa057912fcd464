//! How the scales of a quantized tensor apply: [`Scheme`].

use dtcast_dtype::DType;

use crate::QuantError;

/// Which elements share a scale. Shapes are `[rows, cols]` (a tensor of more dimensions counts
/// its leading ones as rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// One scale for the tensor.
    Tensor,
    /// One scale per row (output channel).
    Channel,
    /// One scale per `k` consecutive elements of a row (`cols` must be a multiple of `k`).
    Group(usize),
    /// One scale per `rows × cols` block; edge blocks are cropped.
    Block(usize, usize),
}

/// How a power-of-two (E8M0) scale is rounded from a group's largest magnitude `amax`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MxRounding {
    /// torchao FLOOR (OCP MX's rule): the exponent of `amax` minus the element's.
    Floor,
    /// torchao CEIL: FLOOR plus one when `amax` is not a power of two.
    Ceil,
    /// torchao EVEN: `amax`'s mantissa rounded to the element's width first, then FLOOR.
    Even,
    /// torchao RCEIL (OpenAI's ROUND_UP): `ceil(log2(amax / max_element))`.
    RCeil,
    /// compressed-tensors' rule: `amax`'s mantissa rounded at float4's width (up from 1.75) for
    /// every element format, then FLOOR (equal to EVEN for MXFP4, not for MXFP8).
    CompressedTensors,
}

/// How the scale of a group is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleRule {
    /// `amax / max_element`, stored in the scale dtype.
    AbsMax,
    /// A power of two, stored as an E8M0 byte.
    PowerOfTwo(MxRounding),
    /// compressed-tensors' integer scales from a group's minimum and maximum (its `W4A16`
    /// presets): `max(|min|, |max|) / (range / 2)` where `symmetric`, else `(max − min) / range`
    /// with a zero point ([`quantize_int_rows`](crate::quantize_int_rows)).
    MinMax {
        /// Whether the zero point is 0 (no zero points stored).
        symmetric: bool,
    },
}

/// Whose arithmetic a scheme follows: the references round in different dtypes and read some
/// bytes differently, and each checkpoint is read as its own tool reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convention {
    /// compressed-tensors 0.20 (what vLLM loads): dequantization multiplies in the scale's dtype
    /// (bfloat16 for MX scales); NVFP4's global scale divides. Quantizing is its `quantize`
    /// called without a zero point, as in its reference cases, so a scaled -0.0 stays float8's
    /// -0 (0x80); a model quantized through compressed-tensors' own pipeline has a zero point of
    /// 0.0 registered, which its float8 compressors add after the division, storing +0 (0x00)
    /// there instead. (Its float4 zero is unsigned either way.) float16 weights quantize in
    /// float16 arithmetic, as compressed-tensors computes on them (FP8 scales stored in float16).
    /// A NaN amax reads as the default NaN (torch's vectorised and scalar kernels disagree).
    CompressedTensors,
    /// torchao 0.18: MX products in the output dtype, E8M0 255 is NaN; NVFP4's per-tensor scale
    /// multiplies.
    TorchAo,
    /// DeepSeek-V3's block FP8: `weight_scale_inv` (a multiplier despite its name), float32
    /// products.
    DeepSeek,
    /// gpt-oss MXFP4 as transformers reads it: `ldexp` of the element by `byte - 127` (255 is
    /// 2^128, not NaN); the output is transposed to `[experts, cols, rows]`.
    GptOss,
    /// NVIDIA ModelOpt 0.47 as its `dequantize` reads a checkpoint: NVFP4 (`NVFP4QTensor`) is
    /// torchao's two-level arithmetic (`e2m1 × (scale × weight_scale_2)` in float32), except that
    /// float4 code 0x8 reads as +0 (its table has no -0); FP8 (`FP8QTensor`) multiplies element
    /// and scale each converted to the output dtype, in it (as torchao's MX products). Read only:
    /// quantizing with it is an error.
    ModelOpt,
}

/// A quantization scheme: element dtype, scale dtype and layout, scale rule, and convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// Which elements share a scale.
    pub granularity: Granularity,
    /// The element dtype (float8_e4m3fn or float4_e2m1fn).
    pub element: DType,
    /// The dtype scales are stored in (E8M0 bytes: `uint8` or `float8_e8m0fnu`).
    pub scale: DType,
    /// How a scale is chosen.
    pub rule: ScaleRule,
    /// Whether a float32 global scale applies on top of the group scales (NVFP4).
    pub global_scale: bool,
    /// Whose arithmetic.
    pub convention: Convention,
}

/// compressed-tensors' integer presets (`W4A16`, `W4A16_ASYM`, `W8A16`, `W2A16`, and `INT8`'s
/// per-channel weights): name, element, granularity, symmetric. Their scales are in the
/// weight's dtype.
const INTEGER_PRESETS: [(&str, DType, Granularity, bool); 5] = [
    ("ct_w4a16", DType::Int4, Granularity::Group(128), true),
    ("ct_w4a16_asym", DType::Int4, Granularity::Group(128), false),
    ("ct_w8a16", DType::Int8, Granularity::Group(128), true),
    ("ct_w2a16", DType::Int2, Granularity::Group(128), true),
    ("ct_w8a16_channel", DType::Int8, Granularity::Channel, true),
];

/// The error for an integer scheme given to the scaled formats' functions.
pub(crate) fn not_scaled() -> QuantError {
    QuantError::Scheme {
        reason: "an integer scheme: integer weights are quantized with `quantize_int_rows` and \
                 dequantized with `dequantize_int_into`"
            .to_owned(),
    }
}

/// The names [`Scheme::named`] knows (the references' own scheme names).
pub(crate) const NAMES: &[&str] = &[
    "ct_fp8_tensor",
    "ct_fp8_channel",
    "ct_fp8_block",
    "ct_mxfp8",
    "ct_mxfp4",
    "ct_mxfp6",
    "ct_nvfp4",
    "ao_mxfp8_floor",
    "ao_mxfp8_ceil",
    "ao_mxfp8_even",
    "ao_mxfp8_rceil",
    "ao_mxfp4_floor",
    "ao_mxfp4_ceil",
    "ao_mxfp4_even",
    "ao_mxfp4_rceil",
    "ao_nvfp4_two_level",
    "ao_nvfp4_single_level",
    "modelopt_nvfp4",
    "modelopt_fp8",
    "deepseek_v3_fp8_block",
    "gpt_oss_mxfp4",
];

impl Scheme {
    /// The scaled formats' names [`Scheme::named`] knows, compressed-tensors' first.
    pub const NAMES: &'static [&'static str] = NAMES;

    /// The integer presets' names [`Scheme::named`] knows (compressed-tensors' `ct_w4a16` and
    /// the like): quantized by [`quantize_int_rows`](crate::quantize_int_rows).
    pub const INTEGER_NAMES: [&'static str; 5] = [
        INTEGER_PRESETS[0].0,
        INTEGER_PRESETS[1].0,
        INTEGER_PRESETS[2].0,
        INTEGER_PRESETS[3].0,
        INTEGER_PRESETS[4].0,
    ];

    /// A reference's scheme by name (`ct_fp8_block`, `ao_mxfp4_rceil`, `gpt_oss_mxfp4`, ...; `ct_`
    /// is compressed-tensors, `ao_` torchao). `weight` is the dense weight's dtype, which
    /// compressed-tensors also stores FP8 scales in.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::{Granularity, Scheme};
    /// let s = Scheme::named("ct_fp8_block", DType::BFloat16)?;
    /// assert_eq!((s.granularity, s.scale), (Granularity::Block(128, 128), DType::BFloat16));
    /// assert!(Scheme::named("fp3", DType::Float32).is_err());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn named(name: &str, weight: DType) -> Result<Scheme, QuantError> {
        use Convention::*;
        use DType::{
            Float32, Float4E2M1Fn as F4, Float6E2M3Fn as F6, Float8E4M3Fn as E4M3, Float8E8M0Fnu,
            UInt8,
        };
        let scheme = |granularity, element, scale, rule, global_scale, convention| Scheme {
            granularity,
            element,
            scale,
            rule,
            global_scale,
            convention,
        };
        let mx = |mode: &str| match mode {
            "floor" => Some(MxRounding::Floor),
            "ceil" => Some(MxRounding::Ceil),
            "even" => Some(MxRounding::Even),
            "rceil" => Some(MxRounding::RCeil),
            _ => None,
        };
        let unknown = || QuantError::UnknownScheme {
            name: name.to_owned(),
        };
        let abs = ScaleRule::AbsMax;
        let compressed_tensors_mx = ScaleRule::PowerOfTwo(MxRounding::CompressedTensors);
        if let Some(&(_, element, granularity, symmetric)) =
            INTEGER_PRESETS.iter().find(|p| p.0 == name)
        {
            let rule = ScaleRule::MinMax { symmetric };
            return Ok(scheme(
                granularity,
                element,
                weight,
                rule,
                false,
                CompressedTensors,
            ));
        }
        Ok(match name {
            "ct_fp8_tensor" => scheme(
                Granularity::Tensor,
                E4M3,
                weight,
                abs,
                false,
                CompressedTensors,
            ),
            "ct_fp8_channel" => scheme(
                Granularity::Channel,
                E4M3,
                weight,
                abs,
                false,
                CompressedTensors,
            ),
            "ct_fp8_block" => scheme(
                Granularity::Block(128, 128),
                E4M3,
                weight,
                abs,
                false,
                CompressedTensors,
            ),
            "ct_mxfp8" => scheme(
                Granularity::Group(32),
                E4M3,
                UInt8,
                compressed_tensors_mx,
                false,
                CompressedTensors,
            ),
            "ct_mxfp4" => scheme(
                Granularity::Group(32),
                F4,
                UInt8,
                compressed_tensors_mx,
                false,
                CompressedTensors,
            ),
            // compressed-tensors' MXFP6 (`mxfp6-pack-quantized`: E2M3 codes, four in three
            // bytes; MXFP4's scales and arithmetic). Read only.
            "ct_mxfp6" => scheme(
                Granularity::Group(32),
                F6,
                UInt8,
                compressed_tensors_mx,
                false,
                CompressedTensors,
            ),
            "ct_nvfp4" => scheme(
                Granularity::Group(16),
                F4,
                E4M3,
                abs,
                true,
                CompressedTensors,
            ),
            "ao_nvfp4_two_level" => scheme(Granularity::Group(16), F4, E4M3, abs, true, TorchAo),
            "modelopt_nvfp4" => scheme(Granularity::Group(16), F4, E4M3, abs, true, ModelOpt),
            "modelopt_fp8" => scheme(Granularity::Tensor, E4M3, Float32, abs, false, ModelOpt),
            "ao_nvfp4_single_level" => {
                scheme(Granularity::Group(16), F4, E4M3, abs, false, TorchAo)
            }
            "deepseek_v3_fp8_block" => scheme(
                Granularity::Block(128, 128),
                E4M3,
                Float32,
                abs,
                false,
                DeepSeek,
            ),
            "gpt_oss_mxfp4" => scheme(
                Granularity::Group(32),
                F4,
                UInt8,
                ScaleRule::PowerOfTwo(MxRounding::RCeil),
                false,
                GptOss,
            ),
            other => {
                let (element, mode) = if let Some(mode) = other.strip_prefix("ao_mxfp8_") {
                    (E4M3, mode)
                } else if let Some(mode) = other.strip_prefix("ao_mxfp4_") {
                    (F4, mode)
                } else {
                    return Err(unknown());
                };
                let rule = ScaleRule::PowerOfTwo(mx(mode).ok_or_else(unknown)?);
                scheme(
                    Granularity::Group(32),
                    element,
                    Float8E8M0Fnu,
                    rule,
                    false,
                    TorchAo,
                )
            }
        })
    }

    /// Whether the scheme's reference quantizes weights of `dtype`: compressed-tensors' rules
    /// read float32, bfloat16 and float16 (each in its own arithmetic), the others float32 and
    /// bfloat16.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// assert!(Scheme::named("ct_nvfp4", DType::Float16)?.check_input(DType::Float16).is_ok());
    /// assert!(Scheme::named("ao_mxfp4_floor", DType::Float16)?.check_input(DType::Float16).is_err());
    /// assert!(Scheme::named("ct_mxfp8", DType::Float64)?.check_input(DType::Float64).is_err());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn check_input(&self, dtype: DType) -> Result<(), QuantError> {
        let wide_or_bf16 = matches!(dtype, DType::Float32 | DType::BFloat16);
        let (accepted, reads) = match self.convention {
            Convention::CompressedTensors => (
                wide_or_bf16 || dtype == DType::Float16,
                "compressed-tensors' rules read float32, bfloat16 or float16 weights",
            ),
            Convention::TorchAo => (
                wide_or_bf16,
                "torchao's rules read float32 or bfloat16 weights (its `to_mx` and NVFP4 refuse float16)",
            ),
            Convention::DeepSeek | Convention::GptOss => (
                wide_or_bf16,
                "the DeepSeek-V3 and gpt-oss rules read float32 or bfloat16 weights",
            ),
            Convention::ModelOpt => (
                wide_or_bf16,
                "ModelOpt's rules read float32 or bfloat16 weights",
            ),
        };
        if accepted {
            Ok(())
        } else {
            Err(QuantError::InputDType { dtype, reads })
        }
    }

    /// Whether the scheme's dtypes fit together: float8_e4m3fn, float6_e2m3fn (read only) or
    /// float4_e2m1fn elements, scales of whole bytes (E8M0 scales: one byte).
    pub fn check(&self) -> Result<(), QuantError> {
        // The formats the references scale: float8_e4m3fn (FP8, MXFP8), float6 (MXFP6) and
        // float4 (MXFP4, NVFP4).
        if let ScaleRule::MinMax { .. } = self.rule {
            return match crate::integer::integer_bits(self) {
                Some(_) if self.scale.is_floating_point() && self.scale.byte_size().is_some() => {
                    Ok(())
                }
                _ => Err(QuantError::Scheme {
                    reason: format!(
                        "min-max scales with {} elements and {} scales (integer schemes store \
                         int2, int4 or int8 with floating scales)",
                        self.element, self.scale
                    ),
                }),
            };
        }
        let narrow_float = matches!(
            self.element,
            DType::Float8E4M3Fn | DType::Float6E2M3Fn | DType::Float4E2M1Fn
        );
        let scale_ok = match self.rule {
            ScaleRule::MinMax { .. } => false,
            ScaleRule::PowerOfTwo(_) => self.scale.bits() == 8 && !self.scale.is_packed(),
            ScaleRule::AbsMax => self.scale.is_floating_point() && self.scale.byte_size().is_some(),
        };
        if !narrow_float {
            return Err(QuantError::Scheme {
                reason: format!(
                    "elements of {} (the scaled formats store float8_e4m3fn, float6_e2m3fn or \
                     float4_e2m1fn)",
                    self.element
                ),
            });
        }
        if !scale_ok {
            return Err(QuantError::Scheme {
                reason: format!(
                    "scales of {} (power-of-two scales are one byte, E8M0; others a floating dtype)",
                    self.scale
                ),
            });
        }
        Ok(())
    }

    /// The bytes of the scales of a `[rows, cols]` tensor as stored, or why the shape does not
    /// suit (more than memory can address among the reasons).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// let channel = Scheme::named("ct_fp8_channel", DType::BFloat16)?;
    /// assert_eq!(channel.scale_bytes(4096, 0)?, 8192); // one bfloat16 scale per row
    /// assert!(channel.scale_bytes(1 << 63, 0).is_err()); // 2^64 bytes
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn scale_bytes(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        let count = self.scale_count(rows, cols)?;
        count
            .checked_mul(self.scale.byte_size().unwrap_or(1))
            .ok_or_else(|| QuantError::Shape {
                reason: format!(
                    "a [{rows}, {cols}] tensor has {count} scales, more bytes than memory can hold"
                ),
            })
    }

    /// A zeroed buffer for the scales of a `[rows, cols]` tensor ([`scale_bytes`](Self::scale_bytes)
    /// long: what [`quantize_rows`](crate::quantize_rows) fills), or an error where the shape
    /// does not suit or the bytes cannot be allocated — never an abort.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// let channel = Scheme::named("ct_fp8_channel", DType::BFloat16)?;
    /// assert_eq!(channel.scale_buffer(3, 64)?.len(), 6);
    /// // 2^62 rows of no columns: 2^63 bytes of scales, more than any allocation may be.
    /// assert!(channel.scale_buffer(1 << 62, 0).is_err());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn scale_buffer(&self, rows: usize, cols: usize) -> Result<Vec<u8>, QuantError> {
        crate::dequant::zeroed(self.scale_bytes(rows, cols)?, "scales")
    }

    /// The number of scales a `[rows, cols]` tensor has, or why the shape does not suit.
    pub fn scale_count(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        let count = match self.granularity {
            Granularity::Tensor => Some(1),
            Granularity::Channel => Some(rows),
            Granularity::Group(k) => {
                if k == 0 || !cols.is_multiple_of(k) {
                    return Err(QuantError::Shape {
                        reason: format!("columns {cols} are not a multiple of the group size {k}"),
                    });
                }
                rows.checked_mul(cols / k)
            }
            Granularity::Block(br, bc) => {
                if br == 0 || bc == 0 {
                    return Err(QuantError::Shape {
                        reason: "a block of zero rows or columns".to_owned(),
                    });
                }
                rows.div_ceil(br).checked_mul(cols.div_ceil(bc))
            }
        };
        // (Only a shape of more elements than memory can hold has more scales than that.)
        count.ok_or_else(|| QuantError::Shape {
            reason: format!("a [{rows}, {cols}] tensor has more scales than memory can hold"),
        })
    }

    /// Row `r`'s runs of columns that share a scale: (first column, end, the scale's index).
    /// Every granularity is runs of one length (the last one shorter in a partial block) whose
    /// scales follow each other.
    pub(crate) fn runs(
        &self,
        r: usize,
        cols: usize,
    ) -> impl Iterator<Item = (usize, usize, usize)> + use<> {
        let (len, first) = match self.granularity {
            Granularity::Tensor => (cols, 0),
            Granularity::Channel => (cols, r),
            Granularity::Group(k) => (k, r * (cols / k.max(1))),
            Granularity::Block(br, bc) => (bc, (r / br.max(1)) * cols.div_ceil(bc.max(1))),
        };
        let len = len.max(1);
        (0..cols.div_ceil(len)).map(move |i| (i * len, ((i + 1) * len).min(cols), first + i))
    }

    /// Whether [`quantize`](fn@crate::quantize) writes this scheme (every one but ModelOpt's
    /// ([`Convention::ModelOpt`]) and compressed-tensors' MXFP6, which dtcast reads only).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// assert!(Scheme::named("ct_nvfp4", DType::BFloat16)?.quantizes());
    /// assert!(!Scheme::named("modelopt_nvfp4", DType::BFloat16)?.quantizes());
    /// assert!(!Scheme::named("ct_mxfp6", DType::BFloat16)?.quantizes());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn quantizes(&self) -> bool {
        let convention = match self.convention {
            Convention::CompressedTensors
            | Convention::TorchAo
            | Convention::DeepSeek
            | Convention::GptOss => true,
            Convention::ModelOpt => false,
        };
        // (MXFP6 is read; its encoder is not written.)
        convention && self.element != DType::Float6E2M3Fn
    }

    /// The bits of an integer scheme's codes and whether it is symmetric (`None` for the scaled
    /// float formats).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// assert_eq!(Scheme::named("ct_w4a16_asym", DType::BFloat16)?.integer(), Some((4, false)));
    /// assert_eq!(Scheme::named("ct_mxfp4", DType::BFloat16)?.integer(), None);
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn integer(&self) -> Option<(u32, bool)> {
        crate::integer::integer_bits(self)
    }

    /// Whether a scale depends on the whole tensor's largest magnitude (a per-tensor scale, a
    /// global scale): then [`quantize_rows`](crate::quantize_rows) needs the tensor's
    /// [`TensorAmax`](crate::TensorAmax) from a first pass over it.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// assert!(Scheme::named("ct_nvfp4", DType::BFloat16)?.uses_tensor_amax());
    /// assert!(!Scheme::named("ct_fp8_block", DType::BFloat16)?.uses_tensor_amax());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn uses_tensor_amax(&self) -> bool {
        self.global_scale || self.granularity == Granularity::Tensor
    }

    /// The rows a piece of a tensor must start at a multiple of so that it holds whole scales
    /// (a 2-D block's rows; one otherwise): such a piece dequantizes on its own, with the scales
    /// of [`scale_range`](Scheme::scale_range).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::Scheme;
    /// let block = Scheme::named("ct_fp8_block", DType::BFloat16)?;
    /// assert_eq!(block.row_alignment(), 128);
    /// assert_eq!(block.scale_range(128, 256, 300), 3..6); // three 128-column blocks a row of blocks
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn row_alignment(&self) -> usize {
        match self.granularity {
            Granularity::Block(br, _) => br,
            Granularity::Tensor | Granularity::Channel | Granularity::Group(_) => 1,
        }
    }

    /// The indices of the scales that rows `start..end` of a `cols`-column tensor use (`start` a
    /// multiple of [`row_alignment`](Scheme::row_alignment), `end` at most the rows of a shape
    /// [`scale_count`](Scheme::scale_count) accepts, so that every index fits); the one scale
    /// of a per-tensor scheme.
    pub fn scale_range(&self, start: usize, end: usize, cols: usize) -> std::ops::Range<usize> {
        match self.granularity {
            Granularity::Tensor => 0..1,
            Granularity::Channel => start..end,
            Granularity::Group(k) => start * (cols / k)..end * (cols / k),
            Granularity::Block(br, bc) => {
                let per_row = cols.div_ceil(bc);
                start / br * per_row..end.div_ceil(br) * per_row
            }
        }
    }

    /// The scale of element `(r, c)` of a tensor with `cols` columns: its index among the scales.
    pub(crate) fn scale_index(&self, r: usize, c: usize, cols: usize) -> usize {
        match self.granularity {
            Granularity::Tensor => 0,
            Granularity::Channel => r,
            Granularity::Group(k) => r * (cols / k) + c / k,
            Granularity::Block(br, bc) => (r / br) * cols.div_ceil(bc) + c / bc,
        }
    }
}
