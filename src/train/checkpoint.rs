//! Checkpoints: the layer and the optimiser as Burn records, with the run's config and state,
//! written atomically and checked when read.
//!
//! File layout (little-endian): the 8-byte magic `LFFTCKPT`, a u32 format version, a u32 CRC-32
//! of the payload, a u64 payload length, then the payload: three length-prefixed (u64) sections,
//! the JSON header (config, state and precision), the layer's record and the optimiser's record
//! (Burn's named MessagePack in the run's float type: f32 for f32 runs, f64 for f64 runs; the
//! optimiser section is empty once Adam is done). Records are read back at f64, which holds
//! either exactly. A file
//! whose magic, version, length or checksum is wrong is refused with [`Error::Checkpoint`].
//!
//! Writing goes to `<file>.tmp` in the same directory, which is flushed to disk and then
//! renamed over the target: a reader, or a run killed mid-write, sees the old file or the new
//! one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use burn::module::{Module, Param, ParamId};
use burn::optim::record::AdaptorRecord;
use burn::optim::{AdamState, AdaptiveMomentumState};
use burn::record::{DoublePrecisionSettings, FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::config::TrainConfig;
use super::observer::Progress;
use super::optimizer::FusedAdam;
use super::state::TrainState;
use crate::backend::Precision;
use crate::error::{Error, Result};
use crate::files::write_atomic;
use crate::nn::{Butterfly, ButterflyConfig, ButterflyInit, ButterflyProduct, ButterflyProductConfig};
use crate::ops::{AdamOps, Permutation};
use crate::reference::Target;
use crate::tensors::float_tensor;

const MAGIC: &[u8; 8] = b"LFFTCKPT";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 8;

/// The file name of the running checkpoint inside a checkpoint directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.lfft";
/// The file name of the config saved beside it.
pub const CONFIG_FILE: &str = "config.json";
/// The file name of a permutation search's progress, kept until the run's first checkpoint
/// ([`crate::train::permutation::MemoFile`]).
pub const SEARCH_FILE: &str = "search.json";

/// The running checkpoint of a run with this config: `<checkpoint_dir>/checkpoint.lfft`, when it
/// has a checkpoint directory.
pub fn running_path(config: &TrainConfig) -> Option<PathBuf> {
    config.checkpoint_dir.as_ref().map(|d| Path::new(d).join(CHECKPOINT_FILE))
}

/// The checkpoint directory, inside a grown run's `dir`, of the half-size run of size `n` that
/// the block of attempts starting at `attempt` grows from ([`crate::train::HALF_REUSE`]); its own
/// half-size runs nest inside it.
pub fn half_dir(dir: &Path, n: usize, attempt: usize) -> PathBuf {
    dir.join(format!("half-n{n}-a{attempt}"))
}

/// Whether `dir` holds something to resume: a run's checkpoint, a half-size run's (a grown
/// run stopped before its own first checkpoint), or a permutation search's progress (a run
/// stopped in its search, before its first checkpoint).
pub fn resumable(dir: &Path) -> bool {
    dir.join(CHECKPOINT_FILE).exists() || dir.join(SEARCH_FILE).exists() || half_runs(dir).iter().any(|d| resumable(d))
}

/// The half-size runs' directories ([`half_dir`]) directly inside `dir`.
fn half_runs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let half = |e: &std::fs::DirEntry| e.file_name().to_str().is_some_and(|n| n.starts_with("half-n"));
    entries.filter_map(|e| e.ok()).filter(half).map(|e| e.path()).collect()
}

/// Whether `dir` holds a permutation search's progress and nothing else to resume: the run
/// stopped in its search starts again, and its search goes on from there.
pub fn searched_only(dir: &Path) -> bool {
    dir.join(SEARCH_FILE).exists() && !dir.join(CHECKPOINT_FILE).exists() && half_runs(dir).is_empty()
}

/// The lock file inside a checkpoint directory (it names the process holding it).
pub const LOCK_FILE: &str = "lock";

