//! Trino's Node.js client (npm `trino-client`) against a real cluster:
//! `tests/node/trino_client.js` runs a quick query, a failing one and a large one and
//! checks what the client hands its user. `.ci/run` installs the package into a
//! throwaway directory and names its `node_modules` in `FLOTILLA_NODE_MODULES`.

use super::common::{missing_service, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trino_node_client_reads_quick_failing_and_large_queries() {
    let Some(modules) = std::env::var_os("FLOTILLA_NODE_MODULES") else {
        return missing_service("trino_node_client", "FLOTILLA_NODE_MODULES (npm trino-client) is not set");
    };
    let cluster = Cluster::start(2, &[]).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/trino_client.js");
    let output = tokio::process::Command::new("node")
        .arg(script)
        .env("NODE_PATH", modules)
        .env("FLOTILLA_URL", &cluster.coordinator.url)
        .output()
        .await;
    let output = match output {
        Ok(o) => o,
        Err(e) => return missing_service("trino_node_client", &format!("cannot run node: {e}")),
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{stdout}");
    assert!(output.status.success(), "Trino's Node.js client:\n{stdout}\n{stderr}");
}
