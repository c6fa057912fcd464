//! safetensors checkpoints: reading (memory-mapped, validated by the `safetensors` crate),
//! streaming conversion tensor by tensor, atomic writing, sharded checkpoints.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use dtcast_cast::{cast_to_vec, CastMode};
use dtcast_device::{Device, Tensor, ToOptions};
use dtcast_dtype::DType;
use memmap2::Mmap;
use safetensors::tensor::{Dtype as StDtype, SafeTensors};

use crate::error::LayerError;

/// The safetensors name of a dtype, if safetensors can store it.
pub fn safetensors_dtype(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "BOOL",
        DType::UInt8 => "U8",
        DType::Int8 => "I8",
        DType::Int16 => "I16",
        DType::UInt16 => "U16",
        DType::Int32 => "I32",
        DType::UInt32 => "U32",
        DType::Int64 => "I64",
        DType::UInt64 => "U64",
        DType::Float16 => "F16",
        DType::BFloat16 => "BF16",
        DType::Float32 => "F32",
        DType::Float64 => "F64",
        DType::Complex64 => "C64",
        DType::Float8E4M3Fn => "F8_E4M3",
        DType::Float8E5M2 => "F8_E5M2",
        DType::Float8E4M3Fnuz => "F8_E4M3FNUZ",
        DType::Float8E5M2Fnuz => "F8_E5M2FNUZ",
        DType::Float8E8M0Fnu => "F8_E8M0",
        _ => return None,
    })
}

fn from_safetensors(dtype: StDtype) -> Option<DType> {
    Some(match dtype {
        StDtype::BOOL => DType::Bool,
        StDtype::U8 => DType::UInt8,
        StDtype::I8 => DType::Int8,
        StDtype::I16 => DType::Int16,
        StDtype::U16 => DType::UInt16,
        StDtype::I32 => DType::Int32,
        StDtype::U32 => DType::UInt32,
        StDtype::I64 => DType::Int64,
        StDtype::U64 => DType::UInt64,
        StDtype::F16 => DType::Float16,
        StDtype::BF16 => DType::BFloat16,
        StDtype::F32 => DType::Float32,
        StDtype::F64 => DType::Float64,
        StDtype::C64 => DType::Complex64,
        StDtype::F8_E4M3 => DType::Float8E4M3Fn,
        StDtype::F8_E5M2 => DType::Float8E5M2,
        StDtype::F8_E4M3FNUZ => DType::Float8E4M3Fnuz,
        StDtype::F8_E5M2FNUZ => DType::Float8E5M2Fnuz,
        StDtype::F8_E8M0 => DType::Float8E8M0Fnu,
        _ => return None,
    })
}

/// One tensor of a checkpoint: where its bytes are in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The tensor's name.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Byte range within the file.
    pub range: std::ops::Range<usize>,
}

/// A safetensors file, memory-mapped and validated: header length, JSON, dtypes, offsets
/// (contiguous, inside the file, covering it exactly).
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    map: Mmap,
    entries: Vec<Entry>,
    metadata: Vec<(String, String)>,
}

