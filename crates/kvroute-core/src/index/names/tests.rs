//! The name table against a std map, and its corner cases: overflow chains, saturated overflow
//! counts, fingerprint collisions.

use super::{mix, split, NameTable, FP_BITS, OVERFLOW_SATURATED, SHARD_BITS, SLOTS};

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
        if step % 1_000 == 999 {
            assert_overflow_counts_exact(&ours);
        }
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

/// Keys of sub-table 0 whose home in a 4-bucket table is `home` (the fingerprint's top two
/// bits, just below the table's bits), with distinct fingerprints for distinct `n`.
fn homed(home: u64, n: u64) -> u64 {
    unmix((home << (FP_SHIFT + FP_BITS - 2)) | ((n + 1) << FP_SHIFT) | 0xABCD)
}

/// Every bucket that counts an overflow is full, as in a table built by inserts alone: the
/// invariant that removals keep by moving pushed-past entries back (`Table::refill`).
fn assert_overflowed_buckets_full(table: &NameTable) {
    for (t, sub) in table.tables.iter().enumerate() {
        for (i, b) in sub.buckets.iter().enumerate() {
            assert!(
                b.overflow() == 0 || b.len() == SLOTS,
                "table {t} bucket {i}: {} entries, overflow {}",
                b.len(),
                b.overflow()
            );
        }
    }
}

/// Each bucket's overflow count is the number of entries stored past it from a home at or
/// before it (a saturated count may be stale-high: it stays saturated until a table grows or a
/// refill finds nothing pushed past), and every bucket that counts one is full.
fn assert_overflow_counts_exact(table: &NameTable) {
    assert_overflowed_buckets_full(table);
    for (t, sub) in table.tables.iter().enumerate() {
        let n = sub.buckets.len();
        let mut passed = vec![0usize; n];
        for (k, b) in sub.buckets.iter().enumerate() {
            for e in 0..b.len() {
                let mut j = sub.home(b.fingerprint(e));
                while j != k {
                    passed[j] += 1;
                    j = (j + 1) % n;
                }
            }
        }
        for (j, b) in sub.buckets.iter().enumerate() {
            let count = usize::from(b.overflow());
            if count < usize::from(OVERFLOW_SATURATED) {
                assert_eq!(count, passed[j], "table {t} bucket {j}");
            }
        }
    }
}

/// Counts that say every bucket was passed (a state only stale, saturated counts could make
/// now): a lookup or removal of an absent name must still end. Before the bound on their scans,
/// both went round the table forever (a writer thread hung).
#[test]
fn absent_names_end_the_scan_when_every_bucket_counts_an_overflow() {
    let mut ours = NameTable::default();
    for n in 0..20 {
        ours.insert(homed(n % 4, n), n as u32);
    }
    assert_eq!(ours.tables[0].buckets.len(), 4, "the construction needs 4 buckets");
    for b in &mut ours.tables[0].buckets {
        b.counts |= OVERFLOW_SATURATED << 4;
    }
    // Run where a hang fails the test instead of stalling it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let absent = homed(2, 99);
        let found = ours.get(absent, |_| true);
        let taken = ours.take(absent, |_| true);
        let removed = ours.remove(absent, 0);
        // A present name's removal ends too, and finds the counts it passes stale.
        let present = ours.remove(homed(1, 1), 1);
        let rest: Vec<_> =
            (0..20).filter(|&n| n != 1).map(|n| ours.get(homed(n % 4, n), |id| id == n as u32)).collect();
        let _ = tx.send((found, taken, removed, present, rest, ours.len()));
    });
    let outcome = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the scans ended");
    let rest: Vec<_> = (0..20).filter(|&n| n != 1).map(|n| Some(n as u32)).collect();
    assert_eq!(outcome, (None, None, false, true, rest, 19));
}

/// A removal from a bucket that entries were pushed past moves the nearest of them back, and
/// so on down the run: entries homed in bucket 0 spill into 1, those of 1 into 2.
#[test]
fn a_removal_moves_back_the_entries_pushed_past_its_bucket() {
    let mut ours = NameTable::default();
    let mut names = Vec::new();
    for home in 0..2 {
        for n in 0..SLOTS as u64 + 1 {
            names.push((homed(home, n), names.len() as u32));
        }
    }
    names.push((homed(2, 0), names.len() as u32));
    for &(key, id) in &names {
        ours.insert(key, id);
    }
    let table = &ours.tables[0];
    assert_eq!(table.buckets.len(), 4, "the construction needs 4 buckets");
    let lens = |t: &NameTable| t.tables[0].buckets.iter().map(|b| b.len()).collect::<Vec<_>>();
    let overflows = |t: &NameTable| t.tables[0].buckets.iter().map(|b| b.overflow()).collect::<Vec<_>>();
    // Bucket 0 spilled one into 1; 1 (full of 0's spill and its own) spilled two into 2.
    assert_eq!((lens(&ours), overflows(&ours)), (vec![9, 9, 3, 0], vec![1, 2, 0, 0]));
    // Taking a name of bucket 0 pulls 0's spill back from bucket 1, which then pulls one of
    // 1's back from bucket 2.
    assert_eq!(ours.take(names[0].0, |id| id == names[0].1), Some(names[0].1));
    assert_eq!((lens(&ours), overflows(&ours)), (vec![9, 9, 2, 0], vec![0, 1, 0, 0]));
    assert_overflowed_buckets_full(&ours);
    for &(key, id) in &names[1..] {
        assert_eq!(ours.get(key, |i| i == id), Some(id));
    }
    assert_eq!(ours.get(names[0].0, |i| i == names[0].1), None);
}

