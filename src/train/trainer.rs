//! The trainer's API: [`Trainer`], its [`TrainReport`], and the [`Observer`] of its progress.
//! The run itself is [`super::run`]; its phases are [`super::adam`] and [`super::polish`].

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use burn::tensor::backend::{Device as _, DeviceId};
use serde::Serialize;

use super::attempt::Block;
use super::chain::HalfSource;
use super::checkpoint;
use super::config::TrainConfig;
use super::objective::{scalar, Objective, Probes};
use super::observer::{AttemptLog, Observer, Progress};
use super::permutation::{self, MemoFile, SearchInF64, Searched};
use super::run::{Grown, Refine, Run, RunOptions};
use super::state::{Level, Phase};
use crate::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
use crate::error::{Error, Result};
use crate::metrics::{self, FloorSource};
use crate::nn::{Butterfly, ButterflyProduct, PermutationSource};
use crate::ops::Permutation;
use crate::reference::factorizations::Factor;
use crate::reference::{Operator, Target};

/// The outcome of a run. The rmse and floor here are the f64 metric of [`crate::metrics`],
/// computed after training from the layer's matrix on its backend.
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    /// Transform size.
    pub n: usize,
    /// Target transform.
    pub target: Target,
    /// The backend, precision and device used.
    pub backend: Selected,
    /// Seed of the attempt that produced the result.
    pub seed: u64,
    /// Attempts made (1 + restarts used).
    pub attempts: usize,
    /// Steps done in total.
    pub steps: usize,
    /// Seconds of training (summed over resumed runs; excludes the final evaluation).
    pub seconds: f64,
    /// The step this run resumed from, if it resumed.
    pub resumed_from: Option<usize>,
    /// Final loss on the device.
    pub loss: f64,
    /// rmse against the f64 target.
    pub rmse: f64,
    /// The floor: the rmse of the target's exact factorization in this precision and backend,
    /// or for a target with none, in f32, of the model's own f64 solution ([`FloorSource`]).
    pub floor: Option<f64>,
    /// rmse / floor.
    pub rmse_over_floor: Option<f64>,
    /// What the floor measures (`None` where there is no floor).
    pub floor_source: Option<FloorSource>,
    /// The exact factorization's floor in the trainer's gauge
    /// ([`gauge::floor_in_trainer_gauge`](super::gauge::floor_in_trainer_gauge)): the same
    /// factorization as the floor of a built-in target, rounded where the trainer's gauge puts
    /// exact ones, so lower (for the DFT 0.21 … 0.43 × the floor at N = 16 … 256). The bar stays the floor;
    /// this says how far below it rounding alone can go. `None` for a user's target.
    pub floor_in_trainer_gauge: Option<f64>,
    /// The bar this run had to reach ([`metrics::bar`]): 1e-14 in f64; in f32 the floor (an
    /// exact factorization's) or 1.05 × the floor (the model's own solution's); `None` in f32
    /// where there is no floor.
    pub bar: Option<f64>,
    /// Whether the rmse is at or under the bar (`false` where there is no bar).
    pub reached: bool,
    /// The model class trained ([`TrainConfig::class`]): `B`, `BP`, `BPBP` or `(BP)^K`, `Re(…)`
    /// under the real-output map (reports written before every class was generic may name
    /// `BP+M`, with fixed stages).
    pub model: String,
    /// Stages the optimiser learned, over all factors.
    pub stages_learned: usize,
    /// Stages set to the values of the target's exact factorization and never trained (0
    /// where every stage is learned).
    pub stages_fixed: usize,
    /// How each factor's input permutation was obtained, the first factor first.
    pub permutations: Vec<PermutationSource>,
    /// Whether the twiddles are in the fixed gauge (first columns 1).
    pub gauge_fixed: bool,
    /// The size of the trained layer the final attempt grew from
    /// ([`TrainConfig::grow_above`]); `None` from random weights. Its steps and seconds (and
    /// those of the runs it grew from) are counted in `steps` and `seconds`.
    pub grown_from: Option<usize>,
    /// The chain the final attempt grew from, smallest size first: each half-size run's
    /// outcome ([`Level`]), so one run at N gives figures for every size of its chain. Empty from
    /// random weights.
    pub levels: Vec<Level>,
    /// Where the final attempt's block of attempts had its own half-size chain refused at its
    /// bottom (no permutation the doubling carries up fitted there), so its attempts doubled the
    /// first block's layer instead: that block's first attempt.
    /// `None` where the attempt doubled its own block's layer, or did not grow.
    pub refused_chain: Option<usize>,
    /// Whether the layer is the rounding of the run's own f64 solution rather than where its
    /// f32 polish ended: on random probes, where fresh probes measure it lower (the polish
    /// minimises the probes' loss, not the dense rmse; see [`crate::train::TrainState::kept_own_rounding`]).
    pub kept_own_rounding: bool,
    /// The checkpoint written at the end, if any.
    pub checkpoint: Option<String>,
    /// Each attempt's outcome, from the progress records: where its Adam phase ended and where
    /// its polish left it ([`AttemptLog`]).
    pub attempt_log: Vec<AttemptLog>,
    /// The progress records of the whole run (resumed runs included), one per (step, phase,
    /// attempt): the training curve ([`crate::plot::training_curve`]). Not serialised.
    #[serde(skip)]
    pub history: Vec<Progress>,
}

