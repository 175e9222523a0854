//! The web UI in headless Chromium while a query runs: the query page renders the
//! query and its stage DAG, the index page lists the query. `.ci/run` installs
//! Debian's chromium when it is missing; elsewhere, without it, the test says so and
//! skips.

use super::common::Cluster;
use serde_json::Value;

fn chromium() -> Option<&'static str> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().find(|p| std::path::Path::new(p).exists())
}

/// The DOM after the page's scripts ran, as headless Chromium dumps it.
fn rendered(browser: &str, url: &str) -> String {
    let profile_tmp = tempfile::Builder::new().prefix("flotilla-ui-").tempdir().unwrap();
    let profile = profile_tmp.path().to_path_buf();
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_ui_shows_a_running_query_and_its_stages() {
    let Some(browser) = chromium() else {
        return super::common::missing_service("the_web_ui", "chromium is not installed (.ci/run installs it)");
    };
    let cluster = Cluster::start(2, &[]).await;
    let base = cluster.coordinator.url.clone();
    let http = reqwest::Client::new();
    let sql = "SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey ORDER BY 2 DESC, 1";
    let id = cluster.start_statement("sf1", sql).await;
    cluster.wait_for_tasks(1).await;
    let info: Value = http.get(format!("{base}/v1/query/{id}")).send().await.unwrap().json().await.unwrap();
    let stages: Vec<u64> = info["stages"].as_array().unwrap().iter().map(|s| s["stage"].as_u64().unwrap()).collect();
    assert!(!stages.is_empty());

    let page = tokio::task::spawn_blocking({
        let (b, url) = (browser.to_string(), format!("{base}/ui/query.html?{id}"));
        move || rendered(&b, &url)
    })
    .await
    .unwrap();
    assert!(page.contains(&id), "query page shows the query id:\n{page}");
    for s in &stages {
        assert!(page.contains(&format!("data-stage=\"{s}\"")), "query page draws stage {s}:\n{page}");
    }
    assert!(page.contains("RUNNING") || page.contains("FINISHED"), "query page shows states:\n{page}");
    assert!(
        page.contains("id=\"query-peak-memory\"") && page.contains("memory peak "),
        "memory per query and stage:\n{page}"
    );

    let index = tokio::task::spawn_blocking({
        let (b, url) = (browser.to_string(), format!("{base}/ui/"));
        move || rendered(&b, &url)
    })
    .await
    .unwrap();
    assert!(index.contains(&id), "index lists the query:\n{index}");

    http.delete(format!("{base}/v1/query/{id}")).send().await.unwrap();
    cluster.assert_no_tasks_left().await;
}
