//! HTTPS, password logins and access rules on a real cluster: a test CA made at run
//! time with `openssl` signs the nodes' certificate; the coordinator takes logins from
//! a Trino password file (a bcrypt and a PBKDF2 entry) and checks Trino-style access
//! rules; workers serve HTTPS too and trust the cluster's CA. The coordinator also
//! serves Arrow Flight SQL, checked with ADBC on the same cluster (`flight_sql`).
//! Without `openssl` the test says it skipped and why.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{oracle, spawn, spawn_logging_to, BIN};

const SECRET: &str = "security-test-secret";

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out =
        Command::new("openssl").args(args).current_dir(dir).output().map_err(|e| format!("cannot run openssl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("openssl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A CA, and a certificate for 127.0.0.1 and localhost signed by it: (ca.pem, node.pem
/// holding the chain and the key).
fn make_certificates(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=flotilla test CA",
        ],
    )?;
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    openssl(
        dir,
        &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=localhost"],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "node.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "node.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    )?;
    let chain = std::fs::read_to_string(dir.join("node.crt")).unwrap()
        + &std::fs::read_to_string(dir.join("node.key")).unwrap();
    std::fs::write(dir.join("node.pem"), chain).unwrap();
    Ok((dir.join("ca.pem"), dir.join("node.pem")))
}

fn password_file(dir: &Path) -> PathBuf {
    let bcrypt = bcrypt::hash("alice-pw", 6).unwrap().replacen("$2b$", "$2y$", 1);
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(b"reader-pw", b"pepper", 1000, &mut out);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let text = format!(
        "alice:{bcrypt}\nreader:1000:{}:{}\nstranger:{}\n",
        hex(b"pepper"),
        hex(&out),
        bcrypt::hash("stranger-pw", 4).unwrap()
    );
    std::fs::write(dir.join("password.db"), text).unwrap();
    dir.join("password.db")
}

const RULES: &str = r#"{
    "catalogs": [
        {"user": "alice", "allow": "all"},
        {"user": "reader", "catalog": "tpch", "allow": "read-only"}
    ],
    "impersonation": [{"original_user": "alice", "new_user": "reader"}]
}"#;

fn sql(server: &str, ca: &Path, user: &str, password: Option<&str>, statement: &str) -> (bool, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["sql", "--server", server, "--ca"]).arg(ca).args([
        "--user",
        user,
        "--output-format",
        "csv",
        "-e",
        statement,
    ]);
    if let Some(p) = password {
        cmd.arg("--password").env("FLOTILLA_PASSWORD", p);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_logins_and_access_rules() {
    let dir_tmp = tempfile::Builder::new().prefix("flotilla-security-").tempdir().unwrap();
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, node_pem) = match make_certificates(&dir) {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return super::common::missing_service(
                "https_logins_and_access_rules",
                &format!("cannot make test certificates with openssl: {e}"),
            );
        }
    };
    let passwords = password_file(&dir);
    std::fs::write(dir.join("rules.json"), RULES).unwrap();
    let (ca_s, node_s, pw_s, rules_s) = (
        ca.display().to_string(),
        node_pem.display().to_string(),
        passwords.display().to_string(),
        dir.join("rules.json").display().to_string(),
    );
    let flight_port = super::common::free_port().to_string();
    let coordinator = spawn(
        &[
            &[
                "coordinator",
                "--bind",
                "127.0.0.1:0",
                "--flight-sql-port",
                &flight_port,
                "--shared-secret",
                SECRET,
                "--https-cert",
                &node_s,
                "--truststore",
                &ca_s,
                "--password-file",
                &pw_s,
                "--access-rules",
                &rules_s,
                // Stages and exchanges between workers, over TLS too.
                "--session",
                "single_task_max_rows=0",
            ][..],
            &flotilla::connector::tpch::TpchSpelling::BENCHMARK_FLAGS,
        ]
        .concat(),
    );
    assert!(coordinator.url.starts_with("https://"), "{}", coordinator.url);
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(spawn(&[
            "worker",
            "--coordinator",
            &coordinator.url,
            "--bind",
            "127.0.0.1:0",
            "--shared-secret",
            SECRET,
            "--https-cert",
            &node_s,
            "--truststore",
            &ca_s,
        ]));
    }
    let pem = std::fs::read(&ca).unwrap();
    let trusting =
        reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap()).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let nodes: Vec<Value> = match trusting
            .get(format!("{}/v1/node", coordinator.url))
            .basic_auth("alice", Some("alice-pw"))
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let https_workers =
            nodes.iter().filter(|n| n["alive"] == true && n["url"].as_str().unwrap_or("").starts_with("https://"));
        if https_workers.count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the HTTPS workers did not join: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Arrow Flight SQL over TLS with the same logins and rules (`flight_sql`).
    let worker_urls: Vec<String> = workers.iter().map(|w| w.url.clone()).collect();
    let flight_uri = format!("grpc+tls://127.0.0.1:{flight_port}");
    super::flight_sql::adbc_checks(&coordinator.url, &flight_uri, &ca, &worker_urls, SECRET).await;

    // Logins: the CLI over HTTPS with the test CA; a query's rows equal DataFusion's.
    let query = "SELECT count(*), sum(o_totalprice) FROM tpch.tiny.orders";
    let want = oracle("tiny", query).await;
    let want_csv = format!(
        "{},{}\n",
        want[0][0].as_i64().map(|v| v.to_string()).unwrap_or_else(|| want[0][0].as_str().unwrap().to_string()),
        want[0][1].as_str().unwrap()
    );
    let (ok, out, err) = sql(&coordinator.url, &ca, "alice", Some("alice-pw"), query);
    assert!(ok, "alice (bcrypt): {err}");
    assert_eq!(out, want_csv);
    let (ok, out, err) = sql(&coordinator.url, &ca, "reader", Some("reader-pw"), query);
    assert!(ok, "reader (PBKDF2): {err}");
    assert_eq!(out, want_csv);
    let (ok, _, err) = sql(&coordinator.url, &ca, "alice", Some("wrong"), query);
    assert!(!ok && err.contains("401"), "a wrong password: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one readable line: {err}");
    // Without a password: 401 asking for basic authentication.
    let resp = trusting.post(format!("{}/v1/statement", coordinator.url)).body(query).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().get("www-authenticate").is_some_and(|v| v.to_str().unwrap().starts_with("Basic")));
    // Plain HTTP to the HTTPS port fails, and promptly.
    let plain = coordinator.url.replacen("https://", "http://", 1);
    let started = Instant::now();
    let r = reqwest::Client::new().get(format!("{plain}/v1/info")).timeout(Duration::from_secs(10)).send().await;
    assert!(r.is_err() && started.elapsed() < Duration::from_secs(10), "plain HTTP to HTTPS: {r:?}");
    // A worker that cannot complete the TLS handshake with the coordinator (here it
    // trusts the node's certificate instead of the CA that issued it) never joins; it
    // says why at the default log level, and not at every heartbeat.
    let log = dir.join("untrusting-worker.log");
    let untrusting = ["worker", "--coordinator", &coordinator.url, "--bind", "127.0.0.1:0"];
    let tls = ["--shared-secret", SECRET, "--https-cert", &node_s, "--truststore", &node_s];
    let untrusting = spawn_logging_to(&[&untrusting[..], &tls[..]].concat(), &log);
    let warned = |text: &str| text.lines().filter(|l| l.contains("cannot announce this worker")).count();
    let deadline = Instant::now() + Duration::from_secs(15);
    while warned(&std::fs::read_to_string(&log).unwrap_or_default()) == 0 {
        assert!(Instant::now() < deadline, "no warning: {}", std::fs::read_to_string(&log).unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(warned(&text), 1, "warned once in 3 s of heartbeats: {text}");
    assert!(text.contains("certificate") && text.contains("WARN"), "the cause, as a warning: {text}");
    drop(untrusting);
    // Internal TLS: workers answer only over HTTPS.
    let worker_plain = workers[0].url.replacen("https://", "http://", 1);
    assert!(reqwest::Client::new()
        .get(format!("{worker_plain}/v1/info"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .is_err());
    // A login may not act as someone else, unless a rule says so.
    let as_other = |login: &'static str, password: &'static str, user: &'static str| {
        trusting
            .post(format!("{}/v1/statement", coordinator.url))
            .basic_auth(login, Some(password))
            .header("X-Trino-User", user)
            .body("SELECT 1")
            .send()
    };
    assert_eq!(as_other("reader", "reader-pw", "alice").await.unwrap().status(), 403);
    assert_eq!(as_other("alice", "alice-pw", "reader").await.unwrap().status(), 200);
    // Another user's query is invisible: not listed, no info, no pages, no cancel.
    let first: Value = trusting
        .post(format!("{}/v1/statement", coordinator.url))
        .basic_auth("alice", Some("alice-pw"))
        .body(query)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Trino's first answer: a `nextUri`, whatever the query's size.
    let id = first["id"].as_str().unwrap().to_string();
    let next = first["nextUri"].as_str().expect("a nextUri").to_string();
    let as_reader = |r: reqwest::RequestBuilder| r.basic_auth("reader", Some("reader-pw")).send();
    let listed: Vec<Value> =
        as_reader(trusting.get(format!("{}/v1/query", coordinator.url))).await.unwrap().json().await.unwrap();
    assert!(listed.iter().all(|q| q["query_id"] != id.as_str()), "reader sees alice's query");
    assert_eq!(as_reader(trusting.get(format!("{}/v1/query/{id}", coordinator.url))).await.unwrap().status(), 404);
    assert_eq!(as_reader(trusting.get(&next)).await.unwrap().status(), 404);
    assert_eq!(as_reader(trusting.delete(&next)).await.unwrap().status(), 404);
    let own = trusting.get(format!("{}/v1/query/{id}", coordinator.url)).basic_auth("alice", Some("alice-pw"));
    assert_eq!(own.send().await.unwrap().status(), 200);

    // Access rules: read-only cannot write, a user without a rule cannot read.
    let (ok, _, err) = sql(&coordinator.url, &ca, "reader", Some("reader-pw"), "CREATE TABLE tpch.tiny.t AS SELECT 1");
    assert!(!ok && err.contains("PERMISSION_DENIED") && err.contains("read-only"), "{err}");
    let (ok, _, err) =
        sql(&coordinator.url, &ca, "reader", Some("reader-pw"), "SELECT * FROM files.information_schema.tables");
    assert!(!ok && err.contains("PERMISSION_DENIED") && err.contains("files"), "{err}");
    let (ok, _, err) = sql(&coordinator.url, &ca, "stranger", Some("stranger-pw"), query);
    assert!(!ok && err.contains("PERMISSION_DENIED") && err.contains("tpch"), "{err}");
    let (ok, out, err) = sql(&coordinator.url, &ca, "reader", Some("reader-pw"), "SHOW CATALOGS");
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "tpch", "a user sees only the catalogs they may use");

    // Guessing slows down: past three failures (the good logins above cleared the
    // earlier one) the door shuts for a while, and even the right password is
    // refused until it opens, unhashed.
    let login = |user: &'static str, password: &'static str| {
        trusting.get(format!("{}/v1/query", coordinator.url)).basic_auth(user, Some(password)).send()
    };
    assert_eq!(login("alice", "guess-1").await.unwrap().status(), 401);
    assert_eq!(login("nobody", "guess-2").await.unwrap().status(), 401, "an unknown user is a failure too");
    assert_eq!(login("alice", "guess-3").await.unwrap().status(), 401);
    let shut = login("alice", "guess-4").await.unwrap();
    assert_eq!(shut.status(), 429);
    let body: Value = shut.json().await.unwrap();
    assert_eq!(body["error"]["code"], "TOO_MANY_FAILED_LOGINS", "{body}");
    assert_eq!(login("alice", "alice-pw").await.unwrap().status(), 429, "refused while shut");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(login("alice", "alice-pw").await.unwrap().status(), 200, "open again, and the count cleared");
    assert_eq!(login("alice", "guess-5").await.unwrap().status(), 401);
}

/// Rules for the write test: `admin` may do anything, `eve` only use `tpch`, `ivy`
/// read `tpch` and `system`, `reader` read everything; anyone else matches no rule.
const WRITE_RULES: &str = r#"{
    "catalogs": [
        {"user": "admin", "allow": "all"},
        {"user": "eve", "catalog": "tpch", "allow": "all"},
        {"user": "ivy", "catalog": "tpch|system", "allow": "read-only"},
        {"user": "reader", "allow": "read-only"},
        {"user": "viewer", "catalog": "files", "allow": "read-only"}
    ]
}"#;

