//! Pictures: every PNG the CLI and the examples write exists, decodes, has its documented size
//! and is not blank; bad data is refused with the figure's name.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use crate::common::scratch;
use learned_fft::plot::{self, Spectrogram, CURVE_FILE, ERROR_FILE, TWIDDLES_FILE};
use learned_fft::Error;

const EXE: &str = env!("CARGO_BIN_EXE_learned-fft");

/// Fewest distinct colours a drawn figure has (white, black, text antialiasing, a colour map or
/// series colours); a blank or single-colour picture has fewer.
const MIN_COLOURS: usize = 16;

/// Decodes a PNG and checks its size and that something was drawn.
fn check_png(path: &Path, size: (u32, u32)) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut pixels).expect("PNG data");
    assert_eq!((info.width, info.height), size, "{}", path.display());
    assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
    let colours: HashSet<&[u8]> = pixels[..info.buffer_size()].chunks(3).collect();
    assert!(colours.len() >= MIN_COLOURS, "{}: only {} colours", path.display(), colours.len());
    assert!(!learned_fft::files::temporary(path).exists(), "no temporary file left");
}

/// Runs the binary on ndarray and returns its last stdout line, as JSON.
fn on_ndarray(args: &[&str]) -> serde_json::Value {
    let out = Command::new(EXE)
        .args(["--backend", "ndarray"])
        .args(args)
        .env_remove("LEARNED_FFT_BACKEND")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string();
    serde_json::from_str(&last).expect("a JSON line")
}

/// `learned-fft plot` of `checkpoint` into `out`: its report.
fn plot_command(checkpoint: &Path, out: &Path) -> serde_json::Value {
    on_ndarray(&["plot", "--checkpoint", checkpoint.to_str().unwrap(), "--out", out.to_str().unwrap()])["plot"].clone()
}

#[test]
fn plot_draws_a_trained_checkpoint() {
    let dir = scratch("trained");
    let run = dir.join("run");
    let trained =
        on_ndarray(&["train", "--n", "16", "--seed", "1", "--quiet", "--checkpoint-dir", run.to_str().unwrap()]);
    let trained_rmse = trained["train"]["rmse"].as_f64().expect("rmse");
    let pics = dir.join("pictures");
    let report = &plot_command(&run.join("checkpoint.lfft"), &pics);
    assert_eq!(report["written"].as_array().map(Vec::len), Some(3), "{report}");
    assert_eq!(report["skipped"].as_array().map(Vec::len), Some(0), "{report}");
    // The error picture is of the layer eval measures.
    assert_eq!(report["rmse"].as_f64(), Some(trained_rmse));
    check_png(&pics.join(CURVE_FILE), plot::CURVE_SIZE);
    check_png(&pics.join(ERROR_FILE), plot::MATRIX_SIZE);
    check_png(&pics.join(TWIDDLES_FILE), plot::TWIDDLES_SIZE);
}

#[test]
fn plot_of_a_checkpoint_without_records_skips_the_curve_and_says_why() {
    let pics = scratch("shipped");
    // Written before checkpoints kept progress records.
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dft-n8-f32-old-format.lfft");
    let report = &plot_command(Path::new(shipped), &pics);
    let skipped = report["skipped"].to_string();
    assert!(skipped.contains(CURVE_FILE) && skipped.contains("no progress records"), "{report}");
    assert!(!pics.join(CURVE_FILE).exists());
    check_png(&pics.join(ERROR_FILE), plot::MATRIX_SIZE);
    check_png(&pics.join(TWIDDLES_FILE), plot::TWIDDLES_SIZE);
}

#[test]
fn spectrograms_and_taps_are_drawn_at_their_documented_sizes() {
    let dir = scratch("examples");
    // A chirp-like pattern: one bright bin per frame, moving up.
    let (frames, bins) = (40, 33);
    let spec = |gain: f64| {
        let values =
            (0..frames * bins).map(|i| if i % bins == (i / bins) * bins / frames { gain } else { 1e-3 }).collect();
        Spectrogram::new(frames, bins, values).expect("a spectrogram")
    };
    let path = dir.join("spectrograms.png");
    plot::spectrograms(&path, &spec(1.0), &spec(0.9), "target and prediction").expect("drawn");
    check_png(&path, plot::SPECTROGRAM_SIZE);
    let truth: Vec<f64> = (0..16).map(|k| (k as f64 * 0.4).sin()).collect();
    let learned: Vec<f64> = truth.iter().map(|t| t * 0.98).collect();
    let path = dir.join("taps.png");
    plot::taps(&path, &truth, &learned, "taps").expect("drawn");
    check_png(&path, plot::TAPS_SIZE);
}

#[test]
fn bad_picture_data_is_refused_naming_the_figure() {
    let dir = scratch("bad");
    let invalid = |r: learned_fft::Result<()>, op: &str, part: &str| match r {
        Err(e @ Error::InvalidInput { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(op) && msg.contains(part), "{msg}");
        }
        other => panic!("expected an invalid-input error from {op}, got {other:?}"),
    };
    invalid(plot::taps(dir.join("t.png"), &[1.0, 2.0], &[1.0], "t").map(|_| ()), "plot.taps", "got 1");
    invalid(plot::taps(dir.join("t.png"), &[1.0, f64::NAN], &[1.0, 2.0], "t"), "plot.taps", "NaN at index 1");
    match Spectrogram::new(3, 4, vec![0.0; 11]) {
        Err(e) => assert!(e.to_string().contains("3 × 4 values") && e.to_string().contains("got 11 values"), "{e}"),
        Ok(_) => panic!("a spectrogram of the wrong length was accepted"),
    }
    invalid(plot::training_curve(dir.join("c.png"), &[], "c"), "plot.curve", "none");
    invalid(plot::twiddle_magnitudes(dir.join("w.png"), 12, &[], &[], "w"), "plot.twiddles", "12");
    assert!(!dir.join("t.png").exists() && !dir.join("c.png").exists(), "nothing written for bad data");
}
