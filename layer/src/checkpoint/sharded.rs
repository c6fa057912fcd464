//! Sharded checkpoints: a `*.safetensors.index.json` whose `weight_map` names the shard file of
//! every tensor. Read and cross-checked before anything is written; converted all or nothing.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use super::convert::{data_bytes, read_config_into, ConvertOptions, Selection, Summary};
use super::header::Entry;
use super::json::{self, quote};
use super::pipeline::{write_converted, Tensors};
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::input::{read_small, Inputs};
use crate::output::{AtomicFile, FileMode, StagedDir, Target, Want};

/// An index file's contents, parsed strictly: a JSON object whose `weight_map` maps each tensor
/// name (once) to a shard given as a plain file name in the index's directory.
#[derive(Clone, Debug, PartialEq)]
pub struct Index {
    /// The whole JSON document (kept for the output index, key order included).
    pub json: Value,
    /// `weight_map` in order: tensor name → shard file name.
    pub weight_map: Vec<(String, String)>,
    /// The shard file names, in order of first mention.
    pub shards: Vec<String>,
}

impl Index {
    /// Parses an index file's bytes.
    ///
    /// ```
    /// use dtcast::layer::checkpoint::Index;
    /// let i = Index::parse(br#"{"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}}"#)?;
    /// assert_eq!(i.shards, ["s1.safetensors"]);
    /// assert!(Index::parse(br#"{"weight_map": {"a": "../x.safetensors"}}"#).is_err());
    /// assert!(Index::parse(br#"{"weight_map": {"a": "s", "a": "t"}}"#).is_err());
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<Index, String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| format!("the index is not valid UTF-8 (byte {})", e.valid_up_to()))?;
        let json = json::parse(text).map_err(|e| format!("the index is not valid JSON: {e}"))?;
        let map = json
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or("the index has no `weight_map` object")?;
        let mut weight_map = Vec::with_capacity(map.len());
        let mut shards: Vec<String> = Vec::new();
        for (name, v) in map {
            let file = v.as_str().ok_or_else(|| {
                format!(
                    "`weight_map` maps `{}` to something that is not a file name",
                    quote(name)
                )
            })?;
            check_shard_name(file)?;
            if !shards.iter().any(|s| s == file) {
                shards.push(file.to_owned());
            }
            weight_map.push((name.clone(), file.to_owned()));
        }
        Ok(Index {
            json,
            weight_map,
            shards,
        })
    }
}

/// A shard must be a plain file name: it stays inside the checkpoint's directory.
fn check_shard_name(file: &str) -> Result<(), String> {
    let plain = !file.is_empty()
        && file != "."
        && file != ".."
        && !file.contains(['/', '\\', '\0'])
        && !(file.len() >= 2 && file.as_bytes()[1] == b':');
    if plain {
        Ok(())
    } else {
        Err(format!(
            "shard `{}` is not a plain file name in the index's directory",
            quote(file)
        ))
    }
}

/// A sharded checkpoint, opened and validated: every shard is a valid safetensors file; every
/// `weight_map` entry is in the shard it names; every tensor of every shard is in the map; no
/// tensor is in two shards.
#[derive(Debug)]
pub struct ShardedCheckpoint {
    path: PathBuf,
    index: Index,
    shards: Vec<(String, Checkpoint)>,
}

impl ShardedCheckpoint {
    /// Opens `index` and every shard it names. Each shard's descriptor is closed once its header
    /// is read (a read opens it again): a checkpoint of any number of shards holds none open.
    pub fn open(index: impl AsRef<Path>) -> Result<ShardedCheckpoint, LayerError> {
        ShardedCheckpoint::open_into(index.as_ref(), &mut Inputs::new())
    }

