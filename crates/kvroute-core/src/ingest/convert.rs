//! Decoded engine events → index operations, per (worker, dp rank).
//!
//! The rules, in order (Dynamo 1.6.1's where they are sound, better where its converter fails):
//! 1. `ownership` set → `unsupported_ownership`; `locality` other than "LOCAL" →
//!    `non_local_locality`; `medium` mapped to a tier, an unknown one → `unknown_medium`.
//! 2. Lower tiers (CPU, disk, external) are counted per tier as sets of engine hashes (placeholders
//!    included), and their events go through the same rules as device ones into the index's
//!    lower tiers (`crate::tiers`), except that a block size other than the router's only
//!    filters the event (`tier_block_size_mismatch`).
//! 3. Only the main KV-cache group enters the tree: `group_idx` ≠ 0 → `non_main_group` (so a
//!    group-1 removal never touches group 0's equal hash); a non-full-attention kind →
//!    `non_main_attention_kind`, an unknown kind → `unknown_kind`.
//! 4. A store with no tokens or `block_size` 0 is a `placeholder`; a block size other than the
//!    router's is `block_size_mismatch`, reported to the caller, never silently emptied.
//! 5. Local hashes are computed from `token_ids` with kvroute's Dynamo-compatible hashing:
//!    * LoRA: `lora_name`, else `lora_id` as `"lora-id:<n>"` (vLLM 0.11 publishes only the id;
//!      Dynamo ignores it and lets LoRA blocks collide with base-model blocks);
//!    * cache namespace: SGLang's `cache_salt`; else, in `extra_keys` of the event's first block,
//!      `dynamo-cache-salt:<ns>` or a bare string that is neither the LoRA name nor a multimodal
//!      id (vLLM's own salt, which Dynamo ignores); else the parent's namespace, since vLLM
//!      salts only the first block of a prompt. A parent stored under two namespaces makes the
//!      child `ambiguous_cache_namespace`.
//!    * multimodal: `(id, offset)` pairs and bare Dynamo markers (16 hex digits + 48 zeros) give
//!      `u64(first 16 hex digits)` per block; prompt-embedding bytes → `prompt_embeds`.
//! 6. The engine hash becomes the block's external name; `parent_block_hash` links it.

use super::counters::{FilterReason, IngestCounters, Tier};
use super::types::{EngineEvent, EngineRemoved, EngineStored, ExtraKey};
use crate::hashing::{block_count, block_hashes_into, BlockHashOptions};
use crate::index::{EventData, Rank, RouterEvent, StoredBlock};
use crate::tiers::LowerTier;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// The prefix that marks a cache namespace in `extra_keys` (Dynamo's frontend convention).
pub const CACHE_SALT_PREFIX: &str = "dynamo-cache-salt:";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Namespace {
    Named(Arc<str>),
    Ambiguous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KindClass {
    Main,
    NonMain,
    Unknown,
}

fn classify_kind(kind: &str) -> KindClass {
    match kind {
        "full_attention" | "mla_attention" | "sink_full_attention" => KindClass::Main,
        "sliding_window"
        | "chunked_local_attention"
        | "mamba"
        | "cross_attention"
        | "encoder_only_attention"
        | "sliding_window_mla"
        | "mamba2"
        | "short_conv"
        | "linear_attention" => KindClass::NonMain,
        _ => KindClass::Unknown,
    }
}

/// A multimodal id as u64: Dynamo's marker (16 hex + 48 zeros) or a 64-hex vLLM identifier,
/// read as its first 16 hex digits. Anything else is not a multimodal id.
pub fn mm_hash_of(id: &str) -> Option<u64> {
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(&id[..16], 16).ok()
}

fn is_marker(id: &str) -> bool {
    mm_hash_of(id).is_some() && id[16..].bytes().all(|b| b == b'0')
}

/// What a batch did, for the caller's bookkeeping beyond the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertOutcome {
    /// `(engine block size, router block size)` of the first mismatching store.
    pub block_size_mismatch: Option<(u64, u32)>,
    /// A device store of a chain root (no parent) was handed to the index: fresh state the
    /// index can build on, which ends a resync.
    pub fresh_root_store: bool,
    /// An AllBlocksCleared was applied: the rank's state is complete again (empty).
    pub cleared: bool,
}

/// A converted event: its lower tier (`None` for device memory) and what it does.
type Converted = (Option<LowerTier>, EventData);

/// The per-(worker, dp rank) state of conversion: namespaces of salted chains, learned group
/// kinds, and the lower tiers' blocks.
#[derive(Debug, Default)]
pub struct RankConverter {
    namespaces: FxHashMap<u64, Namespace>,
    groups: FxHashMap<u64, KindClass>,
    tiers: [FxHashSet<u64>; 3],
    pub counters: IngestCounters,
}

