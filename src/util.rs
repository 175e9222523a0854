//! Small helpers with no better home.

use std::time::Duration;

use rand::Rng;

/// Runs `tick` every `period` on a tokio task until `stop` turns true (or its sender
/// goes): the housekeeping loops of the coordinator and the workers.
pub fn every(period: Duration, mut stop: tokio::sync::watch::Receiver<bool>, mut tick: impl FnMut() + Send + 'static) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => tick(),
                _ = stop.wait_for(|s| *s) => break,
            }
        }
    });
}

/// Lowercase letters and digits, for ids that must not collide across processes.
pub fn random_suffix(len: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..len).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}
