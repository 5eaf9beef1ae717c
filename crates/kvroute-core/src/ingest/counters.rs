//! What ingestion did with every batch and event it saw, per (worker, dp rank). Nothing is
//! dropped silently: each filtered event is counted under its reason, each tolerated oddity
//! under its own name, each undecodable batch as a decode error with the first message kept.

/// Why an engine event did not reach the device index (labels follow Dynamo's where it has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterReason {
    /// `ownership` names a secondary offload tier (e.g. "kvcr"); kvroute does not model cache owners.
    UnsupportedOwnership,
    /// `locality` is not "LOCAL" (REMOTE, or an unknown spelling).
    NonLocalLocality,
    /// `medium` is none of the known tier names.
    UnknownMedium,
    /// `kv_cache_spec_kind` is a known kind other than full attention (sliding window, mamba, …).
    NonMainAttentionKind,
    /// `kv_cache_spec_kind` is a string kvroute does not know.
    UnknownKind,
    /// A removal in a group learned to be non-main.
    NonMainAttentionGroup,
    /// `group_idx` ≠ 0: only the main KV-cache group is indexed.
    NonMainGroup,
    /// A store whose parent was stored under two cache namespaces: its own namespace is unknowable.
    AmbiguousCacheNamespace,
    /// A device store with no tokens or block_size 0 (offload bookkeeping).
    Placeholder,
    /// The engine's block size differs from the router's: the source is marked failed.
    BlockSizeMismatch,
    /// Blocks keyed by prompt embeddings (bytes in `extra_keys`): their content is not in the tokens.
    PromptEmbeds,
    /// A lower tier's store whose block size differs from the router's (an offload tier may use
    /// larger blocks): its blocks cannot line up with a request's, so they are not indexed. The
    /// source is not failed for it.
    TierBlockSizeMismatch,
}

impl FilterReason {
    pub const ALL: [FilterReason; 12] = [
        Self::UnsupportedOwnership,
        Self::NonLocalLocality,
        Self::UnknownMedium,
        Self::NonMainAttentionKind,
        Self::UnknownKind,
        Self::NonMainAttentionGroup,
        Self::NonMainGroup,
        Self::AmbiguousCacheNamespace,
        Self::Placeholder,
        Self::BlockSizeMismatch,
        Self::PromptEmbeds,
        Self::TierBlockSizeMismatch,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnsupportedOwnership => "unsupported_ownership",
            Self::NonLocalLocality => "non_local_locality",
            Self::UnknownMedium => "unknown_medium",
            Self::NonMainAttentionKind => "non_main_attention_kind",
            Self::UnknownKind => "unknown_kind",
            Self::NonMainAttentionGroup => "non_main_attention_group",
            Self::NonMainGroup => "non_main_group",
            Self::AmbiguousCacheNamespace => "ambiguous_cache_namespace",
            Self::Placeholder => "placeholder",
            Self::BlockSizeMismatch => "block_size_mismatch",
            Self::PromptEmbeds => "prompt_embeds",
            Self::TierBlockSizeMismatch => "tier_block_size_mismatch",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Storage tiers below device memory, as `medium` names them; kept per tier so tier-aware
/// scoring can use them later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Device,
    HostPinned,
    Disk,
    External,
}

impl Tier {
    /// Dynamo's medium → tier table (exact, case-sensitive); `None` for an unknown medium.
    pub fn from_medium(medium: Option<&str>) -> Option<Tier> {
        Some(match medium.unwrap_or("") {
            "" | "GPU" | "DEVICE" => Tier::Device,
            "CPU" | "CPU_PINNED" | "CPU_TIER1" => Tier::HostPinned,
            "CPU_TIER2" | "DISK" | "NVME" | "STORAGE" => Tier::Disk,
            "EXTERNAL" | "NETWORK" | "REMOTE" | "SHARED" => Tier::External,
            _ => return None,
        })
    }

    /// Position among the lower tiers (device has none).
    pub const fn lower_index(self) -> Option<usize> {
        match self {
            Tier::Device => None,
            Tier::HostPinned => Some(0),
            Tier::Disk => Some(1),
            Tier::External => Some(2),
        }
    }

    pub const LOWER: [Tier; 3] = [Tier::HostPinned, Tier::Disk, Tier::External];

    pub const fn as_str(self) -> &'static str {
        match self {
            Tier::Device => "device",
            Tier::HostPinned => "host_pinned",
            Tier::Disk => "disk",
            Tier::External => "external",
        }
    }
}

/// Counters of one (worker, dp rank), or of several summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestCounters {
    /// Batches decoded and applied (an undecodable batch counts under `decode_errors` only).
    pub batches: u64,
    pub stored_events: u64,
    pub removed_events: u64,
    pub cleared_events: u64,
    /// Device blocks handed to the index by Stored events.
    pub stored_blocks: u64,
    /// Device hashes handed to the index by Removed events.
    pub removed_hashes: u64,
    /// Per lower tier (host pinned, disk, external): blocks stored and removed.
    pub tier_stored: [u64; 3],
    pub tier_removed: [u64; 3],
    /// Per [`FilterReason`], in `FilterReason::ALL` order.
    pub filtered: [u64; FilterReason::ALL.len()],
    /// Events with an unknown tag, skipped one by one.
    pub unknown_events: u64,
    /// Unknown map keys and extra positional elements (tolerated).
    pub extra_fields: u64,
    /// 32-byte hashes folded to u64, and hashes of other byte lengths folded the same way.
    pub folded_hashes: u64,
    pub odd_length_hashes: u64,
    /// Stores with fewer tokens than their hashes need: the blocks after the short one are dropped.
    pub short_tokens: u64,
    /// Batches whose own dp rank differs from the socket's (the socket's wins).
    pub dp_rank_mismatches: u64,
    pub decode_errors: u64,
    pub first_decode_error: Option<String>,
}

impl IngestCounters {
    pub fn filter(&mut self, why: FilterReason) {
        self.filtered[why.index()] += 1;
    }

    pub fn filtered_by(&self, why: FilterReason) -> u64 {
        self.filtered[why.index()]
    }

    pub fn decode_error(&mut self, message: &str) {
        self.decode_errors += 1;
        self.first_decode_error.get_or_insert_with(|| message.to_owned());
    }

    /// Adds `other` into `self` (the first decode error kept is the earliest one seen here).
    pub fn add(&mut self, other: &IngestCounters) {
        self.batches += other.batches;
        self.stored_events += other.stored_events;
        self.removed_events += other.removed_events;
        self.cleared_events += other.cleared_events;
        self.stored_blocks += other.stored_blocks;
        self.removed_hashes += other.removed_hashes;
        for i in 0..3 {
            self.tier_stored[i] += other.tier_stored[i];
            self.tier_removed[i] += other.tier_removed[i];
        }
        for (a, b) in self.filtered.iter_mut().zip(other.filtered) {
            *a += b;
        }
        self.unknown_events += other.unknown_events;
        self.extra_fields += other.extra_fields;
        self.folded_hashes += other.folded_hashes;
        self.odd_length_hashes += other.odd_length_hashes;
        self.short_tokens += other.short_tokens;
        self.dp_rank_mismatches += other.dp_rank_mismatches;
        self.decode_errors += other.decode_errors;
        if self.first_decode_error.is_none() {
            self.first_decode_error.clone_from(&other.first_decode_error);
        }
    }
}