impl RankConverter {
    /// Blocks held in each lower tier (host pinned, disk, external).
    pub fn tier_blocks(&self) -> [u64; 3] {
        [self.tiers[0].len() as u64, self.tiers[1].len() as u64, self.tiers[2].len() as u64]
    }

    /// Forgets everything of the rank (AllBlocksCleared, restart, unrecoverable gap).
    pub fn reset(&mut self) {
        self.namespaces.clear();
        self.groups.clear();
        for tier in &mut self.tiers {
            tier.clear();
        }
    }

    /// Converts one decoded batch's events into index events for `rank`, appending to `out`.
    pub fn convert(
        &mut self,
        rank: Rank,
        block_size: u32,
        event_id: u64,
        events: &[EngineEvent],
        out: &mut Vec<RouterEvent>,
    ) -> ConvertOutcome {
        let mut outcome = ConvertOutcome::default();
        for event in events {
            let converted = match event {
                EngineEvent::Stored(s) => self.stored(s, block_size, &mut outcome),
                EngineEvent::Removed(r) => self.removed(r),
                EngineEvent::Cleared { ownership: Some(_) } => {
                    self.counters.filter(FilterReason::UnsupportedOwnership);
                    None
                }
                EngineEvent::Cleared { ownership: None } => {
                    self.counters.cleared_events += 1;
                    self.reset();
                    outcome.cleared = true;
                    Some((None, EventData::Cleared))
                }
            };
            if let Some((lower_tier, data)) = converted {
                out.push(RouterEvent { rank, event_id, lower_tier, data });
            }
        }
        outcome
    }

    /// Steps 1–2: the tier of an event, or `None` when it is filtered or handled as a lower tier.
    fn gate(&mut self, ownership: &Option<String>, locality: &Option<String>, medium: &Option<String>) -> Option<Tier> {
        if ownership.is_some() {
            self.counters.filter(FilterReason::UnsupportedOwnership);
            return None;
        }
        if locality.as_deref().is_some_and(|l| l != "LOCAL") {
            self.counters.filter(FilterReason::NonLocalLocality);
            return None;
        }
        let tier = Tier::from_medium(medium.as_deref());
        if tier.is_none() {
            self.counters.filter(FilterReason::UnknownMedium);
        }
        tier
    }

