//! [`TrainConfig`]: everything a training run depends on, saved as JSON beside each run.

use burn::config::Config;

use crate::error::{check_power_of_two, Error, Result};
use crate::nn::ModelChoice;
use crate::reference::{Target, TargetKind};

/// Declares [`TrainConfig`] once: each field's doc, type and Burn default, written as Burn's
/// `Config` derive reads them, expand both to the struct and to [`TrainConfig::FIELDS`], the
/// table a front end (the command line's `train` flags) builds its options from. A new field
/// thus gets its flag, help text and default without a second list to keep in step.
macro_rules! train_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[config(default = $default:literal)])?
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Config, Debug)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[config(default = $default)])?
                pub $field: $ty,
            )*
        }

        impl $name {
            /// Every field in declaration order, as a front end that sets fields from text
            /// sees it (see [`ConfigField`]).
            pub const FIELDS: &'static [ConfigField] = &[$(
                ConfigField {
                    name: stringify!($field),
                    doc: concat!($($doc, "\n"),*),
                    kind: train_config!(@kind $ty $(, $default)?),
                    choices: <$ty as FieldValue>::choices,
                    check: |text| <$ty as FieldValue>::parse_text(text).map(drop),
                },
            )*];

            /// Sets the field `name` from its text (a flag's value; `"true"` or `"false"` for
            /// a switch).
            ///
            /// # Errors
            /// [`Error::InvalidInput`] when there is no such field or the text does not parse
            /// as its type (the message names what is accepted).
            pub fn set_field(&mut self, name: &str, text: &str) -> Result<()> {
                let invalid = |why: String| Error::invalid("train.config", format!("a value of {name}"), why);
                match name {
                    $(stringify!($field) => self.$field = <$ty as FieldValue>::parse_text(text).map_err(invalid)?,)*
                    _ => return Err(Error::invalid("train.config", "a field of TrainConfig", name)),
                }
                Ok(())
            }

            /// The field `name`'s value as text (its default, for a fresh config); `None` for
            /// an optional field that is unset or a name that is no field.
            pub fn field_text(&self, name: &str) -> Option<String> {
                match name {
                    $(stringify!($field) => FieldValue::to_text(&self.$field),)*
                    _ => None,
                }
            }
        }
    };
    (@kind $ty:ty) => { FieldKind::Required };
    (@kind $ty:ty, $default:literal) => { <$ty as FieldValue>::KIND };
}

/// One [`TrainConfig`] field as a front end that sets fields from text sees it (the command
/// line's `train` derives its flag `--<name with dashes>` from it).
#[derive(Clone, Copy, Debug)]
pub struct ConfigField {
    /// The field's name, as in the saved JSON.
    pub name: &'static str,
    /// Its doc comment, one line of Markdown per doc line.
    pub doc: &'static str,
    /// How a value is given.
    pub kind: FieldKind,
    /// The names it accepts where they are a fixed list (a model class), else none.
    pub choices: fn() -> Vec<&'static str>,
    /// Parses a value's text without keeping it; the error names what is accepted.
    pub check: fn(&str) -> std::result::Result<(), String>,
}

/// How a [`ConfigField`]'s value is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An argument of [`TrainConfig::new`] (no default).
    Required,
    /// A value that replaces the default.
    Value,
    /// A value that sets it; without one it is unset (`None`).
    Optional,
    /// A switch: given, the field takes the opposite of its default.
    Switch,
}

/// A [`TrainConfig`] field's type as text gives it.
pub trait FieldValue: Sized {
    /// How a value is given.
    const KIND: FieldKind;
    /// Parses `text`; the error names what is accepted.
    ///
    /// # Errors
    /// A message when `text` is not a value of the type.
    fn parse_text(text: &str) -> std::result::Result<Self, String>;
    /// The value as text; `None` for an unset optional value.
    fn to_text(&self) -> Option<String>;
    /// The names accepted where they are a fixed list, else none.
    fn choices() -> Vec<&'static str> {
        Vec::new()
    }
}

