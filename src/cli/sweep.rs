//! The training sweep behind the training results in docs/benchmarks.md and the shipped checkpoints:
//! targets × N = 8…1024 × several seeds, one precision per call (`learned-fft bench train`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use learned_fft::backend::{dispatch, local_devices, BackendKind, BackendTask, FftBackend, Precision, Selected};
use learned_fft::error::{Error, Result};
use learned_fft::files::write_atomic;
use learned_fft::nn::{ModelChoice, PermutationSource};
use learned_fft::train::checkpoint::{self, Checkpoint, CHECKPOINT_FILE};
use learned_fft::train::{Level, Observer, TrainConfig, TrainReport, Trainer};
use learned_fft::{metrics, Permutation, Target, TargetKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Seed spacing between runs (restart r of a run uses its seed + r).
pub const SEED_STRIDE: u64 = 1000;

/// Steps between a sweep's checkpoints of each run, by default: a run at N = 64 on a CPU core
/// takes 20 to 40 steps a second, the DFT's Adam on an H100 about 500 (2 ms a step), so a sweep
/// killed outright loses at most about two minutes of CPU work, for one checkpoint write (tens of KB
/// at N = 64) every 2000 steps.
pub const SWEEP_CHECKPOINT_EVERY: usize = 2000;

/// What to sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Targets (a circulant gets a random kernel per seed).
    pub targets: Vec<TargetKind>,
    /// Sizes.
    pub sizes: Vec<usize>,
    /// Runs per size (seeds `first_seed · 1000`, then every 1000).
    pub seeds: usize,
    /// Index of the first run's seed (0: seeds 0, 1000, …), to split one sweep over processes.
    pub first_seed: usize,
    /// [`TrainConfig::grow_above`] for every run (`None`: each target's default).
    pub grow_above: Option<usize>,
    /// [`TrainConfig::model`] for every run (`None`: each target's own class).
    pub model: Option<ModelChoice>,
    /// [`TrainConfig::factors`] for every run.
    pub factors: Option<usize>,
    /// Backend.
    pub backend: BackendKind,
    /// Precision.
    pub precision: Precision,
    /// Stop each run as soon as it is under the bar (for time-to-bar); otherwise polish until
    /// the loss stalls.
    pub to_bar: bool,
    /// [`TrainConfig::own_floor`] for every run: in f32 each run's floor, bar and restarts come
    /// from the model's own f64 solution, and no run consults its target's exact factorization
    /// (`to_bar`, whose bar must be known before the run, is then not consulted: the command
    /// line sets this only without it).
    pub own_floor: bool,
    /// Copy seed 0's checkpoint of each size here (none when `first_seed` > 0) and update `manifest.json`.
    pub ship: Option<PathBuf>,
    /// Scratch directory for the runs' checkpoints.
    pub scratch: PathBuf,
    /// Resume every run whose checkpoint is in `scratch` (a sweep stopped earlier, with the same
    /// arguments); the others start.
    pub resume: bool,
    /// [`TrainConfig::checkpoint_every`] for every run ([`SWEEP_CHECKPOINT_EVERY`] from the
    /// command line).
    pub checkpoint_every: usize,
    /// A flag that stops the running run with a checkpoint ([`Trainer::with_stop_flag`]).
    pub stop: Option<Arc<AtomicBool>>,
    /// Devices each size's seeds are spread over, one run per device at a time (1: one run at
    /// a time on the default device).
    pub devices: usize,
    /// Also a row for every size below N of the runs' grown chains ([`TrainReport::levels`]),
    /// so one chain to N gives figures for every size it passed.
    pub levels: bool,
}

/// Makes the observer of one run (a run on another device's thread gets its own).
pub type ObserverFactory = dyn Fn() -> Box<dyn Observer> + Sync;