/// Trains a [`ButterflyProduct`] in the target's model class (one butterfly for the DFT) to
/// reproduce a target transform (see [`crate::train`]).
///
/// # Example
/// ```
/// use learned_fft::{BackendKind, Precision, Target, TrainConfig, Trainer};
///
/// // The DFT of size 8 from random twiddles, on the CPU in f64.
/// let config = TrainConfig::new(8).with_target(Target::Dft).with_seed(1);
/// let report = Trainer::new(config)?.run(BackendKind::Ndarray, Precision::F64, &mut ())?;
/// assert!(report.reached);
/// assert!(report.rmse <= 1e-14);
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Trainer {
    config: TrainConfig,
    resume: bool,
    stop: Option<Arc<AtomicBool>>,
    /// A grown run's half-size run: a run at 2N doubles its layer.
    half: bool,
    /// Where this run's first block takes its half-size layer from, when another run trained
    /// it already ([`HalfSource::of_block`]); `None`: it trains its own.
    below: Option<HalfSource>,
}

impl Trainer {
    /// A trainer for `config` (checked here).
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when the config does not validate
    /// ([`TrainConfig::validate`]).
    pub fn new(config: TrainConfig) -> Result<Self> {
        config.validate()?;
        Ok(Trainer { config, resume: false, stop: None, half: false, below: None })
    }

    /// Continue from `<checkpoint_dir>/checkpoint.lfft` (optimiser state and step counter
    /// included) instead of starting afresh.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// A flag that asks the run to stop: once it is set (by a signal handler, another thread),
    /// the run finishes its current step, writes a checkpoint (with a checkpoint directory) and
    /// returns [`crate::Error::Interrupted`]. The binary sets it on SIGTERM and SIGINT.
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The config.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The running checkpoint's path, when checkpoints are on.
    pub fn checkpoint_path(&self) -> Option<PathBuf> {
        checkpoint::running_path(&self.config)
    }

