//! The `postgresql` connector against Debian's PostgreSQL: a throwaway cluster made
//! here (`initdb` + `pg_ctl` in a temporary directory, as the `postgres` user when the
//! tests run as root) holding TPC-H `nation` and `region`. Its schemas and tables are
//! listed, a join of them with `tpch` `customer` and with a Parquet copy of it equals
//! the all-`tpch` query on single-node DataFusion, and `EXPLAIN` shows the filter in
//! the SQL sent to PostgreSQL.
//!
//! Without PostgreSQL's server programs (`.ci/run` installs Debian's `postgresql`) the
//! test says it skipped, and why.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use super::common::{assert_same_rows, free_port, oracle, EtcCluster};

pub fn server_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
}

/// Runs a server program, as `postgres` when we are root (initdb refuses root).
fn run(bin: &Path, args: &[&str], as_postgres: bool) {
    let mut command = if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let status = command
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(status.success(), "{} {args:?} failed", bin.display());
}

/// The throwaway PostgreSQL cluster, stopped and removed when dropped.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    root: PathBuf,
    pub port: u16,
    as_postgres: bool,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", &data, "-m", "immediate", "stop"])
                .status()
        } else {
            Command::new(self.bin.join("pg_ctl")).args(["-D", &data, "-m", "immediate", "stop"]).status()
        };
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Postgres {
    pub fn start(bin: PathBuf) -> Postgres {
        let root = std::env::temp_dir().join(format!("flotilla-pg-{}", flotilla::util::random_suffix(8)));
        std::fs::create_dir_all(&root).unwrap();
        let as_postgres = unsafe { libc::geteuid() } == 0;
        if as_postgres {
            let ok = Command::new("chown").args(["-R", "postgres"]).arg(&root).status().unwrap().success();
            assert!(ok, "chown of {}", root.display());
        }
        let port = free_port();
        let pg = Postgres { bin, data: root.join("data"), root, port, as_postgres };
        let data = pg.data.display().to_string();
        run(
            &pg.bin.join("initdb"),
            &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"],
            as_postgres,
        );
        let options = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", pg.root.display());
        let log = pg.root.join("log").display().to_string();
        run(&pg.bin.join("pg_ctl"), &["-D", &data, "-l", &log, "-o", &options, "-w", "start"], as_postgres);
        pg
    }

    fn psql(&self, sql: &str) {
        let file = self.root.join(format!("load-{}.sql", flotilla::util::random_suffix(6)));
        std::fs::write(&file, sql).unwrap();
        let status = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres", "-q"])
            .args(["-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&file)
            .status()
            .expect("psql");
        assert!(status.success(), "psql failed");
    }
}

fn sql_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{}'", s.replace('\'', "''")),
        Value::Null => "NULL".into(),
        other => other.to_string(),
    }
}

