//! One training run's state and bookkeeping: the layer, the optimiser, the [`TrainState`], and
//! what every phase does around its steps (progress records, TensorBoard, checkpoints). The
//! phases themselves are [`super::adam`] and [`super::polish`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::lr_scheduler::cosine::CosineAnnealingLrScheduler;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::Tensor;

use super::attempt::{
    block_at, candidate_of, chosen_class, fresh_layer, new_optim, ranked_candidates, resume, schedule, Block,
};
use super::checkpoint::{self, DirLock, CONFIG_FILE};
use super::config::TrainConfig;
use super::lm::Twiddles;
use super::logging::TensorBoard;
use super::objective::{self, scalar, Objective, Probes};
use super::observer::{AttemptLog, FindingFloor, Observer, Progress};
use super::optimizer::FusedAdam;
use super::permutation::{self, MemoFile, SearchInF64};
use super::state::{Level, Phase, TrainState};
use crate::backend::{FftBackend, Precision};
use crate::error::{Error, Result};
use crate::files;
use crate::memory;
use crate::metrics::FloorSource;
use crate::nn::{exact_product, Butterfly, ButterflyProduct, ModelChoice, ModelClass, PermutationSource};
use crate::ops::Permutation;
use crate::reference::{ComplexMatrix, Target};
use crate::tensors::float_tensor;

/// The seed of the fresh probes that choose a run's final layer
/// ([`Run::keep_the_better_rounding`]), from the run's seed: apart from the probes it trains on.
const FRESH_PROBES_SALT: u64 = 0x6a09_e667_f3bc_c908;

/// The initial log2 of the Levenberg–Marquardt damping.
pub(super) const INITIAL_LOG2_LAMBDA: i32 = -10;

/// Adam on the layer, as the trainer configures it.
pub(super) type AdamOptimizer<B> = OptimizerAdaptor<FusedAdam, ButterflyProduct<B>, B>;

/// What a run is asked for besides its config.
pub(super) struct RunOptions<'a, B: FftBackend> {
    /// Continue from the checkpoint directory's checkpoint.
    pub resume: bool,
    /// Once set, the run checkpoints and stops ([`Error::Interrupted`]).
    pub stop: Option<&'a AtomicBool>,
    /// Where an attempt starts instead of random weights ([`TrainConfig::grow_above`]).
    pub grow: &'a Grow<'a, B>,
    /// In f32, for a user's target and for a built-in with [`TrainConfig::own_floor`]: the
    /// solution nearest where an attempt's polish left the layer, whose rounding is the floor,
    /// found at each attempt's end. `None`: the exact factorization's floor (none in f64).
    pub refine: Option<&'a Refine<'a, B>>,
    /// The start is a trained layer handed over to be polished on
    /// ([`super::trainer::Trainer`]'s nearest solution): its permutations are the run's, and
    /// none is searched for (a user's few pairs would search again for nothing).
    pub given_start: bool,
    /// In f32: the permutation search, done in f64 (in f32 the scoring polish can stall behind
    /// the right permutation as behind the wrong ones; see `Trainer::search_in_f64`).
    pub search: Option<&'a SearchInF64<'a>>,
    /// A grown run's half-size run, whose layer the run at 2N doubles: a product's first
    /// permutation, where it is learned, is one the doubling carries up (see `Run::start`).
    pub doubled: bool,
}

/// The f64 solution nearest a layer (polished from it in f64), as this backend evaluates it;
/// `None` where that polish does not reach the f64 bar: no solution is near.
pub(super) type Refine<'a, B> = dyn Fn(
        &ButterflyProduct<B>,
        &mut dyn Observer,
    ) -> Result<Option<ButterflyProduct<<B as burn::tensor::backend::AutodiffBackend>::InnerBackend>>>
    + 'a;

/// Attempt `attempt`'s layer grown from a trained half-size one, that of its block of attempts
/// ([`Block`]), reporting that run's progress to the observer; `None` where the run starts from
/// random weights.
pub(super) type Grow<'a, B> = dyn Fn(usize, Block, &mut dyn Observer) -> Result<Option<Grown<B>>> + 'a;

