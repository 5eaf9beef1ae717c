//! Conversions shared by the entry points: errors and panics into JavaScript errors.

use kvroute_core::KvError;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A napi error whose JavaScript `code` is kvroute's stable code (`ERR_INVALID_ARG`, ...).
pub type NodeResult<T> = napi::Result<T, &'static str>;

pub fn to_node_error(err: KvError) -> napi::Error<&'static str> {
    napi::Error::new(err.code.as_str(), err.message)
}

pub fn invalid_arg(message: impl Into<String>) -> napi::Error<&'static str> {
    napi::Error::new("ERR_INVALID_ARG", message.into())
}

/// Runs `f`, turning a panic into `ERR_INTERNAL`. The state `f` touches is either owned by the
/// call or protected by locks that the core keeps consistent across unwinding, so asserting
/// unwind safety is sound here.
pub fn guard<T>(f: impl FnOnce() -> NodeResult<T>) -> NodeResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_owned());
            Err(napi::Error::new("ERR_INTERNAL", format!("internal error in kvroute native code: {detail}")))
        }
    }
}

/// Runs `f` for an async task, whose promise can only reject with napi's generic status: a core
/// error or a panic comes back as the text "CODE: message", which the TypeScript side turns into
/// a `KvRouteError` (`fromCodedText`).
pub fn coded<T>(f: impl FnOnce() -> Result<T, KvError>) -> Result<T, String> {
    match guard(|| Ok(f())) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{}: {}", e.code.as_str(), e.message)),
        Err(e) => Err(format!("ERR_INTERNAL: {}", e.reason)),
    }
}
