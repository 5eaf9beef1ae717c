//! Hashing entry points: one call per request, typed arrays in and out.

use crate::convert::{guard, invalid_arg, to_node_error};
use kvroute_core::hashing::{self, BlockHashOptions};
use napi::bindgen_prelude::{BigUint64Array, BigUint64ArraySlice, Uint32Array, Uint8Array};
use napi::Result;
use napi_derive::napi;

/// Runs `f` with the hash options of a request whose multimodal hashes arrive flattened
/// (block `i` owns `mm_hashes[mm_offsets[i] .. mm_offsets[i + 1]]`).
pub(crate) fn with_hash_options<R>(
    lora_name: Option<&str>,
    cache_namespace: Option<&str>,
    eagle: bool,
    mm_offsets: Option<&[u32]>,
    mm_hashes: Option<&[u64]>,
    f: impl FnOnce(&BlockHashOptions<'_>) -> Result<R, &'static str>,
) -> Result<R, &'static str> {
    let per_block = split_mm(mm_offsets, mm_hashes)?;
    f(&BlockHashOptions { lora_name, cache_namespace, eagle, mm_hashes: &per_block })
}

/// Local block hashes of `tokens`, written into `out`, which the caller sized to the block count
/// (a JS-allocated array is far cheaper than an external buffer with a finaliser per call).
/// Multimodal hashes arrive flattened: block `i` owns `mmHashes[mmOffsets[i] .. mmOffsets[i + 1]]`.
#[napi(js_name = "blockHashesInto")]
#[allow(clippy::too_many_arguments)]
pub fn block_hashes_into(
    tokens: &[u32],
    block_size: u32,
    lora_name: Option<String>,
    cache_namespace: Option<String>,
    eagle: bool,
    mm_offsets: Option<Uint32Array>,
    mm_hashes: Option<BigUint64Array>,
    mut out: BigUint64ArraySlice<'_>,
) -> Result<(), &'static str> {
    guard(|| {
        if out.len() != hashing::block_count(tokens.len(), block_size, eagle) {
            return Err(invalid_arg("out has the wrong length for this request"));
        }
        // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
        // touch `out` while it is written; the wrapper allocates it for this call only.
        let out = unsafe { out.as_mut() };
        with_hash_options(
            lora_name.as_deref(),
            cache_namespace.as_deref(),
            eagle,
            mm_offsets.as_deref(),
            mm_hashes.as_deref(),
            |opts| hashing::block_hashes_into(tokens, block_size, opts, out).map_err(to_node_error),
        )
    })
}

fn split_mm<'a>(offsets: Option<&'a [u32]>, hashes: Option<&'a [u64]>) -> Result<Vec<&'a [u64]>, &'static str> {
    let (Some(offsets), Some(hashes)) = (offsets, hashes) else {
        return Ok(Vec::new());
    };
    offsets
        .windows(2)
        .map(|w| {
            let (start, end) = (w[0] as usize, w[1] as usize);
            hashes.get(start..end).ok_or_else(|| invalid_arg("mmHashes offsets are out of range"))
        })
        .collect()
}

#[napi(js_name = "sequenceHashes")]
pub fn sequence_hashes(local_hashes: BigUint64Array) -> Result<BigUint64Array, &'static str> {
    guard(|| Ok(BigUint64Array::new(hashing::sequence_hashes(&local_hashes))))
}

/// XXH3-64 of raw bytes; the seed arrives as two u32 halves to avoid a BigInt per call.
#[napi(js_name = "xxh3_64")]
pub fn xxh3_64(data: Uint8Array, seed_hi: u32, seed_lo: u32) -> Result<BigUint64Array, &'static str> {
    guard(|| {
        let seed = (u64::from(seed_hi) << 32) | u64::from(seed_lo);
        Ok(BigUint64Array::new(vec![hashing::xxh3_64(&data, seed)]))
    })
}
