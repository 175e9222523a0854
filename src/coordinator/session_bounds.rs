//! Session values bounded by what the workers' memory allows, checked by the
//! coordinator before it plans a query (`execution::execute`). A value the static
//! ranges of `config` accept can still be more than the cluster can hold: 4,096 hash
//! partitions on two small workers, or a 4 GiB output buffer on a worker that gives a
//! query 1 GiB. Such a query fails at once with `INVALID_SESSION_PROPERTY` and the
//! largest value that fits, instead of growing a worker until it dies.

use super::planner::QueryError;
use crate::config::SessionProperties;
use crate::error_code::ErrorCode;
use crate::worker::memory::human;

/// What one hash partition of a query costs over the cluster at least: each holds a
/// page (up to a batch of rows) in every producer's output buffer and in its
/// consumer's exchange buffer, plus its operator's state; a probe with 4,096
/// partitions on a tiny group-by held about 2.4 MiB a partition on one worker.
pub const PARTITION_MEMORY: u64 = 2 << 20;

/// Checks `props` against what one query may hold on each live worker
/// (`capacities`, from their heartbeats; empty when none has said).
pub fn check(props: &SessionProperties, capacities: &[u64]) -> Result<(), QueryError> {
    let (Some(&smallest), total) = (capacities.iter().min(), capacities.iter().sum::<u64>()) else {
        return Ok(());
    };
    if let Some(h) = props.hash_partition_count {
        let need = h as u64 * PARTITION_MEMORY;
        if need > total {
            return Err(invalid(format!(
                "hash_partition_count {h} needs about {} of worker memory ({} a partition), more than the {} \
                 workers let one query hold ({}): at most {}",
                human(need as usize),
                human(PARTITION_MEMORY as usize),
                capacities.len(),
                human(total as usize),
                (total / PARTITION_MEMORY).max(1)
            )));
        }
    }
    // A task holds its output buffer and its exchange buffer at once, beside its
    // operators' state: each buffer gets at most half of what the query may hold.
    let half = smallest / 2;
    for (name, value) in [
        ("output_buffer_max_bytes", props.output_buffer_max_bytes),
        ("exchange_max_buffer_bytes", props.exchange_max_buffer_bytes),
    ] {
        if let Some(b) = value.filter(|b| *b > half) {
            return Err(invalid(format!(
                "{name} {} is more than half of what one query may hold on the smallest worker ({}): at most {}",
                human(b as usize),
                human(smallest as usize),
                human(half as usize)
            )));
        }
    }
    Ok(())
}

fn invalid(message: String) -> QueryError {
    QueryError::new(ErrorCode::InvalidSessionProperty, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> SessionProperties {
        let map = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        SessionProperties::parse(&map).unwrap()
    }

    #[test]
    fn partitions_beyond_the_workers_memory_are_refused_with_the_largest_that_fits() {
        let workers = [256 << 20, 256 << 20];
        assert!(check(&props(&[("hash_partition_count", "256")]), &workers).is_ok());
        let e = check(&props(&[("hash_partition_count", "4096")]), &workers).unwrap_err();
        assert_eq!(e.error_name, "INVALID_SESSION_PROPERTY");
        assert!(e.message.contains("8.0 GiB") && e.message.contains("512.0 MiB"), "{}", e.message);
        assert!(e.message.ends_with("at most 256"), "{}", e.message);
        assert!(check(&props(&[("hash_partition_count", "4096")]), &[]).is_ok(), "no worker has said");
        assert!(check(&props(&[]), &[1 << 20]).is_ok(), "the default count is not the session's");
    }

    #[test]
    fn a_buffer_gets_at_most_half_of_the_smallest_workers_query_memory() {
        let workers = [1 << 30, 256 << 20];
        assert!(check(&props(&[("output_buffer_max_bytes", "128MB")]), &workers).is_ok());
        let e = check(&props(&[("exchange_max_buffer_bytes", "129MB")]), &workers).unwrap_err();
        assert!(e.message.starts_with("exchange_max_buffer_bytes 129.0 MiB"), "{}", e.message);
        assert!(e.message.contains("at most 128.0 MiB"), "{}", e.message);
    }
}