/// [`FieldValue`] for a type with `FromStr` and `Display`, and for its `Option`.
macro_rules! field_value {
    ($($t:ty => $choices:expr),* $(,)?) => {$(
        impl FieldValue for $t {
            const KIND: FieldKind = FieldKind::Value;
            fn parse_text(text: &str) -> std::result::Result<Self, String> {
                text.parse().map_err(|e: <$t as std::str::FromStr>::Err| e.to_string())
            }
            fn to_text(&self) -> Option<String> {
                Some(self.to_string())
            }
            fn choices() -> Vec<&'static str> {
                $choices
            }
        }

        impl FieldValue for Option<$t> {
            const KIND: FieldKind = FieldKind::Optional;
            fn parse_text(text: &str) -> std::result::Result<Self, String> {
                <$t as FieldValue>::parse_text(text).map(Some)
            }
            fn to_text(&self) -> Option<String> {
                self.as_ref().and_then(FieldValue::to_text)
            }
            fn choices() -> Vec<&'static str> {
                <$t as FieldValue>::choices()
            }
        }
    )*};
}

field_value!(
    usize => Vec::new(),
    u64 => Vec::new(),
    f64 => Vec::new(),
    String => Vec::new(),
    ModelChoice => ModelChoice::VARIANTS.map(ModelChoice::as_str).to_vec(),
);

impl FieldValue for bool {
    const KIND: FieldKind = FieldKind::Switch;
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        text.parse().map_err(|_| format!("true or false, got {text:?}"))
    }
    fn to_text(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// A target by its kind's name; the circulant's kernel has no text form here (the command line
/// takes it from `--kernel`).
impl FieldValue for Target {
    const KIND: FieldKind = FieldKind::Value;
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        let kind: TargetKind = text.parse().map_err(|e: Error| e.to_string())?;
        kind.target(Vec::new()).map_err(|e| e.to_string())
    }
    fn to_text(&self) -> Option<String> {
        Some(self.kind().to_string())
    }
    fn choices() -> Vec<&'static str> {
        TargetKind::VARIANTS.map(TargetKind::as_str).to_vec()
    }
}