impl Checkpoint {
    /// Opens and validates `path`. Corrupt or truncated files are errors naming the problem.
    pub fn open(path: &Path) -> Result<Checkpoint, LayerError> {
        let io = |source| LayerError::Io {
            path: path.to_owned(),
            source,
        };
        if path.is_dir() {
            let reason =
                "it is a directory (for a sharded checkpoint, give its *.safetensors.index.json)";
            return Err(LayerError::Checkpoint {
                path: path.to_owned(),
                reason: reason.to_owned(),
            });
        }
        let file = File::open(path).map_err(io)?;
        // SAFETY: the map is read-only; if another process truncates the file while it is mapped,
        // reads may fault — the usual caveat of memory-mapped input, accepted by every
        // safetensors reader.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let bad = |reason: String| LayerError::Checkpoint {
            path: path.to_owned(),
            reason,
        };
        let (header_len, meta) =
            SafeTensors::read_metadata(&map).map_err(|e| bad(format!("{e}")))?;
        let base = 8 + header_len;
        let infos = meta.tensors();
        let mut entries = Vec::with_capacity(infos.len());
        for name in meta.offset_keys() {
            let Some(info) = infos.get(&name) else {
                continue;
            };
            let dtype = from_safetensors(info.dtype).ok_or_else(|| {
                bad(format!(
                    "tensor `{name}` has dtype {:?}, which dtcast does not support",
                    info.dtype
                ))
            })?;
            let (start, end) = info.data_offsets;
            entries.push(Entry {
                name,
                dtype,
                shape: info.shape.clone(),
                range: base + start..base + end,
            });
        }
        let mut metadata: Vec<(String, String)> = meta
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        metadata.sort();
        Ok(Checkpoint {
            path: path.to_owned(),
            map,
            entries,
            metadata,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensors, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The `__metadata__` strings, sorted by key.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// The bytes of one tensor.
    pub fn bytes(&self, entry: &Entry) -> &[u8] {
        &self.map[entry.range.clone()]
    }

    /// Every tensor as a CPU `Tensor` (copied out of the map), in file order.
    pub fn load(&self) -> Result<Vec<(String, Tensor)>, LayerError> {
        self.entries
            .iter()
            .map(|e| {
                let t = Tensor::from_bytes(self.bytes(e), e.dtype, &e.shape).map_err(|source| {
                    LayerError::Tensor {
                        name: e.name.clone(),
                        source,
                    }
                })?;
                Ok((e.name.clone(), t))
            })
            .collect()
    }

    /// Tells the kernel that the pages of `entry` will not be read again (keeps the resident set
    /// small while streaming through a large file).
    fn release(&self, entry: &Entry) {
        let page = 4096;
        let start = entry.range.start.next_multiple_of(page);
        let end = entry.range.end / page * page;
        if end > start {
            // SAFETY: the map is a read-only private file mapping; dropping its pages only makes
            // later reads fetch them from the file again, with the same contents.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    end - start,
                )
            };
        }
    }
}

/// The header of a safetensors file for `tensors` (name, dtype, shape, byte length) in order,
/// with `metadata`.
fn header(
    tensors: &[(String, DType, Vec<usize>, usize)],
    metadata: &[(String, String)],
) -> Result<Vec<u8>, LayerError> {
    let mut map = serde_json::Map::new();
    if !metadata.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        map.insert("__metadata__".to_owned(), serde_json::Value::Object(m));
    }
    let mut offset = 0usize;
    for (name, dtype, shape, len) in tensors {
        let st = safetensors_dtype(*dtype).ok_or(LayerError::Unstorable {
            name: name.clone(),
            dtype: *dtype,
        })?;
        map.insert(
            name.clone(),
            serde_json::json!({ "dtype": st, "shape": shape, "data_offsets": [offset, offset + len] }),
        );
        offset += len;
    }
    let mut json = serde_json::to_vec(&serde_json::Value::Object(map))
        .map_err(|e| LayerError::Output(e.to_string()))?;
    // Pad with spaces to a multiple of 8 bytes, so that the data starts aligned.
    while (json.len() + 8) % 8 != 0 {
        json.push(b' ');
    }
    Ok(json)
}

/// Writes a file atomically: into a temporary file beside `path`, fsync, rename. `fill` writes the
/// contents; on any error the temporary file is removed and `path` is untouched. The file gets mode
/// 0644 on Unix.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), LayerError>,
) -> Result<(), LayerError> {
    let io = |source| LayerError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".dtcast-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file());
    fill(&mut w)?;
    w.flush().map_err(io)?;
    drop(w);
    tmp.as_file().sync_all().map_err(io)?;
    // Temporary files are private (0600); the result gets the usual mode for a data file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(io)?;
    }
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Saves `tensors` (in this order) with `metadata` to `path`, atomically.
pub fn save(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: &[(String, String)],
) -> Result<(), LayerError> {
    let specs: Vec<_> = tensors
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                t.dtype(),
                t.shape().to_vec(),
                t.numel() * t.dtype().itemsize(),
            )
        })
        .collect();
    let head = header(&specs, metadata)?;
    write_atomically(path, |w| {
        let io = |source| LayerError::Io {
            path: path.to_owned(),
            source,
        };
        w.write_all(&(head.len() as u64).to_le_bytes())
            .map_err(io)?;
        w.write_all(&head).map_err(io)?;
        for (name, t) in tensors {
            let bytes = t.to_bytes().map_err(|source| LayerError::Tensor {
                name: name.clone(),
                source,
            })?;
            w.write_all(&bytes).map_err(io)?;
        }
        Ok(())
    })
}

