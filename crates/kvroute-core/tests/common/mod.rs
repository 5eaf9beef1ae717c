//! Helpers shared by the core's tests: event builders, a deliberately simple reference model of
//! the index, and a seeded generator.
#![allow(dead_code)]

pub mod model;
pub mod rng;

use kvroute_core::hashing::sequence_hashes;
use kvroute_core::index::{EventData, Rank, RouterEvent, StoredBlock};

pub fn rank(worker_id: u64, dp_rank: u32) -> Rank {
    Rank::new(worker_id, dp_rank)
}

/// Names blocks like Dynamo-instrumented engines do: the sequence hash of the locals so far,
/// XORed with `salt` so tests can give ranks different names for the same path.
pub fn names(prefix: &[u64], locals: &[u64], salt: u64) -> Vec<u64> {
    let all: Vec<u64> = prefix.iter().chain(locals).copied().collect();
    sequence_hashes(&all)[prefix.len()..].iter().map(|h| h ^ salt).collect()
}

pub fn event(r: Rank, data: EventData) -> RouterEvent {
    RouterEvent { rank: r, event_id: 0, lower_tier: None, data }
}

/// Stores `locals` after `prefix` (which the rank must hold), named per [`names`].
pub fn store(r: Rank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    store_salted(r, prefix, locals, 0)
}

pub fn store_salted(r: Rank, prefix: &[u64], locals: &[u64], salt: u64) -> RouterEvent {
    let parent = (!prefix.is_empty()).then(|| names(&[], prefix, salt)[prefix.len() - 1]);
    let blocks =
        locals.iter().zip(names(prefix, locals, salt)).map(|(&local, ext)| StoredBlock { ext, local }).collect();
    event(r, EventData::Stored { parent, blocks })
}

/// Removes the blocks at `path[..len]` for each given `len`, named per [`names`].
pub fn remove(r: Rank, path: &[u64], lens: &[usize]) -> RouterEvent {
    let all = names(&[], path, 0);
    event(r, EventData::Removed { hashes: lens.iter().map(|&l| all[l - 1]).collect() })
}

pub fn cleared(r: Rank) -> RouterEvent {
    event(r, EventData::Cleared)
}
