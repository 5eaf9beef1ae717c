//! A check Hugging Face's `tokenizers` does not make: a BPE model with a
//! `continuing_subword_prefix` builds each merge's token from its second part past the prefix's
//! bytes, and the library slices that part without looking, so a part shorter than the prefix
//! (or cut inside a character) panics while the file loads. The binding would catch the panic,
//! but as an internal error with a backtrace on stderr; a malformed file is the caller's input,
//! so it is refused here first, as an invalid argument naming the merge.

use crate::KvError;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// The part of a `tokenizer.json` the check reads first (everything else is skipped unread).
#[derive(Deserialize)]
struct FilePeek {
    model: Option<ModelPeek>,
}

#[derive(Deserialize)]
struct ModelPeek {
    #[serde(rename = "type")]
    kind: Option<String>,
    continuing_subword_prefix: Option<String>,
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

/// Refuses a BPE model whose merge part is shorter than its `continuing_subword_prefix`; passes
/// every other file (including ones the library refuses for reasons of its own).
pub(super) fn check_merge_prefix(json: &str) -> Result<(), KvError> {
    let Ok(FilePeek { model: Some(model) }) = serde_json::from_str::<FilePeek>(json) else { return Ok(()) };
    let (Some("BPE"), Some(prefix)) = (model.kind.as_deref(), model.continuing_subword_prefix) else { return Ok(()) };
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
