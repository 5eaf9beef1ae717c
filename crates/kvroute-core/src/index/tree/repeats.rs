//! [`RepeatFinder`]: whether a name repeats inside one Stored event (such an event is rejected:
//! one name would mean two positions).
//!
//! A general hash set did this job for a tenth of a store's time. This one is a flat array of
//! names, open addressing with linear probing, sized to twice the event and wiped per event: a
//! prompt's few hundred names fit in the first-level cache, so each check is a hash and a
//! compare or two, and nothing is allocated once the scratch has grown.

use crate::index::event::StoredBlock;
use crate::index::stats::vec_bytes;

/// Up to this many blocks, pairs are compared directly: cheaper than hashing for the short
/// events engines send during decode.
const PAIRWISE_MAX: usize = 16;
/// Above this many slots (8 KiB: an event of more than 512 blocks) the scratch is given back
/// after use, so an index does not keep scratch sized for its largest event (it was 32 KiB per
/// shard at W = 256); allocating it again costs little next to wiping it, which every use does.
const KEEP_SLOTS: usize = 1 << 10;

#[derive(Debug, Default)]
pub struct RepeatFinder {
    /// Names; `0` marks a free slot (a name that is 0 is tracked by `zero_seen`).
    slots: Vec<u64>,
}

impl RepeatFinder {
    /// Whether two blocks of the event share a name.
    pub fn any_repeated(&mut self, blocks: &[StoredBlock]) -> bool {
        if blocks.len() <= PAIRWISE_MAX {
            return blocks.iter().enumerate().any(|(i, a)| blocks[i + 1..].iter().any(|b| b.ext == a.ext));
        }
        let size = (blocks.len() * 2).next_power_of_two();
        self.slots.clear();
        self.slots.resize(size, 0);
        let (mask, shift) = (size - 1, 64 - size.trailing_zeros());
        let mut zero_seen = false;
        let mut repeated = false;
        for b in blocks {
            if b.ext == 0 {
                repeated |= std::mem::replace(&mut zero_seen, true);
                continue;
            }
            let mut i = (b.ext.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
            loop {
                let slot = &mut self.slots[i];
                if *slot == 0 {
                    *slot = b.ext;
                    break;
                }
                if *slot == b.ext {
                    repeated = true;
                    break;
                }
                i = (i + 1) & mask;
            }
            if repeated {
                break;
            }
        }
        if self.slots.capacity() > KEEP_SLOTS {
            self.slots = Vec::new();
        }
        repeated
    }

    pub fn heap_bytes(&self) -> usize {
        vec_bytes::<u64>(self.slots.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::RepeatFinder;
    use crate::index::event::StoredBlock;

    fn blocks(names: &[u64]) -> Vec<StoredBlock> {
        names.iter().map(|&ext| StoredBlock { ext, local: ext ^ 1 }).collect()
    }

    #[test]
    fn finds_repeats_in_short_and_long_events() {
        let mut f = RepeatFinder::default();
        for n in [0usize, 1, 2, 16, 17, 300, 5_000] {
            let names: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x1000_0000_0000_0001) ^ 7).collect();
            assert!(!f.any_repeated(&blocks(&names)), "{n} distinct names");
            for (a, b) in [(0, n.saturating_sub(1)), (n / 2, n / 2 + 1)] {
                if b < n && a != b {
                    let mut with_repeat = names.clone();
                    with_repeat[b] = with_repeat[a];
                    assert!(f.any_repeated(&blocks(&with_repeat)), "{n} names, {a} repeated at {b}");
                }
            }
        }
        // Zero is a name like any other, in both regimes.
        let mut names: Vec<u64> = (1..40).collect();
        assert!(!f.any_repeated(&blocks(&names)));
        names[3] = 0;
        assert!(!f.any_repeated(&blocks(&names)));
        names[30] = 0;
        assert!(f.any_repeated(&blocks(&names)));
        assert!(f.any_repeated(&blocks(&[0, 5, 0])));
        // An event of up to 512 blocks leaves its scratch for the next; a larger one gives it back.
        let kept: Vec<u64> = (1..=300).collect();
        assert!(!f.any_repeated(&blocks(&kept)));
        assert_eq!(f.heap_bytes(), 8 * 1024);
        let big: Vec<u64> = (1..=600).collect();
        assert!(!f.any_repeated(&blocks(&big)));
        assert_eq!(f.heap_bytes(), 0);
    }
}
