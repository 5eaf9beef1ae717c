//! The name table against a std map, and its corner cases: overflow chains, saturated overflow
//! counts, fingerprint collisions.

use super::{mix, NameTable, FP_BITS, MAX_LOAD, OVERFLOW_SATURATED, SHARD_BITS, SLOTS};

/// Where a fingerprint's lowest bit sits in the mixed hash (the table's bits are above it).
const FP_SHIFT: u32 = 64 - SHARD_BITS - FP_BITS;
use std::collections::HashMap;

/// The key whose mixed hash is `h` (both steps of `mix` are invertible).
fn unmix(h: u64) -> u64 {
    // The inverse of the odd multiplier modulo 2^64, by Newton's iteration.
    let c: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut inv = c;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(inv)));
    }
    let x = h.wrapping_mul(inv);
    x ^ (x >> 29) ^ (x >> 58)
}

/// Drives the table and a std map with the same operations; names are unique per value, as
/// the writer keeps them, and `is_name` answers from the reference.
fn check_against_map(keys: &[u64], steps: u32, seed: u64) {
    let mut ours = NameTable::default();
    let mut by_key: HashMap<u64, u32> = HashMap::new();
    let mut by_value: HashMap<u32, u64> = HashMap::new();
    let mut x = seed;
    for step in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = keys[(x % keys.len() as u64) as usize];
        let found = ours.get(key, |v| by_value.get(&v) == Some(&key));
        assert_eq!(found, by_key.get(&key).copied(), "step {step}");
        // Each change goes through one of two entry points, chosen by another bit of `x`.
        let by_name = (x >> 20) & 1 == 1;
        match found {
            Some(value) if x.is_multiple_of(3) => {
                if by_name {
                    assert_eq!(ours.take(key, |v| by_value.get(&v) == Some(&key)), Some(value), "step {step}");
                } else {
                    assert!(ours.remove(key, value));
                }
                by_key.remove(&key);
                by_value.remove(&value);
            }
            Some(value) => {
                if by_name {
                    // Claiming a name in use returns its block and changes nothing.
                    assert_eq!(ours.claim(key, step, |v| by_value.get(&v) == Some(&key)), Some(value));
                }
            }
            None => {
                if by_name {
                    assert_eq!(ours.take(key, |v| by_value.get(&v) == Some(&key)), None, "step {step}");
                    assert_eq!(ours.claim(key, step, |v| by_value.get(&v) == Some(&key)), None);
                } else {
                    ours.insert(key, step);
                }
                by_key.insert(key, step);
                by_value.insert(step, key);
            }
        }
        assert_eq!(ours.len(), by_key.len());
    }
    for &key in keys {
        assert_eq!(ours.get(key, |v| by_value.get(&v) == Some(&key)), by_key.get(&key).copied());
    }
    for (&key, &value) in &by_key {
        assert!(ours.remove(key, value));
        assert!(!ours.remove(key, value), "removed twice");
    }
    assert!(ours.is_empty());
    assert_eq!(ours.heap_bytes(), 0);
}