/// One trainer per checkpoint directory: an exclusive advisory lock on its [`LOCK_FILE`], held
/// until dropped. The operating system releases it when the process ends, however it ends, so a
/// killed run never leaves a stale lock.
#[derive(Debug)]
pub struct DirLock {
    _file: std::fs::File,
}

impl DirLock {
    /// Takes the lock on `dir` (created if missing) and removes the temporary files a run killed
    /// mid-write leaves behind.
    ///
    /// # Errors
    /// [`Error::Busy`] naming the holder when another process has the directory;
    /// [`Error::Io`] when the lock file cannot be created.
    pub fn acquire(dir: &Path) -> Result<Self> {
        let op = "train.lock";
        std::fs::create_dir_all(dir).map_err(|e| Error::io(op, dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(op, &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                return Err(Error::Busy {
                    dir: dir.display().to_string(),
                    holder: if holder.is_empty() { "another process".into() } else { holder },
                    lock: path.display().to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(op, &path, e)),
        }
        let named =
            file.set_len(0).and_then(|()| write!(file, "process {}", std::process::id())).and_then(|()| file.flush());
        named.map_err(|e| Error::io(op, &path, e))?;
        for name in [CHECKPOINT_FILE, CONFIG_FILE, SEARCH_FILE] {
            match std::fs::remove_file(dir.join(format!("{name}.tmp"))) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(op, dir, e)),
                _ => {}
            }
        }
        Ok(DirLock { _file: file })
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    config: TrainConfig,
    state: TrainState,
    /// The run's progress records up to `state.step` (absent in files written before they were
    /// kept).
    #[serde(default)]
    history: Vec<Progress>,
    /// Absent in files written before the config lost its `precision` field: see
    /// [`legacy_precision`].
    #[serde(default)]
    precision: Option<Precision>,
    /// The factors' permutations (absent in files written before products: one butterfly after
    /// [`legacy_permutation`], its record a [`Butterfly`]'s).
    #[serde(default)]
    permutations: Option<Vec<Permutation>>,
}

/// The permutation of the single butterfly that files written before products hold: the
/// identity for the Hadamard transform, the bit reversal otherwise.
fn legacy_permutation(target: &Target) -> Permutation {
    match target {
        Target::Hadamard => Permutation::Identity,
        _ => Permutation::BitReversal,
    }
}

/// The precision of a file written when the config carried it (`config.precision`).
fn legacy_precision(header: &[u8]) -> Option<Precision> {
    let v: serde_json::Value = serde_json::from_slice(header).ok()?;
    serde_json::from_value(v.get("config")?.get("precision")?.clone()).ok()
}

/// A checkpoint read back: config, state, and the raw records (decoded on a backend by
/// [`Checkpoint::layer`] or [`Checkpoint::product`], and the optimiser's state by the trainer).
pub struct Checkpoint {
    path: PathBuf,
    /// The config of the run that wrote it.
    pub config: TrainConfig,
    /// Where that run stood.
    pub state: TrainState,
    /// The float type it trained in.
    pub precision: Precision,
    /// The run's progress records up to its step, one per (step, phase, attempt): the training
    /// curve. Empty in files written before records were kept.
    pub history: Vec<Progress>,
    /// The factors' permutations; `None` for a file written before products (one butterfly).
    permutations: Option<Vec<Permutation>>,
    model: Vec<u8>,
    optim: Vec<u8>,
}

fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason: reason.into() }
}

/// The recorder that reads records back: f64, which holds f32 and f64 records exactly (each
/// tensor's data carries its own dtype).
fn reader() -> NamedMpkBytesRecorder<DoublePrecisionSettings> {
    NamedMpkBytesRecorder::default()
}

