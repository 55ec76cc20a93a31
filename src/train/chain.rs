//! Where a grown run's half-size runs come from: each block of attempts at N doubles one layer
//! trained at N/2 ([`HALF_REUSE`](super::HALF_REUSE)), and a new block's run at N/2 grows from
//! the layer the first block's run grew from, two sizes down, instead of training the whole
//! chain under it again.

use std::path::{Path, PathBuf};

use super::checkpoint;

/// Where a half-size run comes from: its seed and checkpoint directory, and where its own first
/// block's half-size layer comes from (`None`: it trains its own, as any run does).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct HalfSource {
    pub seed: u64,
    pub dir: Option<PathBuf>,
    pub below: Option<Box<HalfSource>>,
}

impl HalfSource {
    /// Where the half-size run (at N/2) of the block starting at attempt `block` comes from, for
    /// the run at `n` with `seed` and checkpoint directory `dir`, whose own first block's source
    /// is `given` (`None`: its own).
    ///
    /// The first block's is `given` or the run's own: seed `seed`, in [`checkpoint::half_dir`]
    /// `(N/2, 0)`. A later block's run has seed `seed + block` and its own directory, and its
    /// first block grows from the layer the first block's run grew from, two sizes down: a new
    /// block retrains the level below with new random stages, not the whole chain under it
    /// (which the first block trained, its bottom's permutation search included). The DCT-II's
    /// f64 chain to N = 1024 spent 729 of its 1387 s in the one new block it needed at 1024,
    /// 268 s of them retraining its level at 256 (H100, 2026-12-06).
    pub fn of_block(block: usize, (n, seed, dir): (usize, u64, Option<&Path>), given: Option<&HalfSource>) -> Self {
        let dir_of = |block: usize| dir.map(|d| checkpoint::half_dir(d, n / 2, block));
        let first = given.cloned().unwrap_or_else(|| HalfSource { seed, dir: dir_of(0), below: None });
        match block {
            0 => first,
            _ => HalfSource {
                seed: seed + block as u64,
                dir: dir_of(block),
                below: Some(Box::new(first.first_block(n / 4))),
            },
        }
    }

    /// The source of the half-size layer (at `n`) of this run's first block: the one given to
    /// it, or its own first block's run (its seed, in its directory).
    fn first_block(&self, n: usize) -> HalfSource {
        match &self.below {
            Some(below) => (**below).clone(),
            None => HalfSource {
                seed: self.seed,
                dir: self.dir.as_ref().map(|d| checkpoint::half_dir(d, n, 0)),
                below: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(seed: u64, dir: &Path, below: Option<HalfSource>) -> HalfSource {
        HalfSource { seed, dir: Some(dir.to_path_buf()), below: below.map(Box::new) }
    }

    /// A run at 64 (seed 5): its first block trains its own run at 32 (seed 5, `half-n32-a0`);
    /// block 3's run at 32 has seed 8 and its own directory, and grows from the first block's
    /// layer at 16 (seed 5, inside `half-n32-a0`), not from a chain of its own. Inside that run,
    /// a later block (2) grows from the layer at 8 that the first block's run at 16 grew from.
    #[test]
    fn a_later_block_grows_from_the_first_blocks_layer_two_sizes_down() {
        let d = Path::new("run");
        let (a0, a3) = (checkpoint::half_dir(d, 32, 0), checkpoint::half_dir(d, 32, 3));
        let first = HalfSource::of_block(0, (64, 5, Some(d)), None);
        assert_eq!(first, source(5, &a0, None));
        let sixteen = source(5, &checkpoint::half_dir(&a0, 16, 0), None);
        let third = HalfSource::of_block(3, (64, 5, Some(d)), None);
        assert_eq!(third, source(8, &a3, Some(sixteen.clone())));
        // The run at 32 of block 3 takes that layer as its first block's half-size run.
        assert_eq!(HalfSource::of_block(0, (32, 8, Some(&a3)), third.below.as_deref()), sixteen);
        // Its block 2: seed 10, its own directory, and the layer at 8 of the run at 16 above.
        let eight = source(5, &checkpoint::half_dir(&sixteen.dir.clone().unwrap(), 8, 0), None);
        let later = HalfSource::of_block(2, (32, 8, Some(&a3)), third.below.as_deref());
        assert_eq!(later, source(10, &checkpoint::half_dir(&a3, 16, 2), Some(eight)));
        // Without a checkpoint directory the seeds are the same and no directory is named.
        let bare = HalfSource::of_block(3, (64, 5, None), None);
        assert_eq!(
            bare,
            HalfSource { seed: 8, dir: None, below: Some(Box::new(HalfSource { seed: 5, dir: None, below: None })) }
        );
    }
}