/// A layer grown from a trained layer of half the size, and what training that one took.
pub(super) struct Grown<B: FftBackend> {
    /// The grown layer (its last stage random, or the whole of it fitted: `aligned`).
    pub layer: ButterflyProduct<B>,
    /// Whether the layer is a whole start to polish, not one to run Adam from (a start the
    /// caller gives): the attempt goes straight to the polish.
    pub aligned: bool,
    /// The size it grew from.
    pub from_n: usize,
    /// Steps and seconds of the half-size run (and of the runs it grew from).
    pub steps: usize,
    pub seconds: f64,
    /// The chain it grew from, smallest size first, the half-size run last (empty for a start
    /// the caller gives).
    pub levels: Vec<Level>,
    /// The first attempt of the block whose own chain was refused, where the layer is the first
    /// block's instead ([`TrainReport::refused_chain`](super::TrainReport::refused_chain)).
    pub refused_block: Option<usize>,
}

/// A run in progress on backend `B`.
pub(super) struct Run<'a, B: FftBackend> {
    pub cfg: &'a TrainConfig,
    stop: Option<&'a AtomicBool>,
    grow: &'a Grow<'a, B>,
    /// Where the floor is the rounding of the solution nearest each attempt's end
    /// ([`RunOptions::refine`]).
    pub refine: Option<&'a Refine<'a, B>>,
    /// The checkpoint directory's lock, held while the run lives.
    _lock: Option<DirLock>,
    pub device: &'a B::Device,
    observer: &'a mut dyn Observer,
    /// The loss Adam differentiates.
    pub objective: Objective<B>,
    /// The same loss on the inner backend (polish, final loss).
    pub inner_objective: Objective<B::InnerBackend>,
    /// The floor as the device measures it (progress only; the report uses the f64 metric).
    floor_device: Option<f64>,
    /// The solution whose rounding the floor measures, where it is the model's own
    /// ([`RunOptions::refine`]); `None` where it is the exact factorization, or none was near.
    pub own_solution: Option<ButterflyProduct<B::InnerBackend>>,
    /// Whether this process looked for the solution nearest the layer (a run resumed after its
    /// end has not: [`super::trainer`]'s `finish` looks then).
    pub floor_refined: bool,
    pub layer: ButterflyProduct<B>,
    pub optim: AdamOptimizer<B>,
    /// The learning rate's factor on `lr`.
    pub schedule: CosineAnnealingLrScheduler,
    pub state: TrainState,
    /// The factors' permutations (fixed during the run).
    pub perms: Vec<Permutation>,
    /// The target's model class: which stages are learned, and the others' values.
    pub class: ModelClass,
    /// Per factor, 1 where a twiddle is learned and 0 where the class fixes it (`None` when
    /// every stage is learned): Adam's gradients are masked by it.
    learned_mask: Option<Vec<Twiddles<B::InnerBackend>>>,
    pub resumed_from: Option<usize>,
    /// Progress records so far, one per (step, phase, attempt): saved in every checkpoint.
    history: Vec<Progress>,
    ckpt_path: Option<PathBuf>,
    last_ckpt: Option<usize>,
    /// In the f32 finish (`polish::finish_on_the_grid`), whose stages fixed and save point a
    /// checkpoint does not hold: none is written there, and a stop leaves the last one, from
    /// which a resumed run takes the uninterrupted run's path.
    pub(super) snapping: bool,
    tb: Option<TensorBoard>,
    clock: Instant,
    base_seconds: f64,
}

