//! Block and sequence hashing, bit-compatible with Dynamo's kv-router.
//!
//! Dynamo names a KV block two ways. The *local* hash identifies the block's own tokens (and
//! LoRA / cache namespace / multimodal content); it is what the router's radix tree is keyed
//! by. The *sequence* hash chains the local hashes so that it identifies the block together with
//! everything before it. Engines publish their own opaque sequence hashes; the router only needs
//! to compute local hashes for queries, and sequence hashes for its own predictions.
//!
//! The scheme, fixed by compatibility:
//! * a block's bytes are its tokens as u32 little-endian, followed by its multimodal hashes
//!   (sorted ascending) as u64 little-endian;
//! * `local = xxh3_64(bytes, salt)` with `salt = 1337 (+ xxh3(lora, 0)) (+ xxh3(namespace, 1))`,
//!   wrapping, where empty names count as absent;
//! * only full blocks are hashed; eagle mode uses windows of `block_size + 1` tokens that overlap
//!   by one token;
//! * `seq[0] = local[0]`, `seq[i] = xxh3_64(le64(seq[i-1]) ‖ le64(local[i]), 1337)`.

use crate::KvError;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of every block hash without LoRA or namespace, and of the sequence-hash chain.
pub const XXH3_SEED: u64 = 1337;

/// Largest accepted block size in tokens. Engines use 16 to 512; the bound only exists so that a
/// corrupted argument fails loudly instead of silently hashing nothing.
pub const MAX_BLOCK_SIZE: u32 = 1 << 20;

/// What besides the tokens goes into a block's local hash.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockHashOptions<'a> {
    pub lora_name: Option<&'a str>,
    pub cache_namespace: Option<&'a str>,
    /// EAGLE speculative decoding: windows of `block_size + 1` tokens overlapping by one.
    pub eagle: bool,
    /// Multimodal hashes per block (index = block index). Blocks past the end, and empty
    /// entries, hash as plain text.
    pub mm_hashes: &'a [&'a [u64]],
}

/// XXH3-64 of arbitrary bytes with a full 64-bit seed.
pub fn xxh3_64(data: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(data, seed)
}

/// The seed of a request's block hashes: 1337 mixed with its LoRA and cache namespace.
/// The namespace is mixed with seed 1 so that a namespace "x" never collides with a LoRA "x".
pub fn salt_hash(lora_name: Option<&str>, cache_namespace: Option<&str>) -> u64 {
    let mut salt = XXH3_SEED;
    if let Some(lora) = lora_name.filter(|s| !s.is_empty()) {
        salt = salt.wrapping_add(xxh3_64_with_seed(lora.as_bytes(), 0));
    }
    if let Some(ns) = cache_namespace.filter(|s| !s.is_empty()) {
        salt = salt.wrapping_add(xxh3_64_with_seed(ns.as_bytes(), 1));
    }
    salt
}

/// Checks a block size against the documented domain.
pub fn validate_block_size(block_size: u32) -> Result<(), KvError> {
    if block_size == 0 || block_size > MAX_BLOCK_SIZE {
        return Err(KvError::invalid_arg(format!(
            "blockSize must be an integer in [1, {MAX_BLOCK_SIZE}], got {block_size}"
        )));
    }
    Ok(())
}

/// Number of full blocks (windows) that `token_count` tokens yield.
pub fn block_count(token_count: usize, block_size: u32, eagle: bool) -> usize {
    let bs = block_size as usize;
    if eagle {
        token_count.saturating_sub(1) / bs
    } else {
        token_count / bs
    }
}

/// Local hashes of every full block of `tokens`, in one pass.
pub fn block_hashes(tokens: &[u32], block_size: u32, opts: &BlockHashOptions<'_>) -> Result<Vec<u64>, KvError> {
    validate_block_size(block_size)?;
    let mut out = vec![0; block_count(tokens.len(), block_size, opts.eagle)];
    block_hashes_into(tokens, block_size, opts, &mut out)?;
    Ok(out)
}

/// [`block_hashes`] into a caller-provided slice of exactly [`block_count`] entries.
pub fn block_hashes_into(
    tokens: &[u32],
    block_size: u32,
    opts: &BlockHashOptions<'_>,
    out: &mut [u64],
) -> Result<(), KvError> {
    validate_block_size(block_size)?;
    let count = block_count(tokens.len(), block_size, opts.eagle);
    if out.len() != count {
        return Err(KvError::invalid_arg(format!("output holds {} hashes, the request has {count} blocks", out.len())));
    }
    let salt = salt_hash(opts.lora_name, opts.cache_namespace);
    let stride = block_size as usize;
    let window = if opts.eagle { stride + 1 } else { stride };
    let mut scratch = Vec::new();
    for (i, slot) in out.iter_mut().enumerate() {
        let chunk = &tokens[i * stride..i * stride + window];
        let mm = opts.mm_hashes.get(i).copied().unwrap_or(&[]);
        *slot = hash_block(chunk, mm, salt, &mut scratch);
    }
    Ok(())
}

fn hash_block(tokens: &[u32], mm_hashes: &[u64], salt: u64, scratch: &mut Vec<u8>) -> u64 {
    if mm_hashes.is_empty() {
        if let Some(bytes) = tokens_as_le_bytes(tokens) {
            return xxh3_64_with_seed(bytes, salt);
        }
    }
    scratch.clear();
    scratch.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    let mut sorted = mm_hashes.to_vec();
    sorted.sort_unstable();
    scratch.extend(sorted.iter().flat_map(|h| h.to_le_bytes()));
    xxh3_64_with_seed(scratch, salt)
}

/// On little-endian targets the in-memory layout of `&[u32]` already is the hashed byte string,
/// which saves a copy per block on the hot path.
#[cfg(target_endian = "little")]
fn tokens_as_le_bytes(tokens: &[u32]) -> Option<&[u8]> {
    // Safety: u8 has alignment 1 and no invalid bit patterns; the byte slice covers exactly the
    // memory of `tokens` (len * 4 bytes) and borrows it for the same lifetime.
    Some(unsafe { std::slice::from_raw_parts(tokens.as_ptr().cast::<u8>(), std::mem::size_of_val(tokens)) })
}

#[cfg(not(target_endian = "little"))]
fn tokens_as_le_bytes(_tokens: &[u32]) -> Option<&[u8]> {
    None
}

/// The sequence hash of the block after `prev`, whose local hash is `local`.
pub fn next_sequence_hash(prev: u64, local: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&prev.to_le_bytes());
    bytes[8..].copy_from_slice(&local.to_le_bytes());
    xxh3_64_with_seed(&bytes, XXH3_SEED)
}

/// Chains local hashes into sequence hashes.
pub fn sequence_hashes(local_hashes: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(local_hashes.len());
    let mut prev = None;
    for &local in local_hashes {
        let seq = prev.map_or(local, |p| next_sequence_hash(p, local));
        out.push(seq);
        prev = Some(seq);
    }
    out
}
