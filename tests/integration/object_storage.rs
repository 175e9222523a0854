//! Tables in S3, on a real S3-compatible server (moto's, from PyPI, started here in a
//! temporary directory): TPC-H sf0_1 written into a bucket by `CREATE TABLE ... AS`,
//! all 22 queries over it equal to single-node DataFusion, `INSERT INTO` a bucket
//! table, a missing bucket, an unreachable endpoint and a wrong key as clear errors, and a worker
//! killed mid-scan under `retry_policy=task` with the right rows anyway.
//!
//! `.ci/run` installs moto into a throwaway virtualenv and names its `moto_server` in
//! `FLOTILLA_MOTO_SERVER`; without one (nor `moto_server` on the PATH) the test says
//! it skipped, and why.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flotilla::local::TPCH_QUERIES;

use super::common::{assert_same_rows, free_port, missing_service, oracle, refusing_port, EtcCluster};

const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];
const BUCKET: &str = "flotilla-test";

pub fn moto_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLOTILLA_MOTO_SERVER").map(PathBuf::from).filter(|p| p.exists()) {
        return Some(p);
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join("moto_server")).find(|p| p.exists())
}

/// The S3 server, stopped when dropped.
pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn start_moto(bin: &std::path::Path, dir: &std::path::Path) -> Moto {
    start_moto_with(bin, dir, &[]).await
}

