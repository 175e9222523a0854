//! `/metrics` in Prometheus' text exposition format (version 0.0.4), for the
//! coordinator and the workers. Counters that many places bump are process-wide
//! atomics here; gauges are read from live state at scrape time by the servers,
//! which render them with `Exposition`.
//!
//! Written by hand rather than with a registry crate: the set of metrics is small and
//! fixed, and the crates at hand emit OpenMetrics (`_total` suffix rules, `# EOF`),
//! which is not the classic format scrapers and the issue ask for.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Bytes of pages the exchange received in this process.
pub static EXCHANGE_BYTES: AtomicU64 = AtomicU64::new(0);
/// Pages the exchange received in this process.
pub static EXCHANGE_PAGES: AtomicU64 = AtomicU64::new(0);
/// Pages tasks of this process produced.
pub static PAGES_PRODUCED: AtomicU64 = AtomicU64::new(0);
/// Queries this coordinator accepted.
pub static QUERIES_SUBMITTED: AtomicU64 = AtomicU64::new(0);

/// Query latency in seconds, with fixed buckets.
pub struct LatencyHistogram {
    inner: Mutex<(Vec<u64>, u64, f64)>,
}

pub const LATENCY_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

pub static QUERY_LATENCY: LatencyHistogram = LatencyHistogram { inner: Mutex::new((Vec::new(), 0, 0.0)) };

impl LatencyHistogram {
    pub fn observe(&self, seconds: f64) {
        let mut h = self.inner.lock();
        if h.0.is_empty() {
            h.0 = vec![0; LATENCY_BUCKETS.len()];
        }
        for (i, b) in LATENCY_BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.0[i] += 1;
            }
        }
        h.1 += 1;
        h.2 += seconds;
    }

    fn snapshot(&self) -> (Vec<u64>, u64, f64) {
        let h = self.inner.lock();
        let buckets = if h.0.is_empty() { vec![0; LATENCY_BUCKETS.len()] } else { h.0.clone() };
        (buckets, h.1, h.2)
    }
}

/// Builds one exposition document.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
        .collect();
    format!("{{{}}}", inner.join(","))
}

impl Exposition {
    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.header(name, help, "counter");
        let _ = writeln!(self.out, "{name} {value}");
    }

    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.header(name, help, "gauge");
        let _ = writeln!(self.out, "{name} {value}");
    }

    /// A gauge with one sample per label set.
    pub fn gauge_family(&mut self, name: &str, help: &str, samples: &[(Vec<(&str, &str)>, f64)]) {
        self.header(name, help, "gauge");
        for (l, v) in samples {
            let _ = writeln!(self.out, "{name}{} {v}", labels(l));
        }
    }

    /// A gauge counting `items` per state, one sample for every state in `states`
    /// (zero included), labelled with the state's upper-case name.
    pub fn state_counts<S: PartialEq + std::fmt::Debug>(&mut self, name: &str, help: &str, states: &[S], items: &[S]) {
        let names: Vec<String> = states.iter().map(|s| format!("{s:?}").to_uppercase()).collect();
        let samples: Vec<(Vec<(&str, &str)>, f64)> = states
            .iter()
            .zip(&names)
            .map(|(s, n)| (vec![("state", n.as_str())], items.iter().filter(|i| *i == s).count() as f64))
            .collect();
        self.gauge_family(name, help, &samples);
    }

    pub fn latency_histogram(&mut self, name: &str, help: &str, h: &LatencyHistogram) {
        self.header(name, help, "histogram");
        let (buckets, count, sum) = h.snapshot();
        for (b, c) in LATENCY_BUCKETS.iter().zip(buckets) {
            let _ = writeln!(self.out, "{name}_bucket{} {c}", labels(&[("le", &b.to_string())]));
        }
        let _ = writeln!(self.out, "{name}_bucket{} {count}", labels(&[("le", "+Inf")]));
        let _ = writeln!(self.out, "{name}_sum {sum}");
        let _ = writeln!(self.out, "{name}_count {count}");
    }

    /// The process-wide exchange counters, which both servers expose.
    pub fn exchange_counters(&mut self) {
        self.counter(
            "flotilla_exchange_bytes_total",
            "Bytes of pages received through the exchange.",
            EXCHANGE_BYTES.load(Ordering::Relaxed),
        );
        self.counter(
            "flotilla_exchange_pages_total",
            "Pages received through the exchange.",
            EXCHANGE_PAGES.load(Ordering::Relaxed),
        );
        self.counter(
            "flotilla_pages_produced_total",
            "Pages produced into output buffers.",
            PAGES_PRODUCED.load(Ordering::Relaxed),
        );
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// The HTTP content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_is_valid_text_format() {
        let h = LatencyHistogram { inner: Mutex::new((Vec::new(), 0, 0.0)) };
        h.observe(0.02);
        h.observe(3.0);
        let mut e = Exposition::default();
        e.counter("x_total", "X.", 3);
        e.gauge_family("q", "Q.", &[(vec![("state", "RUNNING")], 2.0), (vec![("state", "a\"b")], 1.0)]);
        e.latency_histogram("lat_seconds", "Latency.", &h);
        let text = e.finish();
        assert!(text.contains("# TYPE x_total counter\nx_total 3\n"), "{text}");
        assert!(text.contains("q{state=\"RUNNING\"} 2\n"), "{text}");
        assert!(text.contains("q{state=\"a\\\"b\"} 1\n"), "{text}");
        assert!(text.contains("lat_seconds_bucket{le=\"0.025\"} 1\n"), "{text}");
        assert!(text.contains("lat_seconds_bucket{le=\"5\"} 2\n"), "{text}");
        assert!(
            text.contains("lat_seconds_bucket{le=\"+Inf\"} 2\nlat_seconds_sum 3.02\nlat_seconds_count 2\n"),
            "{text}"
        );
    }
}