impl<'a, B: FftBackend> Run<'a, B> {
    /// A fresh run, or (`options.resume`) the run saved in the checkpoint directory.
    pub fn start(
        cfg: &'a TrainConfig,
        options: RunOptions<'a, B>,
        device: &'a B::Device,
        observer: &'a mut dyn Observer,
    ) -> Result<Self> {
        cfg.validate()?;
        let n = cfg.n;
        let float = std::mem::size_of::<B::FloatElem>();
        let factors = cfg.class_factors();
        // The class to train (generic), its permutation found from the target's matrix where one
        // is at hand; with the real-output map none is (the permutation is learned).
        let class_for = |dense: Option<&ComplexMatrix>| match cfg.real_output {
            true => Ok(ModelClass::generic(cfg.class(), n)?.with_factors(cfg.class_factors(), n)),
            false => chosen_class(cfg, n, dense),
        };
        let rows = match &cfg.target {
            Target::Data(d) => d.rows(),
            _ => objective::rows_for(n, cfg.probes),
        };
        let what = || match (&cfg.target, rows == n) {
            (Target::Data(_), _) => {
                format!("training at N = {n} ({}, objective on {rows} pairs)", Precision::of::<B>())
            }
            (_, true) => format!("training at N = {n} ({}, dense N×N objective)", Precision::of::<B>()),
            (_, false) => format!("training at N = {n} ({}, objective on {rows} probes)", Precision::of::<B>()),
        };
        // On a GPU that reports its memory, the host holds only its part; elsewhere (the CPU
        // backends, wgpu) host and device are counted as one memory.
        match memory::device_memory(device) {
            Some(gpu) => {
                memory::ensure("train", what, objective::host_bytes_needed(n, rows))?;
                memory::ensure_device("train", what, objective::device_bytes_needed(n, rows, factors, float), &gpu)?;
            }
            None => memory::ensure("train", what, objective::bytes_needed(n, rows, factors, float))?,
        }
        let mut learn_permutation = false;
        // The identity basis (the dense matrix, from which a one-factor class's permutation is
        // found), or random probes (no N×N matrix; the permutation of the exact factorization).
        let (probes, class) = match &cfg.target {
            // A user's pairs are the batch; the matrix fitted to them, where they determine it,
            // is where the permutation is found.
            Target::Data(d) => {
                let fitted = d.fitted_matrix()?;
                // Only where the pairs pin a butterfly down: more residuals (rows · N) than its
                // 2 N log2 N twiddles (fewer fit any permutation, and learning one means nothing).
                learn_permutation = fitted.is_none() && d.rows() > 2 * n.trailing_zeros() as usize;
                (Probes::data(d)?, class_for(fitted.as_ref())?)
            }
            _ if cfg.probes.is_none() && rows == n => {
                let dense = cfg.target.matrix(n)?;
                (Probes::basis(&dense), class_for(Some(&dense))?)
            }
            _ => {
                // A user's matrix is at hand at any size, any other target's up to the dense
                // objective's sizes (an operator's built from its images of the basis): its
                // class's permutation is found from it.
                let at_hand = match cfg.target {
                    Target::Matrix(_) => true,
                    _ => n <= objective::DENSE_MAX_N,
                };
                let dense = (at_hand && !cfg.real_output).then(|| cfg.target.matrix(n)).transpose()?;
                let class = class_for(dense.as_ref())?;
                (Probes::random(&cfg.target, n, rows, cfg.seed, cfg.real_output)?, class)
            }
        };
        let mut class = ModelClass { real: cfg.real, ..class };
        // One trainer per checkpoint directory: taken once the user's inputs are read (a bad file
        // leaves no directory behind) and before anything that takes time, the permutation
        // search included (a second process on the directory is refused at once, not minutes
        // later), and before the checkpoint is read.
        let lock = cfg.checkpoint_dir.as_ref().map(|d| DirLock::acquire(Path::new(d))).transpose()?;
        // A run stopped in its permutation search, before its first checkpoint, left only the
        // search's progress: resumed, it starts again, and its search goes on from there.
        let replays_search = options.resume;
        let searched_only = cfg.checkpoint_dir.as_ref().is_some_and(|d| checkpoint::searched_only(Path::new(d)));
        let options = RunOptions { resume: options.resume && !searched_only, ..options };
        // A product (BPBP), whose first permutation no generic method finds from a matrix:
        // learned with the class's own later butterflies behind it, unless the run grows here
        // (it takes its half-size member's).
        let grows_here = cfg.grows_at(n);
        let learns_product = cfg.class() == ModelChoice::Bpbp && !cfg.real_output;
        learn_permutation |= learns_product && !grows_here;
        // The real-output map: the first permutation is learned below, on the real batch.
        let probes = match cfg.real_output {
            true => {
                learn_permutation = cfg.learns_real_output_permutation();
                probes.real()?
            }
            false => probes,
        };
        let objective = Objective::<B>::from_probes(&probes, device).with_real_output(cfg.real_output);
        let inner_objective =
            Objective::<B::InnerBackend>::from_probes(&probes, device).with_real_output(cfg.real_output);
        // Pairs too few to determine the matrix, the real-output map (whose real part does not
        // show a butterfly's structure), a product whose first permutation the matrix does not
        // give: a fresh run searches for the first permutation (`searched_first`); a resumed run
        // takes its layer's.
        let searched_first = learn_permutation
            && !options.given_start
            && (class.permutations.len() == 1 || cfg.real_output || learns_product)
            && class.sources[0] == PermutationSource::Identity
            && cfg.class() != ModelChoice::B;
        let learn_permutation = searched_first && !options.resume;
        // The search's time is the run's. It is read here, before the half-size run of a grown
        // start: that run's seconds come with it (`Grown::seconds`), and counting them in the
        // search's too made a chain to N = 65536 report 557 s for 459 s of wall time.
        let searched = Instant::now();
        let mut searched_start: Option<ButterflyProduct<B>> = None;
        let mut candidates = Vec::new();
        if learn_permutation {
            // Under the real-output map one butterfly, as measured there; otherwise the class's.
            let factors = if cfg.real_output { 1 } else { class.permutations.len() };
            let doubles = learns_product && options.doubled;
            let memo = MemoFile::in_dir(cfg.checkpoint_dir.as_deref(), replays_search, probes.fingerprint());
            let (learned, source, fitted) = match options.search {
                Some(search) => {
                    let s = search(&probes, factors, doubles, memo.as_ref())?;
                    let fitted = s.fitted.iter().map(|f| Butterfly::from_factor(f, device)).collect::<Result<_>>()?;
                    (s.learned, s.source, fitted)
                }
                None => {
                    let memo = memo.as_ref();
                    permutation::search_permutations(cfg, &objective, factors, doubles, memo, options.stop, device)?
                }
            };
            // A product's first attempt starts from the butterflies the search fitted behind the
            // permutation it kept (learned from random weights there), straight into the polish,
            // where that fit came below the search's early stop (none are handed over otherwise):
            // from random weights behind the same permutation the Hartley transform's ten
            // attempts at N = 32 (seed 1) stalled at rmse 0.033–0.054, where the search's fit had
            // come below 1e-6 of its scale; handed over, the polish reached 1.4e-17 in 68 steps.
            if learns_product && fitted.len() == class.permutations.len() {
                searched_start = Some(ButterflyProduct { factors: fitted });
            }
            class.permutations[0] = learned.permutation;
            class.sources[0] = source;
            // A product's later factors behind the permutation the search kept for them: the
            // identity, as the class has it, or one it found (then learned, or chosen).
            if learns_product && learned.later != Permutation::Identity {
                for k in 1..class.permutations.len() {
                    class.permutations[k] = learned.later.clone();
                    class.sources[k] = source;
                }
            }
            // What the later blocks of attempts may train behind instead (`candidate_of`),
            // where the search chose among permutations for the class's factors.
            if class.permutations.len() == factors {
                let later = class.permutations.get(1).cloned().unwrap_or(Permutation::Identity);
                candidates = ranked_candidates((class.permutations[0].clone(), later), &learned.tried);
            }
        }
        let search_seconds = searched.elapsed().as_secs_f64();
        drop(probes);
        // The exact factorization's floor, or none yet where the floor is found at each
        // attempt's end (`refine`).
        let solution = match options.refine {
            Some(_) => None,
            None => exact_product::<B::InnerBackend>(&cfg.target, n, device)?,
        };
        let floor_device = solution.map(|s| floor_of(&inner_objective, &s));
        let ckpt_path = checkpoint::running_path(cfg);
        let (layer, optim, mut state, history) = match (&ckpt_path, options.resume) {
            // A grown run stopped while its first half-size run trained has only that run's
            // checkpoint: it starts again, and the half-size run resumes.
            (Some(path), true) if path.exists() || !path.parent().is_some_and(checkpoint::resumable) => {
                resume::<B>(path, cfg, device)?
            }
            (None, true) => return Err(Error::invalid("train.resume", "a checkpoint directory", "none")),
            (_, _) => {
                let mut state = TrainState::start();
                state.candidates = std::mem::take(&mut candidates);
                let layer = match (options.grow)(0, Block::FIRST, &mut *observer)? {
                    Some(grown) => {
                        // The attempt opens the run: the half-size run's seconds are its first.
                        state.seconds = grown.seconds;
                        state.grown(grown, &class)?
                    }
                    None => match searched_start.take() {
                        Some(fitted) => {
                            state.phase = Phase::Polish;
                            class.impose(fitted)?
                        }
                        None => fresh_layer(cfg, &class, 0, device)?,
                    },
                };
                (layer, new_optim::<B>(), state, Vec::new())
            }
        };
        let learns = matches!(cfg.target, Target::Data(_)) || cfg.real_output || learns_product;
        if options.resume && learns && class.permutations.len() == layer.len() {
            // A searched first permutation is learned even where it is the class's start (the
            // search can find the identity itself); a later one where it is not the identity.
            let perms = layer.permutations();
            for (k, p) in perms.into_iter().enumerate() {
                // A chain's bottom chose its first among those the doubling carries up, the
                // identity included (which the class holds already), and the later ones.
                let doubles = permutation::carried_up(&p, n)?.is_some();
                let searched = (k == 0 && searched_first) || class.permutations[k] != p;
                if learns_product && options.doubled && doubles && (k == 0 || searched) {
                    class.sources[k] = PermutationSource::Chosen;
                } else if searched {
                    class.sources[k] = PermutationSource::Learned;
                }
                class.permutations[k] = p;
            }
        }
        // A run grown from its half-size member keeps that member's permutations, doubled: at
        // the sizes with no matrix at hand they are known no other way.
        if state.grown_from.is_some() && cfg.class() != ModelChoice::B {
            class.permutations = layer.permutations();
            class.sources.fill(PermutationSource::Grown);
        }
        if !options.resume {
            state.seconds += search_seconds;
        }
        let resumed_from = options.resume.then_some(state.step);
        let schedule = schedule::<B>(cfg, state.attempt_step)?;
        if let Some(dir) = &cfg.checkpoint_dir {
            let json = serde_json::to_vec_pretty(cfg)
                .map_err(|e| Error::invalid("train", "a config that encodes as JSON", e))?;
            files::write_atomic("train.config", &Path::new(dir).join(CONFIG_FILE), &json)?;
        }
        let tb = cfg.log_dir.as_ref().map(TensorBoard::open).transpose()?;
        let perms = layer.permutations();
        // Per factor, the masks of the real and the imaginary parts' gradients.
        let learned_mask = class.real.then(|| {
            let log_n = n.trailing_zeros() as usize;
            let mask = class.stage_mask(n);
            mask.chunks(2 * n * log_n)
                .map(|m| {
                    let mask = float_tensor::<B::InnerBackend, 4>(m.to_vec(), [log_n, n / 2, 2, 2], device);
                    Twiddles::masks(mask, class.real)
                })
                .collect()
        });
        let base_seconds = state.seconds;
        Ok(Run {
            cfg,
            stop: options.stop,
            grow: options.grow,
            refine: options.refine,
            _lock: lock,
            device,
            observer,
            objective,
            inner_objective,
            floor_device,
            own_solution: None,
            floor_refined: false,
            layer,
            optim,
            schedule,
            state,
            perms,
            class,
            learned_mask,
            resumed_from,
            history,
            ckpt_path,
            last_ckpt: resumed_from,
            snapping: false,
            tb,
            clock: Instant::now(),
            base_seconds,
        })
    }

