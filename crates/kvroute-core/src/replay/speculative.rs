//! Speculative decoding (MTP, EAGLE) as Dynamo's mocker models it (`aic_nextn`,
//! `aic_nextn_accept_rates`): each decode forward verifies `draft_tokens` drafted tokens, and
//! a sequence emits the sampled token plus every leading draft accepted, so a step yields 1 to
//! `draft_tokens + 1` tokens. Draft `i` is accepted with probability `accept_rates[i]` given that
//! every draft before it was, drawn from a seeded generator per rank. The Rust twin of
//! `ts/replay/speculative.ts`: the same generator (mulberry32, the library's PRNG) and the same
//! draws in the same order, so both backends sample the same bursts.

use crate::error::KvError;

/// The most draft tokens a step verifies (Dynamo's mocker accepts `aic_nextn` in 1..=5).
pub const MAX_DRAFT_TOKENS: usize = 5;

/// Speculative decoding knobs; `draft_tokens` 0 turns it off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Speculative {
    pub draft_tokens: u32,
    /// Conditional acceptance rate of each draft (entries past `draft_tokens` are unused).
    pub accept_rates: [f64; MAX_DRAFT_TOKENS],
    /// Seeds rank `i`'s generator with `seed + i` (wrapping at 2^32).
    pub seed: u32,
}

impl Speculative {
    pub fn enabled(&self) -> bool {
        self.draft_tokens > 0
    }

    /// The most tokens one decode step can emit.
    pub fn max_burst(&self) -> u64 {
        u64::from(self.draft_tokens) + 1
    }

    pub fn validate(&self) -> Result<(), KvError> {
        if self.draft_tokens as usize > MAX_DRAFT_TOKENS {
            return Err(KvError::invalid_arg(format!(
                "speculative draftTokens must be an integer in 1..={MAX_DRAFT_TOKENS}, got {}",
                self.draft_tokens
            )));
        }
        if let Some(bad) = self.accept_rates.iter().find(|r| !(r.is_finite() && (0.0..=1.0).contains(*r))) {
            return Err(KvError::invalid_arg(format!("speculative acceptRates must be numbers in [0, 1], got {bad}")));
        }
        Ok(())
    }
}

/// One rank's draws.
pub(crate) struct BurstSampler {
    spec: Speculative,
    state: u32,
}

impl BurstSampler {
    pub fn new(spec: Speculative, rank: u32) -> Self {
        Self { spec, state: spec.seed.wrapping_add(rank) }
    }

    /// Uniform in [0, 1): mulberry32, as `SeededRandom.next` in `ts/random.ts`.
    fn next(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x6d2b_79f5);
        let mut t = self.state;
        t = (t ^ (t >> 15)).wrapping_mul(t | 1);
        t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
        f64::from(t ^ (t >> 14)) / 4_294_967_296.0
    }

    /// Tokens one decode step emits: the sampled one plus the drafts accepted before the first
    /// rejection. A rate of 1 always accepts and 0 never does.
    pub fn burst(&mut self) -> u64 {
        let mut tokens = 1;
        for i in 0..self.spec.draft_tokens as usize {
            if self.next() >= self.spec.accept_rates[i] {
                break;
            }
            tokens += 1;
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rates: &[f64]) -> Speculative {
        let mut accept_rates = [0.0; MAX_DRAFT_TOKENS];
        accept_rates[..rates.len()].copy_from_slice(rates);
        Speculative { draft_tokens: rates.len() as u32, accept_rates, seed: 42 }
    }

    #[test]
    fn rates_of_zero_and_one_are_exact() {
        let mut all = BurstSampler::new(spec(&[1.0, 1.0, 1.0]), 0);
        let mut none = BurstSampler::new(spec(&[0.0, 1.0]), 0);
        let mut first = BurstSampler::new(spec(&[1.0, 0.0, 1.0]), 0);
        for _ in 0..100 {
            assert_eq!(all.burst(), 4);
            assert_eq!(none.burst(), 1);
            assert_eq!(first.burst(), 2);
        }
    }

    #[test]
    fn mean_burst_is_the_conditional_expectation() {
        let mut sampler = BurstSampler::new(spec(&[0.7, 0.5, 0.2]), 3);
        let n = 200_000;
        let mean = (0..n).map(|_| sampler.burst() as f64).sum::<f64>() / n as f64;
        let expected = 1.0 + 0.7 + 0.7 * 0.5 + 0.7 * 0.5 * 0.2;
        assert!((mean - expected).abs() < 0.01, "mean {mean}, expected {expected}");
    }

    #[test]
    fn ranks_draw_different_streams() {
        let (mut a, mut b) = (BurstSampler::new(spec(&[0.5, 0.5]), 0), BurstSampler::new(spec(&[0.5, 0.5]), 1));
        let left: Vec<u64> = (0..64).map(|_| a.burst()).collect();
        let right: Vec<u64> = (0..64).map(|_| b.burst()).collect();
        assert_ne!(left, right);
    }

    #[test]
    fn bad_knobs_are_refused() {
        assert!(Speculative { draft_tokens: 6, ..spec(&[0.5]) }.validate().is_err());
        for bad in [-0.1, 1.1, f64::NAN, f64::INFINITY] {
            assert!(spec(&[0.5, bad]).validate().is_err());
        }
        assert!(spec(&[0.85, 0.3]).validate().is_ok());
    }
}
