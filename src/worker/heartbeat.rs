//! What the worker says about its heartbeat to the coordinator. A worker that cannot
//! announce itself never joins the cluster, and the reason (a TLS handshake the
//! coordinator's certificate fails, a wrong shared secret, another environment) is
//! only on the worker's side: it must be logged at the default level, but a worker
//! retrying every second must not log every second. `HeartbeatLog` is the plain state
//! behind that, fed each attempt's outcome by the worker's heartbeat loop; it owns
//! nothing else.

use std::time::{Duration, Instant};

/// How often the same failure is warned about again while it lasts.
pub const REPEAT_WARNING_EVERY: Duration = Duration::from_secs(60);

/// What to log after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatNotice {
    /// Nothing new.
    Quiet,
    /// The heartbeat fails: first time, a new cause, or again after the interval.
    Failing { cause: String, repeated: u64 },
    /// Accepted after failures (or for the first time).
    Joined { after_failures: u64 },
}

#[derive(Debug, Default)]
pub struct HeartbeatLog {
    /// The cause last warned about and when.
    warned: Option<(String, Instant)>,
    /// Failures since the last success (or start).
    failures: u64,
    /// Whether one heartbeat was ever accepted.
    joined: bool,
}

impl HeartbeatLog {
    pub fn failed(&mut self, cause: String, now: Instant) -> HeartbeatNotice {
        self.failures += 1;
        let due = match &self.warned {
            None => true,
            Some((last, at)) => *last != cause || now.duration_since(*at) >= REPEAT_WARNING_EVERY,
        };
        if !due {
            return HeartbeatNotice::Quiet;
        }
        self.warned = Some((cause.clone(), now));
        HeartbeatNotice::Failing { cause, repeated: self.failures }
    }

    pub fn succeeded(&mut self) -> HeartbeatNotice {
        let failures = std::mem::take(&mut self.failures);
        let first = !std::mem::replace(&mut self.joined, true);
        let recovered = self.warned.take().is_some();
        match first || recovered {
            true => HeartbeatNotice::Joined { after_failures: failures },
            false => HeartbeatNotice::Quiet,
        }
    }
}

/// An error and its sources, one after the other: reqwest's own text for a failed
/// TLS handshake is "error sending request", the certificate's fault is three
/// sources down.
pub fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_warned_once_per_cause_and_interval() {
        let mut log = HeartbeatLog::default();
        let t0 = Instant::now();
        let bad_cert = "invalid peer certificate: CaUsedAsEndEntity".to_string();
        assert_eq!(log.failed(bad_cert.clone(), t0), HeartbeatNotice::Failing { cause: bad_cert.clone(), repeated: 1 });
        for s in 1..60 {
            assert_eq!(log.failed(bad_cert.clone(), t0 + Duration::from_secs(s)), HeartbeatNotice::Quiet);
        }
        let again = log.failed(bad_cert.clone(), t0 + REPEAT_WARNING_EVERY);
        assert_eq!(again, HeartbeatNotice::Failing { cause: bad_cert, repeated: 61 });
        // A different cause is news at once.
        let refused = "connection refused".to_string();
        let t1 = t0 + REPEAT_WARNING_EVERY + Duration::from_secs(1);
        assert_eq!(log.failed(refused.clone(), t1), HeartbeatNotice::Failing { cause: refused, repeated: 62 });
        assert_eq!(log.succeeded(), HeartbeatNotice::Joined { after_failures: 62 });
        assert_eq!(log.succeeded(), HeartbeatNotice::Quiet);
    }

    #[test]
    fn the_first_success_is_a_join() {
        let mut log = HeartbeatLog::default();
        assert_eq!(log.succeeded(), HeartbeatNotice::Joined { after_failures: 0 });
        assert_eq!(log.succeeded(), HeartbeatNotice::Quiet);
        let t0 = Instant::now();
        assert!(matches!(log.failed("timed out".into(), t0), HeartbeatNotice::Failing { repeated: 1, .. }));
        assert_eq!(log.succeeded(), HeartbeatNotice::Joined { after_failures: 1 });
    }
}
