//! [`TrainConfig`]: everything a training run depends on, saved as JSON beside each run.

use burn::config::Config;

use crate::error::{check_power_of_two, Error, Result};
use crate::nn::ModelChoice;
use crate::reference::Target;

/// Configuration of a training run (see [`crate::train`] for the method). The backend and the
/// float type are the caller's choice: [`Trainer::run_on`](crate::train::Trainer::run_on) on a
/// backend type, or [`Trainer::run`](crate::train::Trainer::run) on a named one.
///
/// Steps are counted across phases: one Adam update is one step, one Levenberg–Marquardt
/// iteration (kept or refused) is one step.
#[derive(Config, Debug)]
pub struct TrainConfig {
    /// Transform size N (a power of two, at least 2).
    pub n: usize,
    /// The transform to reproduce.
    #[config(default = "Target::Dft")]
    pub target: Target,
    /// Seed of the random initial twiddles (Haar-random unitary blocks); restart r uses
    /// `seed + r`.
    #[config(default = 0)]
    pub seed: u64,
    /// Adam's initial learning rate (cosine decay to `lr_final` over `adam_steps`).
    #[config(default = 1e-2)]
    pub lr: f64,
    /// Adam's learning rate at the end of the schedule.
    #[config(default = 1e-4)]
    pub lr_final: f64,
    /// Most Adam steps per attempt.
    #[config(default = 3000)]
    pub adam_steps: usize,
    /// Adam hands over to the polish phase early when a product's loss (K ≥ 2 factors) fell by
    /// less than 1 % over this many steps (a local minimum: Adam's loss in a basin that leads to the target falls by
    /// orders of magnitude over such a window); 0: never early.
    #[config(default = 250)]
    pub plateau_steps: usize,
    /// Random probe vectors the objective measures the layer on, instead of the N×N identity
    /// basis (see [`crate::train::objective`]); `None`: the identity basis up to
    /// [`DENSE_MAX_N`](crate::train::objective::DENSE_MAX_N), [`PROBES`](crate::train::objective::PROBES)
    /// probes above it.
    #[config(default = "None")]
    pub probes: Option<usize>,
    /// A run whose model class is a product of butterflies after the bit reversal or the
    /// identity with every stage learned (the DFT, the iDFT, the Hadamard transform, the
    /// circulant) and whose N is above this starts each attempt from the layer trained at N/2
    /// (on [`Target::halved`]; itself from random weights, and grown the same way above this
    /// size) applied to both halves, with a random last stage in each factor
    /// ([`ButterflyProduct::doubled`]); one butterfly then goes straight to the polish, a product
    /// runs Adam's schedule first, except the circulant's first attempt of a block, which starts
    /// from the layer grown by the targets' eigenstructure ([`ButterflyProduct::eigen_doubled`])
    /// and goes straight to the polish where that start is within `switch_rmse`. The attempts of a block of
    /// [`HALF_REUSE`](crate::train::HALF_REUSE) double one trained half-size layer, each with
    /// its own random last stages. `None`: the target's default, [`grow_above_default`]. Set it
    /// to N or more to start from random weights at every size.
    ///
    /// [`ButterflyProduct::doubled`]: crate::nn::ButterflyProduct::doubled
    /// [`ButterflyProduct::eigen_doubled`]: crate::nn::ButterflyProduct::eigen_doubled
    #[config(default = "None")]
    pub grow_above: Option<usize>,
    /// The model class to train (`train --model`): `None`, the target's own
    /// ([`crate::nn::model_class`], which represents it exactly); a [`ModelChoice`] overrides it
    /// (a class that cannot represent the target misses the bar).
    #[config(default = "None")]
    pub model: Option<ModelChoice>,
    /// Real butterflies (`train --real`): every twiddle's imaginary part stays 0 (they start at
    /// 0 and their gradients are masked). Off (complex twiddles) by default: of the targets
    /// only the Hadamard transform has a real exact factorization.
    #[config(default = false)]
    pub real: bool,
    /// Adam hands over to the polish phase once the rmse is at or below this.
    #[config(default = 1e-4)]
    pub switch_rmse: f64,
    /// Further attempts, from new random weights, when the polish stalls above the bar (an
    /// attempt in a local minimum ends after about `3 · plateau_steps` Adam steps and a short
    /// polish).
    #[config(default = 9)]
    pub restarts: usize,
    /// Most Levenberg–Marquardt iterations in the polish phase. A polish in a spurious minimum
    /// ends earlier, when it stalls (`max_stalled`); one that still gains needs the room: on a
    /// circulant of N = 16 (a kernel of the chain from 64) it fell from rmse 3e-4 to the bar in
    /// about 200 iterations, where 60 ended every attempt above it.
    #[config(default = 300)]
    pub polish_iters: usize,
    /// Most conjugate-gradient iterations per Levenberg–Marquardt step.
    #[config(default = 200)]
    pub cg_iters: usize,
    /// Relative residual at which conjugate gradients stop.
    #[config(default = 1e-2)]
    pub cg_tol: f64,
    /// Fix the gauge before the polish phase (see [`crate::train::gauge`]); off, the polish
    /// trains every twiddle.
    #[config(default = true)]
    pub fix_gauge: bool,
    /// Each polish stage ends after this many steps in a row that lower the loss by less than
    /// 1 % (the float type's precision is reached).
    #[config(default = 4)]
    pub max_stalled: usize,
    /// Stop as soon as the rmse is at or below this (default: polish until it stalls).
    #[config(default = "None")]
    pub stop_rmse: Option<f64>,
    /// Directory for TensorBoard event files (none: no TensorBoard logging).
    #[config(default = "None")]
    pub log_dir: Option<String>,
    /// Directory for checkpoints and this config (none: no checkpoints).
    #[config(default = "None")]
    pub checkpoint_dir: Option<String>,
    /// Steps between checkpoints.
    #[config(default = 200)]
    pub checkpoint_every: usize,
    /// Steps between log records (TensorBoard and progress).
    #[config(default = 10)]
    pub log_every: usize,
}