    /// [`open`](Self::open), the index and every shard added to `inputs`.
    pub(crate) fn open_into(
        path: &Path,
        inputs: &mut Inputs,
    ) -> Result<ShardedCheckpoint, LayerError> {
        let bad = |reason: String| LayerError::Index {
            path: path.to_owned(),
            reason,
        };
        let Some(bytes) = read_small(path, inputs)? else {
            // Gone: the system's own words for it.
            let source = std::fs::metadata(path)
                .err()
                .unwrap_or_else(|| std::io::ErrorKind::NotFound.into());
            return Err(LayerError::Io {
                path: path.to_owned(),
                source,
            });
        };
        let index = Index::parse(&bytes).map_err(bad)?;
        let dir = crate::output::parent_dir(path);
        let mut shards = Vec::with_capacity(index.shards.len());
        for s in &index.shards {
            let ck = Checkpoint::open(dir.join(s))?;
            ck.close();
            ck.add_to(inputs);
            shards.push((s.clone(), ck));
        }
        let mut holder: HashMap<&str, &str> = HashMap::new();
        for (shard, ck) in &shards {
            for e in ck.entries() {
                if let Some(other) = holder.insert(&e.name, shard) {
                    return Err(bad(format!(
                        "tensor `{}` is in two shards, `{other}` and `{shard}`",
                        quote(&e.name)
                    )));
                }
            }
        }
        for (name, shard) in &index.weight_map {
            match holder.remove(name.as_str()) {
                Some(s) if s == shard => {}
                Some(s) => {
                    return Err(bad(format!(
                        "`weight_map` puts `{}` in `{shard}`, but it is in `{s}`",
                        quote(name)
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "`weight_map` puts `{}` in `{shard}`, but no shard holds it",
                        quote(name)
                    )))
                }
            }
        }
        if let Some((name, shard)) = holder.into_iter().min() {
            return Err(bad(format!(
                "shard `{shard}` holds `{}`, which `weight_map` does not list",
                quote(name)
            )));
        }
        Ok(ShardedCheckpoint {
            path: path.to_owned(),
            index,
            shards,
        })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The shards: file name and checkpoint, in order of first mention in the index.
    pub fn shards(&self) -> &[(String, Checkpoint)] {
        &self.shards
    }

    /// The quantized weights of each shard, in the order of [`shards`](Self::shards), found as
    /// [`detect_quantized`](super::detect_quantized) finds them in one file (`config`: the
    /// checkpoint's `config.json`, [`read_config`](super::read_config())). A weight's parts may be
    /// stored in different shards (the tools that shard checkpoints cut between any two
    /// tensors): each shard's weights are found among its own tensors and those of other shards
    /// in the same modules ([`ShardWeights`]). A `config.json` whose `quantization_config` names
    /// a method when no shard holds a quantized weight is an error, as is anything
    /// [`detect_quantized`](super::detect_quantized) refuses (a scale whose weight no shard
    /// holds, say).
    pub fn quantized_weights(
        &self,
        config: Option<&Value>,
    ) -> Result<Vec<ShardWeights>, LayerError> {
        // Where every tensor of a module is stored: a weight's parts share their module in
        // every layout.
        use super::layout::module;
        let mut by_module: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (k, (_, shard)) in self.shards.iter().enumerate() {
            for (i, e) in shard.entries().iter().enumerate() {
                by_module.entry(module(&e.name)).or_default().push((k, i));
            }
        }
        let mut found = Vec::with_capacity(self.shards.len());
        for (k, (_, shard)) in self.shards.iter().enumerate() {
            let own = shard.entries();
            let mut modules: Vec<&str> = own.iter().map(|e| module(&e.name)).collect();
            modules.sort_unstable();
            modules.dedup();
            let borrowed: Vec<(usize, usize)> = (modules.iter())
                .flat_map(|m| by_module[m].iter().copied())
                .filter(|&(j, _)| j != k)
                .collect();
            let entries: Vec<Entry> = (own.iter().cloned())
                .chain(
                    borrowed
                        .iter()
                        .map(|&(j, i)| self.shards[j].1.entries()[i].clone()),
                )
                .collect();
            let read = |i: usize, buf: &mut [u8]| match i.checked_sub(own.len()) {
                None => shard.read_into(&own[i], 0, buf),
                Some(b) => {
                    let (j, at) = borrowed[b];
                    self.shards[j]
                        .1
                        .read_into(&self.shards[j].1.entries()[at], 0, buf)
                }
            };
            let weights = {
                let data = super::layout::metadata_reader(&entries, read);
                super::quantized::detect_part(&entries, config, &data)?
            };
            found.push(ShardWeights {
                entries,
                own: own.len(),
                borrowed_from: borrowed.into_iter().map(|(j, _)| j).collect(),
                weights,
            });
        }
        if let (Some(m), true) = (
            super::quantized::config_method(config),
            found.iter().all(|f| f.written().next().is_none())
                && (self.shards.iter())
                    .all(|(_, c)| super::quantized::foreign(c.entries()).is_empty()),
        ) {
            return Err(LayerError::Quantized(format!(
                "{} says `{m}`, but no shard holds a quantized weight with its scales",
                super::quantized::config_origin(config)
            )));
        }
        Ok(found)
    }

    fn names(&self) -> impl Iterator<Item = &str> + Clone {
        self.shards
            .iter()
            .flat_map(|(_, c)| c.entries().iter().map(|e| e.name.as_str()))
    }
}

/// One shard's quantized weights ([`ShardedCheckpoint::quantized_weights`]).
#[derive(Clone, Debug)]
pub struct ShardWeights {
    /// The shard's own tensors, then those of other shards in the same modules (borrowed).
    pub entries: Vec<Entry>,
    /// How many of `entries` are the shard's own.
    pub own: usize,
    /// The shard that stores each borrowed tensor (`entries[own + j]`), as an index into
    /// [`ShardedCheckpoint::shards`].
    pub borrowed_from: Vec<usize>,
    /// The quantized weights among `entries` (indices into it), those whose elements other
    /// shards store included: this shard holds only some of their parts, and drops them when it
    /// is dequantized.
    pub weights: Vec<super::QuantizedWeight>,
}

impl ShardWeights {
    /// The weights whose elements this shard stores: it writes their dense tensors.
    pub fn written(&self) -> impl Iterator<Item = &super::QuantizedWeight> + '_ {
        self.weights.iter().filter(|w| w.elements < self.own)
    }
}

