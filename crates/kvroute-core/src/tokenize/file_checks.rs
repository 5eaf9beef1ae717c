//! Faults of a `tokenizer.json` on which Hugging Face's `tokenizers` panics instead of refusing
//! the file. The binding would catch the panic, but as an internal error with a backtrace on
//! stderr, and a malformed file is the caller's input: so these are refused here first, as
//! invalid arguments naming the fault.
//!
//! * A BPE model with a `continuing_subword_prefix` builds each merge's token from its second
//!   part past the prefix's bytes, sliced without looking: a part shorter than the prefix (or cut
//!   inside a character) panics while the file loads.
//! * A `TemplateProcessing` post-processor read from a file skips the checks its builder makes:
//!   a `single` template naming a special token its `special_tokens` lack, or using sequence `B`
//!   (a single text has only `A`), panics when a text is encoded with special tokens. Only
//!   `single` is checked: the `pair` template is never used for one text, and an engine loads a
//!   file whose `pair` breaks the builder's rules and serves it.
//!
//! The checks read the file twice more, skipping all but the fields they need: about 5 ms each of
//! the 250 ms that loading Qwen 2.5's 7 MB `tokenizer.json` takes (2026-12-07, AMD VM).

use crate::KvError;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// The post-processor of a `tokenizer.json` (everything else is skipped unread).
#[derive(Deserialize)]
struct ProcessorPeek {
    post_processor: Option<Value>,
}

/// The model's fields that decide whether its merges are checked, read on their own so that a
/// model of an odd shape cannot keep the post-processor from its check.
#[derive(Deserialize)]
struct ModelPeekFile {
    model: Option<ModelPeek>,
}

#[derive(Deserialize)]
struct ModelPeek {
    #[serde(rename = "type")]
    kind: Option<Value>,
    continuing_subword_prefix: Option<Value>,
}

/// The merges, read in a second pass only for a BPE model with a prefix (almost none have one).
#[derive(Deserialize)]
struct MergesFile {
    model: MergesModel,
}

#[derive(Deserialize)]
struct MergesModel {
    merges: Option<Merges>,
}

/// The merges in either of the forms the library reads; anything else is left to it to refuse.
#[derive(Deserialize)]
#[serde(untagged)]
enum Merges {
    Pairs(Vec<(String, String)>),
    Lines(Vec<String>),
    Other(IgnoredAny),
}

/// Refuses a file with one of the faults above; passes every other file (including ones the
/// library refuses for reasons of its own).
pub(super) fn check_file(json: &str) -> Result<(), KvError> {
    if let Ok(ProcessorPeek { post_processor: Some(processor) }) = serde_json::from_str::<ProcessorPeek>(json) {
        check_post_processor(&processor)
            .map_err(|fault| KvError::invalid_arg(format!("not a tokenizer this library reads: {fault}")))?;
    }
    match serde_json::from_str::<ModelPeekFile>(json) {
        Ok(ModelPeekFile { model: Some(model) }) => check_merge_prefix(json, &model),
        _ => Ok(()),
    }
}

/// A `TemplateProcessing` (alone or in a `Sequence` of processors) whose `single` template
/// encodes a text without panicking. Processors are told by their fields, not their `type`: the
/// library reads an object with the template's fields as a template whatever its `type` says.
fn check_post_processor(processor: &Value) -> Result<(), String> {
    if let Some(all) = processor.get("processors").and_then(Value::as_array) {
        return all.iter().try_for_each(check_post_processor);
    }
    let Some(pieces) = processor.get("single").and_then(Value::as_array) else { return Ok(()) };
    let defined = |id: &str| processor.get("special_tokens").and_then(|t| t.get(id)).is_some();
    pieces.iter().try_for_each(|piece| {
        if let Some(id) = piece.get("SpecialToken").and_then(|t| t.get("id")).and_then(Value::as_str) {
            if !defined(id) {
                return Err(format!(
                    "the post-processor's single template names the special token `{id}`, which its special_tokens do not define"
                ));
            }
        }
        if piece.get("Sequence").and_then(|s| s.get("id")).and_then(Value::as_str) == Some("B") {
            return Err("the post-processor's single template uses sequence B, which a single text does not have".into());
        }
        Ok(())
    })
}

/// Refuses a BPE model whose merge part is shorter than its `continuing_subword_prefix`.
fn check_merge_prefix(json: &str, model: &ModelPeek) -> Result<(), KvError> {
    let kind = model.kind.as_ref().and_then(Value::as_str);
    let (Some("BPE"), Some(prefix)) = (kind, model.continuing_subword_prefix.as_ref().and_then(Value::as_str)) else {
        return Ok(());
    };
    if prefix.is_empty() {
        return Ok(());
    }
    let Ok(MergesFile { model: MergesModel { merges: Some(merges) } }) = serde_json::from_str::<MergesFile>(json)
    else {
        return Ok(());
    };
    let pairs: Vec<(String, String)> = match merges {
        Merges::Pairs(pairs) => pairs,
        // The library's rule for lines: `#version` lines skipped, exactly one space (others it refuses).
        Merges::Lines(lines) => lines
            .iter()
            .filter(|line| !line.starts_with("#version"))
            .filter_map(|line| line.split_once(' ').filter(|(_, b)| !b.contains(' ')))
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
        Merges::Other(_) => return Ok(()),
    };
    // `is_char_boundary` is false past the end too: a part shorter than the prefix.
    match pairs.iter().find(|(_, b)| !b.is_char_boundary(prefix.len())) {
        Some((a, b)) => Err(KvError::invalid_arg(format!(
            "not a tokenizer this library reads: the merge `{a} {b}` has a second part shorter than the continuing subword prefix `{prefix}`"
        ))),
        None => Ok(()),
    }
}