train_config! {
    /// Configuration of a training run (see [`crate::train`] for the method). The backend and
    /// the float type are the caller's choice: [`Trainer::run_on`](crate::train::Trainer::run_on)
    /// on a backend type, or [`Trainer::run`](crate::train::Trainer::run) on a named one.
    ///
    /// Steps are counted across phases: one Adam update is one step, one Levenberg–Marquardt
    /// iteration (kept or refused) is one step.
    ///
    /// Each field's first doc paragraph is also the help of its `train` flag.
    pub struct TrainConfig {
        /// Transform size N (a power of two, at least 2).
        pub n: usize,
        /// The transform to reproduce.
        #[config(default = "Target::Dft")]
        pub target: Target,
        /// Seed of the random initial twiddles (Haar-random unitary blocks); restart r uses
        /// seed + r.
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
        /// Adam hands over to the polish early when a product's loss (K ≥ 2 factors), or one
        /// butterfly's under `real_output`, fell by less than 1 % over this many steps (0: never
        /// early).
        ///
        /// Such a loss is in a local minimum: Adam's loss in a basin that leads to the target
        /// falls by orders of magnitude over such a window.
        #[config(default = 250)]
        pub plateau_steps: usize,
        /// Measure the layer on this many random probe vectors instead of the N×N identity basis
        /// (unset: the identity basis up to N = 4096, 256 probes above).
        ///
        /// The figures are the objective's [`DENSE_MAX_N`](crate::train::objective::DENSE_MAX_N)
        /// and [`PROBES`](crate::train::objective::PROBES) ([`crate::train::objective`]).
        #[config(default = "None")]
        pub probes: Option<usize>,
        /// Rows of the objective's batch per Adam step, taken in turn (unset: the whole batch
        /// every step). The polish always measures the whole batch.
        ///
        /// For large data ([`crate::reference::DataTarget`]): Adam's steps then cost a
        /// minibatch each, and its phase switch reads the minibatch's loss.
        #[config(default = "None")]
        pub batch_size: Option<usize>,
        /// Above this N a run starts from the layer trained at N/2, grown to N (unset: the
        /// default for its target and class, [`grow_above_default`]: the bottom of a product's
        /// chain, 4096 for one butterfly; N or more: from random weights at every size).
        ///
        /// It applies to a run whose model class is a product of butterflies behind
        /// permutations the doubling carries up (the bit reversal, the identity, the other
        /// self-similar members), every stage learned. Each attempt starts from the layer
        /// trained at N/2 (on [`Target::halved`]; itself from random weights, and grown the same
        /// way above this size) applied to both halves, with a random last stage in each factor
        /// ([`ButterflyProduct::doubled`]); one butterfly then goes straight to the polish, a
        /// product runs Adam's schedule first. The attempts of a block (at most
        /// [`HALF_REUSE`](crate::train::HALF_REUSE); one that ends on Adam's plateau ends it,
        /// [`block_start`](crate::train::block_start)) double one trained half-size layer, each
        /// with its own random last stages.
        ///
        /// [`ButterflyProduct::doubled`]: crate::nn::ButterflyProduct::doubled
        #[config(default = "None")]
        pub grow_above: Option<usize>,
        /// Model class to train: `b` one butterfly, `bp` a permutation and a butterfly, `bpbp`
        /// two of them, every stage learned. A class that cannot represent the target misses
        /// the bar.
        ///
        /// Unset, the target's default class, [`default_class`]: BP for the DFT, iDFT, Hadamard
        /// transform and a user's target, BPBP for the others. See [`ModelChoice`].
        #[config(default = "None")]
        pub model: Option<ModelChoice>,
        /// The number of (permutation, butterfly) factors of the class `model` `bpbp` trains:
        /// K ≥ 2 gives (BP)^K in Dao et al.'s notation, every stage of every factor learned, the
        /// later factors behind one permutation that the search finds with the first's (the
        /// identity unless another fits). Unset: 2, BPBP. Only with `model` `bpbp`.
        #[config(default = "None")]
        pub factors: Option<usize>,
        /// Real butterflies: every twiddle's imaginary part stays 0 (the Hadamard transform's
        /// exact factorization is real; the other targets' are not).
        ///
        /// The imaginary parts start at 0 and their gradients are masked. Off (complex twiddles)
        /// by default.
        #[config(default = false)]
        pub real: bool,
        /// The real-output map: the model is the real part of the class's (complex) product,
        /// fitted to a real target on real inputs (a real matrix, a real operator, real pairs).
        ///
        /// The generic class for the real-to-real transforms: Hartley's, the DCT-II's and the
        /// DST-II's matrices are each Re(B P) for a complex butterfly B and a permutation P (the
        /// DFT's bit reversal, after Makhoul's even/odd reordering for the DCT and DST), so
        /// `--model bp --real-output` learns every stage of every factor, and the permutation is
        /// learned from the objective ([`crate::train::permutation`]): no stage of a known
        /// factorization is given. Unset `model` means `bp` then. A target with complex images
        /// is refused. Such a run grows from N/2 (`grow_above`) only as one butterfly
        /// (`model` B, for a family whose butterfly takes its input in natural order): a
        /// permutation learned at each size does not double.
        #[config(default = false)]
        pub real_output: bool,
        /// rmse at which Adam hands over to the polish phase.
        #[config(default = 1e-4)]
        pub switch_rmse: f64,
        /// Further attempts from new random weights when the polish stalls above the bar.
        ///
        /// An attempt in a local minimum ends after about `3 · plateau_steps` Adam steps and a
        /// short polish.
        #[config(default = 9)]
        pub restarts: usize,
        /// Most Levenberg–Marquardt iterations in the polish phase.
        ///
        /// A polish in a spurious minimum ends earlier, when it stalls (`max_stalled`); one that
        /// still gains needs the room: on a circulant of N = 16 (a kernel of the chain from 64)
        /// it fell from rmse 3e-4 to the bar in about 200 iterations, where 60 ended every
        /// attempt above it.
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
        /// In f32, end the gauge-fixed polish by trying each stage's free twiddles rounded to
        /// short binary fractions, kept where the loss falls, and polishing the rest (see
        /// [`crate::train::lm::Polish::short_stages`]); off, the polish ends where Levenberg–Marquardt
        /// stalls. No effect in f64.
        #[config(default = true)]
        pub snap: bool,
        /// Stalled polish steps before stopping: each polish stage ends after this many steps
        /// in a row that lower the loss by less than 1 % (the float type's precision is
        /// reached). In the stage that ends the polish (gauge-fixed, or the only one) a refused
        /// step counts only where it no longer moves any twiddle, and then ends it; one that
        /// moves them only raises the damping.
        #[config(default = 4)]
        pub max_stalled: usize,
        /// Take a built-in target's f32 floor, and so its bar and restarts, from the model's own
        /// f64 solution (the default) instead of from its exact factorization.
        ///
        /// At the end of each attempt's polish the layer is polished on in f64 (no Adam) to the
        /// f64 bar, and that solution, gauge-fixed and rounded to f32, is the floor
        /// ([`FloorSource::OwnF64Solution`](crate::metrics::FloorSource)); where the f64 polish
        /// misses 1e-14 no solution is near and the attempt missed. The run then consults no
        /// answer; the exact factorization's floor in the trainer's gauge is still reported
        /// beside it. Off (`train --exact-floor`), the floor is the exact factorization's rmse
        /// in f32 on the backend: an answer the trainer is handed, for runs that need their bar
        /// before they start (`bench train --to-bar`) and for comparing with figures measured
        /// against it. No effect in f64 (its bar is 1e-14) or on a user's target (whose f32
        /// floor is always found this way).
        #[config(default = true)]
        pub own_floor: bool,
        /// Stop as soon as the rmse is at or below this (unset: polish until it stalls).
        #[config(default = "None")]
        pub stop_rmse: Option<f64>,
        /// Directory for TensorBoard event files (unset: no TensorBoard logging).
        #[config(default = "None")]
        pub log_dir: Option<String>,
        /// Directory for checkpoints and this config (unset: no checkpoints).
        #[config(default = "None")]
        pub checkpoint_dir: Option<String>,
        /// Steps between checkpoints.
        #[config(default = 200)]
        pub checkpoint_every: usize,
        /// Steps between log records (TensorBoard and progress).
        #[config(default = 10)]
        pub log_every: usize,
    }
}

