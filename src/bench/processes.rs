//! `ProcessCluster`: the cluster `flotilla bench --processes` measures. This very
//! binary is started again as a coordinator and N workers on loopback, each its own
//! process, as a deployment runs them; unlike the in-process `LocalCluster`, each
//! worker's resident memory can then be read from the kernel, and reset between
//! queries to get per-query peaks. The processes are killed when it is dropped.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub struct ProcessCluster {
    pub url: String,
    coordinator: Child,
    workers: Vec<Child>,
}

/// Starts `flotilla ARGS` and returns it with the URL it prints on its first line.
async fn spawn(args: &[String], secret: &str) -> Result<(Child, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut child = Command::new(exe)
        .args(args)
        .env("FLOTILLA_SHARED_SECRET", secret)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start flotilla {}: {e}", args[0]))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .map_err(|_| format!("flotilla {} printed no address within 20 s", args[0]))?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("flotilla {} exited before printing its address", args[0]))?;
    // Drained so that the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let url = first.split_whitespace().last().unwrap_or_default().to_string();
    Ok((child, url))
}

impl ProcessCluster {
    /// A coordinator that may read files below `allowed` (when given), and `workers`
    /// workers started with `worker_args`.
    pub async fn start(workers: usize, allowed: Option<&str>, worker_args: &[String]) -> Result<Self, String> {
        let secret = crate::util::random_suffix(32);
        let mut args = vec!["coordinator".to_string(), "--bind".into(), "127.0.0.1:0".into()];
        // The TPC-H queries' spelling of `tpch` (`TpchSpelling::BENCHMARK`).
        args.extend(crate::connector::tpch::TpchSpelling::BENCHMARK_FLAGS.map(String::from));
        if let Some(dir) = allowed {
            args.extend(["--files-allowed-locations".into(), dir.to_string()]);
        }
        let (coordinator, url) = spawn(&args, &secret).await?;
        let mut cluster = ProcessCluster { url, coordinator, workers: Vec::new() };
        for _ in 0..workers {
            let mut args: Vec<String> = vec![
                "worker".into(),
                "--coordinator".into(),
                cluster.url.clone(),
                "--bind".into(),
                "127.0.0.1:0".into(),
            ];
            if let Some(dir) = allowed {
                args.extend(["--files-allowed-locations".into(), dir.to_string()]);
            }
            args.extend_from_slice(worker_args);
            cluster.workers.push(spawn(&args, &secret).await?.0);
        }
        cluster.wait_for_workers(workers, &secret).await?;
        Ok(cluster)
    }

    async fn wait_for_workers(&self, n: usize, secret: &str) -> Result<(), String> {
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::time::Instant::now() < deadline {
            let nodes = http
                .get(format!("{}/v1/node", self.url))
                .header(crate::http::HEADER_INTERNAL_TOKEN, secret)
                .send()
                .await
                .ok()
                .map(|r| r.json::<Vec<serde_json::Value>>());
            if let Some(nodes) = nodes {
                if let Ok(nodes) = nodes.await {
                    if nodes.iter().filter(|n| n["alive"] == serde_json::Value::Bool(true)).count() >= n {
                        return Ok(());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("{n} workers did not join within 20 s"))
    }

    pub fn worker_pids(&self) -> Vec<u32> {
        self.workers.iter().filter_map(|w| w.id()).collect()
    }

    pub async fn shutdown(mut self) {
        for w in &mut self.workers {
            let _ = w.kill().await;
        }
        let _ = self.coordinator.kill().await;
    }
}

/// The most resident memory process `pid` has had (since the last reset).
pub fn peak_rss(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Starts a new peak for `pid` at its current resident memory (Linux' `clear_refs`
/// value 5); false where the kernel does not allow it.
pub fn reset_peak_rss(pid: &str) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}