/// What a conversion does.
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// The dtype to convert to.
    pub dtype: DType,
    /// Convert every tensor, not only the floating ones.
    pub all: bool,
    /// Names or glob patterns (`*.norm.weight`) of tensors to leave as they are.
    pub keep: Vec<String>,
    /// The cast mode.
    pub mode: CastMode,
    /// Where the casts run (`cuda:0`: upload, cast, download, tensor by tensor).
    pub device: Device,
    /// Replace an existing output.
    pub force: bool,
}

impl ConvertOptions {
    /// Floating tensors to `dtype`, Torch mode, on the CPU.
    pub fn new(dtype: DType) -> ConvertOptions {
        ConvertOptions {
            dtype,
            all: false,
            keep: Vec::new(),
            mode: CastMode::Torch,
            device: Device::Cpu,
            force: false,
        }
    }

    fn patterns(&self) -> Result<Vec<glob::Pattern>, LayerError> {
        self.keep
            .iter()
            .map(|k| {
                glob::Pattern::new(k).map_err(|e| {
                    LayerError::Output(format!("--keep `{k}` is not a valid glob pattern: {e}"))
                })
            })
            .collect()
    }

    /// Whether `entry` is converted.
    fn converts(&self, entry: &Entry, keep: &[glob::Pattern]) -> bool {
        let wanted = self.all || entry.dtype.is_floating_point();
        wanted && entry.dtype != self.dtype && !keep.iter().any(|p| p.matches(&entry.name))
    }
}

/// What a conversion did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Tensors converted.
    pub converted: usize,
    /// Tensors left as they were.
    pub kept: usize,
    /// Bytes of tensor data before.
    pub bytes_before: u64,
    /// Bytes of tensor data after.
    pub bytes_after: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl Summary {
    fn add(&mut self, other: &Summary) {
        self.converted += other.converted;
        self.kept += other.kept;
        self.bytes_before += other.bytes_before;
        self.bytes_after += other.bytes_after;
    }
}

fn check_output(input: &Path, output: &Path, force: bool) -> Result<(), LayerError> {
    let same = match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(LayerError::Output(format!(
            "refusing to overwrite the input {}; choose another output",
            input.display()
        )));
    }
    if output.exists() && !force {
        return Err(LayerError::Output(format!(
            "{} exists; pass --force to replace it",
            output.display()
        )));
    }
    Ok(())
}