/// Above this size the one-butterfly targets grow from N/2 by default: Adam from random weights
/// sits on a plateau for thousands of steps above N = 4096 (the DFT at N = 8192 and 16384 did
/// not leave it in 3000 steps, while 4096 reaches the f32 bar; docs/benchmarks.md#training-dft).
pub const GROW_ONE_FACTOR_ABOVE: usize = 4096;

/// Where a chain of the circulant in BPBP starts by default: it grows from N = 16 above it.
/// From random weights its two factors fall into spurious minima: at N = 32 alone ten attempts
/// stalled at rmse 0.34–0.52 (seed 0), and the chain from N = 4 stalled at 16 (f64, rmse 0.36
/// after ten attempts), where the run at 16 alone reached 1.6e-16 in one; from 16 the chain
/// reached both bars at every size to N = 256 in one attempt each (seed 0; f64 2.6e-16 and f32
/// 0.49 × the floor at 256).
pub const CIRCULANT_BOTTOM: usize = 16;

/// Where a chain of the DCT-II or DST-II in BPBP starts by default: its bottom must be large
/// enough to tell its first permutation from the others the doubling carries up (the DCT-II's
/// chain from 8 stalled at 16); from 32 both reached their bars at 128, 256 and 512 in both
/// precisions (seed 0; 1–7 attempts).
pub const DCT_DST_BOTTOM: usize = 32;