/// Converts a sharded checkpoint into the directory `out_dir`, all or nothing: the index and
/// every shard are validated first ([`ShardedCheckpoint::open`]); the shards are converted one by
/// one, each into a staging directory beside `out_dir` once complete (one descriptor open for
/// writing whatever the number of shards), then the new index (`total_size` updated), and the
/// staging directory replaces `out_dir` in one step.
///
/// `out_dir` must not exist, or be empty, or — with `force` — hold a previous conversion (index
/// and shard files only; anything else there is refused rather than deleted), and must not hold
/// any input. On any failure it is exactly as it was; what appeared in it meanwhile is never
/// removed ([`StagedDir::commit`]).
pub fn convert_index(
    index: &Path,
    out_dir: &Path,
    options: &ConvertOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, LayerError> {
    let start = Instant::now();
    let target = Target::resolve(out_dir, options.force, Want::Dir)?;
    // The index first (a cheap check that names the input), then every file it leads to.
    let mut inputs = Inputs::new();
    inputs.add_path(index).map_err(|source| LayerError::Io {
        path: index.to_owned(),
        source,
    })?;
    target.refuse_inputs(&inputs)?;
    check_output_dir(&target, options.force, &[])?;
    let shards = Shards::open(index, options, &mut inputs)?;
    target.refuse_inputs(&inputs)?;
    let staged = StagedDir::create(&target)?;
    let mut summary = shards.write(&staged, out_dir, options, progress)?;
    staged.commit(&target)?;
    summary.seconds = start.elapsed().as_secs_f64();
    Ok(summary)
}

/// A sharded checkpoint opened for converting, and what the conversion does to each shard:
/// everything [`convert_index`] checks before writing.
pub(crate) struct Shards {
    ck: ShardedCheckpoint,
    work: Work,
    /// The output index's `weight_map` where tensors are renamed (`None`: the input's).
    weight_map: Option<Vec<(String, String)>>,
}

/// What each shard goes through.
enum Work {
    /// Cast, and quantized weights dequantized (`found`: each shard's).
    Convert {
        selection: Selection,
        config: Option<Value>,
        found: Vec<ShardWeights>,
    },
    /// `--quantize`: each shard's plan.
    Quantize {
        quantize: super::convert::Quantize,
        file_schemes: Vec<Vec<Option<dtcast_quant::Scheme>>>,
    },
}

impl Shards {
    /// Opens the index, its shards and the configuration beside it (each added to `inputs`),
    /// and plans every shard.
    pub(crate) fn open(
        index: &Path,
        options: &ConvertOptions,
        inputs: &mut Inputs,
    ) -> Result<Shards, LayerError> {
        let ck = ShardedCheckpoint::open_into(index, inputs)?;
        let mut selection = options.selection(ck.names())?;
        if let Some(q) = &options.quantize {
            return Shards::plan_quantizing(ck, q);
        }
        // Quantized weights are dequantized shard by shard, each into the shard of its elements
        // (its scales read from their shard where another one stores them), and the index names
        // the dense tensors.
        let config = read_config_into(index.parent(), inputs)?;
        let found = ck.quantized_weights(config.as_ref())?;
        selection.plan_dequantizing(
            (found.iter()).flat_map(|f| f.written().map(|w| (w, f.entries.as_slice()))),
        )?;
        selection.note_foreign(ck.shards.iter().flat_map(|(_, c)| c.entries()));
        let mut weight_map: Vec<(String, String)> = Vec::new();
        let mut renamed = false;
        for ((name, _), f) in ck.shards.iter().zip(&found) {
            // (A weight a keep pattern keeps stays as it is, its parts under their own names.)
            let dequantized: Vec<_> = (f.weights.iter())
                .filter(|w| !selection.keeps_weight(w, &f.entries))
                .cloned()
                .collect();
            renamed |= dequantized.iter().any(|w| w.elements < f.own);
            let names = super::quantized::QuantizedWeight::output_names(&f.entries, &dequantized);
            let own = (names.into_iter().take(f.own).flatten()).filter(|n| !selection.drops(n));
            weight_map.extend(own.map(|n| (n, name.clone())));
        }
        weight_map.sort();
        Ok(Shards {
            ck,
            work: Work::Convert {
                selection,
                config,
                found,
            },
            weight_map: renamed.then_some(weight_map),
        })
    }

    /// The shards' file names, in the order the index first names them.
    pub(crate) fn shard_names(&self) -> impl Iterator<Item = &str> {
        self.ck.shards.iter().map(|(n, _)| n.as_str())
    }

    /// `--quantize`: every shard planned (and checked) before any is written, and the index
    /// naming the new tensors.
    fn plan_quantizing(
        ck: ShardedCheckpoint,
        q: &super::convert::Quantize,
    ) -> Result<Shards, LayerError> {
        use super::quantize::{check_targets, ignore_patterns, output_names, schemes};
        let ignore = ignore_patterns(q, ck.names())?;
        let mut file_schemes = Vec::with_capacity(ck.shards.len());
        let mut weight_map: Vec<(String, String)> = Vec::new();
        for (name, shard) in &ck.shards {
            let at = |e: LayerError| e.at(Path::new(name));
            let entries = shard.entries();
            let data = super::layout::metadata_reader(entries, |i, buf| {
                shard.read_into(&entries[i], 0, buf)
            });
            if let Some(w) = super::quantized::detect_part(entries, None, &data)
                .map_err(at)?
                .first()
            {
                return Err(at(w.already_quantized()));
            }
            let p = schemes(shard.entries(), q, &ignore).map_err(at)?;
            weight_map.extend(
                output_names(shard.entries(), q, &p)
                    .into_iter()
                    .map(|n| (n, name.clone())),
            );
            file_schemes.push(p);
        }
        check_targets(
            q,
            (ck.shards.iter().zip(&file_schemes)).map(|((_, c), p)| (c.entries(), p.as_slice())),
        )?;
        weight_map.sort();
        Ok(Shards {
            ck,
            work: Work::Quantize {
                quantize: q.clone(),
                file_schemes,
            },
            weight_map: Some(weight_map),
        })
    }

    /// Writes every shard and the new index into `staged`, each file added as soon as it is
    /// complete, then checks every input unchanged. `out_dir` names the output in messages.
    pub(crate) fn write(
        &self,
        staged: &StagedDir,
        out_dir: &Path,
        options: &ConvertOptions,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Summary, LayerError> {
        let ck = &self.ck;
        let total: u64 = ck.shards.iter().map(|(_, c)| data_bytes(c)).sum();
        let mut summary = Summary::default();
        let mut before = 0u64;
        for (k, (name, shard)) in ck.shards.iter().enumerate() {
            let mut file = AtomicFile::create(staged.path(), FileMode::like(shard.path()))?;
            let done = |d| progress(before + d, total);
            let s = match &self.work {
                Work::Quantize {
                    quantize,
                    file_schemes,
                } => super::quantize::write_with_schemes(
                    shard,
                    quantize,
                    &file_schemes[k],
                    &mut file,
                    &done,
                ),
                Work::Convert {
                    selection,
                    config,
                    found,
                } => {
                    let f = &found[k];
                    let other_shards: Vec<&Checkpoint> =
                        (f.borrowed_from.iter()).map(|&j| &ck.shards[j].1).collect();
                    let tensors = Tensors {
                        ckpt: shard,
                        all: &f.entries,
                        other_shards: &other_shards,
                    };
                    let s = write_converted(
                        &tensors,
                        selection,
                        options,
                        config.as_ref(),
                        &mut file,
                        &done,
                    );
                    other_shards.iter().for_each(|c| c.close());
                    s
                }
            }
            .map_err(|e| e.at(&out_dir.join(name)))?;
            shard.close();
            staged.add(file, std::ffi::OsStr::new(name))?;
            before += data_bytes(shard);
            summary.add(&s);
        }
        for (_, shard) in &ck.shards {
            shard.check_unchanged()?;
        }
        let (name, index) = self.new_index(staged, out_dir, summary.bytes_after)?;
        staged.add(index, &name)?;
        Ok(summary)
    }

    /// The converted checkpoint's index, as an unnamed file in `staged`: the input's, with the
    /// new total size and, where tensors were renamed, the new map.
    fn new_index(
        &self,
        staged: &StagedDir,
        out_dir: &Path,
        total_size: u64,
    ) -> Result<(std::ffi::OsString, AtomicFile), LayerError> {
        let index = self.ck.path();
        let mut json = self.ck.index.json.clone();
        set_total_size(&mut json, total_size);
        if let Some(weight_map) = &self.weight_map {
            let map: serde_json::Map<String, Value> = (weight_map.iter())
                .map(|(tensor, shard)| (tensor.clone(), Value::String(shard.clone())))
                .collect();
            if let Some(obj) = json.as_object_mut() {
                obj.insert("weight_map".to_owned(), Value::Object(map));
            }
        }
        let text =
            serde_json::to_string_pretty(&json).map_err(|e| LayerError::Output(e.to_string()))?;
        let mut index_file = AtomicFile::create(staged.path(), FileMode::like(index))?;
        index_file
            .write_all(text.as_bytes())
            .map_err(|e| LayerError::from(e).at(out_dir))?;
        Ok((index.file_name().unwrap_or_default().to_owned(), index_file))
    }
}

fn set_total_size(json: &mut Value, total: u64) {
    if let Some(meta) = json.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("total_size".to_owned(), total.into());
    } else if let Some(obj) = json.as_object_mut() {
        obj.insert(
            "metadata".to_owned(),
            serde_json::json!({ "total_size": total }),
        );
    }
}

/// The output directory may be replaced only if that loses nothing: it is absent or empty, or
/// (with `force`) it holds only index and shard files and the files named `also_ours` (those a
/// model directory's conversion copies). Whether it holds an input is
/// [`Target::refuse_inputs`]'s to say.
pub(crate) fn check_output_dir(
    target: &Target,
    force: bool,
    also_ours: &[std::ffi::OsString],
) -> Result<(), LayerError> {
    let shown = target.requested().display();
    let listing = target.listing();
    if listing.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(LayerError::Output(format!(
            "`{shown}` exists; pass --force to replace it"
        )));
    }
    let mut foreign: Vec<String> = (listing.iter())
        .filter(|e| {
            let name = e.name.to_string_lossy();
            let ours = e.is_file
                && (name.ends_with(".safetensors")
                    || name.ends_with(".safetensors.index.json")
                    || also_ours.contains(&e.name));
            !ours
        })
        .map(|e| e.name.to_string_lossy().into_owned())
        .collect();
    if !foreign.is_empty() {
        foreign.sort();
        return Err(LayerError::Output(format!(
            "refusing to replace `{shown}`: it holds files that are not part of a converted checkpoint ({}); remove them or choose another output",
            foreign.join(", ")
        )));
    }
    Ok(())
}