    /// Tells the observer where the run starts.
    pub fn announce(&mut self, selected: &crate::backend::Selected) {
        self.observer.start(selected, self.cfg, self.resumed_from.unwrap_or(0));
    }

    /// Starts attempt `attempt` from new random weights, with a new optimiser and schedule.
    /// Drawing them is one step, so the new attempt's first record (Adam's loss before its
    /// first update) never shares a step with the last one's.
    pub fn restart(&mut self, attempt: usize) -> Result<()> {
        self.state.step += 1;
        self.state.attempt = attempt;
        self.state.attempt_step = 0;
        self.state.phase = Phase::Adam;
        self.state.gauge_fixed = false;
        self.state.stalled = 0;
        self.state.plateau_window = None;
        self.state.crawl_window = None;
        self.state.crawled = false;
        self.state.log2_lambda = INITIAL_LOG2_LAMBDA;
        self.state.grown_from = None;
        self.state.levels.clear();
        self.state.refused_chain = None;
        // The records so far say where the block of attempts that grow from one half-size layer
        // starts (a resumed run reads them from its checkpoint, and takes the same path).
        let (block, ordinal) = block_at(&AttemptLog::from_history(&self.history), attempt, self.cfg.switch_rmse);
        self.layer = match (self.grow)(attempt, block, &mut *self.observer)? {
            Some(grown) => self.state.grown(grown, &self.class)?,
            None => {
                // A searched run's blocks alternate between the permutations its search kept
                // and the others it scored (`candidate_of`).
                if let Some((first, later)) =
                    self.state.candidates.get(candidate_of(ordinal, self.state.candidates.len())).cloned()
                {
                    self.class.permutations[0] = first;
                    // The later factors' source as the search's own choice sets it.
                    let later_source = match later {
                        Permutation::Identity => PermutationSource::Identity,
                        _ => self.class.sources[0],
                    };
                    for k in 1..self.class.permutations.len() {
                        self.class.permutations[k] = later.clone();
                        self.class.sources[k] = later_source;
                    }
                }
                fresh_layer(self.cfg, &self.class, attempt, self.device)?
            }
        };
        self.perms = self.layer.permutations();
        self.optim = new_optim::<B>();
        self.schedule = schedule::<B>(self.cfg, 0)?;
        Ok(())
    }

