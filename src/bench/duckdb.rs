//! DuckDB's column in `flotilla bench`: each query run by the DuckDB command-line
//! binary (`--duckdb PATH`, e.g. PyPI's `duckdb-cli`) over the same Parquet files
//! the other two sides read, its time DuckDB's own (`.timer on`), its output
//! discarded (`.mode trash`). One process per query, the tables as views over the
//! files, so DuckDB starts cold as the other sides do.

use std::path::Path;
use std::time::Duration;

/// Runs `sql` `iterations` times in one DuckDB process with a view per table over
/// `DATA/TABLE/*.parquet`; answers DuckDB's own time of each run.
pub fn time_query(
    duckdb: &Path,
    data: &Path,
    tables: &[&str],
    sql: &str,
    iterations: usize,
) -> Result<Vec<Duration>, String> {
    let mut args: Vec<String> = vec!["-c".into(), ".mode trash".into()];
    for t in tables {
        let files = data.join(t).join("*.parquet");
        args.push("-c".into());
        args.push(format!("CREATE VIEW {t} AS SELECT * FROM read_parquet('{}')", files.display()));
    }
    args.push("-c".into());
    args.push(".timer on".into());
    for _ in 0..iterations {
        args.push("-c".into());
        args.push(sql.to_string());
    }
    let out = std::process::Command::new(duckdb)
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", duckdb.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("duckdb: {}", err.lines().next().unwrap_or("failed")));
    }
    let times = run_times(&String::from_utf8_lossy(&out.stdout));
    if times.len() != iterations {
        return Err(format!("duckdb reported {} run times for {iterations} runs", times.len()));
    }
    Ok(times)
}

/// The `real` seconds of each `Run Time (s): real 0.123 user ...` line.
fn run_times(output: &str) -> Vec<Duration> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("Run Time (s): real "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_times_are_read_from_the_timer_lines() {
        let out = "Run Time (s): real 0.001 user 0.0005 sys 0.0005\nsomething\nRun Time (s): real 1.250 user 2 sys 0\n";
        assert_eq!(run_times(out), vec![Duration::from_millis(1), Duration::from_millis(1250)]);
    }
}
