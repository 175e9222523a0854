//! Trino's own Python client (DB-API and its SQLAlchemy dialect) against a real
//! cluster: `tests/python/run.sh` makes a throwaway virtualenv, starts a coordinator
//! and 2 workers of this build, and runs `tests/python/test_trino_client.py`. Without
//! python3 (or a part without openssl) the script prints a `SKIPPED` line and
//! succeeds; each such line is a missing service here.

#[test]
fn trino_python_client_and_sqlalchemy_dialect_work() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/run.sh");
    let output = std::process::Command::new("bash").arg(script).arg(super::common::BIN).output().expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "Trino client test failed:\n{stdout}\n{stderr}");
    for skipped in stdout.lines().filter_map(|l| l.strip_prefix("SKIPPED ")) {
        let (what, why) = skipped.split_once(": ").unwrap_or((skipped, "no reason given"));
        super::common::missing_service(what, why);
    }
}
