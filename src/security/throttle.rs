//! Failed logins slow further attempts down: a plain struct the coordinator's
//! authentication middleware asks before it checks a password and tells after.
//!
//! Each user name and each client address that failed has a count; past a few free
//! failures (typos), every further one shuts the door for twice as long as the last
//! (from half a second to `MAX_WAIT`), and an attempt while it is shut is refused
//! without checking the password. A refusal costs no hashing, so parallel guessing is
//! bounded too, not only a sequence of guesses. A good login clears its user's and its
//! address's counts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Failures before any wait.
const FREE_FAILURES: u32 = 3;
/// The first wait; each further failure doubles it.
const FIRST_WAIT: Duration = Duration::from_millis(500);
/// The longest wait: a user someone else is guessing at is locked out no longer.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// A count untouched this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Counts kept at most (forgotten oldest first past it), so that guessing from many
/// addresses cannot grow the map without bound.
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    User(String),
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// Until when the door stays shut after these failures.
    fn shut_until(&self) -> Instant {
        if self.count < FREE_FAILURES {
            return self.last;
        }
        let doublings = (self.count - FREE_FAILURES).min(16);
        self.last + (FIRST_WAIT * 2u32.pow(doublings)).min(MAX_WAIT)
    }
}

#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: parking_lot::Mutex<HashMap<Key, Failures>>,
}

fn keys(user: &str, address: Option<IpAddr>) -> impl Iterator<Item = Key> {
    std::iter::once(Key::User(user.to_string())).chain(address.map(Key::Address))
}

impl LoginThrottle {
    /// How long `user` from `address` must still wait before a password is checked;
    /// None when it may be checked now.
    pub fn wait(&self, user: &str, address: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let failures = self.failures.lock();
        keys(user, address)
            .filter_map(|k| failures.get(&k))
            .map(|f| f.shut_until().saturating_duration_since(now))
            .filter(|d| !d.is_zero())
            .max()
    }

    /// A wrong password (or an unknown user) for `user` from `address`.
    pub fn failed(&self, user: &str, address: Option<IpAddr>, now: Instant) {
        let mut failures = self.failures.lock();
        if failures.len() >= MAX_ENTRIES {
            failures.retain(|_, f| now.saturating_duration_since(f.last) < FORGET_AFTER);
            if failures.len() >= MAX_ENTRIES {
                let oldest = failures.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    failures.remove(&k);
                }
            }
        }
        for k in keys(user, address) {
            let f = failures.entry(k).or_insert(Failures { count: 0, last: now });
            if now.saturating_duration_since(f.last) >= FORGET_AFTER {
                f.count = 0;
            }
            f.count += 1;
            f.last = now;
        }
    }

    /// A good login: its user and address start afresh.
    pub fn succeeded(&self, user: &str, address: Option<IpAddr>) {
        let mut failures = self.failures.lock();
        for k in keys(user, address) {
            failures.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_shut_the_door_for_longer_each_time() {
        let t = LoginThrottle::default();
        let here: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let start = Instant::now();
        for i in 0..FREE_FAILURES {
            assert_eq!(t.wait("alice", here, start), None, "free failure {i}");
            t.failed("alice", here, start);
        }
        // The free ones are spent: half a second, then a second, two, ...
        assert_eq!(t.wait("alice", here, start), Some(FIRST_WAIT));
        t.failed("alice", here, start);
        assert_eq!(t.wait("alice", here, start), Some(FIRST_WAIT * 2));
        assert_eq!(t.wait("alice", here, start + FIRST_WAIT * 2), None, "open again once the wait is over");
        // The same address guessing another user waits too, and so does the same user
        // from another address.
        assert!(t.wait("bob", here, start).is_some());
        assert!(t.wait("alice", Some("10.0.0.2".parse().unwrap()), start).is_some());
        assert_eq!(t.wait("bob", Some("10.0.0.2".parse().unwrap()), start), None);
        for _ in 0..40 {
            t.failed("alice", here, start);
        }
        assert_eq!(t.wait("alice", here, start), Some(MAX_WAIT), "bounded");
        t.succeeded("alice", here);
        assert_eq!(t.wait("alice", here, start), None);
        // Old failures are forgotten: counting starts again.
        let t = LoginThrottle::default();
        for _ in 0..10 {
            t.failed("carol", None, start);
        }
        let later = start + FORGET_AFTER;
        t.failed("carol", None, later);
        assert_eq!(t.wait("carol", None, later), None);
    }

    #[test]
    fn guessing_from_many_addresses_keeps_a_bounded_map() {
        let t = LoginThrottle::default();
        let now = Instant::now();
        for i in 0..(MAX_ENTRIES as u32 + 10) {
            t.failed("x", Some(IpAddr::from(i.to_be_bytes())), now);
        }
        assert!(t.failures.lock().len() <= MAX_ENTRIES);
    }
}