/// Above this size the one-butterfly targets grow from N/2 by default: Adam from random weights
/// sits on a plateau for thousands of steps above N = 4096 (the DFT at N = 8192 and 16384 did
/// not leave it in 3000 steps; at 4096 it reaches the f32 bar in 9.4 s on an H100).
pub const GROW_ONE_FACTOR_ABOVE: usize = 4096;

/// Above this size the circulant (two butterflies) grows from N/2 by default, so every run but
/// N = 4 starts from the chain 4 → 8 → … → N. From random weights its two factors fall into
/// spurious minima: at N = 16 one standard-normal kernel in twelve stalled at rmse 0.246 in all
/// ten attempts (f32, candle), from N = 32 one seed in ten, and at N = 64 every seed tried. Grown
/// from 4, every run reached both bars at N = 8 (20 kernels, f32) and N = 16 (40 kernels in f32,
/// 20 in f64), the one that stalled among them.
pub const GROW_PRODUCT_ABOVE: usize = 4;

/// The size above which a run at N grows from N/2 when [`TrainConfig::grow_above`] is `None`:
/// [`GROW_PRODUCT_ABOVE`] for the circulant, [`GROW_ONE_FACTOR_ABOVE`] for the others (the
/// targets whose class has fixed stages, Hartley, DCT-II and DST-II, never grow).
pub fn grow_above_default(target: &Target) -> usize {
    match target {
        Target::Circulant { .. } => GROW_PRODUCT_ABOVE,
        _ => GROW_ONE_FACTOR_ABOVE,
    }
}

impl TrainConfig {
    /// The size above which this run grows from N/2: [`TrainConfig::grow_above`], or the
    /// target's default.
    pub fn grow_threshold(&self) -> usize {
        self.grow_above.unwrap_or_else(|| grow_above_default(&self.target))
    }

    /// Checks the configuration; returns log2 N.
    pub fn validate(&self) -> Result<usize> {
        let log_n = check_power_of_two("train", self.n)?;
        let positive = |name: &'static str, v: f64| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid("train", format!("{name} finite and > 0"), v))
            }
        };
        if !(self.lr.is_finite() && self.lr_final > 0.0 && self.lr_final <= self.lr) {
            return Err(Error::invalid(
                "train",
                "finite learning rates with 0 < lr_final ≤ lr",
                format!("lr = {}, lr_final = {}", self.lr, self.lr_final),
            ));
        }
        positive("switch_rmse", self.switch_rmse)?;
        positive("cg_tol", self.cg_tol)?;
        if let Some(s) = self.stop_rmse {
            positive("stop_rmse", s)?;
        }
        for (name, v) in [
            ("checkpoint_every", self.checkpoint_every),
            ("log_every", self.log_every),
            ("cg_iters", self.cg_iters),
            ("probes", self.probes.unwrap_or(1)),
        ] {
            if v == 0 {
                return Err(Error::invalid("train", format!("{name} ≥ 1"), v));
            }
        }
        if let Target::Circulant { kernel } = &self.target {
            if kernel.len() != self.n {
                return Err(Error::invalid(
                    "train",
                    format!("a circulant kernel of length n = {}", self.n),
                    kernel.len(),
                ));
            }
        }
        Ok(log_n)
    }

    /// A config saved as JSON by this or an earlier version: the fields a file written before
    /// they existed lacks take their defaults (Burn's `Config` derive fills none in).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `saved` is not an object with a size `n`, or a field does
    /// not decode.
    pub fn from_saved(saved: serde_json::Value) -> Result<Self> {
        let op = "train.config";
        let serde_json::Value::Object(fields) = saved else {
            return Err(Error::invalid(op, "a JSON object", saved));
        };
        let n = fields.get("n").and_then(serde_json::Value::as_u64).and_then(|n| usize::try_from(n).ok());
        let n = n.ok_or_else(|| Error::invalid(op, "a field n (the size)", "none"))?;
        let mut full =
            serde_json::to_value(TrainConfig::new(n)).map_err(|e| Error::invalid(op, "a config that encodes", e))?;
        if let serde_json::Value::Object(defaults) = &mut full {
            defaults.extend(fields);
        }
        serde_json::from_value(full).map_err(|e| Error::invalid(op, "a config whose fields decode", e))
    }
}
