//! ZeroMQ endpoints per dp rank, as vLLM and SGLang derive them: rank `r` publishes on the base
//! endpoint's port + `r` (tcp), or on the base path with `_dp<r>` appended (ipc, inproc; rank 0
//! keeps the base). Validated before any socket opens, so a typo is an `ERR_INVALID_ARG` now,
//! not a silent reconnect loop later.

use crate::KvError;

/// Checks an endpoint's shape: `tcp://host:port` (host may be `*`), `ipc://path` or
/// `inproc://name`.
pub fn validate(endpoint: &str, name: &str) -> Result<(), KvError> {
    let bad = |why: &str| {
        KvError::invalid_arg(format!(
            "{name} must be tcp://host:port, ipc://path or inproc://name ({why}), got {endpoint:?}"
        ))
    };
    if let Some(rest) = endpoint.strip_prefix("tcp://") {
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port: u32 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if port > 65535 {
            return Err(bad("the port is above 65535"));
        }
        return Ok(());
    }
    for scheme in ["ipc://", "inproc://"] {
        if let Some(rest) = endpoint.strip_prefix(scheme) {
            return if rest.is_empty() { Err(bad("empty path")) } else { Ok(()) };
        }
    }
    Err(bad("unknown transport"))
}

/// The endpoint of dp rank `rank` given the base (rank 0's) endpoint.
pub fn for_rank(base: &str, rank: u32, name: &str) -> Result<String, KvError> {
    validate(base, name)?;
    if rank == 0 {
        return Ok(base.to_owned());
    }
    if let Some(rest) = base.strip_prefix("tcp://") {
        let (host, port) = rest.rsplit_once(':').unwrap_or((rest, "0"));
        let port: u32 = port.parse().unwrap_or(0) + rank;
        if port > 65535 {
            return Err(KvError::invalid_arg(format!("{name}: dp rank {rank} would use port {port}, above 65535")));
        }
        return Ok(format!("tcp://{host}:{port}"));
    }
    Ok(format!("{base}_dp{rank}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_offset_ports_and_suffix_paths() {
        assert_eq!(for_rank("tcp://10.0.0.7:5557", 0, "e").unwrap(), "tcp://10.0.0.7:5557");
        assert_eq!(for_rank("tcp://10.0.0.7:5557", 3, "e").unwrap(), "tcp://10.0.0.7:5560");
        assert_eq!(for_rank("tcp://[::1]:5557", 1, "e").unwrap(), "tcp://[::1]:5558");
        assert_eq!(for_rank("ipc:///tmp/kv", 2, "e").unwrap(), "ipc:///tmp/kv_dp2");
        assert!(for_rank("tcp://h:65535", 1, "e").is_err());
        for bad in ["", "http://h:1", "tcp://h", "tcp://:5", "tcp://h:x", "ipc://"] {
            assert!(validate(bad, "e").is_err(), "{bad}");
        }
    }
}
