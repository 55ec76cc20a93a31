//! Phases 2 and 3 of the trainer: Levenberg–Marquardt ([`super::lm`]) on every twiddle until the
//! loss stops falling; then (`fix_gauge`) the gauge is fixed ([`super::gauge`]) and a second
//! stage polishes the free twiddles.

use super::gauge::{fix_gauge, gauge_mask};
use super::lm::{Polish, PolishSettings, Twiddles};
use super::run::{Run, INITIAL_LOG2_LAMBDA};
use super::state::Phase;
use crate::backend::{FftBackend, Precision};
use crate::error::{Error, Result};
use crate::tensors::{float_tensor, to_f64_vec};

/// Phase 2 of the trainer: Levenberg–Marquardt on every twiddle until the loss stops falling;
/// then (`fix_gauge`) the gauge is fixed and a second stage polishes the free twiddles. A
/// polish that stalls above the bar restarts the run from new random weights (Adam again)
/// while restarts remain.
/// Runs of short stages the f32 finish tries, longest first ([`Polish::short_stages`]): each
/// costs a polish of the rest (a few Levenberg–Marquardt steps where it gains nothing). On the
/// Hadamard transform at N = 128 the second run (every stage but the scale's) is the one.
const SNAP_RUNS: usize = 3;

/// Polish steps over which the polish's rate is measured ([`Run::crawls`]); the first window
/// is not judged (the damping starts large, and the first steps are short).
pub(super) const CRAWL_WINDOW: usize = 20;

/// How many times its remaining steps a polish may need, at its last window's rate, to reach
/// the bar before its stage is ended as crawling, as a stalled one is (the last stage's end
/// above the bar restarts the run).
/// The DST-II in BPBP at N = 64 (f64, seed 0), handed over from the search at rmse 1.25e-4, fell
/// to 9.9e-8 in 50 steps and then by 1.5 decades in 250 (3.3e-9 when its 300 steps ran out,
/// 690 s on two CPU cores), where its next attempt from random weights reached 1.9e-17 in 30
/// polish steps; the Hartley transform's (seed 1), about a decade of rmse in 20 steps from
/// 1e-4 down, reached 2.5e-17 in 282. A margin of 2 cuts the first and keeps the second.
const CRAWL_MARGIN: f64 = 2.0;

/// Whether a polish whose loss fell from `then` to `now` in `steps` steps needs, at that rate
/// (decades per step), more than [`CRAWL_MARGIN`] × `remaining` steps to reach `target`. A
/// loss at or below the target, or one that did not fall, is not crawling (the second is the
/// stall test's).
fn crawling(then: f64, now: f64, steps: usize, target: f64, remaining: usize) -> bool {
    if !(now > target && then > now && steps > 0) {
        return false;
    }
    let rate = (then / now).log10() / steps as f64;
    (now / target).log10() / rate > CRAWL_MARGIN * remaining as f64
}

