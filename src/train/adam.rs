//! Phase 1: Adam from random weights, with Burn's cosine learning-rate decay, until the rmse
//! reaches `switch_rmse` (or `stop_rmse`), a product's loss (or one butterfly's under the
//! real-output map) stops falling (by less than [`PLATEAU_GAIN`] over `plateau_steps`), or the
//! attempt has taken `adam_steps`; the polish follows, and a polish that stalls above the bar
//! restarts the run from new random weights, `restarts` times at most.

use burn::lr_scheduler::LrScheduler;
use burn::optim::{GradientsParams, Optimizer};

use super::objective::scalar;
use super::run::Run;
use super::state::Phase;
use crate::backend::FftBackend;
use crate::error::{Error, Result};

/// The least relative fall of Adam's loss over `plateau_steps` steps that keeps Adam going.
/// Measured on the circulant (BPBP, N = 8…16, f32): an attempt in a spurious minimum falls by
/// 0.3 % over its third window of 250 steps at rmse 0.15, one that leads to the target by a
/// factor of 7 or more per window.
pub const PLATEAU_GAIN: f64 = 0.01;

impl<B: FftBackend> Run<'_, B> {
    /// Runs the Adam phase to its end (nothing happens if the run is past it).
    pub(super) fn adam(&mut self) -> Result<()> {
        while self.state.phase == Phase::Adam {
            if self.state.attempt_step >= self.cfg.adam_steps {
                self.attempt_over()?;
            } else {
                self.adam_step()?;
            }
        }
        Ok(())
    }

    /// The attempt used its steps: the polish takes what Adam has (Gauss–Newton converges
    /// from where Adam crawls); a polish that stalls above the bar restarts the run.
    fn attempt_over(&mut self) -> Result<()> {
        self.state.phase = Phase::Polish;
        self.state.attempt_step = 0;
        Ok(())
    }

    /// Whether Adam's loss `value` at this step closes a window of `plateau_steps` in which it
    /// fell by less than [`PLATEAU_GAIN`]; opens the next window (a resumed run, which computes
    /// the step of its checkpoint again, finds the window it opened there).
    fn plateaued(&mut self, value: f64) -> bool {
        let (window, at) = (self.cfg.plateau_steps, self.state.attempt_step);
        // One butterfly fitted to a complex target has no spurious minima to leave; its Adam
        // phase can be flat for a while at large N (the DFT at N = 4096), which the test would
        // take for one. Under the real-output map one butterfly has them: the DCT-II at N = 32
        // with its permutation given stalled at rmse 0.012–0.031 in 24 of 26 seeds, falling
        // by less than 1 % a window from step 1000–1750 on, where the two that led to the
        // target fell by orders of magnitude in the first window.
        let one_complex = self.perms.len() == 1 && !self.objective.real_output();
        if window == 0 || one_complex || !at.is_multiple_of(window) {
            return false;
        }
        match self.state.plateau_window {
            Some((start, _)) if start == at => false,
            previous => {
                self.state.plateau_window = Some((at, value));
                previous.is_some_and(|(start, w)| start + window == at && value > (1.0 - PLATEAU_GAIN) * w)
            }
        }
    }

    /// One step: the loss, the phase switch, the checkpoint, the update.
    fn adam_step(&mut self) -> Result<()> {
        let (tw_re, tw_im) = self.layer.stacked_twiddles();
        let batch = self.objective.minibatch(self.state.attempt_step, self.cfg.batch_size);
        let loss = batch.loss(&tw_re, &tw_im, &self.perms);
        let value = scalar(loss.clone());
        if !value.is_finite() {
            return Err(Error::Diverged { what: "loss", value, step: self.state.step });
        }
        let rmse = value.sqrt();
        let lr = self.cfg.lr * self.schedule.step();
        let stop = rmse <= self.cfg.stop_rmse.unwrap_or(0.0);
        let switching = rmse <= self.cfg.switch_rmse || stop || self.plateaued(value);
        if self.logs(switching) {
            self.report(value, Some(lr))?;
        }
        if switching {
            self.state.phase = if stop { Phase::Done } else { Phase::Polish };
            self.state.attempt_step = 0;
            return Ok(());
        }
        if self.checkpoint_due() {
            self.save()?;
        }
        self.stop_if_asked()?;
        let grads = self.mask_fixed(GradientsParams::from_grads(loss.backward(), &self.layer));
        self.layer = self.optim.step(lr, self.layer.clone(), grads);
        self.state.step += 1;
        self.state.attempt_step += 1;
        Ok(())
    }
}