/// Encodes a Burn record to bytes, in `B`'s float type (Burn's `FullPrecisionSettings` would
/// round an f64 run's parameters to f32).
pub(crate) fn record_bytes<B: Backend, R: burn::record::Record<B>>(record: R) -> Result<Vec<u8>> {
    let encoded = match Precision::of::<B>() {
        Precision::F32 => Recorder::<B>::record(&NamedMpkBytesRecorder::<FullPrecisionSettings>::default(), record, ()),
        Precision::F64 => {
            Recorder::<B>::record(&NamedMpkBytesRecorder::<DoublePrecisionSettings>::default(), record, ())
        }
    };
    encoded.map_err(|e| corrupt(Path::new("<memory>"), format!("cannot encode record: {e}")))
}

/// Writes a checkpoint atomically (temporary file, flush, rename).
pub fn write<B: Backend>(
    path: &Path,
    config: &TrainConfig,
    state: &TrainState,
    history: &[Progress],
    layer: &ButterflyProduct<B>,
    optim: Option<Vec<u8>>,
) -> Result<()> {
    let precision = Some(Precision::of::<B>());
    let header = serde_json::to_vec(&Header {
        config: config.clone(),
        state: state.clone(),
        history: history.to_vec(),
        precision,
        permutations: Some(layer.permutations()),
    })
    .map_err(|e| corrupt(path, format!("cannot encode header: {e}")))?;
    let model = record_bytes::<B, _>(layer.clone().into_record())?;
    let optim = optim.unwrap_or_default();
    let mut payload = Vec::with_capacity(24 + header.len() + model.len() + optim.len());
    for section in [&header, &model, &optim] {
        payload.extend_from_slice(&(section.len() as u64).to_le_bytes());
        payload.extend_from_slice(section);
    }
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&payload);
    write_atomic("checkpoint.write", path, &bytes)
}

