//! `learned-fft train`: one training run. Every `TrainConfig` field with a default has its flag
//! derived from [`TrainConfig::FIELDS`] (name, help and default shown come from the config);
//! this file declares only the flags whose spelling or meaning is the command line's own.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Args};
use learned_fft::backend::Precision;
use learned_fft::nn::ModelChoice;
use learned_fft::reference::{DataTarget, MatrixTarget};
use learned_fft::train::config::{ConfigField, FieldKind};
use learned_fft::train::FloorSource;
use learned_fft::{Target, TargetKind, TrainConfig, TrainReport, Trainer};
use serde_json::{json, Value};

use super::progress::ProgressLine;
use super::{one_of, stop_on_signals, Global, JsonLines};

/// The size a run takes when neither `--n` nor a target file gives one.
const DEFAULT_N: usize = 64;

#[derive(Args)]
pub struct TrainArgs {
    /// Transform size N (a power of two) [default: 64, or the size of --target-file's matrix or
    /// of --data's vectors].
    #[arg(long)]
    n: Option<usize>,
    /// Target transform.
    #[arg(long, default_value = "dft", value_parser = one_of(&TargetKind::VARIANTS, TargetKind::as_str))]
    target: TargetKind,
    /// Kernel of the circulant target, comma-separated (length N).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    kernel: Vec<f64>,
    /// Your own target: an N×N matrix saved by numpy.save (float32, float64, complex64 or
    /// complex128) or in a .safetensors file (F32 or F64, [N, N] or [N, N, 2] for complex; N a
    /// power of two), instead of --target.
    #[arg(long, value_name = "M.npy", conflicts_with_all = ["target", "kernel"])]
    target_file: Option<std::path::PathBuf>,
    /// Your own target as data: inputs X and outputs Y, each a [pairs, N] array (one vector per
    /// row; real or complex, f32 or f64) in a .npy or .safetensors file, instead of --target.
    #[arg(long, num_args = 2, value_names = ["X.npy", "Y.npy"], conflicts_with_all = ["target", "kernel", "target_file"])]
    data: Vec<std::path::PathBuf>,
    #[command(flatten)]
    config: ConfigFlags,
    /// Complex butterflies (the default).
    #[arg(long, conflicts_with = "real")]
    complex: bool,
    /// Do not fix the gauge before the polish phase (train every twiddle).
    #[arg(long)]
    free_gauge: bool,
    /// In f32, end the polish where Levenberg–Marquardt stalls: no twiddles tried at short
    /// binary fractions (`TrainConfig::snap`).
    #[arg(long)]
    no_snap: bool,
    /// In f32, take a built-in target's floor, bar and restarts from its exact factorization
    /// (an answer the run is handed) instead of from the model's own f64 solution
    /// (`TrainConfig::own_floor`).
    #[arg(long)]
    exact_floor: bool,
    /// The default since the own floor became every f32 run's (kept so that earlier commands
    /// still run).
    #[arg(long, hide = true, conflicts_with = "exact_floor")]
    own_floor: bool,
    /// Continue from the checkpoint in --checkpoint-dir.
    #[arg(long)]
    resume: bool,
    /// No progress line (log records go to stderr as JSON lines instead).
    #[arg(long)]
    quiet: bool,
}

impl TrainArgs {
    fn config(&self) -> learned_fft::Result<TrainConfig> {
        let target = match (&self.target_file, &self.data[..]) {
            (Some(path), _) => Target::Matrix(MatrixTarget::read(path)?),
            (None, [x, y]) => Target::Data(DataTarget::read(x, y)?),
            _ => self.target.target(self.kernel.clone())?,
        };
        let n = match (&target, self.n) {
            (_, Some(n)) => n,
            (Target::Matrix(m), None) => m.n(),
            (Target::Data(d), None) => d.n(),
            (_, None) => DEFAULT_N,
        };
        let mut c = TrainConfig::new(n).with_target(target);
        for (name, text) in &self.config.given {
            c.set_field(name, text)?;
        }
        c.fix_gauge = !self.free_gauge;
        c.snap = !self.no_snap;
        c.own_floor = self.own_floor || !self.exact_floor;
        c.validate()?;
        Ok(c)
    }
}