    /// With [`RunOptions::refine`], the solution nearest the layer becomes the floor's (`None`
    /// where no solution is near: the attempt missed).
    pub fn refine_floor(&mut self) -> Result<()> {
        let Some(refine) = self.refine else { return Ok(()) };
        let solution = match refine(&self.layer, &mut FindingFloor(&mut *self.observer)) {
            // A stop during the f64 polish stops this run, with its own checkpoint (a resumed
            // run ends its polish at once and looks again).
            Err(Error::Interrupted { .. }) if self.stop_asked() => {
                if self.checkpoint_due() {
                    self.save()?;
                }
                return self.stop_if_asked();
            }
            solution => solution?,
        };
        self.floor_refined = true;
        self.floor_device = solution.as_ref().map(|s| floor_of(&self.inner_objective, s));
        // Known only now: the training curve gets it at the step it was found.
        if let (Some(tb), Some(floor)) = (self.tb.as_mut(), self.floor_device) {
            tb.scalars(self.state.step, &[("floor", floor)])?;
        }
        self.own_solution = solution;
        Ok(())
    }

    /// On random probes, the rounding of the run's own f64 solution in place of where the f32
    /// polish ended, where fresh probes (drawn apart from the run's) measure it lower; true
    /// where it was put in place. The polish minimises the loss on the run's probes, whose
    /// metric is not the dense rmse's: a direction they see little costs little, and the
    /// polish trades error there for error where they look. The DFT on 16 probes ended at
    /// 1.50 × its own floor at N = 32 and 1.92 × at 64, and near 1.0 × only with about N probes
    /// (f32, ndarray, 2026-12-06); the rounding is at 1.0 × by definition. Fresh probes
    /// estimate the dense rmse without bias, so the choice reads nothing but the target's
    /// images of them (what any target offers; not for a user's pairs, which are all there is).
    /// On the dense objective the polish minimises the rmse itself and ends at or below the
    /// rounding (0.7–1.0 ×), so nothing is compared there.
    pub fn keep_the_better_rounding(&mut self) -> Result<bool> {
        let (cfg, n) = (self.cfg, self.cfg.n);
        let Some(own) = &self.own_solution else { return Ok(false) };
        let rows = objective::rows_for(n, cfg.probes);
        if matches!(cfg.target, Target::Data(_)) || (cfg.probes.is_none() && rows == n) {
            return Ok(false);
        }
        let fresh = Probes::random(&cfg.target, n, rows, cfg.seed ^ FRESH_PROBES_SALT, cfg.real_output)?;
        let fresh = if cfg.real_output { fresh.real()? } else { fresh };
        let check = Objective::<B::InnerBackend>::from_probes(&fresh, self.device).with_real_output(cfg.real_output);
        let theta = self.twiddles();
        let ours = scalar(check.loss(&theta.re, &theta.im, &self.perms));
        let (re, im) = own.stacked_twiddles();
        let theirs = scalar(check.loss(&re, &im, &own.permutations()));
        if theirs >= ours {
            return Ok(false);
        }
        self.set_twiddles(Twiddles { re, im });
        self.state.kept_own_rounding = true;
        Ok(true)
    }

