//! Where a grown run's half-size runs come from: each block of attempts at N doubles one layer
//! trained at N/2 ([`HALF_REUSE`](super::HALF_REUSE)). Blocks alternate ([`Block::anchor`]):
//! one trains the chain under its half-size run, its bottom's permutation search included; the
//! next grows its run at N/2 from that block's layer two sizes down, so it retrains one level,
//! not the whole chain; the next trains a chain of its own again, with a new seed.

use std::path::{Path, PathBuf};

use super::attempt::Block;
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
    /// Where the half-size run (at N/2) of `block` comes from, for the run at `n` with `seed` and
    /// checkpoint directory `dir`, whose own first block's source is `given` (`None`: its own).
    ///
    /// The first block's is `given` or the run's own: seed `seed`, in [`checkpoint::half_dir`]
    /// `(N/2, 0)`. A later block's run has seed `seed + block.start` and its own directory. Where
    /// the block is its own anchor, that run trains its own chain; otherwise its first block
    /// grows from the layer the anchor's run grew from, two sizes down, and retrains only the
    /// level below with new random stages. The DCT-II's f64 chain to N = 1024 spent 729 of its
    /// 1387 s in the one new block it needed at 1024, 268 s of them retraining its level at 256
    /// (H100, 2026-12-06); growing every block from the first block's layer left every DCT-II run
    /// at 128 stalled ([`Block::anchor`]).
    pub fn of_block(block: Block, (n, seed, dir): (usize, u64, Option<&Path>), given: Option<&HalfSource>) -> Self {
        let own = |start: usize| HalfSource {
            seed: seed + start as u64,
            dir: dir.map(|d| checkpoint::half_dir(d, n / 2, start)),
            below: None,
        };
        let anchor = match (block.anchor, given) {
            (0, Some(given)) => given.clone(),
            (start, _) => own(start),
        };
        if block.start == block.anchor {
            return anchor;
        }
        HalfSource { below: Some(Box::new(anchor.first_block(n / 4))), ..own(block.start) }
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

    fn block(start: usize, anchor: usize) -> Block {
        Block { start, anchor }
    }

    /// A run at 64 (seed 5): its first block trains its own run at 32 (seed 5, `half-n32-a0`);
    /// block 3's run at 32 has seed 8 and its own directory, and grows from the first block's
    /// layer at 16 (seed 5, inside `half-n32-a0`), not from a chain of its own. Inside that run,
    /// a later block (2) grows from the layer at 8 that the first block's run at 16 grew from.
    /// Block 6 trains a chain of its own (seed 11), and block 9 grows from its layer at 16.
    #[test]
    fn blocks_alternate_between_their_own_chain_and_the_block_befores_layer() {
        let d = Path::new("run");
        let (a0, a3) = (checkpoint::half_dir(d, 32, 0), checkpoint::half_dir(d, 32, 3));
        let first = HalfSource::of_block(block(0, 0), (64, 5, Some(d)), None);
        assert_eq!(first, source(5, &a0, None));
        let sixteen = source(5, &checkpoint::half_dir(&a0, 16, 0), None);
        let third = HalfSource::of_block(block(3, 0), (64, 5, Some(d)), None);
        assert_eq!(third, source(8, &a3, Some(sixteen.clone())));
        // The run at 32 of block 3 takes that layer as its first block's half-size run.
        assert_eq!(HalfSource::of_block(block(0, 0), (32, 8, Some(&a3)), third.below.as_deref()), sixteen);
        // Its block 2: seed 10, its own directory, and the layer at 8 of the run at 16 above.
        let eight = source(5, &checkpoint::half_dir(&sixteen.dir.clone().unwrap(), 8, 0), None);
        let later = HalfSource::of_block(block(2, 0), (32, 8, Some(&a3)), third.below.as_deref());
        assert_eq!(later, source(10, &checkpoint::half_dir(&a3, 16, 2), Some(eight)));
        // Its block 4 is its own anchor: a chain of its own, nothing given.
        let own = HalfSource::of_block(block(4, 4), (32, 8, Some(&a3)), third.below.as_deref());
        assert_eq!(own, source(12, &checkpoint::half_dir(&a3, 16, 4), None));
        // Blocks 6 and 9 of the run at 64: a new chain, then its layer at 16.
        let a6 = checkpoint::half_dir(d, 32, 6);
        assert_eq!(HalfSource::of_block(block(6, 6), (64, 5, Some(d)), None), source(11, &a6, None));
        let sixteen_of_six = source(11, &checkpoint::half_dir(&a6, 16, 0), None);
        let ninth = HalfSource::of_block(block(9, 6), (64, 5, Some(d)), None);
        assert_eq!(ninth, source(14, &checkpoint::half_dir(d, 32, 9), Some(sixteen_of_six)));
        // Without a checkpoint directory the seeds are the same and no directory is named.
        let bare = HalfSource::of_block(block(3, 0), (64, 5, None), None);
        assert_eq!(
            bare,
            HalfSource { seed: 8, dir: None, below: Some(Box::new(HalfSource { seed: 5, dir: None, below: None })) }
        );
    }
}
