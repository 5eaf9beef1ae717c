//! Golden vectors shared with the TypeScript suites (`test/vectors/hashing.json`), plus the
//! structural rules of Dynamo's block hashing.

use kvroute_core::hashing::{block_hashes, salt_hash, sequence_hashes, xxh3_64, BlockHashOptions, XXH3_SEED};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../../test/vectors/hashing.json")).expect("vector file is valid JSON")
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().parse().unwrap()).collect()
}

fn le_bytes(tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

#[test]
fn xxh3_golden_values() {
    for case in vectors()["xxh3"].as_array().unwrap() {
        let seed: u64 = case["seed"].as_str().unwrap().parse().unwrap();
        let want: u64 = case["hash"].as_str().unwrap().parse().unwrap();
        assert_eq!(xxh3_64(case["utf8"].as_str().unwrap().as_bytes(), seed), want, "{case}");
    }
}

#[test]
fn block_and_sequence_golden_values() {
    for case in vectors()["blocks"].as_array().unwrap() {
        let tokens: Vec<u32> = case["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        let bs = case["block_size"].as_u64().unwrap() as u32;
        let local = block_hashes(&tokens, bs, &BlockHashOptions::default()).unwrap();
        assert_eq!(local, u64s(&case["local"]), "{}", case["source"]);
        assert_eq!(sequence_hashes(&local), u64s(&case["sequence"]), "{}", case["source"]);
    }
}

#[test]
fn full_blocks_only() {
    for bs in [11u32, 32, 64] {
        let n = |len: u32| block_hashes(&(0..len).collect::<Vec<_>>(), bs, &BlockHashOptions::default()).unwrap().len();
        assert_eq!((n(bs - 1), n(bs), n(bs + 1), n(2 * bs + 1)), (0, 1, 1, 2));
    }
}

#[test]
fn eagle_windows_overlap_by_one_token() {
    let opts = BlockHashOptions { eagle: true, ..Default::default() };
    let got = block_hashes(&[0, 1, 2, 3, 4, 5], 2, &opts).unwrap();
    let want = vec![xxh3_64(&le_bytes(&[0, 1, 2]), XXH3_SEED), xxh3_64(&le_bytes(&[2, 3, 4]), XXH3_SEED)];
    assert_eq!(got, want);
}

#[test]
fn lora_and_namespace_change_the_seed() {
    let tokens = [0u32, 1, 2, 3];
    let hash = |lora: Option<&str>, ns: Option<&str>| {
        let opts = BlockHashOptions { lora_name: lora, cache_namespace: ns, ..Default::default() };
        block_hashes(&tokens, 4, &opts).unwrap()[0]
    };
    let base = hash(None, None);
    assert_eq!(hash(Some("adapter-a"), None), xxh3_64(&le_bytes(&tokens), salt_hash(Some("adapter-a"), None)));
    assert_ne!(hash(Some("adapter-a"), None), base);
    assert_ne!(hash(Some("x"), None), hash(None, Some("x")), "namespace x must differ from LoRA x");
    assert_eq!(hash(Some(""), Some("")), base, "empty names count as absent");
}

#[test]
fn multimodal_hashes_are_sorted_and_appended() {
    let tokens = [7u32, 8, 9, 10];
    let mm: &[&[u64]] = &[&[30, 10, 20]];
    let opts = BlockHashOptions { mm_hashes: mm, ..Default::default() };
    let mut bytes = le_bytes(&tokens);
    for h in [10u64, 20, 30] {
        bytes.extend(h.to_le_bytes());
    }
    assert_eq!(block_hashes(&tokens, 4, &opts).unwrap(), vec![xxh3_64(&bytes, XXH3_SEED)]);
    let empty: &[&[u64]] = &[&[]];
    let text = block_hashes(&tokens, 4, &BlockHashOptions::default()).unwrap();
    assert_eq!(block_hashes(&tokens, 4, &BlockHashOptions { mm_hashes: empty, ..Default::default() }).unwrap(), text);
}

#[test]
fn bad_block_sizes_are_rejected() {
    assert!(block_hashes(&[1, 2], 0, &BlockHashOptions::default()).is_err());
    assert!(block_hashes(&[1, 2], (1 << 20) + 1, &BlockHashOptions::default()).is_err());
}
