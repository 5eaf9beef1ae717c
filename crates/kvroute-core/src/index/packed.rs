//! The packed columnar event layout that crosses the Node boundary in one call per batch, and
//! that benchmark workloads are stored in.
//!
//! `meta` holds 4 u32 per event: kind, dp rank, flags, count. `words` holds per event: worker id,
//! event id, the parent when flagged, then `count` (block_hash, tokens_hash) pairs for a Stored or
//! `count` hashes for a Removed. The TypeScript validator writes it (`ts/events/packed.ts`).
//! Flags: bit 0 a parent follows; bit 1 the device tier; otherwise bits 2-3 name the lower tier
//! (0 host pinned, 1 disk, 2 external).

use super::event::{EventData, Rank, RouterEvent, StoredBlock};
use super::tree::DumpedStore;
use crate::tiers::LowerTier;
use crate::KvError;

pub const KIND_STORED: u32 = 0;
pub const KIND_REMOVED: u32 = 1;
pub const KIND_CLEARED: u32 = 2;
pub const FLAG_HAS_PARENT: u32 = 1;
pub const FLAG_DEVICE_TIER: u32 = 2;
/// Where a lower tier's index sits in the flags.
pub const LOWER_TIER_SHIFT: u32 = 2;

/// Decodes a packed batch; a malformed layout is an `ERR_INVALID_ARG`.
pub fn decode(meta: &[u32], words: &[u64]) -> Result<Vec<RouterEvent>, KvError> {
    let malformed = || KvError::invalid_arg("packed event batch is malformed");
    if !meta.len().is_multiple_of(4) {
        return Err(malformed());
    }
    let mut events = Vec::with_capacity(meta.len() / 4);
    let mut w = 0usize;
    let mut take = |n: usize| -> Result<&[u64], KvError> {
        let out = words.get(w..w + n).ok_or_else(malformed)?;
        w += n;
        Ok(out)
    };
    for m in meta.chunks_exact(4) {
        let (kind, dp_rank, flags, count) = (m[0], m[1], m[2], m[3] as usize);
        let head = take(2)?;
        let rank = Rank::new(head[0], dp_rank);
        let event_id = head[1];
        let data = match kind {
            KIND_STORED => {
                let parent = if flags & FLAG_HAS_PARENT != 0 { Some(take(1)?[0]) } else { None };
                let pairs = take(2 * count)?;
                let blocks = pairs.chunks_exact(2).map(|p| StoredBlock { ext: p[0], local: p[1] }).collect();
                EventData::Stored { parent, blocks }
            }
            KIND_REMOVED => EventData::Removed { hashes: take(count)?.to_vec() },
            KIND_CLEARED => EventData::Cleared,
            _ => return Err(malformed()),
        };
        let lower_tier = if flags & FLAG_DEVICE_TIER != 0 {
            None
        } else {
            Some(*LowerTier::ALL.get(((flags >> LOWER_TIER_SHIFT) & 3) as usize).ok_or_else(malformed)?)
        };
        events.push(RouterEvent { rank, event_id, lower_tier, data });
    }
    if w != words.len() {
        return Err(malformed());
    }
    Ok(events)
}

/// Encodes a dump in the same layout (every event a Stored of its tier, event ids 0).
pub fn encode_dump(dump: &[DumpedStore]) -> (Vec<u32>, Vec<u64>) {
    let mut meta = Vec::with_capacity(dump.len() * 4);
    let mut words = Vec::new();
    for d in dump {
        let tier = d.lower_tier.map_or(FLAG_DEVICE_TIER, |t| (t.index() as u32) << LOWER_TIER_SHIFT);
        let flags = tier | if d.parent.is_some() { FLAG_HAS_PARENT } else { 0 };
        meta.extend([KIND_STORED, d.rank.dp_rank, flags, d.blocks.len() as u32]);
        words.extend([d.rank.worker_id, 0]);
        words.extend(d.parent);
        words.extend(d.blocks.iter().flat_map(|b| [b.ext, b.local]));
    }
    (meta, words)
}
