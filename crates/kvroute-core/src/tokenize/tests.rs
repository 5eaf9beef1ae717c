use super::TextTokenizer;
use crate::ErrorCode;

/// A word-level model over a whitespace pre-tokenizer, with an unknown token and a BOS template:
/// small enough to state the expected ids by hand.
fn word_level(extra: &str) -> String {
    format!(
        r#"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":{{"type":"Lowercase"}},
        "pre_tokenizer":{{"type":"Whitespace"}},
        "post_processor":{{"type":"TemplateProcessing","single":[{{"SpecialToken":{{"id":"<s>","type_id":0}}}},{{"Sequence":{{"id":"A","type_id":0}}}}],
          "pair":[{{"Sequence":{{"id":"A","type_id":0}}}},{{"Sequence":{{"id":"B","type_id":1}}}}],
          "special_tokens":{{"<s>":{{"id":"<s>","ids":[0],"tokens":["<s>"]}}}}}},
        "decoder":null,
        "model":{{"type":"WordLevel","vocab":{{"<s>":0,"<unk>":1,"kv":2,"cache":3,"router":4}},"unk_token":"<unk>"}}{extra}}}"#
    )
}

#[test]
fn encodes_with_and_without_the_post_processor() {
    let t = TextTokenizer::from_json(&word_level("")).unwrap();
    assert_eq!(t.encode("KV cache router", false).unwrap(), vec![2, 3, 4]);
    assert_eq!(t.encode("KV cache router", true).unwrap(), vec![0, 2, 3, 4]);
    assert_eq!(t.encode("kv zebra", false).unwrap(), vec![2, 1]);
    assert_eq!(t.encode("", false).unwrap(), Vec::<u32>::new());
}

#[test]
fn truncation_in_the_file_is_switched_off() {
    let json = word_level("").replace(
        r#""truncation":null"#,
        r#""truncation":{"direction":"Right","max_length":2,"strategy":"LongestFirst","stride":0}"#,
    );
    let t = TextTokenizer::from_json(&json).unwrap();
    assert_eq!(t.encode("kv cache router kv", false).unwrap(), vec![2, 3, 4, 2]);
}

#[test]
fn bad_files_are_invalid_arguments() {
    for bad in ["", "{", "[]", r#"{"model":{"type":"Nonsense"}}"#, &word_level("").replace("WordLevel", "Nonsense")] {
        let err = TextTokenizer::from_json(bad).err().expect(bad);
        assert_eq!(err.code, ErrorCode::InvalidArg, "{bad}");
        assert!(err.message.starts_with("not a tokenizer this library reads"), "{}", err.message);
    }
}

#[test]
fn one_tokenizer_serves_several_threads() {
    let t = TextTokenizer::from_json(&word_level("")).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    assert_eq!(t.encode("router cache kv", true).unwrap(), vec![0, 4, 3, 2]);
                }
            });
        }
    });
}

#[test]
fn token_ids_by_text_include_added_tokens() {
    let json = word_level("").replace(
        r#""added_tokens":[]"#,
        r#""added_tokens":[{"id":5,"content":"</s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}]"#,
    );
    let t = TextTokenizer::from_json(&json).unwrap();
    assert_eq!(t.token_to_id("<s>"), Some(0));
    assert_eq!(t.token_to_id("router"), Some(4));
    assert_eq!(t.token_to_id("</s>"), Some(5));
    assert_eq!(t.token_to_id("<eos>"), None);
}

/// A BPE merge whose second part is shorter than the continuing subword prefix (or cut inside a
/// character by it) panics inside the library; it is refused first, as an invalid argument.
#[test]
fn a_merge_shorter_than_the_subword_prefix_is_refused_not_a_panic() {
    let bpe = |prefix: &str, merges: &str| {
        format!(
            r###"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":null,
            "post_processor":null,"decoder":null,"model":{{"type":"BPE","dropout":null,"unk_token":null,
            "continuing_subword_prefix":{prefix},"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,
            "ignore_merges":false,"vocab":{{"a":0,"##b":1,"ab":2,"b":3,"aé":4,"#é":5}},"merges":{merges}}}}}"###
        )
    };
    let prefix = r###""##""###;
    for merges in [r###"[["a","##b"],["a","b"]]"###, r###"["#version: 0.2","a ##b","a b"]"###, r###"[["a","#é"]]"###] {
        let err = TextTokenizer::from_json(&bpe(prefix, merges)).err().expect(merges);
        assert_eq!(err.code, ErrorCode::InvalidArg, "{merges}");
        assert!(err.message.contains("shorter than the continuing subword prefix"), "{}", err.message);
    }
    let t = TextTokenizer::from_json(&bpe(prefix, r###"[["a","##b"]]"###)).unwrap();
    assert_eq!(t.encode("ab", false).unwrap(), vec![2]);
    assert!(TextTokenizer::from_json(&bpe("null", r###"[["a","b"]]"###)).is_ok(), "no prefix, nothing to check");
}

/// A template post-processor read from a file skips its builder's checks; a `single` template
/// naming an undefined special token, or sequence B, panicked at the first encode. Refused at
/// load, in a `Sequence` of processors too; a `pair` template breaking the builder's rules is
/// never used for one text, and loads.
#[test]
fn a_single_template_that_would_panic_is_refused_at_load() {
    let with_processor = |processor: &str| {
        let json = word_level("");
        let at = json.find(r#""post_processor":"#).unwrap();
        let end = json.find(r#""decoder""#).unwrap();
        format!("{}\"post_processor\":{processor},\n        {}", &json[..at], &json[end..])
    };
    let template = |single: &str, pair: &str| {
        format!(
            r#"{{"type":"TemplateProcessing","single":{single},"pair":{pair},"special_tokens":{{"<s>":{{"id":"<s>","ids":[0],"tokens":["<s>"]}}}}}}"#
        )
    };
    let a = r#"{"Sequence":{"id":"A","type_id":0}}"#;
    let b = r#"{"Sequence":{"id":"B","type_id":1}}"#;
    let s = |id: &str| format!(r#"{{"SpecialToken":{{"id":"{id}","type_id":0}}}}"#);
    let pair = format!("[{a},{b}]");
    for (single, fault) in
        [(format!("[{},{a}]", s("<x>")), "special token `<x>`"), (format!("[{},{b}]", s("<s>")), "sequence B")]
    {
        let alone = template(&single, &pair);
        let nested =
            format!(r#"{{"type":"Sequence","processors":[{{"type":"ByteLevel","trim_offsets":false}},{alone}]}}"#);
        // The library reads a template by its fields, whatever its `type` says (a fuzzed file).
        let mistyped = alone.replace(r#""type":"TemplateProcessing""#, r#""type":true"#);
        for processor in [alone, nested, mistyped] {
            // A model of an odd shape too: the post-processor is checked on its own.
            let odd_model = with_processor(&processor).replace(r#""type":"WordLevel""#, r#""type":7"#);
            for file in [with_processor(&processor), odd_model] {
                let err = TextTokenizer::from_json(&file).err().expect(&file);
                assert_eq!(err.code, ErrorCode::InvalidArg);
                assert!(err.message.contains(fault), "{}", err.message);
            }
        }
    }
    // A pair template without B, or naming an undefined token, is the library's business: it loads.
    let t = TextTokenizer::from_json(&with_processor(&template(
        &format!("[{},{a}]", s("<s>")),
        &format!("[{a},{}]", s("<y>")),
    )))
    .unwrap();
    assert_eq!(t.encode("kv", true).unwrap(), vec![0, 2]);
}