impl Checkpoint {
    /// Reads and checks a checkpoint file (magic, version, length, checksum, header).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Checkpoint`] when it is truncated,
    /// corrupt or of another format or version.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        Self::read_at(path.as_ref())
    }

    /// [`Checkpoint::read`] for a path given as one: the decoding is compiled once, here, not in
    /// every caller.
    fn read_at(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io("checkpoint.read", path, e))?;
        if bytes.len() < HEADER_LEN {
            return Err(corrupt(
                path,
                format!("truncated: {} bytes, shorter than the {HEADER_LEN}-byte header", bytes.len()),
            ));
        }
        if &bytes[..8] != MAGIC {
            return Err(corrupt(path, "not a learned-fft checkpoint (wrong magic bytes)"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(corrupt(path, format!("format version {version}, this build reads version {VERSION}")));
        }
        let crc = u32_at(12);
        let len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")) as usize;
        let payload = &bytes[HEADER_LEN..];
        if payload.len() != len {
            return Err(corrupt(
                path,
                format!("truncated or extended: payload of {} bytes, header says {len}", payload.len()),
            ));
        }
        if crc32fast::hash(payload) != crc {
            return Err(corrupt(path, "checksum mismatch (the file is corrupt)"));
        }
        let mut sections = Vec::with_capacity(3);
        let mut at = 0usize;
        for _ in 0..3 {
            let size = payload
                .get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
                .ok_or_else(|| corrupt(path, "section table cut short"))?;
            let section =
                payload.get(at + 8..at + 8 + size).ok_or_else(|| corrupt(path, "section runs past the end"))?;
            sections.push(section.to_vec());
            at += 8 + size;
        }
        let optim = sections.pop().unwrap_or_default();
        let model = sections.pop().unwrap_or_default();
        let mut header: serde_json::Value =
            serde_json::from_slice(&sections[0]).map_err(|e| corrupt(path, format!("bad header: {e}")))?;
        // Fields the config gained after the file was written take their defaults.
        if let Some(config) = header.get_mut("config") {
            *config =
                serde_json::to_value(TrainConfig::from_saved(config.take()).map_err(|e| corrupt(path, e.to_string()))?)
                    .map_err(|e| corrupt(path, format!("bad header: {e}")))?;
        }
        let header: Header = serde_json::from_value(header).map_err(|e| corrupt(path, format!("bad header: {e}")))?;
        header.config.validate().map_err(|e| corrupt(path, format!("its config is invalid: {e}")))?;
        let precision = header
            .precision
            .or_else(|| legacy_precision(&sections[0]))
            .ok_or_else(|| corrupt(path, "the header names no precision"))?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            config: header.config,
            state: header.state,
            precision,
            history: header.history,
            permutations: header.permutations,
            model,
            optim,
        })
    }

    /// The number of factors of the stored product.
    pub fn factors(&self) -> usize {
        self.permutations.as_ref().map_or(1, Vec::len)
    }

    /// The stored factors' permutations, the first applied first.
    pub fn permutations(&self) -> Vec<Permutation> {
        self.permutations.clone().unwrap_or_else(|| vec![legacy_permutation(&self.config.target)])
    }

    /// The layer stored in the checkpoint, on backend `B`, when it is a single butterfly.
    ///
    /// # Errors
    /// [`Error::Checkpoint`] when it cannot be decoded; [`Error::InvalidInput`] when it holds a
    /// product of several factors (read it with [`Checkpoint::product`]).
    pub fn layer<B: Backend>(&self, device: &B::Device) -> Result<Butterfly<B>> {
        let k = self.factors();
        if k != 1 {
            return Err(Error::invalid(
                "checkpoint.layer",
                "a checkpoint of one butterfly",
                format!("a product of {k} factors (read it as a ButterflyProduct)"),
            ));
        }
        self.product(device)?.into_butterfly()
    }

    /// The product stored in the checkpoint, on backend `B` (one factor for files written before
    /// products).
    ///
    /// # Errors
    /// [`Error::Checkpoint`] when the record does not decode or its shapes are not the
    /// config's.
    pub fn product<B: Backend>(&self, device: &B::Device) -> Result<ButterflyProduct<B>> {
        let n = self.config.n;
        let decode =
            |what: &str, e: burn::record::RecorderError| corrupt(&self.path, format!("cannot decode {what}: {e}"));
        let (mut product, stored) = match &self.permutations {
            Some(perms) => {
                let empty = ButterflyProductConfig::new(n, perms.clone())
                    .with_init(ButterflyInit::Identity)
                    .init::<B>(device)
                    .map_err(|e| corrupt(&self.path, format!("its permutations do not fit n = {n}: {e}")))?;
                let file: items::File<items::Product> = Recorder::<B>::load_item(&reader(), &mut self.model.clone())
                    .map_err(|e| decode("the product", e))?;
                (empty, file.item.factors)
            }
            None => {
                let empty = ButterflyConfig::new(n)
                    .with_init(ButterflyInit::Identity)
                    .with_permutation(legacy_permutation(&self.config.target))
                    .init::<B>(device)?;
                let file: items::File<items::Butterfly> =
                    Recorder::<B>::load_item(&reader(), &mut self.model.clone()).map_err(|e| decode("the layer", e))?;
                (ButterflyProduct::from_butterfly(empty), vec![file.item])
            }
        };
        if stored.len() != self.factors() {
            return Err(corrupt(&self.path, format!("{} factors, the header names {}", stored.len(), self.factors())));
        }
        let expected = [n.trailing_zeros() as usize, n / 2, 2, 2];
        for (layer, stored) in product.factors.iter_mut().zip(stored) {
            layer.twiddle_re = self.param::<B>(stored.twiddle_re, expected, device)?;
            layer.twiddle_im = self.param::<B>(stored.twiddle_im, expected, device)?;
        }
        Ok(product)
    }

    /// A stored parameter as a trainable tensor of `B`'s float type, with its saved id (the
    /// optimiser's state is keyed by it).
    fn param<B: Backend>(
        &self,
        stored: items::Param,
        shape: [usize; 4],
        device: &B::Device,
    ) -> Result<Param<Tensor<B, 4>>> {
        let id = ParamId::try_deserialize(&stored.id)
            .ok_or_else(|| corrupt(&self.path, format!("parameter id {:?} does not decode", stored.id)))?;
        let tensor = self.tensor::<B>(stored.param, shape, device)?;
        Ok(Param::initialized(id, tensor.require_grad()))
    }

    /// A stored tensor in `B`'s float type, checked against the shape it must have.
    fn tensor<B: Backend>(&self, data: TensorData, shape: [usize; 4], device: &B::Device) -> Result<Tensor<B, 4>> {
        if data.shape.as_slice() != shape {
            return Err(corrupt(&self.path, format!("a tensor of shape {:?}, config says {shape:?}", data.shape)));
        }
        let values = data
            .convert::<f64>()
            .into_vec::<f64>()
            .map_err(|e| corrupt(&self.path, format!("a tensor that does not decode as floats: {e:?}")))?;
        Ok(float_tensor::<B, 4>(values, shape, device))
    }

    /// Adam's state saved with the layer, per parameter id, decoded on `B`; `None` when the
    /// checkpoint holds none (Adam was done).
    pub(super) fn adam_state<B: AutodiffBackend<InnerBackend: AdamOps>>(
        &self,
        device: &B::Device,
    ) -> Result<Option<Vec<AdamParamState<B>>>> {
        if self.optim.is_empty() {
            return Ok(None);
        }
        let file: items::File<HashMap<String, items::Adaptor>> =
            Recorder::<B>::load_item(&reader(), &mut self.optim.clone())
                .map_err(|e| corrupt(&self.path, format!("cannot decode the optimiser state: {e}")))?;
        let n = self.config.n;
        let shape = [n.trailing_zeros() as usize, n / 2, 2, 2];
        let mut state = Vec::with_capacity(file.item.len());
        for (id, items::Adaptor::V1(items::Ranked::Rank4(adam))) in file.item {
            let id = ParamId::try_deserialize(&id).ok_or_else(|| {
                corrupt(&self.path, format!("optimiser state for parameter id {id:?}, which does not decode"))
            })?;
            let m = adam.momentum;
            let max_moment_2 = m.max_moment_2.map(|t| self.tensor::<B::InnerBackend>(t, shape, device)).transpose()?;
            let momentum = AdaptiveMomentumState {
                time: m.time,
                moment_1: self.tensor::<B::InnerBackend>(m.moment_1, shape, device)?,
                moment_2: self.tensor::<B::InnerBackend>(m.moment_2, shape, device)?,
                max_moment_2,
            };
            state.push((id, AdaptorRecord::from_state(AdamState { momentum })));
        }
        Ok(Some(state))
    }
}