/// One size's results.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// Target.
    pub target: TargetKind,
    /// Size.
    pub n: usize,
    /// Where the row is a level of grown chains ([`Sweep::levels`]): the size of the runs whose
    /// chains these are. Each level is a half-size run of at most
    /// [`HALF_REUSE`](learned_fft::train::HALF_REUSE) attempts on the runs' target halved (a
    /// circulant's kernel halved, not a new random one), with the seed of the block it served;
    /// its steps and seconds count the chain below it. `None`: runs at this size.
    pub grown_in: Option<usize>,
    /// Precision.
    pub precision: Precision,
    /// The bar's rmse at this size (1e-14 in f64, the floor in f32; none in f32 for a target
    /// with no exact factorization in the model class).
    pub bar: Option<f64>,
    /// The floor.
    pub floor: Option<f64>,
    /// What the floor measures (the first run's; [`metrics::FloorSource`]).
    pub floor_source: Option<metrics::FloorSource>,
    /// The model class trained (the first run's: every run of a size has the same).
    pub model: String,
    /// Stages the optimiser learned, over all factors.
    pub stages_learned: usize,
    /// Stages fixed to an exact factorization's values, the most over the runs (0: every
    /// stage of every run learned).
    pub stages_fixed: usize,
    /// How each factor's input permutation was obtained, every source a run of the size
    /// reported (in order of first appearance, first factor first).
    pub permutations: Vec<PermutationSource>,
    /// Runs.
    pub runs: usize,
    /// Runs under the bar.
    pub reached: usize,
    /// Median and worst rmse.
    pub rmse_median: f64,
    /// Worst rmse.
    pub rmse_max: f64,
    /// Median steps.
    pub steps_median: usize,
    /// Median seconds.
    pub seconds_median: f64,
    /// Slowest run's seconds.
    pub seconds_max: f64,
    /// Attempts used, summed over runs.
    pub attempts: usize,
    /// Wall time of the size's runs together (spread over `devices`, or one after another);
    /// `None` for a level row, whose runs were part of the size above's.
    pub wall_seconds: Option<f64>,
    /// Devices the runs were spread over.
    pub devices: usize,
}

/// One entry of `checkpoints/manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    /// File name in the checkpoint directory.
    pub file: String,
    /// Size.
    pub n: usize,
    /// Target name.
    pub target: String,
    /// The permutation of its first factor, when it is a named one (the bit reversal or the
    /// identity).
    #[serde(default)]
    pub permutation: Option<Permutation>,
    /// The number of (permutation, butterfly) factors of its model class (absent: one).
    #[serde(default)]
    pub factors: Option<usize>,
    /// Its model class, as the run's report names it (BP, BPBP, (BP)^K or BP+M; absent in
    /// manifests written before products).
    #[serde(default)]
    pub model: Option<String>,
    /// Precision trained in.
    pub precision: Precision,
    /// rmse against the f64 target, on the training backend.
    pub rmse: f64,
    /// The floor there.
    pub floor: Option<f64>,
    /// Seed of the attempt that produced it.
    pub seed: u64,
    /// Steps.
    pub steps: usize,
    /// Seconds of training.
    pub seconds: f64,
    /// Backend.
    pub backend: String,
    /// Device.
    pub device: String,
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    v[v.len() / 2]
}

/// Every permutation source the runs reported, each once, in order of first appearance.
fn distinct_permutations<'a>(reports: impl IntoIterator<Item = &'a TrainReport>) -> Vec<PermutationSource> {
    let mut sources = Vec::new();
    for p in reports.into_iter().flat_map(|r| r.permutations.iter().copied()) {
        if !sources.contains(&p) {
            sources.push(p);
        }
    }
    sources
}

