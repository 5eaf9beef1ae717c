//! The `NativeRouterCore` class: kvroute-core's `RouterCore` over a `NativeKvIndex`. One call
//! per request returns every candidate's figures; the cost and the choice are computed in
//! TypeScript.

use crate::convert::{guard, invalid_arg, to_node_error};
use crate::hashing::with_hash_options;
use crate::index::{u64_arg, NativeKvIndex};
use kvroute_core::hashing;
use kvroute_core::index::{KvIndex, Rank};
use kvroute_core::routing::RouterCore;
use napi::bindgen_prelude::{BigInt, BigUint64Array, Float64Array, Float64ArraySlice, Uint32Array};
use napi::Result;
use napi_derive::napi;
use std::sync::Arc;

/// Figures per candidate in `score`'s output: overlap, tree size, active prefill tokens, active
/// blocks, new blocks, active requests.
const FIGURES: usize = 8;

#[napi]
pub struct NativeRouterCore {
    index: Arc<KvIndex>,
    core: RouterCore,
}

fn handle_arg(handle: f64) -> Result<u64, &'static str> {
    if !(handle >= 0.0 && handle.fract() == 0.0 && handle < 9_007_199_254_740_992.0) {
        return Err(invalid_arg("request handle must be a non-negative safe integer"));
    }
    Ok(handle as u64)
}

#[napi]
impl NativeRouterCore {
    #[napi(constructor)]
    pub fn new(index: &NativeKvIndex) -> Self {
        Self { index: Arc::clone(&index.inner), core: RouterCore::default() }
    }