/// Adam's saved state of one parameter.
pub(super) type AdamParamState<B> = (ParamId, AdaptorRecord<FusedAdam, B>);

/// Mirrors of the records' serialised items, decoded here rather than by Burn's
/// `Record::from_item`: Burn 0.21 creates the loaded tensors in the device's default float
/// dtype, which is one per device for the whole process (`NdArray<f32>` and `NdArray<f64>`
/// share it), so an f64 checkpoint loaded after an f32 layer would be rounded to f32. Each
/// tensor's data carries its own dtype; the tensors are built in `B`'s (`crate::tensors`).
mod items {
    use burn::tensor::TensorData;
    use serde::Deserialize;

    /// Burn's `BurnRecord` (its metadata is not needed).
    #[derive(Deserialize)]
    pub struct File<I> {
        pub item: I,
    }

    /// Burn's `ParamSerde` of a float tensor.
    #[derive(Deserialize)]
    pub struct Param {
        pub id: String,
        pub param: TensorData,
    }

    /// [`crate::nn::Butterfly`]'s record item (its skipped fields are not stored).
    #[derive(Deserialize)]
    pub struct Butterfly {
        pub twiddle_re: Param,
        pub twiddle_im: Param,
    }

    /// [`crate::nn::ButterflyProduct`]'s record item.
    #[derive(Deserialize)]
    pub struct Product {
        pub factors: Vec<Butterfly>,
    }

