//! Phase 1: Adam from random weights, with Burn's cosine learning-rate decay, until the rmse
//! reaches `switch_rmse` (or `stop_rmse`) or has taken `adam_steps`; the polish follows, and a
//! polish that stalls above the bar restarts the run from new random weights, `restarts` times
//! at most.

use burn::lr_scheduler::LrScheduler;
use burn::optim::{GradientsParams, Optimizer};

use super::objective::scalar;
use super::run::Run;
use super::state::Phase;
use crate::backend::FftBackend;
use crate::error::{Error, Result};

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

    /// One step: the loss, the phase switch, the checkpoint, the update.
    fn adam_step(&mut self) -> Result<()> {
        let (tw_re, tw_im) = self.layer.stacked_twiddles();
        let loss = self.objective.loss(&tw_re, &tw_im, &self.perms);
        let value = scalar(loss.clone());
        if !value.is_finite() {
            return Err(Error::Diverged { what: "loss", value, step: self.state.step });
        }
        let rmse = value.sqrt();
        let lr = self.cfg.lr * self.schedule.step();
        let stop = rmse <= self.cfg.stop_rmse.unwrap_or(0.0);
        let switching = rmse <= self.cfg.switch_rmse || stop;
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