/// After removals every bucket of a table can still count an overflow (an entry pushed past
/// it while it was full): a lookup or removal of an absent name must still end. Before the
/// bound on their scans, both went round the table forever (a writer thread hung).
#[test]
fn absent_names_end_the_scan_when_every_bucket_has_overflowed() {
    // Keys of sub-table 0 whose home in a 4-bucket table is `home` (the fingerprint's top
    // two bits, just below the table's bits), with distinct fingerprints for distinct `n`.
    let key = |home: u64, n: u64| unmix((home << (FP_SHIFT + FP_BITS - 2)) | ((n + 1) << FP_SHIFT) | 0xABCD);
    let most = 4 * SLOTS * MAX_LOAD.0 / MAX_LOAD.1;
    let mut ours = NameTable::default();
    let mut value = 0;
    let mut add = |t: &mut NameTable, k: u64| {
        t.insert(k, value);
        value += 1;
    };
    // SLOTS + 1 names homed in each of buckets 0-2: bucket 0 spills one into 1, 1 two into
    // 2, 2 three into 3.
    let per_home = SLOTS as u64 + 1;
    for home in 0..3 {
        for n in 0..per_home {
            add(&mut ours, key(home, n));
        }
    }
    assert_eq!(ours.tables[0].buckets.len(), 4);
    // Make room in bucket 1, then add SLOTS - 2 names homed in bucket 3 (holding 3): it
    // fills, and the last passes bucket 0 (full) into bucket 1.
    let spill_into_zero = SLOTS as u64 - 2;
    let taken = 3 * per_home + spill_into_zero - most as u64;
    for n in 0..taken {
        assert!(ours.take(key(1, n), |_| true).is_some());
    }
    for n in 0..spill_into_zero {
        add(&mut ours, key(3, n));
    }
    let table = &ours.tables[0];
    assert_eq!(table.buckets.len(), 4, "no growth: the construction needs 4 buckets");
    assert_eq!(ours.len(), most);
    assert!(table.buckets.iter().all(|b| b.overflow() > 0), "every bucket counts an overflow");
    // Run where a hang fails the test instead of stalling it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let absent = key(2, 99);
        let found = ours.get(absent, |_| true);
        let taken = ours.take(absent, |_| true);
        let removed = ours.remove(absent, 0);
        let _ = tx.send((found, taken, removed, ours.len()));
    });
    let outcome = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the scans ended");
    assert_eq!(outcome, (None, None, false, most));
}

/// More entries pushed past one bucket than its counter holds: the count saturates and stays
/// (a lookup homed there always goes on), and every name is still found, or found absent,
/// while they come and go.
#[test]
fn a_saturated_overflow_count_stays_correct() {
    // Distinct fingerprints, all homed in bucket 0 at any table size (top fingerprint bits 0).
    let key = |n: u64| unmix(((n + 1) << FP_SHIFT) | 0x1234);
    let mut ours = NameTable::default();
    let names = 2 * SLOTS as u64 + u64::from(OVERFLOW_SATURATED) + 4;
    for n in 0..names {
        ours.insert(key(n), n as u32);
    }
    assert_eq!(ours.tables[0].buckets[0].overflow(), OVERFLOW_SATURATED);
    // Removed in three passes (n % 3 == 0, then 1, then 2); a name is there until its pass.
    for pass in 0..3 {
        for n in (pass..names).step_by(3) {
            assert!(ours.remove(key(n), n as u32), "pass {pass}: {n}");
        }
        for n in 0..names {
            let expected = (n % 3 > pass).then_some(n as u32);
            assert_eq!(ours.get(key(n), |id| u64::from(id) == n), expected, "pass {pass}: {n}");
        }
    }
    assert!(ours.is_empty());
    for n in 0..names {
        assert_eq!(ours.get(key(n), |id| u64::from(id) == n), None);
        ours.insert(key(n), n as u32);
    }
    for n in 0..names {
        assert_eq!(ours.get(key(n), |id| u64::from(id) == n), Some(n as u32));
    }
}

/// Small keys (which collide after masking) and heavy removal.
#[test]
fn behaves_like_a_map() {
    let keys: Vec<u64> = (0..5_000).collect();
    check_against_map(&keys, 200_000, 0x1234_5678);
}

/// Keys crafted to share fingerprints (same top 32 bits after mixing), so that every hit
/// must be told apart by `is_name`, and to crowd few buckets, so that overflow chains form.
#[test]
fn fingerprint_collisions_and_overflow() {
    assert_eq!(mix(unmix(0xDEAD_BEEF_0123_4567)), 0xDEAD_BEEF_0123_4567);
    let mut keys = Vec::new();
    for group in 0..40u64 {
        for low in 0..25u64 {
            keys.push(unmix(((0x5000_0000 + group * 7) << 32) | (low * 0x1_0001 + 1)));
        }
    }
    check_against_map(&keys, 100_000, 0x9876_5432);
}
