//! The reference model: per rank, a map from name to path and from path to name. No tree, no
//! sharing, no cleverness; it states the semantics as plainly as possible.

use kvroute_core::index::{EventData, Rank, RouterEvent};
use std::collections::{BTreeMap, HashMap};

#[derive(Default, Clone)]
pub struct RankModel {
    names: HashMap<u64, Vec<u64>>,
    held: HashMap<Vec<u64>, u64>,
}

#[derive(Default, Clone)]
pub struct Model {
    pub ranks: BTreeMap<Rank, RankModel>,
}

impl Model {
    pub fn apply(&mut self, e: &RouterEvent) {
        if e.lower_tier.is_some() {
            return;
        }
        let r = self.ranks.entry(e.rank).or_default();
        match &e.data {
            EventData::Stored { parent, blocks } => {
                let mut path = match parent {
                    None => Vec::new(),
                    Some(p) => match r.names.get(p) {
                        Some(path) => path.clone(),
                        None => return,
                    },
                };
                if parent.is_some_and(|p| blocks.iter().any(|b| b.ext == p)) {
                    return;
                }
                let mut planned = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for b in blocks {
                    path.push(b.local);
                    if !seen.insert(b.ext) || r.names.get(&b.ext).is_some_and(|p| *p != path) {
                        return;
                    }
                    planned.push((path.clone(), b.ext));
                }
                for (path, ext) in planned {
                    if let Some(old) = r.held.insert(path.clone(), ext) {
                        r.names.remove(&old);
                    }
                    r.names.insert(ext, path);
                }
            }
            EventData::Removed { hashes } => {
                for h in hashes {
                    if let Some(path) = r.names.get(h).cloned() {
                        let doomed: Vec<Vec<u64>> = r.held.keys().filter(|p| p.starts_with(&path)).cloned().collect();
                        for p in doomed {
                            let name = r.held.remove(&p).unwrap();
                            r.names.remove(&name);
                        }
                    }
                }
            }
            EventData::Cleared => {
                r.names.clear();
                r.held.clear();
            }
        }
    }

    pub fn remove_worker(&mut self, worker_id: u64, dp_rank: Option<u32>) {
        self.ranks.retain(|r, _| !(r.worker_id == worker_id && dp_rank.is_none_or(|d| d == r.dp_rank)));
    }

    /// (rank, matched blocks, blocks held) for every rank matching at least one block, sorted
    /// like the index's answer.
    pub fn find_matches(&self, query: &[u64]) -> Vec<(Rank, u32, u32)> {
        let mut out: Vec<(Rank, u32, u32)> = self
            .ranks
            .iter()
            .map(|(rank, r)| {
                let n = (1..=query.len()).take_while(|&k| r.held.contains_key(&query[..k])).count();
                (*rank, n as u32, r.held.len() as u32)
            })
            .filter(|(_, n, _)| *n > 0)
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    pub fn total_blocks(&self) -> u64 {
        self.ranks.values().map(|r| r.held.len() as u64).sum()
    }
}
