//! An engine rank's speculative decode steps (MTP, EAGLE) as Dynamo's mocker models them: room
//! for every decoding request's longest burst before the step, then each request's burst drawn
//! (`speculative.rs` samples it). The Rust twin of the same methods in `ts/replay/engine.ts`.

use super::{Engine, SimRequest};

impl Engine {
    /// Blocks the decoding requests need beyond those they hold for their longest bursts.
    fn burst_blocks_needed(&self, reqs: &[SimRequest]) -> u64 {
        let (bs, max_burst) = (self.config.block_size, self.config.speculative.max_burst());
        self.decode
            .iter()
            .map(|&uid| &reqs[uid as usize])
            .map(|r| (r.context() + max_burst).div_ceil(bs).saturating_sub(r.held.len() as u64 + u64::from(r.partial)))
            .sum()
    }

    /// Before a speculative decode step, room for every decoding request's longest burst, as
    /// Dynamo reserves it: the newest running requests are preempted until it fits. The step's
    /// decode time then counts only the requests left.
    pub(super) fn reserve_bursts(&mut self, reqs: &mut [SimRequest]) {
        let free = |e: &Self| e.config.num_gpu_blocks.saturating_sub(e.cache.used() as u64);
        while !self.decode.is_empty() && self.burst_blocks_needed(reqs) > free(self) {
            if self.preempt(reqs, None).is_none() {
                break;
            }
        }
    }

    /// A speculative decode step of `uid` (its `first` after prefill, or a later one; room was
    /// reserved): the burst is drawn and its tokens' KV kept. Returns the burst's length.
    pub(super) fn speculative_step(&mut self, reqs: &mut [SimRequest], uid: u32, first: bool) -> u64 {
        let r = &mut reqs[uid as usize];
        let sampler = self.bursts.as_mut().expect("a speculative engine has a sampler");
        let drawn = sampler.burst();
        // As Dynamo's accept length: decode-only steps (not the one finishing a prefill).
        if !first {
            self.decode_steps += 1;
            self.drawn_tokens += drawn;
        }
        let burst = drawn.min(r.output_length.saturating_sub(r.generated)).max(1);
        // The step computed the KV of the last token and of the drafts accepted; the token it
        // sampled last is computed by the next step, as without speculation.
        let context = r.context();
        let covered = self.ensure(r, context + burst - 1);
        debug_assert!(covered, "room for the longest burst was reserved");
        burst
    }
}