    /// Trains on the named backend and precision (resolving `auto`, see
    /// [`crate::backend::dispatch`]).
    ///
    /// # Errors
    /// As [`run_on`](Self::run_on), and the backend's: [`Error::BackendUnavailable`],
    /// [`Error::UnsupportedPrecision`].
    pub fn run(&self, backend: BackendKind, precision: Precision, observer: &mut dyn Observer) -> Result<TrainReport> {
        struct Task<'a>(&'a Trainer, &'a mut dyn Observer);
        impl BackendTask for Task<'_> {
            type Output = TrainReport;
            fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<TrainReport> {
                self.0.run_on::<B>(&device, selected, self.1).map(|(_, report)| report)
            }
        }
        dispatch(backend, precision, Task(self, observer))
    }

    /// Trains on backend `B` and returns the trained layer with the report (a product of one
    /// factor for the DFT, the iDFT and the Hadamard transform:
    /// [`ButterflyProduct::into_butterfly`] gives the [`crate::nn::Butterfly`]).
    ///
    /// # Errors
    /// [`Error::Diverged`] when the loss or the twiddles go non-finite,
    /// [`Error::Interrupted`] when the stop flag is set, [`Error::OutOfMemory`] when the target
    /// or the objective does not fit, [`Error::Io`] from the checkpoint directory and the
    /// TensorBoard logs, [`Error::Checkpoint`] and [`Error::Busy`] from the checkpoint directory
    /// (a resume included).
    pub fn run_on<B: FftBackend>(
        &self,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<(ButterflyProduct<B>, TrainReport)> {
        let halves = RefCell::new(Halves::default());
        let grow = |attempt: usize, block: Block, observer: &mut dyn Observer| {
            self.grown::<B>(attempt, block, device, selected, &halves, observer)
        };
        let nearest = |layer: &ButterflyProduct<B>, observer: &mut dyn Observer| {
            self.nearest_solution::<B>(layer, device, selected, observer)
        };
        // The floor from the run's own solution: a user's target has no other, a built-in's is
        // its exact factorization's only with `own_floor` off. f64's bar is 1e-14 for every target.
        let cfg = &self.config;
        let refines = Precision::of::<B>() == Precision::F32 && (cfg.own_floor || cfg.target.is_users());
        let refine: Option<&Refine<'_, B>> = if refines { Some(&nearest) } else { None };
        let in_f64 = |probes: &Probes, factors: usize, doubles: bool, memo: Option<&MemoFile>| {
            self.search_in_f64::<B>(probes, (factors, doubles), memo, device, selected)
        };
        let f32 = Precision::of::<B>() == Precision::F32;
        let search: Option<&SearchInF64<'_>> = if f32 { Some(&in_f64) } else { None };
        let options = RunOptions {
            resume: self.resume,
            stop: self.stop.as_deref(),
            grow: &grow,
            refine,
            search,
            given_start: false,
            doubled: self.half,
        };
        to_the_end(&self.config, options, device, selected, observer)
    }

    /// In f32, for a user's target and for a built-in with [`TrainConfig::own_floor`], the f64
    /// solution nearest where an attempt's polish left `layer`, as this backend evaluates it
    /// (its twiddles rounded to the backend's float type): the same config in f64 started from
    /// `layer`'s twiddles, straight into the polish (no Adam, no restart, no checkpoints or
    /// logs, its progress to `observer`), gauge-fixed as the trainer leaves a layer. `None`
    /// where that polish ends above the f64 bar: no solution is near. Its rounding is the f32
    /// floor of the solution this run found, found without an answer, whichever of a product's
    /// family of solutions that is (a separate f64 run from random weights, the first design,
    /// can end at another, whose rounding differs by up to 2×, and cost minutes where this
    /// costs seconds). It runs on the run's own backend and device where that computes in f64
    /// (CUDA, candle, ndarray) and on the CPU (ndarray) for wgpu, which has no f64.
    fn nearest_solution<B: FftBackend>(
        &self,
        layer: &ButterflyProduct<B>,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<Option<ButterflyProduct<B::InnerBackend>>> {
        let trainer = self.in_f64();
        let (kind, on) = f64_backend::<B>(selected, device);
        let task = InF64 { trainer: &trainer, start: layer.to_factors(), on, device_name: &selected.device, observer };
        let Some(factors) = dispatch(kind, Precision::F64, task)? else {
            return Ok(None);
        };
        let factors = factors.into_iter().map(|f| Butterfly::from_factor(&f, device)).collect::<Result<Vec<_>>>()?;
        Ok(Some(ButterflyProduct { factors }))
    }

    /// This run's config as an f64 polish takes it: no checkpoints, logs, early stop or
    /// restarts.
    fn in_f64(&self) -> Trainer {
        let config = TrainConfig {
            checkpoint_dir: None,
            log_dir: None,
            stop_rmse: None,
            restarts: 0,
            own_floor: false,
            ..self.config.clone()
        };
        Trainer { config, resume: false, stop: self.stop.clone(), half: false, below: None }
    }

    /// An f32 run's permutation search, done in f64 on the backend and device
    /// [`Trainer::nearest_solution`] polishes on, on the run's probes; then, where it hands
    /// butterflies over (its fit came below the early stop), the f64 polish from them
    /// ([`Trainer::polish_from`]), whose end is handed over (a solution where it reached the
    /// f64 bar).
    /// In f32 the scoring polish stalls where the fit left it behind the right permutation as
    /// behind the wrong ones (the DCT-II in BPBP at N = 64: 1.56e-2 behind its own class, where
    /// f64's falls to 3.7e-4), so no candidate stands apart and every one is scored; and the f32
    /// polish from the search's fit can stall above the bar (the Hartley transform's at N = 64
    /// at 8.8e-7). Both are the run's own signals in f64, as its floor is (`own_floor`).
    /// Its progress is kept in `memo` (the f32 run's checkpoint directory), as an f64 run's.
    fn search_in_f64<B: FftBackend>(
        &self,
        probes: &Probes,
        (factors, doubles): (usize, bool),
        memo: Option<&MemoFile>,
        device: &B::Device,
        selected: &Selected,
    ) -> Result<Searched> {
        let trainer = self.in_f64();
        let (kind, on) = f64_backend::<B>(selected, device);
        let device_name = &selected.device;
        let task = SearchTask { trainer: &trainer, probes, factors, doubles, memo, on, device_name };
        dispatch(kind, Precision::F64, task)
    }

    /// The run from the twiddles `start` straight into the polish, with no restart (the start
    /// is handed over as a grown layer within Adam's hand-over rmse).
    fn polish_from<B: FftBackend>(
        &self,
        start: &[Factor],
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<(ButterflyProduct<B>, TrainReport)> {
        let factors = start.iter().map(|f| Butterfly::from_factor(f, device)).collect::<Result<Vec<_>>>()?;
        let start = RefCell::new(Some(ButterflyProduct { factors }));
        let n = self.config.n;
        let grow = |_: usize, _: Block, _: &mut dyn Observer| {
            Ok(start.borrow_mut().take().map(|layer| Grown {
                layer,
                aligned: true,
                from_n: n,
                steps: 0,
                seconds: 0.0,
                levels: Vec::new(),
                refused_block: None,
            }))
        };
        let options = RunOptions {
            resume: false,
            stop: self.stop.as_deref(),
            grow: &grow,
            refine: None,
            search: None,
            given_start: true,
            doubled: false,
        };
        to_the_end(&self.config, options, device, selected, observer)
    }

    /// Attempt `attempt`'s start grown from the layer trained at N/2 on the halved target, where
    /// the config asks for it ([`TrainConfig::grow_threshold`]) and the model class is a product
    /// of butterflies after the bit reversal or the identity with every stage learned (the
    /// half-size layer's permutations, found there, are carried up by [`permutation::carried_up`]);
    /// `None` otherwise. The half-size run (no logs of its own, its progress to `observer`, its
    /// checkpoints in [`checkpoint::half_dir`] inside this run's directory) has seed `seed + h`,
    /// where `h` is `block.start`, the first attempt of `attempt`'s block
    /// ([`block_start`](super::attempt::block_start)); the attempts of a block double that one
    /// trained layer (kept in `half`), each with its own seed for the stages the half-size layer
    /// does not hold, whether or not it reached its bar; the first block's layer is kept too
    /// (`halves`), for a later block whose own chain is refused ([`Self::block_half`]). The block
    /// depends only on the attempts' records (and the runs are deterministic), so a resumed run
    /// takes the uninterrupted run's path.
    fn grown<B: FftBackend>(
        &self,
        attempt: usize,
        block: Block,
        device: &B::Device,
        selected: &Selected,
        halves: &RefCell<Halves<B>>,
        observer: &mut dyn Observer,
    ) -> Result<Option<Grown<B>>> {
        let cfg = &self.config;
        // Under the real-output map only one butterfly grows: a permutation learned at each
        // size does not double.
        if !cfg.grows_at(cfg.n) || cfg.learns_real_output_permutation() {
            return Ok(None);
        }
        let class = super::attempt::chosen_class(cfg, cfg.n, None)?;
        let doubles = |p: &Permutation| matches!(p, Permutation::BitReversal | Permutation::Identity);
        if !class.permutations.iter().all(doubles) {
            return Ok(None);
        }
        let mut cached = halves.borrow_mut();
        let h = match cached.current.take() {
            Some(h) if h.attempt == block.start => h,
            _ => self.block_half::<B>(block, cached.first.as_ref(), device, selected, observer)?,
        };
        if block.start == 0 && cached.first.is_none() {
            cached.first = Some(h.clone());
        }
        // Its steps and seconds count once, in the block's first attempt, and not at all where
        // another block trained it (they were counted there).
        let own = h.levels.last().filter(|_| h.attempt == attempt && !h.reused);
        let (steps, seconds) = own.map_or((0, 0.0), |l| (l.steps, l.seconds));
        let half_n = cfg.n / 2;
        let carried =
            h.layer.permutations().iter().map(|p| permutation::carried_up(p, half_n)).collect::<Result<Vec<_>>>()?;
        let Some(carried) = carried.into_iter().collect::<Option<Vec<_>>>() else {
            // A user's family whose half-size permutation is not one the doubling carries over
            // (its member at N is not two of the member at N/2 and one stage).
            return Err(Error::invalid(
                "train.grow",
                format!(
                    "a half-size layer behind permutations the doubling carries up (the bit reversal, the identity, another self-similar member), to grow {} by doubling",
                    cfg.target.name()
                ),
                format!(
                    "{:?} found at N = {}: this family cannot be grown by doubling; train it at N = {} without grow_above",
                    h.layer.permutations(),
                    cfg.n / 2,
                    cfg.n
                ),
            ));
        };
        let layer = h.layer.doubled_behind(&carried, cfg.seed + attempt as u64)?;
        let levels = h.levels.clone();
        let refused_block = h.refused.then_some(block.start);
        cached.current = Some(h);
        Ok(Some(Grown { layer, aligned: false, from_n: cfg.n / 2, steps, seconds, levels, refused_block }))
    }

    /// The half-size layer the attempts of `block` double: its own run's
    /// ([`half_run`](Self::half_run)), or where a later block's run is refused
    /// ([`Error::InvalidInput`] `train.grow`: the new seed's search at the bottom of its chain
    /// fitted no permutation the doubling carries up), the first block's layer (`first`, kept
    /// by this process; a resumed run reads it back from its directory), doubled with this
    /// block's seeds. A refusal is the search's verdict on one seed's fits, and the first block's chain
    /// has shown that the family grows: the run goes on to its last attempt and ends with its
    /// best rmse. The circulant's run at N = 64 with seed 4000 (f64) was refused in the second
    /// block of its run at 32, at that block's bottom (16: behind the bit reversal every fit
    /// from six seeds ended at rmse 0.2464), after the first block's chain had trained its
    /// layer at 32 (2026-12-07).
    fn block_half<B: FftBackend>(
        &self,
        block: Block,
        first: Option<&Half<B>>,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<Half<B>> {
        match self.half_run::<B>(block, false, device, selected, observer) {
            Err(Error::InvalidInput { op: "train.grow", .. }) if block.start > 0 => {
                let first = match first {
                    // Its steps and seconds were counted in the first block.
                    Some(first) => Half { reused: true, ..first.clone() },
                    None => self.half_run::<B>(Block::FIRST, true, device, selected, observer)?,
                };
                Ok(Half { attempt: block.start, refused: true, ..first })
            }
            half => half,
        }
    }

    /// The run at N/2 on the halved target for the block starting at attempt `block` (its seed
    /// and directory from [`HalfSource::of_block`]), polished to its own precision (the grown
    /// layer starts there), with at most [`HALF_REUSE`] attempts: a run that misses its bar
    /// there is still a start the run at N can finish from (the circulant's chain from N = 4 to
    /// 64 with seed 0 missed at 8 in every attempt, rmse 0.11, and reached the bar at 16 from
    /// it), and its own chain stays one block per level. A layer another block trained is read
    /// back from its checkpoint directory (without one it is trained again from the same seed,
    /// which gives the same layer), as is the first block's where `read_back` asks for it.
    fn half_run<B: FftBackend>(
        &self,
        block: Block,
        read_back: bool,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<Half<B>> {
        let cfg = &self.config;
        let n = cfg.n / 2;
        let run_dir = cfg.checkpoint_dir.as_deref().map(Path::new);
        let source = HalfSource::of_block(block, (cfg.n, cfg.seed, run_dir), self.below.as_ref());
        let dir = source.dir.clone();
        // A layer another block trained is read back from its directory, its steps and seconds
        // counted where it was trained; without one it is trained again, and counted again.
        let given = block.start == 0 && (self.below.is_some() || read_back);
        let resumable = dir.as_deref().is_some_and(checkpoint::resumable);
        let reused = given && resumable;
        let half = TrainConfig {
            n,
            target: cfg.target.halved()?,
            seed: source.seed,
            // One block: a run above it grows from the layer even when it missed its bar.
            restarts: cfg.restarts.min(HALF_REUSE - 1),
            checkpoint_dir: dir.as_ref().map(|d| d.display().to_string()),
            log_dir: None,
            stop_rmse: None,
            ..cfg.clone()
        };
        // A resumed run resumes (or reads back, when it finished) the half-size run it stopped
        // in or needs again; a new run trains its own anew.
        let resume = resumable && (self.resume || given);
        let below = source.below.map(|b| *b);
        let trainer = Trainer { config: half, resume, stop: self.stop.clone(), half: true, below };
        let (layer, report) = trainer.run_on::<B>(device, selected, observer)?;
        let mut levels = report.levels;
        levels.push(Level {
            n,
            seed: report.seed,
            attempts: report.attempts,
            steps: report.steps,
            seconds: report.seconds,
            rmse: report.rmse,
            floor: report.floor,
            floor_source: report.floor_source,
            bar: report.bar,
            reached: report.reached,
        });
        Ok(Half { attempt: block.start, layer, levels, reused, refused: false })
    }
}

/// The most attempts at N that grow from one trained half-size layer (each doubling it with its
/// own seed) before the half-size run is repeated with a new seed (fewer where an attempt ends on
/// Adam's plateau: [`block_start`](super::attempt::block_start)), and the most attempts a
/// half-size run makes. A failed attempt at N then costs its own steps, not the whole chain
/// below it again, and a chain costs at most this many attempts per level and block: without it the
/// circulant's chain from N = 16 to 64 or 1024 retrained every level on every failed attempt
/// above it, with ten attempts at each. Every other block's half-size run grows from the block
/// before's layer two sizes down, so it retrains one level, not the chain under it; the
/// others train a chain of their own.
pub const HALF_REUSE: usize = 3;

/// A trained half-size layer, the attempt it was trained for, and what training it took (its
/// level, last in `levels`).
#[derive(Clone)]
struct Half<B: FftBackend> {
    attempt: usize,
    layer: ButterflyProduct<B>,
    /// Trained by another block's run and read back: its steps and seconds were counted there.
    reused: bool,
    /// The block's own chain was refused at its bottom: this is the first block's layer
    /// ([`Trainer::block_half`]).
    refused: bool,
    /// Its chain and its own outcome (its steps and seconds, the chain's included), smallest
    /// size first ([`TrainReport::levels`]).
    levels: Vec<Level>,
}

/// The half-size layers a run keeps: the one its current block's attempts double, and its first
/// block's, which a later block whose own chain is refused doubles instead
/// ([`Trainer::block_half`]; without it, a run with no checkpoint directory would train the
/// first block's chain again).
struct Halves<B: FftBackend> {
    current: Option<Half<B>>,
    first: Option<Half<B>>,
}

impl<B: FftBackend> Default for Halves<B> {
    fn default() -> Self {
        Halves { current: None, first: None }
    }
}

/// The run of `cfg` with `options`: Adam then the polish, again from new random weights after a
/// polish that stalled above the bar (while restarts remain); then [`finish`].
fn to_the_end<'a, B: FftBackend>(
    cfg: &'a TrainConfig,
    options: RunOptions<'a, B>,
    device: &'a B::Device,
    selected: &Selected,
    observer: &'a mut dyn Observer,
) -> Result<(ButterflyProduct<B>, TrainReport)> {
    let mut run = Run::<B>::start(cfg, options, device, observer)?;
    run.announce(selected);
    while run.state.phase != Phase::Done {
        run.adam()?;
        run.polish()?;
    }
    finish(run, selected)
}

/// The last checkpoint, and the report: the final loss on the device, and the f64 metric.
fn finish<B: FftBackend>(mut run: Run<'_, B>, selected: &Selected) -> Result<(ButterflyProduct<B>, TrainReport)> {
    // A run resumed after its end has not looked for its solution in this process.
    if !run.floor_refined {
        run.refine_floor()?;
    }
    run.keep_the_better_rounding()?;
    let theta = run.twiddles();
    let loss = scalar(run.inner_objective.loss(&theta.re, &theta.im, &run.perms));
    run.state.seconds = run.seconds();
    run.save()?;
    let (cfg, device) = (run.cfg, run.device);
    let own_solution = run.own_solution.take();
    // With `own_floor`, no solution near the last attempt's end means no floor: the exact
    // factorization's is not consulted.
    let refined = run.refine.is_some();
    let (stages_learned, stages_fixed) = run.class.stage_counts();
    let permutations = run.class.sources.clone();
    let ended = run.close()?;
    let (layer, state) = (ended.layer, ended.state);
    let n = cfg.n;
    // With the real-output map the model is Re(M): its rmse and every floor are the real part's.
    let rmse = metrics::rmse_of_model(&layer, &cfg.target, cfg.real_output)?;
    let (floor, floor_source) = match &own_solution {
        Some(own) => {
            (Some(metrics::rmse_of_model(own, &cfg.target, cfg.real_output)?), Some(FloorSource::OwnF64Solution))
        }
        None if refined => (None, None),
        None => {
            let floor = metrics::floor_of_model::<B>(n, &cfg.target, cfg.real_output, device)?;
            (floor, floor.map(|_| FloorSource::ExactFactorization))
        }
    };
    let bar = metrics::bar(Precision::of::<B>(), floor.zip(floor_source));
    let report = TrainReport {
        n,
        target: cfg.target.clone(),
        backend: selected.clone(),
        seed: cfg.seed + state.attempt as u64,
        attempts: state.attempt + 1,
        steps: state.step,
        seconds: state.seconds,
        resumed_from: ended.resumed_from,
        loss,
        rmse,
        floor,
        rmse_over_floor: floor.map(|f| rmse / f),
        floor_source,
        floor_in_trainer_gauge: super::gauge::floor_in_trainer_gauge::<B>(n, &cfg.target, cfg.real_output, device)?,
        bar,
        reached: bar.is_some_and(|b| rmse <= b),
        model: match cfg.real_output {
            true => format!("Re({})", cfg.class_name()),
            false => cfg.class_name(),
        },
        stages_learned,
        stages_fixed,
        permutations,
        gauge_fixed: state.gauge_fixed,
        grown_from: state.grown_from,
        levels: state.levels,
        refused_chain: state.refused_chain,
        kept_own_rounding: state.kept_own_rounding,
        checkpoint: ended.checkpoint.map(|p| p.display().to_string()),
        attempt_log: AttemptLog::from_history(&ended.history),
        history: ended.history,
    };
    Ok((layer, report))
}

/// Where an f32 run's work in f64 runs: on the run's own backend and device where that computes
/// in f64 (CUDA, candle, ndarray), on the CPU (ndarray) for wgpu, which has no f64.
fn f64_backend<B: FftBackend>(selected: &Selected, device: &B::Device) -> (BackendKind, Option<DeviceId>) {
    match selected.kind {
        BackendKind::Wgpu => (BackendKind::Ndarray, None),
        kind => (kind, Some(device.to_id())),
    }
}

/// The device `on` (the f32 run's) where given, described as the f32 run's; `device` otherwise.
fn on_device<C: FftBackend>(
    on: Option<DeviceId>,
    name: &str,
    device: C::Device,
    selected: &Selected,
) -> (C::Device, Selected) {
    match on {
        Some(id) => (C::Device::from_id(id), Selected { device: name.to_string(), ..selected.clone() }),
        None => (device, selected.clone()),
    }
}

/// [`Trainer::search_in_f64`] on the backend [`dispatch`] picks.
struct SearchTask<'a> {
    trainer: &'a Trainer,
    probes: &'a Probes,
    factors: usize,
    doubles: bool,
    memo: Option<&'a MemoFile>,
    on: Option<DeviceId>,
    device_name: &'a str,
}

impl BackendTask for SearchTask<'_> {
    type Output = Searched;
    fn run<C: FftBackend>(self, device: C::Device, selected: &Selected) -> Result<Self::Output> {
        let (device, selected) = on_device::<C>(self.on, self.device_name, device, selected);
        let (cfg, stop) = (&self.trainer.config, self.trainer.stop.as_deref());
        let objective = Objective::<C>::from_probes(self.probes, &device).with_real_output(cfg.real_output);
        let (learned, source, fitted) =
            permutation::search_permutations(cfg, &objective, self.factors, self.doubles, self.memo, stop, &device)?;
        drop(objective);
        // None where the search's best fit stayed above its early stop; none polished under the
        // real-output map, whose run takes only the permutation (a product's first attempt is
        // what starts from the search's butterflies).
        if fitted.is_empty() || cfg.real_output {
            return Ok(Searched { learned, source, fitted: Vec::new() });
        }
        // The polish keeps only steps that lower the loss: its end, reached or not, is nearer
        // a solution than the fit it started from.
        let fitted = ButterflyProduct { factors: fitted }.to_factors();
        // A stop here stops the run before its first step, as one in the search does: this
        // polish has no checkpoint of its own, and its step count is not the run's (the
        // search's progress is kept: a resumed run fits the kept candidate once more).
        let (layer, _) = match self.trainer.polish_from::<C>(&fitted, &device, &selected, &mut ()) {
            Err(Error::Interrupted { .. }) => {
                let checkpoint = self.memo.map(|m| m.path.display().to_string());
                return Err(Error::Interrupted { step: 0, checkpoint });
            }
            polished => polished?,
        };
        Ok(Searched { learned, source, fitted: layer.to_factors() })
    }
}

/// The f64 polish of [`Trainer::nearest_solution`] on the backend [`dispatch`] picks, on device
/// `on` where given (the f32 run's, for a backend with both precisions on one device type),
/// from `start`; its factors in f64 when it reached its bar.
struct InF64<'a> {
    trainer: &'a Trainer,
    start: Vec<Factor>,
    on: Option<DeviceId>,
    /// The f32 run's description of its device, which `on` is.
    device_name: &'a str,
    observer: &'a mut dyn Observer,
}

impl BackendTask for InF64<'_> {
    type Output = Option<Vec<Factor>>;
    fn run<C: FftBackend>(self, device: C::Device, selected: &Selected) -> Result<Self::Output> {
        let (device, selected) = on_device::<C>(self.on, self.device_name, device, selected);
        let (layer, report) = self.trainer.polish_from::<C>(&self.start, &device, &selected, self.observer)?;
        Ok(report.reached.then(|| layer.to_factors()))
    }
}