impl Sweep {
    /// Runs the sweep; `each` sees every run's report as it finishes (with several devices, a
    /// size's reports once all its runs have finished, in seed order).
    pub fn run(&self, observer: &ObserverFactory, mut each: impl FnMut(&TrainReport)) -> Result<Vec<SweepRow>> {
        if self.seeds == 0 || self.sizes.is_empty() || self.targets.is_empty() {
            return Err(Error::invalid(
                "bench train",
                "at least one target, one size and one seed",
                format!("{} targets, {} sizes, {} seeds", self.targets.len(), self.sizes.len(), self.seeds),
            ));
        }
        let mut rows = Vec::new();
        for (&kind, &n) in self.targets.iter().flat_map(|k| self.sizes.iter().map(move |n| (k, n))) {
            TrainConfig::new(n).with_model(self.model).with_factors(self.factors).validate()?;
            let mut trainers = Vec::new();
            let mut bars = Vec::new();
            let mut dirs = Vec::new();
            for i in self.first_seed..self.first_seed + self.seeds {
                let seed = i as u64 * SEED_STRIDE;
                let target = target_for(kind, n, seed)?;
                // The floor on this backend, for the f32 bar and for stopping at it (not read
                // where each run finds its own).
                let floor = if self.own_floor { None } else { floor_on(&target, n, self.backend, self.precision)? };
                let bar = metrics::bar(self.precision, floor.map(|f| (f, metrics::FloorSource::ExactFactorization)));
                let dir = self.scratch.join(format!("{kind}-n{n}-{}-{i}", self.precision));
                let mut config = TrainConfig::new(n)
                    .with_target(target)
                    .with_seed(seed)
                    .with_grow_above(self.grow_above)
                    .with_model(self.model)
                    .with_factors(self.factors)
                    .with_own_floor(self.own_floor)
                    .with_checkpoint_dir(Some(dir.display().to_string()))
                    .with_checkpoint_every(self.checkpoint_every);
                if let (true, Some(bar)) = (self.to_bar, bar) {
                    // 0.95: the device's rmse and the f64 metric agree to ~1e-3, not exactly.
                    config.stop_rmse = Some(0.95 * bar);
                }
                let resume = self.resume && checkpoint::resumable(&dir);
                let mut trainer = Trainer::new(config)?.with_resume(resume);
                if let Some(stop) = &self.stop {
                    trainer = trainer.with_stop_flag(Arc::clone(stop));
                }
                trainers.push(trainer);
                bars.push(bar);
                dirs.push(dir);
            }
            let start = Instant::now();
            let reports = if self.devices > 1 {
                let task = SpreadRuns { trainers: &trainers, devices: self.devices, observer };
                let reports = dispatch(self.backend, self.precision, task)?;
                reports.iter().for_each(&mut each);
                reports
            } else {
                let mut reports = Vec::new();
                for trainer in &trainers {
                    let report = trainer.run(self.backend, self.precision, observer().as_mut())?;
                    each(&report);
                    reports.push(report);
                }
                reports
            };
            if let (0, Some(ship)) = (self.first_seed, &self.ship) {
                ship_checkpoint(ship, &dirs[0].join(CHECKPOINT_FILE), &reports[0])?;
            }
            let rmses: Vec<f64> = reports.iter().map(|r| r.rmse).collect();
            let secs: Vec<f64> = reports.iter().map(|r| r.seconds).collect();
            let wall_seconds = start.elapsed().as_secs_f64();
            if self.levels {
                rows.extend(level_rows(kind, self.precision, &reports));
            }
            rows.push(SweepRow {
                target: kind,
                n,
                grown_in: None,
                precision: self.precision,
                // The same for every seed, except a circulant's, whose kernel changes, and an
                // own floor's, found by each run: the first.
                bar: if self.own_floor { reports[0].bar } else { bars[0] },
                floor: reports[0].floor,
                floor_source: reports[0].floor_source,
                model: reports[0].model.clone(),
                stages_learned: reports[0].stages_learned,
                stages_fixed: reports.iter().map(|r| r.stages_fixed).max().unwrap_or(0),
                permutations: distinct_permutations(&reports),
                runs: reports.len(),
                reached: reports.iter().filter(|r| r.reached).count(),
                rmse_median: median(rmses.clone()),
                rmse_max: rmses.iter().cloned().fold(0.0, f64::max),
                steps_median: median(reports.iter().map(|r| r.steps).collect()),
                seconds_median: median(secs.clone()),
                seconds_max: secs.iter().cloned().fold(0.0, f64::max),
                attempts: reports.iter().map(|r| r.attempts).sum(),
                wall_seconds: Some(wall_seconds),
                devices: self.devices,
            });
        }
        Ok(rows)
    }
}