/// Every statement that writes needs write access to where it writes, `COPY ... TO`
/// included, and `COPY` may not write into a table's files; a table directory
/// swapped for a link after `CREATE` is refused when the workers open it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_write_access_and_copy_keeps_out_of_tables() {
    use super::common::Cluster;
    use flotilla::client::{ClientError, StatementClient};
    let root_tmp = tempfile::Builder::new().prefix("flotilla-writes-auth-").tempdir().unwrap();
    let root = root_tmp.path().to_path_buf();
    let (allowed, outside) = (root.join("allowed"), root.join("outside"));
    std::fs::create_dir_all(allowed.join("ok")).unwrap();
    std::fs::create_dir_all(allowed.join("t2")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(allowed.join("ok/a.csv"), "h\norig\n").unwrap();
    std::fs::write(allowed.join("t2/a.csv"), "h\nmine\n").unwrap();
    std::fs::write(outside.join("secret.csv"), "h\nsecret\n").unwrap();
    std::fs::write(root.join("rules.json"), WRITE_RULES).unwrap();
    let (allowed_s, rules_s) = (allowed.display().to_string(), root.join("rules.json").display().to_string());
    let cluster =
        Cluster::start_with(&["--files-allowed-locations", &allowed_s, "--access-rules", &rules_s], 2, &[]).await;
    let as_user = |user: &str| StatementClient::new(&cluster.coordinator.url).with_user(user);
    let denied = |r: Result<flotilla::client::QueryOutcome, ClientError>, what: &str, says: &str| match r {
        Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "PERMISSION_DENIED", "{what}: {message}");
            assert!(message.contains(says), "{what}: {message}");
        }
        other => panic!("{what} was not refused: {other:?}"),
    };
    let admin = as_user("admin");
    for table in ["t", "t2"] {
        let dir = if table == "t" { "ok" } else { "t2" };
        admin
            .execute(&format!(
                "CREATE EXTERNAL TABLE files.default.{table} (h varchar) STORED AS CSV LOCATION '{allowed_s}/{dir}/' \
                 OPTIONS ('format.has_header' 'true')"
            ))
            .await
            .unwrap();
    }
    let tampering = format!("COPY (SELECT 'h' AS h UNION ALL SELECT 'TAMPERED') TO '{allowed_s}/ok/a.csv'");
    denied(as_user("eve").execute(&tampering).await, "eve's COPY", "Cannot access catalog files");
    denied(as_user("nobody").execute(&tampering).await, "a COPY by a user of no rule", "Cannot access catalog files");
    denied(as_user("reader").execute(&tampering).await, "a read-only user's COPY", "read-only");
    let reader = as_user("reader");
    for write in [
        "CREATE TABLE files.default.x AS SELECT 1 AS a".to_string(),
        "INSERT INTO files.default.t VALUES ('x')".to_string(),
        "DROP TABLE files.default.t".to_string(),
        "CREATE SCHEMA files.s2".to_string(),
        format!("CREATE EXTERNAL TABLE files.default.y (h varchar) STORED AS CSV LOCATION '{allowed_s}/ok/'"),
    ] {
        denied(reader.execute(&write).await, &write, "read-only");
    }
    // Not even the catalog's own writer may COPY over a table's files or out by a link.
    denied(admin.execute(&tampering).await, "a COPY into a table", "inside table files.default.t");
    std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
    let out_by_link = format!("COPY (SELECT 1 AS a) TO '{allowed_s}/link/x.csv'");
    denied(admin.execute(&out_by_link).await, "a COPY out by a link", "outside");
    assert!(!outside.join("x.csv").exists());
    assert_eq!(std::fs::read_to_string(allowed.join("ok/a.csv")).unwrap(), "h\norig\n", "the table's file");
    let rows = admin.execute("SELECT h FROM files.default.t").await.unwrap().rows;
    assert_eq!(rows, vec![vec![Value::from("orig")]]);
    // A COPY elsewhere under the allowed place is the admin's to make.
    let export = admin.execute(&format!("COPY (SELECT 'e' AS h) TO '{allowed_s}/export/out.csv'")).await;
    assert!(export.is_ok(), "{export:?}");
    assert!(std::fs::read_to_string(allowed.join("export/out.csv")).unwrap().contains('e'));
    // Views: reading one needs access to the view; what it reads is checked as its
    // owner (SECURITY DEFINER, the default) or as the reader (SECURITY INVOKER).
    let viewer = as_user("viewer");
    let nations = "SELECT n_name FROM tpch.tiny.nation WHERE n_regionkey = 1";
    admin.execute(&format!("CREATE VIEW files.default.nations AS {nations}")).await.unwrap();
    admin.execute(&format!("CREATE VIEW files.default.nations_inv SECURITY INVOKER AS {nations}")).await.unwrap();
    denied(viewer.execute(nations).await, "viewer reading tpch", "Cannot access catalog tpch");
    let through = viewer.execute("SELECT count(*) FROM files.default.nations").await.unwrap().rows;
    let want = super::common::oracle("tiny", "SELECT count(*) FROM nation WHERE n_regionkey = 1").await;
    assert_eq!(through, want, "a definer's view reads as its owner");
    let invoker = viewer.execute("SELECT count(*) FROM files.default.nations_inv").await;
    denied(invoker, "an invoker's view", "Cannot access catalog tpch");
    denied(as_user("eve").execute("SELECT * FROM files.default.nations").await, "eve", "Cannot access catalog files");
    metadata_of_denied_catalogs_is_hidden(&admin, &as_user("ivy")).await;
    views_trino_refuses_are_refused(&admin).await;
    views_keep_their_literals(&admin).await;
    views_read_tables_by_name(&admin, &allowed).await;
    // t2's directory becomes a link out after its CREATE: nobody reads through it.
    std::fs::remove_dir_all(allowed.join("t2")).unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("t2")).unwrap();
    let read = admin.execute("SELECT h FROM files.default.t2").await;
    denied(read, "a read through a swapped link", "outside");
}

