//! Dynamo's mocker polynomials and the two ways kvroute feeds them (see `TimingModel` in
//! `ts/replay/timing.ts` for the formulas as documented to users).

/// How an engine pass is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimingModel {
    /// Dynamo 1.6's mocker: the prefill polynomial once per pass on its total new tokens; a
    /// decode step only when some sequence was already decoding, at the summed lengths of the
    /// decoding sequences; same-timestamp arrivals share the next pass.
    Dynamo,
    /// kvroute before 0.2: one prefill polynomial per chunk, a decode step in every pass with
    /// sequences in decode, occupancy = unique blocks in use.
    Classic,
}

/// Prefill time of `t` new tokens (ms). Evaluated in the same order as the TypeScript twin, so
/// both give bit-identical durations.
pub fn prefill_ms(t: f64) -> f64 {
    if t > 0.0 {
        4.209989e-7 * t * t + 0.01518344 * t + 16.50142
    } else {
        0.0
    }
}

/// One decode step (ms) with fraction `p` of the rank's KV blocks in use.
pub fn decode_ms(p: f64) -> f64 {
    let x = p.min(1.0);
    (-25.74 * x * x + 54.01 * x + 5.74).max(1.0)
}
