//! A terminal progress display for training (indicatif), shared by the CLI and the example.

use indicatif::{ProgressBar, ProgressStyle};

use learned_fft::backend::Selected;
use learned_fft::train::{Observer, Phase, Progress, TrainConfig};

/// Shows step, phase, loss, rmse and floor on one live line (on stderr).
pub struct ProgressLine {
    bar: ProgressBar,
}

impl Default for ProgressLine {
    fn default() -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        ProgressLine { bar }
    }
}

impl ProgressLine {
    /// Clears the line (call before printing results).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Observer for ProgressLine {
    fn start(&mut self, selected: &Selected, config: &TrainConfig, start_step: usize) {
        let from = if start_step > 0 { format!(", resuming at step {start_step}") } else { String::new() };
        self.bar.println(format!(
            "training a butterfly: N = {}, target {:?}, {selected}, seed {}{from}",
            config.n, config.target, config.seed
        ));
    }

    fn finding_floor(&mut self, selected: &Selected) {
        self.bar.println(format!("finding the f32 floor: the layer polished on in f64 ({selected})"));
    }

    fn progress(&mut self, p: &Progress) {
        let floor = p.floor.map(|f| format!(" floor {f:.2e} ({:.2}×)", p.rmse / f)).unwrap_or_default();
        let phase = match p.phase {
            // The f64 polish that finds an f32 attempt's own floor counts its own steps.
            _ if p.finding_floor => "floor (f64 polish)".to_string(),
            Phase::Adam => format!("adam#{}", p.attempt),
            Phase::Polish => "polish".to_string(),
            Phase::Done => "done".to_string(),
        };
        self.bar.set_message(format!("step {:>5} {phase:<7} loss {:.3e} rmse {:.3e}{floor}", p.step, p.loss, p.rmse));
        self.bar.tick();
    }
}