    /// Hashes a request, matches it and reads each candidate's load: `FIGURES` numbers per
    /// candidate into `out`. Returns the request's block count.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn score(
        &mut self,
        handle: f64,
        tokens: &[u32],
        block_size: u32,
        lora_name: Option<String>,
        cache_namespace: Option<String>,
        eagle: bool,
        mm_offsets: Option<Uint32Array>,
        mm_hashes: Option<BigUint64Array>,
        candidate_workers: &[u64],
        candidate_ranks: &[u32],
        now_ms: f64,
        assume_kv_reuse: bool,
        mut out: Float64ArraySlice<'_>,
    ) -> Result<u32, &'static str> {
        guard(|| {
            let handle = handle_arg(handle)?;
            if candidate_workers.len() != candidate_ranks.len() || out.len() < FIGURES * candidate_ranks.len() {
                return Err(invalid_arg("candidate arrays and output do not match"));
            }
            let locals = with_hash_options(
                lora_name.as_deref(),
                cache_namespace.as_deref(),
                eagle,
                mm_offsets.as_deref(),
                mm_hashes.as_deref(),
                |opts| hashing::block_hashes(tokens, block_size, opts).map_err(to_node_error),
            )?;
            let candidates: Vec<Rank> =
                candidate_workers.iter().zip(candidate_ranks.iter()).map(|(&w, &r)| Rank::new(w, r)).collect();
            let block_count = locals.len() as u32;
            let figures = self
                .core
                .score(&self.index, handle, locals, &candidates, now_ms, assume_kv_reuse)
                .map_err(to_node_error)?;
            // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
            // touch `out` while it is written; the wrapper owns it and never exposes it.
            let out = unsafe { out.as_mut() };
            for (i, f) in figures.iter().enumerate() {
                out[FIGURES * i..FIGURES * (i + 1)].copy_from_slice(&[
                    f64::from(f.overlap),
                    f64::from(f.tree_size),
                    f.load.active_prefill_tokens as f64,
                    f.load.active_blocks as f64,
                    f.load.new_blocks as f64,
                    f.load.requests as f64,
                    f64::from(f.lower.host_pinned),
                    f64::from(f.lower.disk + f.lower.external),
                ]);
            }
            Ok(block_count)
        })
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn book(
        &mut self,
        handle: f64,
        worker_id: BigInt,
        dp_rank: u32,
        prefill_tokens: f64,
        track_blocks: bool,
        now_ms: f64,
        predict_until_ms: Option<f64>,
    ) -> Result<(), &'static str> {
        guard(|| {
            let rank = Rank::new(u64_arg(&worker_id, "workerId")?, dp_rank);
            self.core
                .book(
                    &self.index,
                    handle_arg(handle)?,
                    rank,
                    prefill_tokens as u64,
                    track_blocks,
                    now_ms,
                    predict_until_ms,
                )
                .map_err(to_node_error)
        })
    }

    /// Books a request another router replica routed (see `RouterCore::book_remote`).
    #[napi(js_name = "bookRemote")]
    #[allow(clippy::too_many_arguments)]
    pub fn book_remote(
        &mut self,
        handle: f64,
        worker_id: BigInt,
        dp_rank: u32,
        blocks: &[u64],
        unshared: u32,
        prefill_tokens: f64,
        now_ms: f64,
    ) -> Result<(), &'static str> {
        guard(|| {
            let rank = Rank::new(u64_arg(&worker_id, "workerId")?, dp_rank);
            if !(prefill_tokens >= 0.0 && prefill_tokens.fract() == 0.0 && prefill_tokens < 9_007_199_254_740_992.0) {
                return Err(invalid_arg("prefillTokens must be a non-negative safe integer"));
            }
            self.core
                .book_remote(
                    handle_arg(handle)?,
                    rank,
                    blocks.to_vec(),
                    unshared as usize,
                    prefill_tokens as u64,
                    now_ms,
                )
                .map_err(to_node_error)
        })
    }

    /// The block identities a booked request holds (empty when unknown or untracked).
    #[napi(js_name = "bookedBlocks")]
    pub fn booked_blocks(&self, handle: f64) -> Result<BigUint64Array, &'static str> {
        guard(|| Ok(BigUint64Array::new(self.core.booked_blocks(handle_arg(handle)?).to_vec())))
    }

    /// For the scored requests whose handles fill `group[..count]`, the leading blocks of each
    /// that another accounts for (see `RouterCore::shared_leading_blocks`), written over their
    /// handles: a buffer the caller reuses, so a batch's routing allocates nothing here.
    #[napi(js_name = "sharedLeadingBlocks")]
    pub fn shared_leading_blocks(&self, mut group: Float64ArraySlice<'_>, count: u32) -> Result<(), &'static str> {
        guard(|| {
            // Safety: this call runs synchronously on the JavaScript thread, so no JavaScript can
            // touch the buffer while it is borrowed here.
            let group = unsafe { group.as_mut() };
            let group = group.get_mut(..count as usize).ok_or_else(|| invalid_arg("count exceeds the group buffer"))?;
            let handles = group.iter().map(|&h| handle_arg(h)).collect::<Result<Vec<_>, _>>()?;
            let shared = self.core.shared_leading_blocks(&handles).map_err(to_node_error)?;
            for (slot, blocks) in group.iter_mut().zip(shared) {
                *slot = f64::from(blocks);
            }
            Ok(())
        })
    }

    #[napi]
    pub fn discard(&mut self, handle: f64) -> Result<(), &'static str> {
        guard(|| {
            self.core.discard(handle_arg(handle)?);
            Ok(())
        })
    }

    #[napi(js_name = "prefillCompleted")]
    pub fn prefill_completed(&mut self, handle: f64) -> Result<bool, &'static str> {
        guard(|| Ok(self.core.prefill_completed(handle_arg(handle)?)))
    }

    #[napi]
    pub fn free(&mut self, handle: f64) -> Result<bool, &'static str> {
        guard(|| Ok(self.core.free(handle_arg(handle)?)))
    }

    /// Adds `count` output blocks to a booked request, then decays its own blocks to `decay`
    /// when given (see kvroute-core's `ActiveLoad::add_output_blocks`); false when unknown.
    #[napi(js_name = "addOutputBlocks")]
    pub fn add_output_blocks(&mut self, handle: f64, count: u32, decay: Option<f64>) -> Result<bool, &'static str> {
        guard(|| self.core.add_output_blocks(handle_arg(handle)?, count, decay).map_err(to_node_error))
    }

    #[napi]
    pub fn touch(&mut self, handle: f64, now_ms: f64) -> Result<bool, &'static str> {
        guard(|| Ok(self.core.touch(handle_arg(handle)?, now_ms)))
    }

    /// Frees requests booked before `cutoff_ms`; returns their handles.
    #[napi]
    pub fn expire(&mut self, cutoff_ms: f64) -> Result<Vec<f64>, &'static str> {
        guard(|| Ok(self.core.expire(cutoff_ms).into_iter().map(|h| h as f64).collect()))
    }

    #[napi(js_name = "removeWorker")]
    pub fn remove_worker(&mut self, worker_id: BigInt) -> Result<Vec<f64>, &'static str> {
        guard(|| Ok(self.core.remove_worker(u64_arg(&worker_id, "workerId")?).into_iter().map(|h| h as f64).collect()))
    }

    /// Per rank with in-flight requests: worker ids, and (dp rank, prefill tokens, blocks,
    /// requests) quadruples.
    #[napi]
    pub fn snapshot(&self) -> Result<NativeLoadSnapshot, &'static str> {
        guard(|| {
            let snap = self.core.snapshot();
            Ok(NativeLoadSnapshot {
                workers: BigUint64Array::new(snap.iter().map(|(r, _)| r.worker_id).collect()),
                figures: Float64Array::new(
                    snap.iter()
                        .flat_map(|(r, f)| {
                            [
                                f64::from(r.dp_rank),
                                f.active_prefill_tokens as f64,
                                f.active_blocks as f64,
                                f64::from(f.requests),
                            ]
                        })
                        .collect(),
                ),
            })
        })
    }
}

#[napi(object)]
pub struct NativeLoadSnapshot {
    pub workers: BigUint64Array,
    pub figures: Float64Array,
}