/// Where a chain of the Hartley transform in BPBP starts by default: at N = 32 both the bit
/// reversal and the identity fit, and the chain from there missed at 128 (rmse 0.10 after ten
/// attempts, f64, seed 0); from 64, where only the bit reversal fits, it reached f64 at 128, 256
/// and 512 and f32 at 256 and 512 (seed 0), and f64 at 128 with seeds 1 and 2.
pub const HARTLEY_BOTTOM: usize = 64;

/// The class a run trains when [`TrainConfig::model`] is unset: BP (one butterfly after a
/// permutation, found from the matrix where it is at hand) for the targets one butterfly
/// represents by their definition (the DFT, iDFT, Hadamard transform) and for a user's target
/// (whose permutation is found where one makes it a butterfly); BPBP, every stage of both
/// factors learned, for the Hartley transform, the DCT-II, the DST-II and the circulant, which
/// no single butterfly represents. Either is Dao et al.'s generic class: no stage of a known
/// factorization is read.
pub fn default_class(target: &Target) -> ModelChoice {
    match target {
        Target::Hartley | Target::Dct2 | Target::Dst2 | Target::Circulant { .. } => ModelChoice::Bpbp,
        Target::Dft | Target::Idft | Target::Hadamard | Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => {
            ModelChoice::Bp
        }
    }
}

/// The size above which a run at N grows from N/2 when [`TrainConfig::grow_above`] is unset,
/// for a run in the class `class` with `factors` factors: for BPBP (two factors) the bottom of
/// the target's chain, [`CIRCULANT_BOTTOM`], [`DCT_DST_BOTTOM`], [`HARTLEY_BOTTOM`]; for one
/// butterfly of a built-in [`GROW_ONE_FACTOR_ABOVE`] (as for any other class); a user's matrix,
/// of one size, never grows, and a user's operator grows only when asked (`usize::MAX`).
pub fn grow_above_default(target: &Target, class: ModelChoice, factors: usize) -> usize {
    match (target, class, factors) {
        (Target::Matrix(_) | Target::Operator(_) | Target::Data(_), _, _) => usize::MAX,
        (Target::Circulant { .. }, ModelChoice::Bpbp, 2) => CIRCULANT_BOTTOM,
        (Target::Dct2 | Target::Dst2, ModelChoice::Bpbp, 2) => DCT_DST_BOTTOM,
        (Target::Hartley, ModelChoice::Bpbp, 2) => HARTLEY_BOTTOM,
        _ => GROW_ONE_FACTOR_ABOVE,
    }
}

impl TrainConfig {
    /// The class this run trains: [`TrainConfig::model`], or unset the target's default
    /// ([`default_class`]); with the real-output map unset means BP.
    pub fn class(&self) -> ModelChoice {
        match (self.model, self.real_output) {
            (Some(m), _) => m,
            (None, true) => ModelChoice::Bp,
            (None, false) => default_class(&self.target),
        }
    }

    /// The number of (permutation, butterfly) factors of the class ([`TrainConfig::class`];
    /// [`TrainConfig::factors`] for `bpbp`, 2 unset).
    pub fn class_factors(&self) -> usize {
        match self.class() {
            ModelChoice::Bpbp => self.factors.unwrap_or(ModelChoice::Bpbp.factors()),
            m => m.factors(),
        }
    }

    /// The name of the class, as the report gives it: `B`, `BP`, `BPBP`, or `(BP)^K` for more
    /// factors.
    pub fn class_name(&self) -> String {
        match (self.class(), self.class_factors()) {
            (ModelChoice::Bpbp, k) if k > 2 => format!("(BP)^{k}"),
            (m, _) => m.name().to_string(),
        }
    }

    /// Whether the run learns its first permutation under the real-output map (any class but
    /// one butterfly): such a permutation is learned at each size, so the run does not grow.
    pub fn learns_real_output_permutation(&self) -> bool {
        self.real_output && self.model != Some(ModelChoice::B)
    }