/// A row for every size of the runs' grown chains ([`TrainReport::levels`]), smallest first,
/// each over the runs whose chain passed it.
fn level_rows(kind: TargetKind, precision: Precision, reports: &[TrainReport]) -> Vec<SweepRow> {
    let mut sizes: Vec<usize> = reports.iter().flat_map(|r| r.levels.iter().map(|l| l.n)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|m| {
            let (runs, levels): (Vec<&TrainReport>, Vec<&Level>) =
                reports.iter().filter_map(|r| r.levels.iter().find(|l| l.n == m).map(|l| (r, l))).unzip();
            let rmses: Vec<f64> = levels.iter().map(|l| l.rmse).collect();
            let secs: Vec<f64> = levels.iter().map(|l| l.seconds).collect();
            // Every class trains factors × log2 N stages, each learned: a chain's level has the
            // run's factors at its own size.
            let per_log2 = runs[0].stages_learned / runs[0].n.ilog2() as usize;
            SweepRow {
                target: kind,
                n: m,
                grown_in: Some(runs[0].n),
                precision,
                bar: levels[0].bar,
                floor: levels[0].floor,
                floor_source: levels[0].floor_source,
                model: runs[0].model.clone(),
                stages_learned: per_log2 * m.ilog2() as usize,
                stages_fixed: runs.iter().map(|r| r.stages_fixed).max().unwrap_or(0),
                permutations: distinct_permutations(runs.iter().copied()),
                runs: levels.len(),
                reached: levels.iter().filter(|l| l.reached).count(),
                rmse_median: median(rmses.clone()),
                rmse_max: rmses.iter().cloned().fold(0.0, f64::max),
                steps_median: median(levels.iter().map(|l| l.steps).collect()),
                seconds_median: median(secs.clone()),
                seconds_max: secs.iter().cloned().fold(0.0, f64::max),
                attempts: levels.iter().map(|l| l.attempts).sum(),
                wall_seconds: None,
                devices: 1,
            }
        })
        .collect()
}

/// A size's runs spread over the backend's first `devices` devices: device d runs trainers d,
/// d + devices, …, one at a time, on a thread of its own.
struct SpreadRuns<'a> {
    trainers: &'a [Trainer],
    devices: usize,
    observer: &'a ObserverFactory,
}

impl BackendTask for SpreadRuns<'_> {
    type Output = Vec<TrainReport>;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<Vec<TrainReport>> {
        let devices = local_devices::<B>("bench train --devices", &device, self.devices)?;
        let results = spread(&devices, self.trainers, |d, device, trainer| {
            // The device's own name: `selected` names the first device only.
            let selected =
                Selected { device: format!("{device:?} (device {d} of {})", devices.len()), ..selected.clone() };
            trainer.run_on::<B>(device, &selected, (self.observer)().as_mut()).map(|(_, report)| report)
        });
        results.into_iter().collect()
    }
}

/// `run(d, device, job)` for every job, device d taking jobs d, d + D, … (D devices) in turn on a
/// thread of its own; the results in the jobs' order.
fn spread<D: Sync, J: Sync, R: Send>(devices: &[D], jobs: &[J], run: impl Fn(usize, &D, &J) -> R + Sync) -> Vec<R> {
    let per_device: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(d, device)| {
                let run = &run;
                scope.spawn(move || {
                    (d..jobs.len()).step_by(devices.len()).map(|j| (j, run(d, device, &jobs[j]))).collect()
                })
            })
            .collect();
        // A worker that panicked passes its panic on.
        workers.into_iter().map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let mut results: Vec<(usize, R)> = per_device.into_iter().flatten().collect();
    results.sort_by_key(|(j, _)| *j);
    results.into_iter().map(|(_, r)| r).collect()
}

