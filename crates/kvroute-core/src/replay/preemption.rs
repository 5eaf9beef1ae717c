//! Which running request a simulated rank preempts when its KV blocks run out (Dynamo's mocker
//! `preemption_mode`), the twin of `ts/replay/preemption.ts` (read there for the model).
//! Preemption is vLLM's recompute preemption: the victim's blocks go back to the pool (into the
//! prefix cache) and it waits at the front of the queue.

use super::request::SimRequest;

/// Which end of the running order goes first. The running order is the order requests left the
/// queue, as in vLLM's `running` list: a request restarted after a preemption is the newest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreemptionMode {
    /// The newest running request (vLLM's rule, Dynamo's default).
    #[default]
    Lifo,
    /// The oldest running request (Dynamo's alternative).
    Fifo,
}

/// The running request (of `running`) to preempt so that `current`, which needs blocks, can go
/// on; `current` is `None` when a step reserves room for all its decodes at once. LIFO: the
/// newest admitted after `current`, so the oldest always makes progress (`None` when there is
/// none: then `current` itself yields, the caller's move). FIFO: the oldest, `current` included.
pub(crate) fn preemption_victim(
    mode: PreemptionMode,
    running: impl Iterator<Item = u32>,
    reqs: &[SimRequest],
    current: Option<u32>,
) -> Option<u32> {
    let seq = |uid: u32| reqs[uid as usize].admitted_seq;
    let mut victim: Option<u32> = None;
    for x in running {
        let better = match mode {
            PreemptionMode::Fifo => victim.is_none_or(|v| seq(x) < seq(v)),
            PreemptionMode::Lifo => current.is_none_or(|c| seq(x) > seq(c)) && victim.is_none_or(|v| seq(x) > seq(v)),
        };
        if better {
            victim = Some(x);
        }
    }
    victim
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(seqs: &[u64]) -> Vec<SimRequest> {
        seqs.iter()
            .enumerate()
            .map(|(uid, &admitted_seq)| SimRequest { uid: uid as u32, admitted_seq, ..SimRequest::default() })
            .collect()
    }

    #[test]
    fn lifo_takes_the_newest_admitted_after_the_current_request() {
        let reqs = running(&[3, 1, 4, 2]);
        let all = || 0..4u32;
        assert_eq!(preemption_victim(PreemptionMode::Lifo, all(), &reqs, None), Some(2));
        assert_eq!(preemption_victim(PreemptionMode::Lifo, all(), &reqs, Some(1)), Some(2));
        // The newest never preempts: it yields.
        assert_eq!(preemption_victim(PreemptionMode::Lifo, all(), &reqs, Some(2)), None);
    }

    #[test]
    fn fifo_takes_the_oldest_the_current_request_included() {
        let reqs = running(&[3, 1, 4, 2]);
        let all = || 0..4u32;
        assert_eq!(preemption_victim(PreemptionMode::Fifo, all(), &reqs, Some(2)), Some(1));
        assert_eq!(preemption_victim(PreemptionMode::Fifo, all(), &reqs, Some(1)), Some(1));
        assert_eq!(preemption_victim(PreemptionMode::Fifo, std::iter::empty(), &reqs, None), None);
    }
}
