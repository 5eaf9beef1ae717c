//! One error type for every fallible core call, carrying the stable code that the TypeScript
//! layer exposes as `KvRouteError.code`. Keeping the code here (not in the binding) means the
//! native and pure-JS backends report the same code for the same mistake. (Malformed event
//! objects are rejected by the TypeScript validator before they reach the core; malformed event
//! JSON text is parsed and rejected here, as `InvalidEvent`.)

use std::fmt;

/// Stable error codes, shared with the TypeScript API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A caller passed an argument outside its documented domain.
    InvalidArg,
    /// An event (or its JSON text) does not have Dynamo's shape.
    InvalidEvent,
    /// The object was closed; it accepts no further calls.
    Closed,
    /// A bug in kvroute: an invariant did not hold. Never the caller's fault.
    Internal,
}

impl ErrorCode {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArg => "ERR_INVALID_ARG",
            Self::InvalidEvent => "ERR_INVALID_EVENT",
            Self::Closed => "ERR_CLOSED",
            Self::Internal => "ERR_INTERNAL",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvError {
    pub code: ErrorCode,
    pub message: String,
}

impl KvError {
    pub fn invalid_arg(message: impl Into<String>) -> Self {
        Self { code: ErrorCode::InvalidArg, message: message.into() }
    }

    pub fn invalid_event(message: impl Into<String>) -> Self {
        Self { code: ErrorCode::InvalidEvent, message: message.into() }
    }

    pub fn closed(what: &str) -> Self {
        Self { code: ErrorCode::Closed, message: format!("{what} is closed") }
    }
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for KvError {}
