//! Arrow Flight SQL with the clients people use: PyPI's ADBC driver and pyarrow's
//! Flight client (`tests/python/test_flight_sql.py`), over TLS with the node's
//! certificate and logins from the password file, on the cluster of the security
//! test. What they got is compared with single-node DataFusion; the cancelled queries
//! (one by ADBC's cancel, one by Flight's `CancelFlightInfo`) are checked on the
//! coordinator: ended USER_CANCELED, no tasks left on the workers.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::common::{missing_service, oracle, tasks_on};

/// Runs the ADBC checks against `flight_uri`; `coordinator` is the HTTPS URL.
pub async fn adbc_checks(coordinator: &str, flight_uri: &str, ca: &Path, workers: &[String], secret: &str) {
    let Ok(python) = std::env::var("FLOTILLA_ADBC_PYTHON") else {
        return missing_service(
            "https_logins_and_access_rules (Flight SQL)",
            "FLOTILLA_ADBC_PYTHON is not set: a Python with PyPI's adbc-driver-flightsql, adbc-driver-manager and \
             pyarrow (.ci/run makes one)",
        );
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/test_flight_sql.py");
    let out =
        std::process::Command::new(&python).args([script, "checks", flight_uri]).arg(ca).output().expect("run python");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "test_flight_sql.py failed:\n{stdout}\n{stderr}");
    let got: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("a JSON document");

    let nation = oracle("tiny", "SELECT n_nationkey, n_name, n_regionkey FROM nation ORDER BY n_nationkey").await;
    assert_eq!(got["nation"], json!(nation), "a DB-API cursor's rows");
    assert_eq!(got["description"][1], json!(["n_name", "string"]), "names and Arrow types: {}", got["description"]);
    let orders = oracle(
        "tiny",
        "SELECT o_orderstatus, count(*) AS n, sum(o_totalprice) AS total, min(o_orderdate) AS first \
         FROM orders GROUP BY o_orderstatus ORDER BY o_orderstatus",
    )
    .await;
    assert_eq!(got["orders"], json!(orders), "fetch_arrow_table, decimals exact");
    assert_eq!(got["orders_types"], json!(["string", "int64", "decimal128(22, 2)", "date32[day]"]));
    let param =
        oracle("tiny", "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_custkey = 370 AND o_orderstatus = 'O'");
    assert_eq!(got["parameterised"], json!(param.await[0]), "a parameterised statement");
    let again = oracle("tiny", "SELECT count(*) FROM orders WHERE o_custkey = 1").await;
    assert_eq!(got["parameterised_again"], json!(again[0]), "the same statement, new parameters");
    let missing = got["missing_table"].as_str().expect("an error");
    assert!(missing.contains("TABLE_NOT_FOUND") && missing.contains("no_such_table"), "{missing}");
    let customers = oracle("sf1", "SELECT count(*) FROM customer").await;
    assert_eq!(got["after_use"], json!(customers[0]), "USE changed the connection's schema");
    assert_eq!(got["inserted"], json!([[1, "one"], [2, "two"], [3, null]]), "executemany's rows");
    assert_eq!(got["vendor_name"], "flotilla");
    let columns = json!(["n_nationkey", "n_name", "n_regionkey", "n_comment"]);
    assert_eq!(got["objects"], json!([["tpch", "tiny", "nation", "TABLE", columns]]), "adbc_get_objects");
    let catalogs = got["alice_catalogs"].as_array().unwrap();
    for c in ["files", "memory", "system", "tpcds", "tpch"] {
        assert!(catalogs.contains(&json!(c)), "alice sees {c}: {catalogs:?}");
    }
    assert_eq!(got["reader_catalogs"], json!(["tpch"]), "the access rules' catalogs");
    let schema = got["table_schema"].as_str().unwrap();
    assert!(schema.contains("r_regionkey: int64") && schema.contains("r_name: string"), "{schema}");
    assert_eq!(got["table_types"], json!(["TABLE", "VIEW"]));
    let types = got["xdbc_types"].as_array().unwrap();
    assert!(types.contains(&json!("bigint")) && types.contains(&json!("varchar")), "{types:?}");
    let write = got["reader_write"].as_str().expect("an error");
    assert!(write.contains("PERMISSION_DENIED"), "{write}");
    let wrong = got["wrong_password"].as_str().expect("an error");
    assert!(wrong.contains("wrong user or password"), "{wrong}");
    assert!(got["after_cancel"].is_string(), "reading after a cancel fails: {}", got["after_cancel"]);
    // CancelFlightInfoResult { status: CANCELLED }.
    assert_eq!(got["cancel_flight_info"], json!(["0801"]), "the CancelFlightInfo action's answer");
    for sql in ["SELECT * FROM tpch.sf1.lineitem", "SELECT l_orderkey FROM tpch.sf1.lineitem"] {
        cancelled_on_the_coordinator(coordinator, ca, workers, secret, sql).await;
    }
}

/// The cancelled query ended USER_CANCELED, and its tasks are gone from the workers.
async fn cancelled_on_the_coordinator(coordinator: &str, ca: &Path, workers: &[String], secret: &str, sql: &str) {
    let pem = std::fs::read(ca).unwrap();
    let http =
        reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap()).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let queries: Vec<Value> = http
            .get(format!("{coordinator}/v1/query"))
            .basic_auth("alice", Some("alice-pw"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let q = queries.iter().find(|q| q["sql"] == sql).expect("the cancelled query");
        let mut left = 0;
        for w in workers {
            left += tasks_on(&http, w, Some(secret)).await.map_or(0, |t| t.len());
        }
        if q["state"] == "FAILED" && left == 0 {
            assert_eq!(q["error"]["error_name"], "USER_CANCELED", "{q}");
            return;
        }
        assert!(Instant::now() < deadline, "the cancelled query did not end, or left {left} tasks: {q}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