impl<B: FftBackend> Run<'_, B> {
    /// Runs the polish phase to its end (nothing happens if the run is not in it).
    pub(super) fn polish(&mut self) -> Result<()> {
        if self.state.phase != Phase::Polish {
            return Ok(());
        }
        let settings = PolishSettings {
            cg_iters: self.cfg.cg_iters,
            cg_tol: self.cfg.cg_tol,
            stop_loss: self.cfg.stop_rmse.map_or(0.0, |s| s * s),
            max_stalled: self.cfg.max_stalled,
            patient: false,
        };
        let (stopped, loss) = loop {
            let (stopped, loss) = self.polish_stage(&settings)?;
            let more = self.cfg.fix_gauge && !self.state.gauge_fixed && !stopped;
            if !more || self.state.attempt_step >= self.cfg.polish_iters || !self.enter_fixed_gauge() {
                break (stopped, loss);
            }
        };
        // Where the floor is the run's own solution's (a user's target in f32, or `own_floor`),
        // it is found here, from the solution nearest this end (none near: missed). A polish that stalled above the bar ended in a local minimum: start
        // again from new random weights while restarts remain.
        self.refine_floor()?;
        let rmse = loss.sqrt();
        let missed = match (self.refine, &self.own_solution) {
            (Some(_), None) => true,
            _ => self.device_bar().is_some_and(|bar| rmse.is_nan() || rmse > bar),
        };
        if !stopped && missed && self.state.attempt < self.cfg.restarts {
            self.restart(self.state.attempt + 1)
        } else {
            self.state.phase = Phase::Done;
            Ok(())
        }
    }

    /// One stage from the layer's twiddles (only the free ones once the gauge is fixed) until
    /// it stalls, reaches `stop_loss` or uses up `polish_iters`; the layer takes the result.
    /// Returns whether the loss reached `stop_loss`, and the loss of the twiddles it leaves.
    fn polish_stage(&mut self, settings: &PolishSettings) -> Result<(bool, f64)> {
        // The stage that ends the polish: gauge-fixed, or the only one.
        let settings = &PolishSettings { patient: self.state.gauge_fixed || !self.cfg.fix_gauge, ..*settings };
        let theta = self.twiddles();
        let n = self.cfg.n;
        let mask = if self.state.gauge_fixed {
            let (re, im) = (to_f64_vec(theta.re.clone()), to_f64_vec(theta.im.clone()));
            float_tensor::<B::InnerBackend, 4>(
                gauge_mask(&re, &im, n, &self.class.learned),
                theta.re.dims(),
                self.device,
            )
        } else {
            float_tensor::<B::InnerBackend, 4>(self.class.stage_mask(n), theta.re.dims(), self.device)
        };
        let mask = Twiddles::masks(mask, self.class.real);
        let objective = self.inner_objective.clone();
        let perms = self.perms.clone();
        let mut polish = Polish::<B>::new(&objective, &perms, theta, mask, self.state.log2_lambda, self.state.stalled);
        if !polish.loss.is_finite() {
            return Err(Error::Diverged { what: "loss", value: polish.loss, step: self.state.step });
        }
        self.levenberg_marquardt(&mut polish, settings, false)?;
        let f32_grid = self.state.gauge_fixed && Precision::of::<B>() == Precision::F32;
        let room = self.state.attempt_step < self.cfg.polish_iters;
        if self.cfg.snap && f32_grid && room && polish.loss > settings.stop_loss {
            self.finish_on_the_grid(&mut polish, settings)?;
        }
        self.keep(&polish);
        Ok((polish.loss <= settings.stop_loss, polish.loss))
    }

    /// The f32 finish (`TrainConfig::snap`): runs of the stages whose twiddles are short
    /// fractions to within a few ulps ([`Polish::short_stages`]), the longest first, set to them
    /// and fixed, and the rest polished again; the first run that ends below the loss before it
    /// is kept, and where none does the twiddles go back. Setting a run and going back each
    /// count as one step, recorded, so every record has a step of its own.
    fn finish_on_the_grid(&mut self, polish: &mut Polish<'_, B>, settings: &PolishSettings) -> Result<()> {
        self.snapping = true;
        let finished = self.try_short_runs(polish, settings);
        self.snapping = false;
        finished
    }

    /// [`Run::finish_on_the_grid`]'s runs, with no checkpoint written (`Run::snapping`).
    fn try_short_runs(&mut self, polish: &mut Polish<'_, B>, settings: &PolishSettings) -> Result<()> {
        let short = polish.short_stages();
        let before = polish.save_point();
        for run in (1..=short.len()).rev().take(SNAP_RUNS) {
            let free = polish.fix_short(&short[..run]);
            self.state.step += 1;
            self.state.attempt_step += 1;
            self.report(polish.loss, None)?;
            if free {
                polish.log2_lambda = INITIAL_LOG2_LAMBDA;
                self.levenberg_marquardt(polish, settings, true)?;
            }
            if polish.loss < before.loss() {
                return Ok(());
            }
            polish.restore(before.clone());
            self.state.step += 1;
            self.state.attempt_step += 1;
            self.report(polish.loss, None)?;
        }
        Ok(())
    }

    /// Levenberg–Marquardt steps until the polish is done or `polish_iters` are used up,
    /// logging and checkpointing as it goes (`logged`: the first step already has its record).
    fn levenberg_marquardt(
        &mut self,
        polish: &mut Polish<'_, B>,
        settings: &PolishSettings,
        logged: bool,
    ) -> Result<()> {
        let mut first = true;
        loop {
            let done =
                polish.done(settings) || self.state.attempt_step >= self.cfg.polish_iters || self.crawls(polish.loss);
            if self.logs(done) && !(first && logged) {
                self.report(polish.loss, None)?;
            }
            first = false;
            if done {
                break;
            }
            if self.checkpoint_due() {
                self.keep(polish);
                self.save()?;
            }
            self.stop_if_asked()?;
            polish.step(settings);
            self.state.step += 1;
            self.state.attempt_step += 1;
        }
        Ok(())
    }

    /// Whether the polish crawls ([`CRAWL_MARGIN`]): the stage ends, as one that stalls does
    /// (the first stage gives way to the gauge-fixed one, and the f32 finish still follows the
    /// last). Judged at the end of each window of [`CRAWL_WINDOW`] polish steps but the first
    /// (of the attempt's polish), against the bar as the device measures it
    /// (none where the floor is found at the attempt's end: then never); opens the next window.
    /// A resumed run, which computes the step of its checkpoint again, finds the window it
    /// opened there. Not in the f32 finish, whose steps set stages to short fractions.
    fn crawls(&mut self, loss: f64) -> bool {
        let at = self.state.attempt_step;
        if self.state.crawled || self.snapping || !at.is_multiple_of(CRAWL_WINDOW) {
            return self.state.crawled;
        }
        let opened = self.state.crawl_window.replace((at, loss));
        let Some((from, then)) = opened.filter(|&(from, _)| from < at && at >= 2 * CRAWL_WINDOW) else {
            return false;
        };
        let Some(bar) = self.device_bar() else { return false };
        let remaining = self.cfg.polish_iters.saturating_sub(at);
        self.state.crawled = crawling(then, loss, at - from, bar * bar, remaining);
        self.state.crawled
    }

    /// The layer and the state take the stage's twiddles and damping.
    fn keep(&mut self, polish: &Polish<'_, B>) {
        self.state.log2_lambda = polish.log2_lambda;
        self.state.stalled = polish.stalled;
        self.set_twiddles(polish.theta.clone());
    }

    /// Moves the layer to the fixed gauge (the product unchanged) and resets the damping;
    /// `false` where the twiddles cannot be gauge-fixed (a first column near zero).
    fn enter_fixed_gauge(&mut self) -> bool {
        let theta = self.twiddles();
        let dims = theta.re.dims();
        let (re, im) = (to_f64_vec(theta.re), to_f64_vec(theta.im));
        let Some((re, im)) = fix_gauge(&re, &im, self.cfg.n, &self.perms, &self.class.learned) else { return false };
        let on_device = |v: Vec<f64>| float_tensor::<B::InnerBackend, 4>(v, dims, self.device);
        self.set_twiddles(Twiddles { re: on_device(re), im: on_device(im) });
        self.state.gauge_fixed = true;
        self.state.stalled = 0;
        // A crawl ends a stage, as a stall does: the gauge-fixed stage is judged afresh.
        self.state.crawled = false;
        self.state.crawl_window = None;
        self.state.log2_lambda = INITIAL_LOG2_LAMBDA;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::crawling;

    /// The crawl test cuts a polish whose rate would take it past its steps and keeps one that
    /// gets there, with the rmse trajectories measured (see `CRAWL_MARGIN`); a loss under the
    /// target, or one that did not fall, is never crawling.
    #[test]
    fn a_polish_crawls_only_where_its_rate_misses_its_remaining_steps() {
        let target = 1e-28; // f64's bar, 1e-14, as a loss
                            // The DST-II's: 1.5 decades of rmse in 250 steps, from 9.9e-8, 240 steps left.
        let (then, now) = (9.9e-8f64, 9.9e-8 * 10f64.powf(-1.5 * 20.0 / 250.0));
        assert!(crawling(then * then, now * now, 20, target, 240));
        // Hartley's: a decade of rmse in 20 steps, from 2.8e-9, 220 steps left.
        assert!(!crawling(2.8e-9f64.powi(2), 2.8e-10f64.powi(2), 20, target, 220));
        // The same rate with 40 steps left: it needs about 89 (9 decades of loss at 0.1 a
        // step), more than twice 40: cut.
        assert!(crawling(2.8e-9f64.powi(2), 2.8e-10f64.powi(2), 20, target, 40));
        assert!(!crawling(1e-27, 1e-29, 20, target, 0), "under the target");
        assert!(!crawling(1e-20, 1e-20, 20, target, 0), "no fall: the stall test's");
        assert!(!crawling(1e-20, 2e-20, 20, target, 0), "a rise: the stall test's");
    }
}