/// Every table of the `system` catalog, read by `ivy`, who may read only `tpch` and
/// `system`: nothing of `files` (its name, its tables, the admin's comment on one)
/// nor of `memory`, while the admin sees them and `ivy` sees `tpch`'s.
async fn metadata_of_denied_catalogs_is_hidden(
    admin: &flotilla::client::StatementClient,
    ivy: &flotilla::client::StatementClient,
) {
    admin.execute("COMMENT ON TABLE files.default.t IS 'the admin''s private note'").await.unwrap();
    let text = |rows: Vec<Vec<Value>>| rows.iter().flatten().map(|v| v.to_string()).collect::<Vec<_>>().join("|");
    let admins = text(admin.execute("SELECT * FROM system.metadata.table_comments").await.unwrap().rows);
    assert!(admins.contains("private note") && admins.contains("\"files\""), "{admins}");
    let catalogs = ivy.execute("SELECT catalog_name FROM system.metadata.catalogs ORDER BY 1").await.unwrap().rows;
    assert_eq!(catalogs, vec![vec![Value::from("system")], vec![Value::from("tpch")]]);
    let tables = ivy
        .execute("SELECT table_schema, table_name FROM system.information_schema.tables WHERE table_schema <> 'information_schema'")
        .await
        .unwrap()
        .rows;
    assert!(tables.len() >= 6, "system's tables: {tables:?}");
    for table in tables {
        let (schema, name) = (table[0].as_str().unwrap(), table[1].as_str().unwrap());
        let rows = ivy.execute(&format!("SELECT * FROM system.{schema}.{name}")).await.unwrap().rows;
        let seen = text(rows);
        for hidden in ["\"files\"", "\"memory\"", "private note"] {
            assert!(!seen.contains(hidden), "ivy sees {hidden} in system.{schema}.{name}: {seen}");
        }
    }
    let comments = ivy.execute("SELECT DISTINCT catalog_name FROM system.metadata.table_comments").await.unwrap().rows;
    assert_eq!(comments, vec![vec![Value::from("tpch")]], "ivy's own catalog is described");
}

