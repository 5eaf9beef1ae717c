//! Reader of the `KVIW` engine-batch workload that `bench/ingest-workload.ts` writes (layout
//! documented there).

pub struct Batch {
    pub worker: u64,
    pub dp_rank: u32,
    pub seq: u64,
    pub block_events: u64,
    pub payload: Vec<u8>,
}

pub struct Workload {
    pub block_size: u32,
    pub batches: Vec<Batch>,
    pub queries: Vec<Vec<u64>>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

pub fn read(path: &str) -> Workload {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    assert_eq!(&b[..4], b"KVIW", "{path} is not an ingest workload");
    assert_eq!(u32_at(&b, 4), 1, "unknown workload version");
    let block_size = u32_at(&b, 8);
    let (count, queries) = (u32_at(&b, 12) as usize, u32_at(&b, 16) as usize);
    let mut o = 20;
    let mut batches = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32_at(&b, o + 16) as usize;
        batches.push(Batch {
            worker: u64::from(u32_at(&b, o)),
            dp_rank: u32_at(&b, o + 4),
            seq: u64::from(u32_at(&b, o + 8)),
            block_events: u64::from(u32_at(&b, o + 12)),
            payload: b[o + 20..o + 20 + len].to_vec(),
        });
        o += 20 + len;
    }
    let mut qs = Vec::with_capacity(queries);
    for _ in 0..queries {
        let n = u32_at(&b, o) as usize;
        o += 4;
        qs.push((0..n).map(|i| u64::from_le_bytes(b[o + 8 * i..o + 8 * i + 8].try_into().expect("8 bytes"))).collect());
        o += 8 * n;
    }
    Workload { block_size, batches, queries: qs }
}