    fn stored(&mut self, s: &EngineStored, block_size: u32, outcome: &mut ConvertOutcome) -> Option<Converted> {
        let tier = self.gate(&s.ownership, &s.locality, &s.medium)?;
        let lower = tier.lower_index().map(|i| LowerTier::ALL[i]);
        if let Some(i) = tier.lower_index() {
            self.counters.tier_stored[i] += s.block_hashes.len() as u64;
            self.tiers[i].extend(s.block_hashes.iter().copied());
        }
        let group = s.group_idx.unwrap_or(0);
        if let Some(kind) = s.kv_cache_spec_kind.as_deref() {
            let class = classify_kind(kind);
            self.groups.insert(group, class);
            match class {
                KindClass::Main => {}
                KindClass::NonMain => return self.filtered(FilterReason::NonMainAttentionKind),
                KindClass::Unknown => return self.filtered(FilterReason::UnknownKind),
            }
        } else if self.groups.get(&group).is_some_and(|c| *c != KindClass::Main) {
            return self.filtered(FilterReason::NonMainAttentionGroup);
        }
        if group != 0 {
            return self.filtered(FilterReason::NonMainGroup);
        }
        if s.block_size == 0 || s.token_ids.is_empty() {
            return self.filtered(FilterReason::Placeholder);
        }
        if s.block_size != u64::from(block_size) {
            if lower.is_some() {
                return self.filtered(FilterReason::TierBlockSizeMismatch);
            }
            outcome.block_size_mismatch.get_or_insert((s.block_size, block_size));
            return self.filtered(FilterReason::BlockSizeMismatch);
        }
        let keys = s.extra_keys.as_deref().unwrap_or(&[]);
        if keys.iter().flatten().flatten().any(|k| matches!(k, ExtraKey::Bytes(_))) {
            return self.filtered(FilterReason::PromptEmbeds);
        }
        let lora_id_name;
        let lora = match s.lora_name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => Some(name),
            None => match s.lora_id {
                Some(id) => {
                    lora_id_name = format!("lora-id:{id}");
                    Some(lora_id_name.as_str())
                }
                None => None,
            },
        };
        let own_salt = s
            .cache_salt
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(Arc::<str>::from)
            .or_else(|| salt_from_extra_keys(keys.first().and_then(|k| k.as_deref()), lora));
        let namespace = match own_salt {
            Some(ns) => Some(ns),
            None => match s.parent_block_hash.and_then(|p| self.namespaces.get(&p)) {
                Some(Namespace::Named(ns)) => Some(Arc::clone(ns)),
                Some(Namespace::Ambiguous) => return self.filtered(FilterReason::AmbiguousCacheNamespace),
                None => None,
            },
        };
        let mm: Vec<Vec<u64>> = keys.iter().map(|k| mm_hashes(k.as_deref().unwrap_or(&[]))).collect();
        let mm_refs: Vec<&[u64]> = mm.iter().map(Vec::as_slice).collect();
        let full = block_count(s.token_ids.len(), block_size, s.eagle);
        let count = s.block_hashes.len().min(full);
        if count < s.block_hashes.len() {
            self.counters.short_tokens += 1;
        }
        let opts = BlockHashOptions {
            lora_name: lora,
            cache_namespace: namespace.as_deref(),
            eagle: s.eagle,
            mm_hashes: &mm_refs,
        };
        let mut locals = vec![0u64; full];
        // Cannot fail: the block size was checked against the router's valid one above and
        // `locals` has exactly `block_count` entries.
        if block_hashes_into(&s.token_ids, block_size, &opts, &mut locals).is_err() {
            return self.filtered(FilterReason::BlockSizeMismatch);
        }
        for &h in &s.block_hashes[..count] {
            match (&namespace, self.namespaces.get(&h)) {
                (Some(ns), None) => {
                    self.namespaces.insert(h, Namespace::Named(Arc::clone(ns)));
                }
                (Some(ns), Some(Namespace::Named(old))) if old != ns => {
                    self.namespaces.insert(h, Namespace::Ambiguous);
                }
                (None, Some(Namespace::Named(_))) => {
                    self.namespaces.insert(h, Namespace::Ambiguous);
                }
                _ => {}
            }
        }
        if lower.is_none() {
            self.counters.stored_events += 1;
            self.counters.stored_blocks += count as u64;
            if s.parent_block_hash.is_none() && count > 0 {
                outcome.fresh_root_store = true;
            }
        }
        let blocks =
            s.block_hashes[..count].iter().zip(&locals).map(|(&ext, &local)| StoredBlock { ext, local }).collect();
        Some((lower, EventData::Stored { parent: s.parent_block_hash, blocks }))
    }

    fn removed(&mut self, r: &EngineRemoved) -> Option<Converted> {
        let tier = self.gate(&r.ownership, &r.locality, &r.medium)?;
        let lower = tier.lower_index().map(|i| LowerTier::ALL[i]);
        if let Some(i) = tier.lower_index() {
            for h in &r.block_hashes {
                if self.tiers[i].remove(h) {
                    self.counters.tier_removed[i] += 1;
                }
            }
        }
        let group = r.group_idx.unwrap_or(0);
        if self.groups.get(&group).is_some_and(|c| *c != KindClass::Main) {
            return self.filtered(FilterReason::NonMainAttentionGroup);
        }
        if group != 0 {
            return self.filtered(FilterReason::NonMainGroup);
        }
        if lower.is_some() {
            // The namespaces are the device chain's: an offload tier dropping its copy of a block
            // says nothing about the device's.
            return Some((lower, EventData::Removed { hashes: r.block_hashes.clone() }));
        }
        for h in &r.block_hashes {
            if matches!(self.namespaces.get(h), Some(Namespace::Named(_))) {
                self.namespaces.remove(h);
            }
        }
        self.counters.removed_events += 1;
        self.counters.removed_hashes += r.block_hashes.len() as u64;
        Some((None, EventData::Removed { hashes: r.block_hashes.clone() }))
    }

    fn filtered<T>(&mut self, why: FilterReason) -> Option<T> {
        self.counters.filter(why);
        None
    }
}

/// The namespace carried by a chain's first block: `dynamo-cache-salt:<ns>`, or vLLM's bare
/// salt string (not the LoRA name, which vLLM lists first, and not a multimodal id).
fn salt_from_extra_keys(first_block: Option<&[ExtraKey]>, lora: Option<&str>) -> Option<Arc<str>> {
    let mut lora_skipped = false;
    for key in first_block? {
        let ExtraKey::Text(text) = key else { continue };
        if !lora_skipped && Some(text.as_str()) == lora {
            lora_skipped = true;
            continue;
        }
        if let Some(ns) = text.strip_prefix(CACHE_SALT_PREFIX) {
            if !ns.is_empty() {
                return Some(Arc::from(ns));
            }
            continue;
        }
        if !text.is_empty() && mm_hash_of(text).is_none() {
            return Some(Arc::from(text.as_str()));
        }
    }
    None
}

fn mm_hashes(keys: &[ExtraKey]) -> Vec<u64> {
    keys.iter()
        .filter_map(|k| match k {
            ExtraKey::Pair(id, _) => mm_hash_of(id),
            ExtraKey::Text(id) if is_marker(id) => mm_hash_of(id),
            _ => None,
        })
        .collect()
}