    /// Burn's `AdaptorRecordItem`.
    #[derive(Deserialize)]
    pub enum Adaptor {
        V1(Ranked),
    }

    /// Burn's `AdaptorRecordItemV1`: every parameter of the layer has rank 4.
    #[derive(Deserialize)]
    pub enum Ranked {
        Rank4(Adam),
    }

    /// Burn's `AdamStateItem`.
    #[derive(Deserialize)]
    pub struct Adam {
        pub momentum: Momentum,
    }

    /// Burn's `AdaptiveMomentumStateItem`.
    #[derive(Deserialize)]
    pub struct Momentum {
        pub time: usize,
        pub moment_1: TensorData,
        pub moment_2: TensorData,
        pub max_moment_2: Option<TensorData>,
    }
}

impl<B: Backend> Butterfly<B> {
    /// Loads the layer from a checkpoint written by the trainer (`learned-fft train` or
    /// [`crate::train::Trainer`]), on any backend and float type.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, [`Error::Checkpoint`] when it is truncated,
    /// corrupt or not a checkpoint.
    pub fn from_checkpoint(path: impl AsRef<Path>, device: &B::Device) -> Result<Self> {
        Checkpoint::read(path)?.layer(device)
    }
}

impl<B: Backend> ButterflyProduct<B> {
    /// Loads the product from a checkpoint written by the trainer, on any backend and float
    /// type (a checkpoint of one butterfly gives a product of one factor).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, [`Error::Checkpoint`] when it is truncated,
    /// corrupt or not a checkpoint.
    pub fn from_checkpoint(path: impl AsRef<Path>, device: &B::Device) -> Result<Self> {
        Checkpoint::read(path)?.product(device)
    }
}

impl Checkpoint {
    /// A resumed run must train the same shapes on the same problem, in the same float type.
    pub(super) fn check_compatible(&self, new: &TrainConfig, precision: Precision) -> Result<()> {
        let op = "train.resume";
        let saved = &self.config;
        if saved.n != new.n {
            return Err(Error::invalid(op, format!("n = {} as in the checkpoint", saved.n), format!("n = {}", new.n)));
        }
        if saved.target != new.target {
            return Err(Error::invalid(
                op,
                format!("target {:?} as in the checkpoint", saved.target),
                format!("{:?}", new.target),
            ));
        }
        if self.precision != precision {
            return Err(Error::invalid(op, format!("precision {} as in the checkpoint", self.precision), precision));
        }
        if saved.model != new.model || saved.class_factors() != new.class_factors() {
            return Err(Error::invalid(
                op,
                format!("the checkpoint's model class ({})", saved.class_name()),
                format!("model class {}", new.class_name()),
            ));
        }
        // A run written in a target's former class (fixed stages: three factors for the real
        // transforms), which no run trains now, holds another number of factors.
        if self.factors() != new.class_factors() {
            return Err(Error::invalid(
                op,
                format!("a checkpoint of the {} factors of the class {}", new.class_factors(), new.class_name()),
                format!(
                    "{} factors in the checkpoint (a class no longer trained: start the run afresh)",
                    self.factors()
                ),
            ));
        }
        if saved.real != new.real {
            let name = |real: bool| if real { "real" } else { "complex" };
            return Err(Error::invalid(
                op,
                format!("{} butterflies as in the checkpoint", name(saved.real)),
                name(new.real),
            ));
        }
        if saved.real_output != new.real_output {
            let name = |on: bool| if on { "the real-output map" } else { "the whole output" };
            return Err(Error::invalid(
                op,
                format!("{} as in the checkpoint", name(saved.real_output)),
                name(new.real_output),
            ));
        }
        if saved.seed != new.seed {
            return Err(Error::invalid(op, format!("seed {} as in the checkpoint", saved.seed), new.seed));
        }
        Ok(())
    }
}