/// The target of `kind` for the run with `seed`: a circulant's kernel is standard normal, drawn
/// from the seed.
fn target_for(kind: TargetKind, n: usize, seed: u64) -> Result<Target> {
    let kernel = match kind {
        TargetKind::Circulant => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..n).map(|_| StandardNormal.sample(&mut rng)).collect()
        }
        _ => Vec::new(),
    };
    kind.target(kernel)
}

/// The floor of `target` at size `n` on the backend, when it has one.
fn floor_on(target: &Target, n: usize, backend: BackendKind, precision: Precision) -> Result<Option<f64>> {
    use learned_fft::backend::{dispatch, BackendTask, FftBackend, Selected};
    struct Floor<'a>(&'a Target, usize);
    impl BackendTask for Floor<'_> {
        type Output = Option<f64>;
        fn run<B: FftBackend>(self, device: B::Device, _: &Selected) -> Result<Option<f64>> {
            metrics::floor::<B::InnerBackend>(self.1, self.0, &device)
        }
    }
    dispatch(backend, precision, Floor(target, n))
}

/// Copies a run's checkpoint into `dir` as `{target}-n{N}-{precision}.lfft` and records it in
/// `dir/manifest.json` (replacing an entry for the same file), both written atomically.
fn ship_checkpoint(dir: &Path, checkpoint: &Path, r: &TrainReport) -> Result<()> {
    let file = format!("{}-n{}-{}.lfft", r.target.kind(), r.n, r.backend.precision);
    let bytes = std::fs::read(checkpoint).map_err(|e| Error::io("bench train", checkpoint, e))?;
    write_atomic("bench.ship", &dir.join(&file), &bytes)?;
    let manifest_path = dir.join("manifest.json");
    let mut entries: Vec<ManifestEntry> = match std::fs::read(&manifest_path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| Error::invalid("bench train", "a valid manifest.json", e))?,
        Err(_) => Vec::new(),
    };
    entries.retain(|e| e.file != file);
    let perms = Checkpoint::read(checkpoint)?.permutations();
    entries.push(ManifestEntry {
        file,
        n: r.n,
        target: r.target.kind().to_string(),
        permutation: perms.first().filter(|p| !matches!(p, Permutation::Gather(_))).cloned(),
        factors: Some(perms.len()),
        model: Some(r.model.clone()),
        precision: r.backend.precision,
        rmse: r.rmse,
        floor: r.floor,
        seed: r.seed,
        steps: r.steps,
        seconds: r.seconds,
        backend: r.backend.kind.to_string(),
        device: r.backend.device.clone(),
    });
    entries.sort_by_key(|e| (e.target.clone(), e.precision.to_string(), e.n));
    let json =
        serde_json::to_vec_pretty(&entries).map_err(|e| Error::invalid("bench train", "a manifest that encodes", e))?;
    write_atomic("bench.ship", &manifest_path, &json)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::spread;

    /// Every job runs once, on device `job mod D`, its result in the jobs' order, and the devices'
    /// threads run at the same time.
    #[test]
    fn spread_runs_every_job_once_on_its_device_and_keeps_the_order() {
        let devices = ["gpu0", "gpu1", "gpu2"];
        let jobs: Vec<usize> = (0..8).collect();
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let results = spread(&devices, &jobs, |d, device, &job| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(30));
            running.fetch_sub(1, Ordering::SeqCst);
            (d, device.to_string(), job)
        });
        assert_eq!(results.len(), jobs.len());
        for (j, (d, device, job)) in results.into_iter().enumerate() {
            assert_eq!((job, d, device.as_str()), (j, j % 3, devices[j % 3]));
        }
        // Three sleeping threads overlap whatever the load; one at a time would mean no spreading.
        assert!(most.load(Ordering::SeqCst) >= 2, "at most {} job(s) ran at once", most.load(Ordering::SeqCst));
    }
}
