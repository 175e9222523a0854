//! Trino's own Python client (DB-API and its SQLAlchemy dialect) against a real
//! cluster: `tests/python/run.sh` makes a throwaway virtualenv, starts a coordinator
//! and 2 workers of this build, and runs `tests/python/test_trino_client.py`. Without
//! python3 the script prints why it skipped and succeeds.

#[test]
fn trino_python_client_and_sqlalchemy_dialect_work() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/run.sh");
    let output = std::process::Command::new("bash").arg(script).arg(super::common::BIN).output().expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "Trino client test failed:\n{stdout}\n{stderr}");
}
