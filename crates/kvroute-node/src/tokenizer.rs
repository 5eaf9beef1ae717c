//! `NativeTokenizer`: a model's `tokenizer.json` (kvroute-core's `tokenize`), with an encode that
//! runs on libuv's thread pool so a long prompt never holds up the JavaScript thread.

use crate::convert::{coded, guard, to_node_error};
use kvroute_core::tokenize::TextTokenizer;
use napi::bindgen_prelude::{AsyncTask, Either, Uint32Array};
use napi::{Env, Result, Task};
use napi_derive::napi;
use std::sync::Arc;

#[napi]
pub struct NativeTokenizer {
    inner: Arc<TextTokenizer>,
}

#[napi]
impl NativeTokenizer {
    /// Reads a `tokenizer.json` document (its text).
    #[napi(constructor)]
    pub fn new(json: String) -> Result<Self, &'static str> {
        guard(|| TextTokenizer::from_json(&json).map(|t| Self { inner: Arc::new(t) }).map_err(to_node_error))
    }

    /// The token ids of `text`, on the calling thread.
    #[napi]
    pub fn encode(&self, text: String, add_special_tokens: bool) -> Result<Uint32Array, &'static str> {
        guard(|| self.inner.encode(&text, add_special_tokens).map(Uint32Array::new).map_err(to_node_error))
    }

    /// The id of `token` in the vocabulary, added tokens included; `null` when it has none.
    #[napi(js_name = "tokenToId")]
    pub fn token_to_id(&self, token: String) -> Option<u32> {
        self.inner.token_to_id(&token)
    }

    /// The token ids of `text`, computed on the thread pool. Resolves to the ids, or to
    /// "CODE: message" (an async task can only reject with napi's generic status, so the code
    /// travels as data).
    #[napi(js_name = "encodeAsync")]
    pub fn encode_async(&self, text: String, add_special_tokens: bool) -> AsyncTask<EncodeTask> {
        AsyncTask::new(EncodeTask { tokenizer: Arc::clone(&self.inner), text, add_special_tokens })
    }
}

pub struct EncodeTask {
    tokenizer: Arc<TextTokenizer>,
    text: String,
    add_special_tokens: bool,
}

impl Task for EncodeTask {
    type Output = std::result::Result<Vec<u32>, String>;
    type JsValue = Either<Uint32Array, String>;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(coded(|| self.tokenizer.encode(&self.text, self.add_special_tokens)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(match output {
            Ok(ids) => Either::A(Uint32Array::new(ids)),
            Err(message) => Either::B(message),
        })
    }
}