/// Trains; a run that misses its bar reports with an `"error"` (exit status 1).
pub fn run(args: TrainArgs, global: &Global) -> learned_fft::Result<Value> {
    let config = args.config()?;
    let (model, real, own_floor) = (config.model, config.real, config.own_floor);
    let trainer = Trainer::new(config)?.with_resume(args.resume).with_stop_flag(stop_on_signals()?);
    let report = if args.quiet {
        trainer.run(global.backend, global.precision(), &mut JsonLines)?
    } else {
        let mut line = ProgressLine::default();
        let report = trainer.run(global.backend, global.precision(), &mut line);
        line.finish();
        report?
    };
    // A grown run's chain, smallest first: what each size it passed reached.
    for l in &report.levels {
        eprintln!(
            "  grown through N = {}: rmse {:.3e}{}{} after {} steps in {:.1} s ({} attempt(s), seed {})",
            l.n,
            l.rmse,
            l.bar.map(|b| format!(", bar {b:.3e}")).unwrap_or_default(),
            if l.reached { " (reached)" } else { " (missed; the size above went on from it)" },
            l.steps,
            l.seconds,
            l.attempts,
            l.seed
        );
    }
    eprintln!(
        "N = {}: rmse {:.3e}{} after {} steps in {:.1} s ({} attempt(s)) on {}",
        report.n,
        report.rmse,
        report.floor.map(|f| format!(", floor {f:.3e} ({:.3}×)", report.rmse / f)).unwrap_or_default()
            + &report
                .floor_in_trainer_gauge
                .filter(|&f| f > 0.0)
                .map(|f| format!(", {:.3}× its rounding in the trainer's gauge", report.rmse / f))
                .unwrap_or_default(),
        report.steps,
        report.seconds,
        report.attempts,
        report.backend
    );
    if !report.reached {
        let why = missed_bar(&report, model, real, own_floor);
        eprintln!("error: {why}");
        return Ok(json!({ "train": report, "error": why }));
    }
    Ok(json!({ "train": report }))
}

/// Why a run did not reach its bar, for its error message.
fn missed_bar(report: &TrainReport, model: Option<ModelChoice>, real: bool, own_floor: bool) -> String {
    let (target, precision) = (report.target.kind(), report.backend.precision);
    // The report names the class chosen (`(BP)^K` with `--factors`).
    let chosen = model.map(|_| match &report.target {
        Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => format!(" (model {} from --model)", report.model),
        _ => format!(
            " (model {} from --model; its default class, {}, represents it)",
            report.model,
            learned_fft::train::default_class(&report.target).name()
        ),
    });
    let why = match report.bar {
        Some(bar) => format!(
            "train: {target} at N = {}: rmse {:.3e} is above the bar {bar:.3e} ({}); the run did not recover the target",
            report.n,
            report.rmse,
            match (precision, report.floor_source) {
                (Precision::F64, _) => "f64: 1e-14",
                (Precision::F32, Some(FloorSource::OwnF64Solution)) => {
                    "f32: 1.05 × the floor, the rmse in f32 on this backend of the model's own f64 solution"
                }
                (Precision::F32, _) => "f32: the floor, its exact factorization's rmse in f32 on this backend",
            }
        ),
        None if precision == Precision::F32 && (own_floor || matches!(target, TargetKind::Matrix | TargetKind::Data)) => {
            format!(
                "train: {target} at N = {}: rmse {:.3e}; its f32 bar is the rounding of the model's own f64 solution, \
                 and polished on in f64 from where the run ended it found none (it ended above 1e-14), so there is no \
                 f32 bar and the run did not recover the target",
                report.n, report.rmse
            )
        }
        None => format!(
            "train: {target} at N = {}: rmse {:.3e}; no exact factorization of {target} in this model class is known, so \
             there is no {precision} bar and the run cannot count as recovering it",
            report.n, report.rmse
        ),
    };
    let real = if real { " (real butterflies from --real)" } else { "" };
    why + &chosen.unwrap_or_default() + real
}