/// A table of steady size whose names come and go (a rank whose cache is full, every store
/// evicting), at up to 83% of its slots: every name stays found, every bucket that counts an
/// overflow stays full, and a lookup of an absent name visits about as many buckets as in a
/// table built afresh (it was 117 buckets and rising at 83%, before removals moved entries back).
#[test]
fn steady_churn_keeps_lookups_short() {
    for fill in [0.8, 0.95] {
        let mut ours = NameTable::default();
        let mut x: u64 = 0x1234_5678;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut live: Vec<(u64, u32)> = Vec::new();
        // Grown to 2,048 buckets per table, then held at `fill` of the most it takes.
        while ours.tables.iter().any(|t| t.buckets.len() < 2048) || live.len() < 4 * 2048 * SLOTS * 7 / 16 {
            let id = live.len() as u32;
            let key = next();
            ours.insert(key, id);
            live.push((key, id));
        }
        let most: usize = ours.tables.iter().map(|t| t.most).sum();
        live.truncate((most as f64 * fill) as usize);
        let mut rebuilt = NameTable::default();
        // Names not in `live` any more are removed through the churn below instead.
        for &(key, id) in &live {
            rebuilt.insert(key, id);
        }
        let mut ours = rebuilt;
        let buckets: Vec<usize> = ours.tables.iter().map(|t| t.buckets.len()).collect();
        for step in 0..400_000u32 {
            let i = (next() % live.len() as u64) as usize;
            let (key, id) = live.swap_remove(i);
            if step % 2 == 0 {
                assert!(ours.remove(key, id));
            } else {
                assert_eq!(ours.take(key, |v| v == id), Some(id));
            }
            let key = next();
            assert_eq!(ours.claim(key, id, |_| false), None);
            live.push((key, id));
        }
        assert_eq!(ours.tables.iter().map(|t| t.buckets.len()).collect::<Vec<_>>(), buckets, "steady size");
        assert_overflowed_buckets_full(&ours);
        for &(key, id) in &live {
            assert_eq!(ours.get(key, |v| v == id), Some(id));
        }
        let mut fresh = NameTable::default();
        for ((table, &count), churned) in fresh.tables.iter_mut().zip(&buckets).zip(&ours.tables) {
            table.buckets = vec![Default::default(); count];
            table.bits = count.trailing_zeros();
            table.most = churned.most;
        }
        for &(key, id) in &live {
            fresh.insert(key, id);
        }
        let visits = |t: &NameTable, keys: &[u64]| -> f64 {
            let total: usize = keys
                .iter()
                .map(|&k| {
                    let (ti, fp) = split(k);
                    let table = &t.tables[ti];
                    let mut i = table.home(fp);
                    let mut n = 1;
                    while table.buckets[i].overflow() != 0 && n < table.buckets.len() {
                        i = table.next(i);
                        n += 1;
                    }
                    n
                })
                .sum();
            total as f64 / keys.len() as f64
        };
        let absent: Vec<u64> = (0..20_000).map(|_| next()).collect();
        let (churned, built) = (visits(&ours, &absent), visits(&fresh, &absent));
        assert!(
            churned <= built * 1.1,
            "fill {fill}: {churned:.2} buckets per absent lookup, {built:.2} in a fresh table"
        );
    }
}

/// More entries pushed past one bucket than its counter holds: the count saturates (a lookup
/// homed there always goes on until a removal finds nothing pushed past it any more), and
/// every name is still found, or found absent, while they come and go.
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

/// Tables under `QUADRUPLE_BELOW` buckets grow fourfold and larger ones double, every name is
/// found after each growth, and a table grows only once it holds the most its size allows.
#[test]
fn small_tables_grow_fourfold_then_double() {
    let mut ours = NameTable::default();
    let mut sizes = Vec::new();
    let keys: Vec<u64> = (0..9_000u64).map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555).collect();
    for (id, &key) in keys.iter().enumerate() {
        let before = ours.tables[0].buckets.len();
        let full = ours.tables[0].len >= ours.tables[0].most;
        ours.insert(key, id as u32);
        let after = ours.tables[0].buckets.len();
        if after != before {
            assert!(before == 0 || full, "grew from {before} buckets before it was full");
            sizes.push(after);
            for (i, &k) in keys[..=id].iter().enumerate() {
                assert_eq!(ours.get(k, |v| v == i as u32), Some(i as u32), "after growing to {after}");
            }
        }
    }
    assert_eq!(sizes, [1, 4, 16, 64, 256, 512], "bucket counts of table 0 as it grew");
}