/// A view that reads itself, directly or through another view, is refused as Trino
/// refuses it (`VIEW_IS_RECURSIVE`), and the views stay as they were; `SECURITY
/// DEFINER` where no owner is kept (the memory catalog) is refused, not dropped.
async fn views_trino_refuses_are_refused(admin: &flotilla::client::StatementClient) {
    let error = |r: Result<flotilla::client::QueryOutcome, flotilla::client::ClientError>| match r {
        Err(flotilla::client::ClientError::Query(e)) => (e.error_name.to_string(), e.message),
        other => panic!("not refused: {other:?}"),
    };
    admin.execute("CREATE VIEW files.default.v1 AS SELECT 1 AS a").await.unwrap();
    let (name, message) = error(
        admin.execute("CREATE OR REPLACE VIEW files.default.v1 AS SELECT a + 1 AS a FROM files.default.v1").await,
    );
    assert_eq!((name.as_str(), message.as_str()), ("VIEW_IS_RECURSIVE", "View is recursive: files.default.v1"));
    admin.execute("CREATE VIEW files.default.v2 AS SELECT a * 10 AS a FROM files.default.v1").await.unwrap();
    let (name, _) =
        error(admin.execute("CREATE OR REPLACE VIEW files.default.v1 AS SELECT a FROM files.default.v2").await);
    assert_eq!(name, "VIEW_IS_RECURSIVE", "a cycle through another view");
    let rows = admin.execute("SELECT a FROM files.default.v2").await.unwrap().rows;
    assert_eq!(rows, vec![vec![Value::from(10)]], "the views are as they were");
    let (name, message) = error(admin.execute("CREATE VIEW memory.default.mv SECURITY DEFINER AS SELECT 1 AS a").await);
    assert_eq!(name, "NOT_SUPPORTED", "{message}");
    admin.execute("CREATE VIEW memory.default.mv SECURITY INVOKER AS SELECT 1 AS a").await.unwrap();
    admin.execute("DROP VIEW memory.default.mv").await.unwrap();
    for v in ["v2", "v1"] {
        admin.execute(&format!("DROP VIEW files.default.{v}")).await.unwrap();
    }
}