/// Converts one safetensors file, streaming tensor by tensor: each tensor is cast and written
/// before the next is read, so memory does not grow with the file. `progress` is called with
/// (bytes done, bytes total) after each tensor. The output is written atomically; names, order and
/// `__metadata__` are kept.
pub fn convert_file(
    input: &Path,
    output: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, LayerError> {
    let start = Instant::now();
    check_output(input, output, options.force)?;
    let ckpt = Checkpoint::open(input)?;
    let keep = options.patterns()?;
    let plan: Vec<(Entry, DType)> = ckpt
        .entries()
        .iter()
        .map(|e| {
            (
                e.clone(),
                if options.converts(e, &keep) {
                    options.dtype
                } else {
                    e.dtype
                },
            )
        })
        .collect();
    let specs: Vec<_> = plan
        .iter()
        .map(|(e, to)| {
            let n = e.range.len() / e.dtype.itemsize();
            (e.name.clone(), *to, e.shape.clone(), n * to.itemsize())
        })
        .collect();
    let head = header(&specs, ckpt.metadata())?;
    let total: u64 = plan.iter().map(|(e, _)| e.range.len() as u64).sum();
    let mut summary = Summary::default();
    write_atomically(output, |w| {
        let io = |source| LayerError::Io {
            path: output.to_owned(),
            source,
        };
        w.write_all(&(head.len() as u64).to_le_bytes())
            .map_err(io)?;
        w.write_all(&head).map_err(io)?;
        let mut done = 0u64;
        for (e, to) in &plan {
            let src = ckpt.bytes(e);
            if *to == e.dtype {
                w.write_all(src).map_err(io)?;
                summary.kept += 1;
            } else {
                let out = convert_bytes(src, e, *to, options)?;
                w.write_all(&out).map_err(io)?;
                summary.converted += 1;
            }
            ckpt.release(e);
            summary.bytes_before += src.len() as u64;
            summary.bytes_after += (src.len() / e.dtype.itemsize() * to.itemsize()) as u64;
            done += src.len() as u64;
            progress(done, total);
        }
        Ok(())
    })?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

fn convert_bytes(
    src: &[u8],
    e: &Entry,
    to: DType,
    options: &ConvertOptions,
) -> Result<Vec<u8>, LayerError> {
    let fail = |source| LayerError::Tensor {
        name: e.name.clone(),
        source,
    };
    match options.device {
        Device::Cpu => cast_to_vec(src, e.dtype, to, options.mode).map_err(|c| fail(c.into())),
        device => {
            let t = Tensor::from_bytes(src, e.dtype, &e.shape).map_err(fail)?;
            let opts = ToOptions {
                mode: options.mode,
                ..Default::default()
            };
            let on = t.to(device).map_err(fail)?;
            on.to_with(to, opts)
                .and_then(|c| c.to_bytes())
                .map_err(fail)
        }
    }
}

/// Converts a sharded checkpoint: `index` is a `*.safetensors.index.json` (`weight_map`: tensor →
/// shard file); every shard is converted into `out_dir` under its own name (shards in parallel),
/// then a new index with the right `total_size` is written there.
pub fn convert_index(
    index: &Path,
    out_dir: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, LayerError> {
    use rayon::prelude::*;
    let start = Instant::now();
    let io = |source| LayerError::Io {
        path: index.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(index).map_err(io)?;
    let bad = |reason: String| LayerError::Checkpoint {
        path: index.to_owned(),
        reason,
    };
    let mut json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("index is not JSON: {e}")))?;
    let weight_map = json
        .get("weight_map")
        .and_then(|w| w.as_object())
        .ok_or_else(|| bad("index has no `weight_map` object".to_owned()))?;
    let mut shards: Vec<String> = Vec::new();
    for v in weight_map.values() {
        let f = v
            .as_str()
            .ok_or_else(|| bad("a `weight_map` value is not a file name".to_owned()))?;
        if Path::new(f).components().count() != 1 {
            return Err(bad(format!("shard `{f}` is not a plain file name")));
        }
        if !shards.iter().any(|s| s == f) {
            shards.push(f.to_owned());
        }
    }
    let in_dir = index.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(out_dir).map_err(|source| LayerError::Io {
        path: out_dir.to_owned(),
        source,
    })?;
    let out_index = out_dir.join(index.file_name().unwrap_or_default());
    check_output(index, &out_index, options.force)?;
    let total: u64 = shards
        .iter()
        .filter_map(|s| std::fs::metadata(in_dir.join(s)).ok())
        .map(|m| m.len())
        .sum();
    let done = std::sync::atomic::AtomicU64::new(0);
    let results: Vec<Summary> = shards
        .par_iter()
        .map(|s| {
            let last = std::sync::atomic::AtomicU64::new(0);
            convert_file(&in_dir.join(s), &out_dir.join(s), options, &|d, _| {
                let step = d - last.swap(d, std::sync::atomic::Ordering::Relaxed);
                let all = done.fetch_add(step, std::sync::atomic::Ordering::Relaxed) + step;
                progress(all, total);
            })
        })
        .collect::<Result<_, _>>()?;
    let mut summary = Summary::default();
    for r in &results {
        summary.add(r);
    }
    if let Some(meta) = json.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert(
            "total_size".to_owned(),
            serde_json::json!(summary.bytes_after),
        );
    } else if let Some(obj) = json.as_object_mut() {
        obj.insert(
            "metadata".to_owned(),
            serde_json::json!({ "total_size": summary.bytes_after }),
        );
    }
    let text =
        serde_json::to_string_pretty(&json).map_err(|e| LayerError::Output(e.to_string()))?;
    write_atomically(&out_index, |w| {
        w.write_all(text.as_bytes())
            .map_err(|source| LayerError::Io {
                path: out_index.clone(),
                source,
            })
    })?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// Loads a safetensors file into a name → tensor map (for [`Layer::load_tensors`](crate::Layer::load_tensors)).
pub fn load_map(path: &Path) -> Result<HashMap<String, Tensor>, LayerError> {
    Ok(Checkpoint::open(path)?.load()?.into_iter().collect())
}