    /// The bar as the device measures it ([`crate::metrics::bar`] of the device's floor): a
    /// polish that ends above it restarts the run while restarts remain.
    pub fn device_bar(&self) -> Option<f64> {
        let source = match self.own_solution {
            Some(_) => FloorSource::OwnF64Solution,
            None => FloorSource::ExactFactorization,
        };
        crate::metrics::bar(Precision::of::<B>(), self.floor_device.map(|f| (f, source)))
    }

    /// Whether this step gets a progress record (every `log_every` steps, and at `ends`).
    pub fn logs(&self, ends: bool) -> bool {
        ends || self.state.step.is_multiple_of(self.cfg.log_every)
    }

    /// Sends a progress record to the observer and TensorBoard, and keeps it in the history
    /// (replacing a record of the same step, phase and attempt: a resumed run logs its first
    /// step again, and a polish stage that follows another starts at the step it ended).
    pub fn report(&mut self, loss: f64, lr: Option<f64>) -> Result<()> {
        let p = Progress {
            step: self.state.step,
            phase: self.state.phase,
            attempt: self.state.attempt,
            loss,
            rmse: loss.sqrt(),
            floor: self.floor_device,
            lr,
            seconds: self.seconds(),
            finding_floor: false,
        };
        self.observer.progress(&p);
        match self.history.last_mut() {
            Some(last) if (last.step, last.phase, last.attempt) == (p.step, p.phase, p.attempt) => *last = p.clone(),
            _ => self.history.push(p.clone()),
        }
        if let Some(tb) = self.tb.as_mut() {
            let mut v = vec![("loss", p.loss), ("rmse", p.rmse)];
            v.extend(p.floor.map(|f| ("floor", f)));
            v.extend(p.lr.map(|lr| ("lr", lr)));
            tb.scalars(p.step, &v)?;
        }
        Ok(())
    }