    /// The size above which this run grows from N/2: [`TrainConfig::grow_above`], or the
    /// default for its target and class ([`grow_above_default`]; none under the real-output
    /// map, whose permutation is learned at each size).
    pub fn grow_threshold(&self) -> usize {
        let default = match self.real_output {
            true => grow_above_default(&self.target, ModelChoice::Bp, 1),
            false => grow_above_default(&self.target, self.class(), self.class_factors()),
        };
        self.grow_above.unwrap_or(default)
    }

    /// Whether the run at size `n` of this config's chain starts from its member of half the
    /// size: above [`TrainConfig::grow_threshold`], and never at N = 4 (N/2 = 2, where the bit
    /// reversal is the identity, so N = 4 starts from random weights).
    pub fn grows_at(&self, n: usize) -> bool {
        n > self.grow_threshold().max(4)
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
        match (self.factors, self.model) {
            (Some(k), Some(ModelChoice::Bpbp)) if k < 2 => {
                return Err(Error::invalid("train", "factors ≥ 2 with model bpbp ((BP)^K)", k));
            }
            (Some(k), m) if m != Some(ModelChoice::Bpbp) => {
                return Err(Error::invalid(
                    "train",
                    "factors only with model bpbp (the class (BP)^K)",
                    format!("factors = {k} with model {}", m.map_or("unset", ModelChoice::as_str)),
                ));
            }
            _ => {}
        }
        if let Some(s) = self.stop_rmse {
            positive("stop_rmse", s)?;
        }
        for (name, v) in [
            ("checkpoint_every", self.checkpoint_every),
            ("log_every", self.log_every),
            ("cg_iters", self.cg_iters),
            ("probes", self.probes.unwrap_or(1)),
            ("batch_size", self.batch_size.unwrap_or(1)),
        ] {
            if v == 0 {
                return Err(Error::invalid("train", format!("{name} ≥ 1"), v));
            }
        }
        match &self.target {
            Target::Circulant { kernel } if kernel.len() != self.n => {
                return Err(Error::invalid(
                    "train",
                    format!("a circulant kernel of length n = {}", self.n),
                    kernel.len(),
                ));
            }
            Target::Matrix(m) if m.n() != self.n => {
                let source = m.source().unwrap_or("given in memory");
                return Err(Error::invalid(
                    "train",
                    format!("n = {} (the size of the target matrix, {source})", m.n()),
                    self.n,
                ));
            }
            Target::Data(d) if d.n() != self.n => {
                return Err(Error::invalid("train", format!("n = {} (the size of the data's vectors)", d.n()), self.n));
            }
            Target::Data(_) if self.grow_threshold() < self.n || self.probes.is_some() => {
                return Err(Error::invalid(
                    "train",
                    "no growing and no probes for data (its pairs are its objective, of one size)",
                    format!("grow_above = {}, probes = {:?}", self.grow_threshold(), self.probes),
                ));
            }
            Target::Matrix(_) if self.grow_threshold() < self.n => {
                return Err(Error::invalid(
                    "train",
                    "no growing for a target matrix (it has no member of half the size)",
                    format!("grow_above = {}", self.grow_threshold()),
                ));
            }
            _ if self.learns_real_output_permutation() && self.grow_above.is_some_and(|g| g < self.n) => {
                return Err(Error::invalid(
                    "train",
                    "no growing with the real-output map except for one butterfly (`--model b`): a \
                     permutation learned at each size does not double",
                    format!("grow_above = {}", self.grow_threshold()),
                ));
            }
            // An operator not held (a config read back from a checkpoint) is checked when it is
            // given again; the run refuses to start without it.
            Target::Operator(o) if o.operator().is_ok() => {
                // Where the run grows, every size of its chain down to the threshold.
                let mut n = self.n;
                while n >= 2 {
                    if !o.has_size(n) {
                        return Err(Error::invalid(
                            "train",
                            format!("the operator {} to have a member of size N = {n}", o.name()),
                            match n == self.n {
                                true => "none".to_string(),
                                false => format!("none (a run at N = {} grows from N = {n})", self.n),
                            },
                        ));
                    }
                    if !self.grows_at(n) {
                        break;
                    }
                    n /= 2;
                }
            }
            _ => {}
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
