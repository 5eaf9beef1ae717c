//! Text to token ids with a model's `tokenizer.json`, for a gateway that routes on the tokens an
//! engine will see without asking the engine.
//!
//! This is Hugging Face's own `tokenizers` crate, the library that vLLM's and SGLang's fast
//! tokenizers run, so the ids are the engine's for the same text. The pure-JS backend reads the
//! same file with tokenizers.js, a separate implementation: a differential test compares the two.
//! Hugging Face's reader is about ten times faster than tokenizers.js on a 4,096-byte prompt, and
//! the binding runs it off the JavaScript thread, where a long prompt would otherwise hold up
//! every other request of the gateway.
//!
//! A `tokenizer.json` may carry truncation and padding settings; both are switched off here, as
//! transformers does for vLLM: the engine sees the whole prompt, so routing must too.

use crate::KvError;
use std::str::FromStr;
use tokenizers::Tokenizer;

/// A loaded `tokenizer.json`. Encoding takes `&self` and keeps no per-call state, so one
/// tokenizer serves many threads at once.
pub struct TextTokenizer {
    inner: Tokenizer,
}

impl TextTokenizer {
    /// Reads a `tokenizer.json` document.
    ///
    /// # Errors
    /// `InvalidArg` when the text is not a tokenizer this library reads (not JSON, an unknown
    /// model or component type, a regex that does not compile).
    pub fn from_json(json: &str) -> Result<Self, KvError> {
        file_checks::check_file(json)?;
        let mut inner = Tokenizer::from_str(json)
            .map_err(|e| KvError::invalid_arg(format!("not a tokenizer this library reads: {e}")))?;
        inner
            .with_truncation(None)
            .map_err(|e| KvError::invalid_arg(format!("cannot switch off the tokenizer's truncation: {e}")))?;
        inner.with_padding(None);
        Ok(Self { inner })
    }

    /// The token ids of `text`; `add_special_tokens` applies the tokenizer's post-processor (a
    /// model's BOS token, say), as `encode(text, add_special_tokens=...)` does in transformers.
    ///
    /// # Errors
    /// `InvalidArg` when the model cannot encode the text (a BPE without an unknown token meeting
    /// a character outside its vocabulary, for one).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, KvError> {
        let encoding = self
            .inner
            .encode_fast(text, add_special_tokens)
            .map_err(|e| KvError::invalid_arg(format!("the tokenizer cannot encode this text: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The id of `token` in the vocabulary, added tokens included; `None` when it has none. A
    /// `tokenizer_config.json` names its BOS and EOS tokens by text, and transformers looks their
    /// ids up this way when the config's `add_bos_token` / `add_eos_token` rebuild the
    /// post-processor.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

mod file_checks;
#[cfg(test)]
mod tests;