/// A view with Trino's clauses keeps its query as written: a quote doubled in a
/// literal stays one quote of the value, and `'x''||''y'` stays one literal, not a
/// concatenation (reading the clauses' tokens back as text once undid the doubling).
async fn views_keep_their_literals(admin: &flotilla::client::StatementClient) {
    admin
        .execute(
            "CREATE VIEW files.default.quoted COMMENT 'it''s' SECURITY INVOKER AS SELECT 'it''s' AS a, 'x''||''y' AS b",
        )
        .await
        .unwrap();
    let rows = admin.execute("SELECT a, b FROM files.default.quoted").await.unwrap().rows;
    assert_eq!(rows, vec![vec![Value::from("it's"), Value::from("x'||'y")]]);
    let shown = admin.execute("SHOW CREATE VIEW files.default.quoted").await.unwrap().rows;
    let text = shown[0][0].as_str().unwrap();
    assert!(text.contains("COMMENT 'it''s'") && text.contains("'x''||''y'"), "{text}");
    admin.execute("DROP VIEW files.default.quoted").await.unwrap();
}

/// A view reads the table its text names as it is when read (Trino's rule): renamed
/// away, the view fails with `INVALID_VIEW` naming why; a new table of the name, and
/// the view reads it.
async fn views_read_tables_by_name(admin: &flotilla::client::StatementClient, allowed: &Path) {
    std::fs::create_dir_all(allowed.join("other")).unwrap();
    std::fs::write(allowed.join("other/a.csv"), "h\nother\n").unwrap();
    let external = |name: &str, dir: &str| {
        format!(
            "CREATE EXTERNAL TABLE files.default.{name} (h varchar) STORED AS CSV LOCATION '{}/{dir}/' \
             OPTIONS ('format.has_header' 'true')",
            allowed.display()
        )
    };
    admin.execute(&external("b1", "ok")).await.unwrap();
    admin.execute("CREATE VIEW files.default.vb AS SELECT h FROM files.default.b1").await.unwrap();
    let read = || admin.execute("SELECT h FROM files.default.vb");
    assert_eq!(read().await.unwrap().rows, vec![vec![Value::from("orig")]]);
    admin.execute("ALTER TABLE files.default.b1 RENAME TO files.default.b3").await.unwrap();
    match read().await {
        Err(flotilla::client::ClientError::Query(e)) => {
            assert_eq!(e.error_name, "INVALID_VIEW", "{}", e.message);
            assert!(e.message.contains("files.default.vb") && e.message.contains("b1"), "{}", e.message);
        }
        other => panic!("a view over a renamed table read it: {other:?}"),
    }
    admin.execute(&external("b1", "other")).await.unwrap();
    assert_eq!(read().await.unwrap().rows, vec![vec![Value::from("other")]], "the view reads the new b1");
    for drop in ["DROP VIEW files.default.vb", "DROP TABLE files.default.b1", "DROP TABLE files.default.b3"] {
        admin.execute(drop).await.unwrap();
    }
}