async fn start_moto_with(bin: &std::path::Path, dir: &std::path::Path, env: &[(&str, &str)]) -> Moto {
    let port = free_port();
    let child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let moto = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(60);
    while reqwest::get(&moto.endpoint).await.is_err() {
        assert!(Instant::now() < deadline, "moto_server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    moto
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_in_a_bucket_is_written_read_and_survives_a_killed_worker() {
    let Some(bin) = moto_server() else {
        return missing_service(
            "object_storage",
            "no S3-compatible server (install PyPI moto[server] and set FLOTILLA_MOTO_SERVER to its moto_server, as \
             .ci/run does)",
        );
    };
    let root_tmp = tempfile::Builder::new().prefix("flotilla-s3-").tempdir().unwrap();
    let root = root_tmp.path().to_path_buf();
    std::fs::create_dir_all(&root).unwrap();
    let moto = start_moto(&bin, &root).await;
    // The bucket, made with the server's own API (moto checks no signature).
    let made = reqwest::Client::new().put(format!("{}/{BUCKET}", moto.endpoint)).send().await.unwrap();
    assert!(made.status().is_success(), "create bucket: {}", made.status());
    // A server that checks keys after two requests (the start-up probe and the one
    // making the bucket); it knows none, so the catalog's key is wrong.
    let locked = start_moto_with(&bin, &root, &[("INITIAL_NO_AUTH_ACTION_COUNT", "2")]).await;
    let made = reqwest::Client::new().put(format!("{}/flotilla-locked", locked.endpoint)).send().await.unwrap();
    assert!(made.status().is_success(), "create bucket: {}", made.status());
    let s3 = |endpoint: &str, allowed: &str| {
        format!(
            "connector.name=files\nfiles.allowed-locations={allowed}\n\
             s3.endpoint={endpoint}\ns3.region=us-east-1\n\
             s3.path-style-access=true\ns3.aws-access-key=testing\ns3.aws-secret-key=testing\n"
        )
    };
    // `gone` points at a port nobody listens on (held, so that no other test's
    // server can take it meanwhile); a bucket's client comes from the catalog whose
    // allowed locations name the bucket, so it has a bucket of its own.
    let (_refusing, closed_port) = refusing_port();
    let closed = format!("http://127.0.0.1:{closed_port}");
    let lake_catalog = s3(&moto.endpoint, &format!("s3://{BUCKET}/,s3://flotilla-missing/"))
        + &format!("files.warehouse=s3://{BUCKET}/warehouse\n");
    let gone_catalog = s3(&closed, "s3://flotilla-gone/");
    let locked_catalog = s3(&locked.endpoint, "s3://flotilla-locked/");
    println!("moto at {}, nothing at {closed}", moto.endpoint);
    let catalogs = [("lake", lake_catalog.as_str()), ("gone", &gone_catalog), ("locked", &locked_catalog)];
    let mut c = EtcCluster::start(&root, &catalogs, 3).await;
    let lake = c.client("lake", "tpch");
    lake.execute("CREATE SCHEMA lake.tpch").await.expect("create schema");
    let started = Instant::now();
    for t in TABLES {
        let out = lake
            .execute(&format!("CREATE TABLE lake.tpch.{t} AS SELECT * FROM tpch.sf0_1.{t}"))
            .await
            .unwrap_or_else(|e| panic!("ctas {t}: {e}"));
        assert_eq!(out.rows, oracle("sf0_1", &format!("SELECT count(*) FROM {t}")).await, "{t}");
    }
    println!("TPC-H sf0_1 written into the bucket in {:?}", started.elapsed());
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("s3 q{}", i + 1);
        let got = lake.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        assert_same_rows(&label, sql, &got.rows, &oracle("sf0_1", sql).await);
    }

    // A missing bucket, an endpoint nobody listens on and a key the server does not
    // know: errors naming the location.
    for (sql, place, why) in [
        (
            "CREATE EXTERNAL TABLE locked.default.t STORED AS PARQUET LOCATION 's3://flotilla-locked/t/'",
            "flotilla-locked",
            "InvalidAccessKeyId",
        ),
        (
            "CREATE EXTERNAL TABLE lake.tpch.nowhere STORED AS PARQUET LOCATION 's3://flotilla-missing/t/'",
            "flotilla-missing",
            "NoSuchBucket",
        ),
        (
            "CREATE EXTERNAL TABLE gone.default.t STORED AS PARQUET LOCATION 's3://flotilla-gone/t/'",
            "flotilla-gone",
            "error sending request",
        ),
    ] {
        let t = Instant::now();
        let e = lake.execute(sql).await.expect_err("no such place");
        let flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. }) = &e else {
            panic!("{sql}: {e}")
        };
        println!("{sql}: {error_name}: {message}");
        assert_eq!(error_name, "OBJECT_STORE_ERROR", "{sql}: {message}");
        assert!(message.contains(place) && message.contains(why), "{sql}: {message}");
        assert!(t.elapsed() < Duration::from_secs(60), "{sql}: took {:?}", t.elapsed());
    }

    // A worker killed mid-scan under retry_policy=task: the query ends right.
    let sql = "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity), sum(l_extendedprice) \
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY 1, 2 ORDER BY 1, 2";
    let client = lake.clone().with_session("retry_policy", "task");
    let query = tokio::spawn(async move { client.execute(sql).await });
    c.cluster.wait_for_tasks(2).await;
    c.cluster.kill_worker(0);
    let got = tokio::time::timeout(Duration::from_secs(180), query)
        .await
        .expect("query must end")
        .expect("join")
        .expect("query succeeds");
    assert_same_rows("s3 join after kill -9", sql, &got.rows, &oracle("sf0_1", sql).await);

    // A write under retry_policy=task whose worker is killed: the rows are written
    // once (only the successful attempts' files are published), no staging is left.
    let client = lake.clone().with_session("retry_policy", "task");
    let ctas = tokio::spawn(async move {
        client.execute("CREATE TABLE lake.tpch.orders_sf1 AS SELECT * FROM tpch.sf1.orders").await
    });
    c.cluster.wait_for_tasks(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.cluster.kill_worker(0);
    let made = tokio::time::timeout(Duration::from_secs(180), ctas)
        .await
        .expect("write must end")
        .expect("join")
        .expect("write succeeds");
    let count = "SELECT count(*) FROM orders";
    assert_eq!(made.rows, oracle("sf1", count).await);
    let got = lake.execute("SELECT count(*) FROM lake.tpch.orders_sf1").await.unwrap().rows;
    assert_eq!(got, oracle("sf1", count).await, "every row once");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let url = format!("{}/{BUCKET}?list-type=2&prefix=warehouse/tpch/orders_sf1/", moto.endpoint);
        let listing = reqwest::get(url).await.unwrap().text().await.unwrap();
        if !listing.contains(".flotilla-staging") {
            break;
        }
        assert!(Instant::now() < deadline, "staging left in the bucket: {listing}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // INSERT INTO a table in the bucket.
    let n = lake.execute("INSERT INTO lake.tpch.nation SELECT * FROM tpch.sf0_1.nation").await.expect("insert");
    assert_eq!(n.rows, oracle("sf0_1", "SELECT count(*) FROM nation").await);
    let q = "SELECT n_regionkey, count(*) FROM nation GROUP BY 1";
    let want = oracle("sf0_1", "SELECT n_regionkey, 2 * count(*) FROM nation GROUP BY 1").await;
    assert_same_rows("nation twice", q, &lake.execute(q).await.unwrap().rows, &want);
    c.cluster.assert_no_tasks_left().await;
    drop(c);

    // The endpoint, plain HTTP and keys from the environment only, as AWS's tools
    // read them: a catalog naming just its bucket reads the same table.
    let env_root = root.join("env");
    std::fs::create_dir_all(&env_root).unwrap();
    let env = [
        ("AWS_ENDPOINT_URL", moto.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ];
    let catalog = format!("connector.name=files\nfiles.allowed-locations=s3://{BUCKET}/\n");
    // Spooled result segments go to the bucket too (Trino's file and keys).
    std::fs::create_dir_all(env_root.join("etc-coordinator")).unwrap();
    let manager = format!("spooling-manager.name=filesystem\nfs.location=s3://{BUCKET}/spooling/\n");
    std::fs::write(env_root.join("etc-coordinator/spooling-manager.properties"), manager).unwrap();
    let e = EtcCluster::start_with_env(&env_root, &[("envlake", &catalog)], 1, &env).await;
    let client = e.client("envlake", "default");
    let location = format!("s3://{BUCKET}/warehouse/tpch/nation/");
    client.execute(&format!("CREATE EXTERNAL TABLE nation STORED AS PARQUET LOCATION '{location}'")).await.unwrap();
    let got = client.execute(q).await.unwrap().rows;
    assert_same_rows("nation through the environment's endpoint", q, &got, &want);
    spooled_to_the_bucket(&e.cluster.coordinator.url, &moto.endpoint).await;
    drop(e);
    drop(moto);
}

/// Trino's spooling protocol by hand, its segments in the bucket: `json+lz4`
/// segments, each the rows its metadata counts, every row of the result once, and
/// nothing left under the spooling prefix once each is acknowledged.
async fn spooled_to_the_bucket(coordinator: &str, s3: &str) {
    use base64::Engine;
    use serde_json::Value;
    let http = reqwest::Client::new();
    let sql = "SELECT o_orderkey, o_comment FROM tpch.sf0_1.orders";
    let start = http.post(format!("{coordinator}/v1/statement")).header("X-Trino-User", "t");
    let start = start.header("X-Trino-Query-Data-Encoding", "json+lz4").body(sql);
    let mut doc: Value = start.send().await.unwrap().json().await.unwrap();
    let (mut rows, mut spooled, mut keys) = (0u64, 0, 0i64);
    loop {
        if let Some(data) = doc.get("data").filter(|d| !d.is_null()) {
            assert_eq!(data["encoding"], "json+lz4", "the data of a page is a segment, not rows");
            for segment in data["segments"].as_array().unwrap() {
                let meta = &segment["metadata"];
                let bytes = match segment["type"].as_str().unwrap() {
                    "inline" => {
                        base64::engine::general_purpose::STANDARD.decode(segment["data"].as_str().unwrap()).unwrap()
                    }
                    _ => {
                        spooled += 1;
                        let uri = segment["uri"].as_str().unwrap();
                        http.get(uri).send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap().to_vec()
                    }
                };
                assert_eq!(meta["segmentSize"].as_u64(), Some(bytes.len() as u64));
                let json = match meta["uncompressedSize"].as_u64() {
                    Some(n) => lz4_flex::block::decompress(&bytes, n as usize).unwrap(),
                    None => bytes,
                };
                let parsed: Vec<Vec<Value>> = serde_json::from_slice(&json).unwrap();
                assert_eq!(Some(parsed.len() as u64), meta["rowsCount"].as_u64());
                assert_eq!(Some(rows), meta["rowOffset"].as_u64());
                rows += parsed.len() as u64;
                keys += parsed.iter().map(|r| r[0].as_i64().unwrap()).sum::<i64>();
                if let Some(ack) = segment["ackUri"].as_str() {
                    assert!(http.get(ack).send().await.unwrap().status().is_success());
                }
            }
        }
        let Some(next) = doc["nextUri"].as_str().map(str::to_string) else { break };
        doc = http.get(next).send().await.unwrap().json().await.unwrap();
    }
    let want = oracle("sf0_1", "SELECT count(*), sum(o_orderkey) FROM orders").await;
    assert_eq!((serde_json::json!(rows), serde_json::json!(keys)), (want[0][0].clone(), want[0][1].clone()));
    assert!(spooled > 0, "a result of {rows} rows was spooled");
    let listing =
        reqwest::get(format!("{s3}/{BUCKET}?list-type=2&prefix=spooling/")).await.unwrap().text().await.unwrap();
    assert!(!listing.contains(".segment"), "segments left in the bucket: {listing}");
}