    /// Whether a checkpoint is due at this step: every `checkpoint_every` steps, and when a stop
    /// was asked for.
    pub fn checkpoint_due(&self) -> bool {
        self.ckpt_path.is_some()
            && !self.snapping
            && (self.state.step.is_multiple_of(self.cfg.checkpoint_every) || self.stop_asked())
            && self.last_ckpt != Some(self.state.step)
    }

    /// Whether a stop was asked for.
    fn stop_asked(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Ends the run with [`Error::Interrupted`] once a stop was asked for (call it after the
    /// checkpoint of the step): the checkpoint then holds the state at this step, and a resume
    /// takes this step next (in the f32 finish, the last checkpoint's step: see `snapping`).
    pub fn stop_if_asked(&mut self) -> Result<()> {
        if !self.stop_asked() {
            return Ok(());
        }
        if let Some(tb) = self.tb.as_mut() {
            tb.flush()?;
        }
        let step = match (self.snapping, self.last_ckpt) {
            (true, Some(saved)) => saved,
            _ => self.state.step,
        };
        Err(Error::Interrupted { step, checkpoint: self.ckpt_path.as_ref().map(|p| p.display().to_string()) })
    }

    /// Writes the checkpoint (atomically), with the optimiser's record while Adam runs.
    pub fn save(&mut self) -> Result<()> {
        let Some(path) = &self.ckpt_path else { return Ok(()) };
        let optim = match self.state.phase {
            Phase::Adam => Some(checkpoint::record_bytes::<B, _>(self.optim.to_record())?),
            _ => None,
        };
        self.state.seconds = self.seconds();
        checkpoint::write(path, self.cfg, &self.state, &self.history, &self.layer, optim)?;
        self.last_ckpt = Some(self.state.step);
        Ok(())
    }

    /// Seconds of training, over resumed runs too.
    pub fn seconds(&self) -> f64 {
        self.base_seconds + self.clock.elapsed().as_secs_f64()
    }

    /// The layer's twiddles on the inner backend, stacked factor-major.
    pub fn twiddles(&self) -> Twiddles<B::InnerBackend> {
        let (re, im) = self.layer.stacked_twiddles();
        Twiddles { re: re.inner(), im: im.inner() }
    }

    /// Replaces the layer's twiddles (stacked factor-major; trainable, no gradient history).
    pub fn set_twiddles(&mut self, theta: Twiddles<B::InnerBackend>) {
        self.layer.set_stacked_twiddles(Tensor::from_inner(theta.re), Tensor::from_inner(theta.im));
    }

    /// `grads` with the gradients of the twiddles the model class fixes set to zero (Adam then
    /// leaves them exactly as they are: its moments stay zero).
    pub fn mask_fixed(&self, mut grads: GradientsParams) -> GradientsParams {
        let Some(masks) = &self.learned_mask else { return grads };
        for (f, m) in self.layer.factors.iter().zip(masks) {
            for (id, mask) in [(f.twiddle_re.id, &m.re), (f.twiddle_im.id, &m.im)] {
                if let Some(g) = grads.remove::<B::InnerBackend, 4>(id) {
                    grads.register(id, g * mask.clone());
                }
            }
        }
        grads
    }

    /// Ends the run: closes TensorBoard.
    pub fn close(mut self) -> Result<Ended<B>> {
        if let Some(tb) = self.tb.take() {
            tb.close()?;
        }
        Ok(Ended {
            layer: self.layer,
            state: self.state,
            resumed_from: self.resumed_from,
            history: self.history,
            checkpoint: self.ckpt_path,
        })
    }
}

/// What a run leaves.
pub(super) struct Ended<B: FftBackend> {
    pub layer: ButterflyProduct<B>,
    pub state: TrainState,
    /// The step it resumed from, if it did.
    pub resumed_from: Option<usize>,
    /// Its progress records.
    pub history: Vec<Progress>,
    /// Its checkpoint file, if it wrote one.
    pub checkpoint: Option<PathBuf>,
}

/// The rmse of `solution` as `objective` measures it: the floor on the device.
fn floor_of<B: crate::ops::ButterflyOps + crate::ops::ResidualOps>(
    objective: &Objective<B>,
    solution: &ButterflyProduct<B>,
) -> f64 {
    let (re, im) = solution.stacked_twiddles();
    scalar(objective.loss(&re, &im, &solution.permutations())).sqrt()
}