/// The fields whose flags [`TrainArgs`] declares itself: `--n` (the CLI's default size), `--target`
/// with `--kernel` (a target and its data), `--free-gauge` (the name `fix_gauge` had on the
/// command line before its flag was derived), and `--no-snap` and `--exact-floor` (a switch
/// turns a field from its default, and `snap`'s and `own_floor`'s are on).
const OWN: [&str; 5] = ["n", "target", "fix_gauge", "snap", "own_floor"];

/// A flag `--<name with dashes>` for every other [`TrainConfig`] field with a default: a value
/// flag, or a switch for a `bool` (given, the field takes the opposite of its default). A flag
/// not given leaves the config's default.
#[derive(Clone, Debug, Default)]
struct ConfigFlags {
    /// The fields given, with their text.
    given: Vec<(&'static str, String)>,
}

fn derived() -> impl Iterator<Item = &'static ConfigField> {
    TrainConfig::FIELDS.iter().filter(|f| f.kind != FieldKind::Required && !OWN.contains(&f.name))
}

impl clap::FromArgMatches for ConfigFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = ConfigFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let defaults = TrainConfig::new(2);
        for f in derived() {
            let text = match f.kind {
                FieldKind::Switch => matches
                    .get_flag(f.name)
                    .then(|| (defaults.field_text(f.name).as_deref() != Some("true")).to_string()),
                _ => matches.get_one::<String>(f.name).cloned(),
            };
            self.given.extend(text.map(|t| (f.name, t)));
        }
        Ok(())
    }
}

impl clap::Args for ConfigFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let defaults = TrainConfig::new(2);
        derived().fold(cmd, |cmd, f| cmd.arg(flag(f, &defaults)))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The flag of field `f`, its help from the field's doc as clap's derive writes a doc comment
/// (the first paragraph without its period; all of them for `--help`) and, for a value, the
/// config's default.
fn flag(f: &'static ConfigField, defaults: &TrainConfig) -> Arg {
    let arg = Arg::new(f.name).long(leak(f.name.replace('_', "-")));
    let arg = match f.kind {
        FieldKind::Switch => arg.action(ArgAction::SetTrue),
        _ => {
            let arg = arg.action(ArgAction::Set).value_name(leak(f.name.to_uppercase()));
            let choices = (f.choices)();
            if choices.is_empty() {
                arg.value_parser(move |s: &str| (f.check)(s).map(|()| s.to_string()))
            } else {
                arg.value_parser(PossibleValuesParser::new(choices))
            }
        }
    };
    let default = match f.kind {
        FieldKind::Value => defaults.field_text(f.name),
        _ => None,
    };
    let paragraphs = paragraphs(f.doc);
    let first = paragraphs.first().cloned().unwrap_or_default();
    let mut help = first.strip_suffix('.').unwrap_or(&first).to_string();
    let mut long = (paragraphs.len() > 1).then(|| paragraphs.join("\n\n"));
    if let Some(d) = default {
        help += &format!(" [default: {d}]");
        long = long.map(|l| format!("{l}\n\n[default: {d}]"));
    }
    let arg = arg.help(help);
    match long {
        Some(long) => arg.long_help(long),
        None => arg,
    }
}

/// A doc comment's paragraphs, each on one line, with Markdown links as their text and link
/// definitions dropped (rustdoc's links mean nothing on a terminal).
fn paragraphs(doc: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for line in doc.lines().map(str::trim) {
        if line.starts_with('[') && line.contains("]: ") {
            continue;
        }
        if line.is_empty() {
            if !current.is_empty() {
                out.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(link_text(line));
        }
    }
    if !current.is_empty() {
        out.push(current.join(" "));
    }
    out
}

/// `[text](target)` and `[text]` as `text`.
fn link_text(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[close + 1..];
        if let Some(end) = rest.strip_prefix('(').and_then(|r| r.find(')')) {
            rest = &rest[end + 2..];
        }
    }
    out + rest
}

/// A `'static` copy of `s`: clap's flag and value names are `'static` without its `string`
/// feature, and the command is built once per process.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}
