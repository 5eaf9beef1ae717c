//! Engine KV events as decoded from the wire, before conversion: one shape for every engine,
//! version and layout (vLLM and SGLang, array or map events, TensorRT-LLM's vLLM-wire events).
//! Hashes are already folded to u64 (see `decode.rs`); every optional field is `None` when absent
//! or nil.

/// One `extra_keys` item of a block, untagged as the engines publish them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraKey {
    /// A string: a LoRA name, a cache salt, a multimodal identifier.
    Text(String),
    /// An integer: older vLLM's `lora_int_id`.
    Int(i128),
    /// `(identifier, offset in block)`: a multimodal object in newer vLLM.
    Pair(String, i64),
    /// Bytes: a prompt-embedding digest.
    Bytes(Vec<u8>),
    /// Anything else (kept so the count of keys is right; never interpreted).
    Other,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStored {
    pub block_hashes: Vec<u64>,
    pub parent_block_hash: Option<u64>,
    /// Token ids, flattened (Eagle bigram pairs become one run, see `eagle`).
    pub token_ids: Vec<u32>,
    /// The tokens came as `[t, t+1]` bigram pairs (SGLang Eagle pages): blocks are windows of
    /// `block_size + 1` tokens.
    pub eagle: bool,
    pub block_size: u64,
    pub lora_id: Option<i128>,
    pub medium: Option<String>,
    pub lora_name: Option<String>,
    /// SGLang's salt: a map field (≥ 0.5.20) or the trailing `{"cache_salt"}` of 0.5.19 arrays.
    pub cache_salt: Option<String>,
    /// Per block: its keys, or `None`.
    pub extra_keys: Option<Vec<Option<Vec<ExtraKey>>>>,
    pub group_idx: Option<u64>,
    pub kv_cache_spec_kind: Option<String>,
    pub kv_cache_spec_sliding_window: Option<u64>,
    pub locality: Option<String>,
    pub ownership: Option<String>,
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineRemoved {
    pub block_hashes: Vec<u64>,
    pub medium: Option<String>,
    pub group_idx: Option<u64>,
    pub locality: Option<String>,
    pub ownership: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// Boxed: a store carries far more fields than the other events.
    Stored(Box<EngineStored>),
    Removed(EngineRemoved),
    Cleared {
        ownership: Option<String>,
    },
}

/// How a batch's events were laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// No events, so no layout to tell.
    Empty,
    /// Tagged arrays: vLLM ≤ 0.23, SGLang ≤ 0.5.19.
    Array,
    /// Tagged maps: vLLM ≥ 0.24, SGLang ≥ 0.5.20.
    Map,
    /// Both in one batch (no engine does this; decoded anyway).
    Mixed,
}

impl Layout {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Array => "array",
            Self::Map => "map",
            Self::Mixed => "mixed",
        }
    }
}

/// Tolerated oddities of a decoded batch: none is fatal, each is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeNotes {
    /// Events whose tag is not one of the three known ones; skipped one by one.
    pub unknown_events: u32,
    /// Map keys, trailing array elements or batch elements that were not understood.
    pub extra_fields: u32,
    /// Hashes given as bins that were not 32 bytes long (folded by their last 8 bytes).
    pub odd_length_hashes: u32,
    /// Hashes given as 32-byte bins (vLLM bytes mode), folded to the int-mode value.
    pub folded_hashes: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DecodedBatch {
    pub ts: f64,
    /// The rank the publisher wrote into the batch (nil or missing: `None`).
    pub dp_rank: Option<i64>,
    pub events: Vec<EngineEvent>,
    pub layout: Layout,
    pub notes: DecodeNotes,
}
