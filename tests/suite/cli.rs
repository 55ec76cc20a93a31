//! The binary as a user runs it: bad inputs give errors and never panics, the flag beats the
//! environment, one trainer per checkpoint directory, SIGTERM and SIGINT leave a checkpoint.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use crate::common::scratch;
use learned_fft::train::{Checkpoint, DirLock};

const EXE: &str = env!("CARGO_BIN_EXE_learned-fft");

pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(EXE);
    cmd.args(args).env_remove("LEARNED_FFT_BACKEND");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The last stdout line, as JSON.
pub(crate) fn last_json(out: &Output) -> serde_json::Value {
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string();
    serde_json::from_str(&last).unwrap_or_default()
}

/// A failed command: non-zero status, no panic, and stderr mentions every one of `parts`.
fn refused(args: &[&str], env: &[(&str, &str)], parts: &[&str]) {
    let out = run(args, env);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} should fail; it printed {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for part in parts {
        assert!(err.contains(part), "{args:?}: the error should mention {part:?}: {err}");
    }
}

#[test]
fn sizes_too_large_are_refused_with_the_figure_before_allocating() {
    let cpu = ["--backend", "ndarray"];
    let with = |rest: &[&'static str]| -> Vec<&'static str> { cpu.iter().chain(rest).copied().collect() };
    // 2^24: the objective on 256 probes would need about 1.9 TiB (the dense one, used up to
    // N = 4096, 80 · N² bytes on the host alone), 2^30 about 150 TiB; 2^63 overflows any count
    // of bytes.
    refused(&with(&["train", "--n", "16777216"]), &[], &["error: train", "N = 16777216", "needs", "TiB", "available"]);
    refused(&with(&["train", "--n", "1073741824"]), &[], &["error: train", "needs", "TiB"]);
    refused(&with(&["train", "--n", "9223372036854775808"]), &[], &["error: train", "needs"]);
    refused(&with(&["exact", "--n", "1073741824"]), &[], &["target.matrix", "needs"]);
    refused(&with(&["bench", "butterfly", "--n", "1073741824"]), &[], &["bench butterfly", "needs"]);
    refused(
        &with(&["bench", "spectral", "--win", "64", "--signals", "1000000", "--samples", "48000000"]),
        &[],
        &["bench spectral", "needs"],
    );
}

/// More devices than the backend reports are refused before any run, naming the count; so are
/// none.
#[test]
fn devices_beyond_the_backend_are_refused() {
    let scratch = scratch("devices_beyond_the_backend");
    let dir = scratch.to_str().unwrap();
    let sweep = ["--backend", "ndarray", "bench", "train", "--sizes", "8", "--seeds", "1", "--scratch", dir];
    let with = |devices: &'static str| -> Vec<&str> { sweep.iter().copied().chain(["--devices", devices]).collect() };
    refused(&with("2"), &[], &["bench train --devices", "1 device(s) the backend reports", "2 devices"]);
    let written = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(written, 0, "nothing written for a refused sweep");
    refused(&with("0"), &[], &["--devices", "0"]);
}

#[test]
fn counts_of_zero_are_refused() {
    for args in [
        ["bench", "butterfly", "--iters", "0"],
        ["bench", "spectral", "--iters", "0"],
        ["bench", "conv", "--iters", "0"],
        ["bench", "butterfly", "--batch", "0"],
    ] {
        let flag = args[2];
        refused(&args, &[], &[flag, "0"]);
    }
}

#[test]
fn bench_conv_defaults_stop_at_the_signal_length() {
    let small = ["--backend", "ndarray", "bench", "conv", "--channels", "1", "--batch", "1", "--warmup", "0"];
    let with = |rest: &[&'static str]| -> Vec<&'static str> { small.iter().chain(rest).copied().collect() };
    let out = run(&with(&["--length", "64", "--iters", "1"]), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let kernels: Vec<u64> = last_json(&out)["rows"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["kernel"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(kernels, [16, 32, 64], "the default lengths up to the signal's");
    // Lengths given are taken as given: one longer than the signal is named in the error.
    refused(&with(&["--length", "64", "--kernels", "128"]), &[], &["fft_conv1d", "128"]);
    // No default length fits a signal of 8 samples.
    refused(&with(&["--length", "8"]), &[], &["bench conv", "8 samples"]);
}

#[test]
fn the_backend_flag_beats_the_environment_variable() {
    let bogus = [("LEARNED_FFT_BACKEND", "bogus")];
    let out = run(&["--backend", "ndarray", "backend"], &bogus);
    assert!(out.status.success(), "the flag should win over a bad variable: {}", stderr(&out));
    assert_eq!(last_json(&out)["backend"]["kind"], "ndarray");
    // Without the flag the variable counts, and a bad one is named.
    refused(&["backend"], &bogus, &["LEARNED_FFT_BACKEND", "bogus"]);
    let out = run(&["backend"], &[("LEARNED_FFT_BACKEND", "ndarray")]);
    assert_eq!(last_json(&out)["backend"]["kind"], "ndarray", "{}", stderr(&out));
    let out = run(&["--backend", "candle", "backend"], &[("LEARNED_FFT_BACKEND", "ndarray")]);
    assert_eq!(last_json(&out)["backend"]["kind"], "candle", "{}", stderr(&out));
}

#[test]
fn choosing_a_backend_prints_nothing_about_wgpu_unless_wgpu_is_chosen() {
    // Without a display session (no XDG_RUNTIME_DIR), probing every graphics API used to print
    // "error: XDG_RUNTIME_DIR is invalid…" twice from the GL/EGL probe.
    let mut cmd = Command::new(EXE);
    cmd.args(["backend"]).env_remove("LEARNED_FFT_BACKEND").env_remove("XDG_RUNTIME_DIR");
    let out = cmd.output().expect("the binary runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<String> = stderr(&out).lines().map(String::from).collect();
    assert!(lines.iter().all(|l| l.starts_with("backend: ")), "only the choice is printed, got {lines:?}");
}

#[test]
fn a_cuda_backend_that_is_missing_is_an_error() {
    // A build without the `cuda` feature (as CI's) says so; with it, the driver probe does.
    if cfg!(feature = "cuda") {
        return;
    }
    refused(&["--backend", "cuda", "backend"], &[], &["cuda", "not available", "--features cuda"]);
}

/// Training arguments for a small ndarray run in `dir`.
fn train_args(dir: &Path, n: usize, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["--backend", "ndarray", "train", "--seed", "5", "--quiet", "--log-every", "1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--n".into(), n.to_string(), "--checkpoint-dir".into(), dir.display().to_string()]);
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Spawns a trainer and reads its progress lines until one is at `step` or later; returns the
/// child (still running) and the last step seen.
fn trainer_past(args: &[String], step: u64) -> (Child, u64) {
    let mut child = Command::new(EXE)
        .args(args)
        .env_remove("LEARNED_FFT_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = 0;
    for line in lines.by_ref() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap_or_default();
        if let Some(s) = v["progress"]["step"].as_u64() {
            seen = s;
            if s >= step {
                break;
            }
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, seen)
}

#[test]
fn one_trainer_per_checkpoint_directory() {
    // A directory this process holds: the trainer is refused, naming the holder.
    let dir = scratch("locked");
    let lock = DirLock::acquire(&dir).expect("the lock");
    std::fs::write(dir.join("checkpoint.lfft.tmp"), b"half a checkpoint").unwrap();
    let args: Vec<String> = train_args(&dir, 8, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, &[], &["in use by process", &std::process::id().to_string(), "lock"]);
    drop(lock);
    // Released, the same command trains, and the stale temporary file of a killed run is gone.
    let out = run(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!dir.join("checkpoint.lfft.tmp").exists(), "the stale temporary file is removed at start");

    // Two trainers: the second is refused at once and the first finishes.
    let dir = scratch("two");
    let first_args = train_args(&dir, 64, &[]);
    let (first, _) = trainer_past(&first_args, 1);
    let second = run(&first_args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(!second.status.success(), "the second trainer must not run");
    assert!(stderr(&second).contains(&format!("in use by process {}", first.id())), "{}", stderr(&second));
    let first = first.wait_with_output().expect("the first trainer ends");
    assert!(first.status.success(), "the first trainer finishes");
    assert!(last_json(&first)["train"]["rmse"].is_f64());
}

/// A sweep killed outright (SIGKILL: nothing is written on the way out) has left each run a
/// checkpoint at most `--checkpoint-every` steps back, and `--resume` ends the run where an
/// uninterrupted sweep ends it (steps, attempts, rmse).
#[test]
fn a_killed_sweep_resumes_from_its_last_periodic_checkpoint() {
    let every = 25u64;
    let sweep = |dir: &Path| -> Vec<String> {
        let mut a: Vec<String> = ["--backend", "ndarray", "bench", "train", "--targets", "dft", "--sizes", "32"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--seeds", "1", "--verbose", "--checkpoint-every"].map(String::from));
        a.extend([every.to_string(), "--scratch".into(), dir.display().to_string()]);
        a
    };
    let dir = scratch("sweep-killed");
    let args = sweep(&dir);
    let (mut child, seen) = trainer_past(&args, 3 * every + 7);
    child.kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix.
    let _ = child.wait();
    assert!(seen >= 3 * every + 7, "the run got to step {seen}");
    let ckpt = Checkpoint::read(dir.join("dft-n32-f32-0").join("checkpoint.lfft")).expect("a checkpoint after SIGKILL");
    assert!(ckpt.state.step as u64 + every >= seen, "killed after step {seen}, checkpoint at step {}", ckpt.state.step);
    let ended = |out: &Output| {
        assert!(out.status.success(), "{}", stderr(out));
        let err = stderr(out);
        let runs = err.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
        let run = runs.filter_map(|v| v.get("run").cloned()).next_back().expect("a run line");
        [run["steps"].clone(), run["attempts"].clone(), run["rmse"].clone(), run["reached"].clone()]
    };
    let resumed: Vec<String> = args.iter().cloned().chain(["--resume".to_string()]).collect();
    let resumed = ended(&run(&resumed.iter().map(String::as_str).collect::<Vec<_>>(), &[]));
    let whole = ended(&run(&sweep(&scratch("sweep-whole")).iter().map(String::as_str).collect::<Vec<_>>(), &[]));
    assert_eq!(resumed, whole, "the resumed run ends where the uninterrupted one does");
}

#[test]
fn sigterm_and_sigint_leave_a_checkpoint_at_the_step_they_stopped() {
    for signal in ["TERM", "INT"] {
        let dir = scratch(&format!("signal-{signal}"));
        // No periodic checkpoint: what is on disk afterwards was written on the way out.
        let args = train_args(&dir, 16, &["--checkpoint-every", "100000"]);
        let (child, seen) = trainer_past(&args, 30);
        assert!(seen >= 30, "the run got to step {seen}");
        let kill = Command::new("kill").args(["-s", signal, &child.id().to_string()]).status().expect("kill");
        assert!(kill.success());
        let out = child.wait_with_output().expect("the trainer ends");
        let err = last_json(&out)["error"].as_str().unwrap_or_default().to_string();
        assert!(!out.status.success(), "SIG{signal}: the run must exit non-zero");
        assert!(err.contains("stopped at step") && err.contains("--resume"), "SIG{signal}: {err}");
        let step: usize =
            err.split("stopped at step ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
        let ckpt = Checkpoint::read(dir.join("checkpoint.lfft")).expect("a loadable checkpoint");
        assert_eq!(ckpt.state.step, step, "SIG{signal}: the checkpoint is at the step the run stopped");
        assert!(step as u64 >= seen, "SIG{signal}: stopped at {step}, after step {seen} was reported");
        ckpt.layer::<learned_fft::backend::NdArrayBackend<f32>>(&Default::default()).expect("the layer loads");
        // And the run continues from it.
        let resumed: Vec<String> = args.iter().cloned().chain(["--resume".to_string()]).collect();
        let out = run(&resumed.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        assert!(out.status.success(), "SIG{signal}: resume failed: {}", stderr(&out));
        assert_eq!(last_json(&out)["train"]["resumed_from"].as_u64(), Some(step as u64));
    }
}

#[test]
fn a_run_that_misses_its_bar_exits_non_zero_saying_so() {
    let dir = scratch("missed-bar");
    // The DFT cut short (20 Adam steps, one polish step): far above the f32 floor. With its own
    // floor (the default) the f64 polish from there finds no solution, so it has no bar; with
    // the exact factorization's it is above that bar.
    let cut = ["--adam-steps", "20", "--restarts", "0", "--polish-iters", "1"];
    let own = train_args(&dir.join("dft-own"), 16, &cut);
    let args: Vec<&str> = own.iter().map(String::as_str).collect();
    refused(&args, &[], &["error: train: dft at N = 16", "no f32 bar", "did not recover the target"]);
    let early = train_args(&dir.join("dft"), 16, &[&cut[..], &["--exact-floor"]].concat());
    let out = run(&early.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for part in ["error: train: dft at N = 16", "is above the bar", "did not recover the target"] {
        assert!(err.contains(part), "the error should mention {part:?}: {err}");
    }
    let report = last_json(&out);
    assert!(report["train"]["rmse"].as_f64().is_some_and(|r| r > 1e-4), "the report still comes: {report}");
    assert_eq!(report["train"]["reached"], false);
    assert!(report["error"].as_str().is_some_and(|e| e.contains("above the bar")), "{report}");
    // A product (DCT-II: three factors) cut short misses its f32 bar too.
    let dct = train_args(
        &dir.join("dct"),
        8,
        &["--target", "dct2", "--adam-steps", "30", "--restarts", "0", "--polish-iters", "1", "--exact-floor"],
    );
    let args: Vec<&str> = dct.iter().map(String::as_str).collect();
    refused(&args, &[], &["error: train: dct2 at N = 8", "is above the bar"]);
    // A model class chosen with --model that cannot represent the target (the circulant as
    // one butterfly) misses its bar and says which class it was. (The kernel starts with a
    // negative number, which is a value, not a flag.)
    let bp = train_args(
        &dir.join("bp"),
        8,
        &[
            "--target",
            "circulant",
            "--kernel",
            "-1,2,-3,4,5,6,7,8",
            "--model",
            "bp",
            "--restarts",
            "0",
            "--exact-floor",
        ],
    );
    let args: Vec<&str> = bp.iter().map(String::as_str).collect();
    refused(&args, &[], &["error: train: circulant at N = 8", "is above the bar", "model BP from --model", "BPBP"]);
}

#[test]
fn bench_train_sweeps_targets_as_it_sweeps_sizes() {
    let scratch_dir = scratch("sweep");
    let args = [
        "--backend",
        "ndarray",
        "bench",
        "train",
        "--targets",
        "dft,hadamard",
        "--sizes",
        "8",
        "--seeds",
        "2",
        "--to-bar",
        "--scratch",
        scratch_dir.to_str().unwrap(),
    ];
    let out = run(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = last_json(&out)["sweep"].as_array().cloned().unwrap_or_default();
    let targets: Vec<&str> = rows.iter().filter_map(|r| r["target"].as_str()).collect();
    assert_eq!(targets, ["dft", "hadamard"]);
    for row in &rows {
        assert_eq!(row["runs"], 2, "{row}");
        assert_eq!(row["reached"], 2, "every run under its bar: {row}");
        assert!(row["bar"].as_f64().is_some_and(|b| b > 0.0 && b < 1e-6), "an f32 floor: {row}");
    }
    // `--resume` reads every finished run back from its checkpoint: the same runs, reported as
    // they ended (seed, steps, attempts, rmse).
    let runs = |out: &std::process::Output| -> Vec<serde_json::Value> {
        stderr(out)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                let r = v.get("run")?;
                Some(serde_json::json!([r["target"], r["seed"], r["steps"], r["attempts"], r["rmse"]]))
            })
            .collect()
    };
    let mut again = args.to_vec();
    again.push("--resume");
    let resumed = run(&again, &[]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(runs(&out).len(), 4, "{}", stderr(&out));
    assert_eq!(runs(&resumed), runs(&out), "the resumed sweep reports the finished runs as they ended");
}

/// `bench train --levels` gives a row for every size a run's grown chain passed, from the runs
/// at N alone: the DFT at 32 grown from 16 from 8 gives rows at 8 and 16 (`grown_in: 32`, no
/// wall time of their own) before the row at 32, each over both seeds, its figures those of the
/// levels each run lists on stderr.
#[test]
fn bench_train_levels_gives_a_row_for_every_size_of_the_chains() {
    let scratch_dir = scratch("sweep-levels");
    let args = [
        "--backend",
        "ndarray",
        "--precision",
        "f64",
        "bench",
        "train",
        "--targets",
        "dft",
        "--sizes",
        "32",
        "--seeds",
        "2",
        "--grow-above",
        "8",
        "--levels",
        "--scratch",
        scratch_dir.to_str().unwrap(),
    ];
    let out = run(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = last_json(&out)["sweep"].as_array().cloned().unwrap_or_default();
    let sizes: Vec<(u64, Option<u64>)> =
        rows.iter().map(|r| (r["n"].as_u64().unwrap_or(0), r["grown_in"].as_u64())).collect();
    assert_eq!(sizes, [(8, Some(32)), (16, Some(32)), (32, None)], "{rows:?}");
    let levels: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("run").map(|r| r["levels"].clone()))
        .collect();
    assert_eq!(levels.len(), 2, "{}", stderr(&out));
    for (i, row) in rows[..2].iter().enumerate() {
        assert_eq!((&row["runs"], &row["stages_learned"]), (&2.into(), &(3 + i).into()), "{row}");
        assert!(row["wall_seconds"].is_null(), "{row}");
        let rmses: Vec<f64> = levels.iter().map(|l| l[i]["rmse"].as_f64().unwrap_or(-1.0)).collect();
        assert_eq!(row["rmse_max"].as_f64(), Some(rmses[0].max(rmses[1])), "{row} from {levels:?}");
        let reached = levels.iter().filter(|l| l[i]["reached"] == true).count();
        assert_eq!(row["reached"], reached, "{row} from {levels:?}");
        let attempts: u64 = levels.iter().map(|l| l[i]["attempts"].as_u64().unwrap_or(0)).sum();
        assert_eq!(row["attempts"], attempts, "{row}");
    }
    assert!(rows[2]["wall_seconds"].as_f64().is_some_and(|w| w > 0.0), "{}", rows[2]);
}

/// `bench train` consults no exact factorization by default: each f32 run's floor is its own f64
/// solution's rounding, and the rows say what was learned (every stage, the permutation found
/// from the matrix) and what the floor measures. With `--exact-floor` the floor and bar are the
/// exact factorization's; `--own-floor` (the former switch, now the default) with `--to-bar`,
/// whose bar must be known before the run, is refused naming both.
#[test]
fn bench_train_own_floor_reports_its_floor_and_what_was_learned() {
    let scratch_dir = scratch("sweep-own-floor");
    let dir = scratch_dir.to_str().unwrap();
    let exact_dir = scratch("sweep-exact-floor");
    let args = ["--backend", "ndarray", "bench", "train", "--targets", "dft", "--sizes", "8", "--seeds", "1"];
    let with = |rest: &[&'static str], dir: &str| -> Vec<String> {
        args.iter().chain(rest).map(|s| s.to_string()).chain([dir.to_string()]).collect()
    };
    let row_of = |rest: &[&'static str], dir: &str| {
        let args = with(rest, dir);
        let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let rows = last_json(&out)["sweep"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows[0].clone()
    };
    let row = row_of(&["--scratch"], dir);
    assert_eq!(row["floor_source"], "own_f64_solution", "{row}");
    assert_eq!(row["reached"], 1, "{row}");
    assert_eq!((&row["model"], &row["stages_fixed"], &row["stages_learned"]), (&"BP".into(), &0.into(), &3.into()));
    assert_eq!(row["permutations"], serde_json::json!(["identified"]), "{row}");
    // The bar is the own solution's: 1.05 × its floor, not the exact factorization's.
    let (bar, floor) = (row["bar"].as_f64().unwrap_or(0.0), row["floor"].as_f64().unwrap_or(0.0));
    assert!(floor > 0.0 && (bar / floor - learned_fft::metrics::F32_OWN_BAR_OVER_FLOOR).abs() < 1e-12, "{row}");
    let exact = row_of(&["--exact-floor", "--scratch"], exact_dir.to_str().unwrap());
    assert_eq!((&exact["floor_source"], &exact["reached"]), (&"exact_factorization".into(), &1.into()), "{exact}");
    let (bar, floor) = (exact["bar"].as_f64().unwrap_or(0.0), exact["floor"].as_f64().unwrap_or(0.0));
    assert!(floor > 0.0 && (bar / floor - learned_fft::metrics::F32_BAR_OVER_FLOOR).abs() < 1e-12, "{exact}");
    let refused_args = with(&["--own-floor", "--to-bar", "--scratch"], dir);
    refused(&refused_args.iter().map(String::as_str).collect::<Vec<_>>(), &[], &["--own-floor", "--to-bar"]);
}

/// `bench … --anchor FILE` reads the same run's anchor JSON lines before timing anything: a
/// missing file, a file without the shape's line, and a line that is not JSON are refused naming
/// the option; with the shape's line the result carries the ratios, computed from its own
/// figures.
#[test]
fn bench_anchors_are_read_and_checked() {
    let dir = scratch("cli-anchor");
    let file = dir.join("anchor.jsonl");
    let anchor = file.to_str().unwrap();
    let bench = ["--backend", "ndarray", "bench", "butterfly", "--n", "16", "--batch", "4", "--iters", "3"];
    let with = |rest: &[&'static str]| -> Vec<&str> { bench.iter().copied().chain(rest.iter().copied()).collect() };
    refused(&with(&["--anchor", "/nonexistent/anchor.jsonl"]), &[], &["bench butterfly --anchor", "/nonexistent"]);
    let other =
        r#"{"device": "d", "n": 16, "batch": 5, "cufft_effective_GBps": 100.0, "torch_butterfly_fwdbwd_ms": 2.0}"#;
    std::fs::write(&file, format!("{other}\n")).unwrap();
    let mut args = with(&["--anchor"]);
    args.push(anchor);
    refused(&args, &[], &["bench butterfly --anchor", "n = 16, batch = 4", "none among 1 lines"]);
    let own =
        r#"{"device": "d", "n": 16, "batch": 4, "cufft_effective_GBps": 100.0, "torch_butterfly_fwdbwd_ms": 2.0}"#;
    std::fs::write(&file, format!("{other}\n{own}\n")).unwrap();
    let out = run(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    let ratio = r["anchor"]["forward_over_cufft"].as_f64().unwrap();
    assert!((ratio - r["forward_gbps"].as_f64().unwrap() / 100.0).abs() <= 1e-12 * ratio, "{r}");
    let speedup = r["anchor"]["fwd_bwd_speedup_over_torch"].as_f64().unwrap();
    assert!((speedup - 2.0 / r["fwd_bwd_ms"].as_f64().unwrap()).abs() <= 1e-12 * speedup, "{r}");
    let pipelined = r["anchor"]["fwd_bwd_pipelined_speedup_over_torch"].as_f64().unwrap();
    assert!((pipelined - 2.0 / r["fwd_bwd_pipelined_ms"].as_f64().unwrap()).abs() <= 1e-12 * pipelined, "{r}");
    std::fs::write(&file, "not json\n").unwrap();
    let spectral = ["--backend", "ndarray", "bench", "spectral", "--win", "16", "--signals", "1", "--samples", "256"];
    let mut args: Vec<&str> = spectral.to_vec();
    args.extend(["--anchor", anchor]);
    refused(&args, &[], &["bench spectral --anchor", "JSON lines"]);
}

/// `train`'s flags come from `TrainConfig::FIELDS`: every field has one (`n`, `target` and
/// `fix_gauge` under their own spelling), the help shows the config's defaults, and a value
/// outside a fixed list is refused naming the list.
#[test]
fn every_train_config_field_has_its_flag() {
    let out = run(&["train", "--help"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    for field in learned_fft::TrainConfig::FIELDS {
        let flag = match field.name {
            "fix_gauge" => "--free-gauge".to_string(),
            "snap" => "--no-snap".to_string(),
            "own_floor" => "--exact-floor".to_string(),
            name => format!("--{}", name.replace('_', "-")),
        };
        assert!(help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")), "{flag} missing: {help}");
    }
    assert!(help.contains("[default: 3000]"), "Adam's default steps, from the config: {help}");
    refused(&["train", "--model", "bogus"], &[], &["--model", "bogus", "b", "bp", "bpbp"]);
    refused(&["train", "--target", "bogus"], &[], &["--target", "dft", "circulant"]);
    refused(&["train", "--real", "--complex"], &[], &["--real", "--complex"]);
}