async fn inserts(table: &str) -> String {
    let rows = oracle("sf0_1", &format!("SELECT * FROM {table}")).await;
    let values: Vec<String> =
        rows.iter().map(|r| format!("({})", r.iter().map(sql_value).collect::<Vec<_>>().join(", "))).collect();
    format!("INSERT INTO {table} VALUES {};\n", values.join(", "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_tables_join_tpch_and_parquet_tables_with_filters_pushed_down() {
    let Some(bin) = server_bin() else {
        return super::common::missing_service(
            "postgresql",
            "no PostgreSQL server programs under /usr/lib/postgresql (Debian's postgresql package, which .ci/run \
             installs)",
        );
    };
    let pg = Postgres::start(bin);
    pg.psql(&format!(
        "CREATE TABLE nation (n_nationkey bigint, n_name varchar(25), n_regionkey bigint, n_comment varchar(152));\n\
         CREATE TABLE region (r_regionkey bigint, r_name varchar(25), r_comment varchar(152));\n{}{}",
        inserts("nation").await,
        inserts("region").await
    ));
    let root_tmp = tempfile::Builder::new().prefix("flotilla-pgcluster-").tempdir().unwrap();
    let root = root_tmp.path().to_path_buf();
    let catalog = format!(
        "connector.name=postgresql\nconnection-url=jdbc:postgresql://127.0.0.1:{}/postgres\nconnection-user=postgres\n\
         split-column=nation.n_nationkey\n",
        pg.port
    );
    let lake = format!("connector.name=files\nfiles.warehouse={}\n", root.join("warehouse").display());
    // The same server with a login it refuses.
    let refused = catalog.replace("connection-user=postgres", "connection-user=no_such_role");
    let c = EtcCluster::start(&root, &[("pg", &catalog), ("lake", &lake), ("pgbad", &refused)], 2).await;
    let client = c.client("tpch", "sf0_1");
    // Every statement says why, listings included (they answered 0 rows).
    for refused in ["SELECT * FROM pgbad.public.nation", "SHOW TABLES FROM pgbad.public", "SHOW SCHEMAS FROM pgbad"] {
        match client.execute(refused).await {
            Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                assert_eq!(error_name, "JDBC_ERROR", "{refused}: {message}");
                assert!(
                    message.contains("no_such_role") && message.contains("catalog pgbad"),
                    "{refused}: the server's words: {message}"
                );
            }
            other => panic!("{refused}: a refused login must be an error saying so: {other:?}"),
        }
    }
    let schemas = client.execute("SHOW SCHEMAS FROM pg").await.expect("show schemas").rows;
    assert!(schemas.contains(&vec![json!("public")]), "{schemas:?}");
    let mut tables = client.execute("SHOW TABLES FROM pg.public").await.expect("show tables").rows;
    tables.sort_by_key(|r| r[0].to_string());
    assert_eq!(tables, vec![vec![json!("nation")], vec![json!("region")]]);

    let want_sql = "SELECT n_name, count(*), sum(c_acctbal) FROM customer JOIN nation ON c_nationkey = n_nationkey \
        JOIN region ON n_regionkey = r_regionkey WHERE r_name = 'ASIA' GROUP BY n_name ORDER BY n_name";
    let want = oracle("sf0_1", want_sql).await;
    let with_tpch = "SELECT n_name, count(*), sum(c_acctbal) FROM tpch.sf0_1.customer \
        JOIN pg.public.nation ON c_nationkey = n_nationkey JOIN pg.public.region ON n_regionkey = r_regionkey \
        WHERE r_name = 'ASIA' GROUP BY n_name ORDER BY n_name";
    assert_same_rows("pg x tpch", with_tpch, &client.execute(with_tpch).await.expect("join").rows, &want);
    // The same join with customer as a Parquet table.
    client.execute("CREATE SCHEMA lake.w").await.expect("schema");
    client.execute("CREATE TABLE lake.w.customer AS SELECT * FROM tpch.sf0_1.customer").await.expect("ctas");
    let with_parquet = with_tpch.replace("tpch.sf0_1.customer", "lake.w.customer");
    assert_same_rows("pg x parquet", &with_parquet, &client.execute(&with_parquet).await.expect("join").rows, &want);

    // The filter and the projection are in the SQL PostgreSQL gets.
    let plan = client
        .execute("EXPLAIN SELECT n_name FROM pg.public.nation WHERE n_regionkey = 2 AND n_nationkey IN (8, 9, 12)")
        .await
        .expect("explain")
        .rows;
    let text: String = plan.iter().map(|r| r[0].as_str().unwrap_or_default().to_string()).collect();
    // (DataFusion writes a short IN list as ORs before it reaches the connector.)
    let pushed = "sql=SELECT \"n_name\"::text FROM \"public\".\"nation\" WHERE (\"n_regionkey\" = 2) AND ";
    assert!(text.contains(pushed) && text.contains("(\"n_nationkey\" = 12)"), "{text}");
    assert!(!text.contains("FilterExec"), "nothing is left to filter in flotilla: {text}");
    let q = "SELECT n_name FROM nation WHERE n_regionkey = 2 AND n_nationkey IN (8, 9, 12)";
    let got = client.execute(&q.replace("FROM nation", "FROM pg.public.nation")).await.expect("filtered").rows;
    assert_same_rows("pushed filter", q, &got, &oracle("sf0_1", q).await);
    // With a split column, a table is read by ranges of it, spread over the tasks.
    let all = "SELECT n_nationkey, n_name, n_regionkey FROM nation";
    let plan =
        client.execute(&format!("EXPLAIN {}", all.replace("FROM nation", "FROM pg.public.nation"))).await.unwrap().rows;
    let text: String = plan.iter().map(|r| r[0].as_str().unwrap_or_default().to_string()).collect();
    let parts: usize = text
        .split("PostgresScanExec: catalog=pg, partitions=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(parts > 1, "nation is read in ranges: {text}");
    assert!(text.contains("(\"n_nationkey\" IS NULL OR \"n_nationkey\" < "), "{text}");
    let got = client.execute(&all.replace("FROM nation", "FROM pg.public.nation")).await.expect("split scan").rows;
    assert_same_rows("split scan", all, &got, &oracle("sf0_1", all).await);
    c.cluster.assert_no_tasks_left().await;
    drop(c);
}
