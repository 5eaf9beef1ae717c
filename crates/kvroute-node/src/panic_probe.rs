//! A deliberate panic, reachable only through the raw binding. It exists so that a test can
//! prove that a Rust panic surfaces as `ERR_INTERNAL` and the Node process survives; the public
//! TypeScript API does not expose it.

use crate::convert::guard;
use napi::Result;
use napi_derive::napi;

#[napi(js_name = "__panicProbe")]
pub fn panic_probe() -> Result<(), &'static str> {
    guard(|| panic!("deliberate panic from __panicProbe"))
}
