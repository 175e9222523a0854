use std::collections::BTreeMap;

use datafusion::common::TableReference;

use super::*;
use crate::coordinator::metadata::{CreateKind, MetadataStatement as M};
use crate::coordinator::show_stats::StatsTarget;

fn parsed(sql: &str) -> Statement {
    parse(sql, &BTreeMap::new()).unwrap_or_else(|e| panic!("{sql}: {e:?}"))
}

fn metadata(sql: &str) -> M {
    match parsed(sql) {
        Statement::Metadata(m) => m,
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(sql: &str) -> String {
    match parse(sql, &BTreeMap::new()) {
        Err(e) => e.error_name.to_string(),
        Ok(s) => panic!("{sql} parsed: {s:?}"),
    }
}

fn like(pattern: &str, escape: Option<char>) -> Option<Like> {
    Some(Like { pattern: pattern.into(), escape })
}

#[test]
fn show_statements_read_every_form_trino_documents() {
    assert_eq!(metadata("SHOW CATALOGS"), M::ShowCatalogs { like: None });
    assert_eq!(metadata("show catalogs like 't%';"), M::ShowCatalogs { like: like("t%", None) });
    assert_eq!(
        metadata("SHOW SCHEMAS FROM tpch LIKE 'sf%'"),
        M::ShowSchemas { catalog: Some("tpch".into()), like: like("sf%", None) }
    );
    assert_eq!(metadata("SHOW SCHEMAS IN \"Tpch\""), M::ShowSchemas { catalog: Some("Tpch".into()), like: None });
    assert_eq!(
        metadata("SHOW TABLES FROM tpch.tiny LIKE 'n%'"),
        M::ShowTables { catalog: Some("tpch".into()), schema: Some("tiny".into()), like: like("n%", None) }
    );
    // Quoted names keep their case and may hold dots and quotes.
    assert_eq!(
        metadata(r#"SHOW TABLES FROM "a"."b.""c""#),
        M::ShowTables { catalog: Some("a".into()), schema: Some("b.\"c".into()), like: None }
    );
    assert_eq!(
        metadata(r"SHOW TABLES IN sf1 LIKE 'line\_%' ESCAPE '\'"),
        M::ShowTables { catalog: None, schema: Some("sf1".into()), like: like(r"line\_%", Some('\\')) }
    );
    assert_eq!(
        metadata("SHOW COLUMNS FROM tpch.tiny.nation LIKE 'n%'"),
        M::ShowColumns { table: TableReference::full("tpch", "tiny", "nation"), like: like("n%", None) }
    );
    assert_eq!(metadata("DESCRIBE Nation"), M::ShowColumns { table: TableReference::bare("nation"), like: None });
    assert_eq!(
        metadata("desc tiny.\"Odd\""),
        M::ShowColumns { table: TableReference::partial("tiny", "Odd"), like: None }
    );
    assert_eq!(metadata("SHOW FUNCTIONS LIKE 'array%'"), M::ShowFunctions { like: like("array%", None) });
    assert_eq!(metadata("SHOW SESSION LIKE 'query%'"), M::ShowSession { like: like("query%", None) });
    assert_eq!(
        metadata("SHOW CREATE SCHEMA tpch.tiny"),
        M::ShowCreate { kind: CreateKind::Schema, name: vec!["tpch".into(), "tiny".into()] }
    );
    assert_eq!(
        metadata("show create view f.s.v"),
        M::ShowCreate { kind: CreateKind::View, name: vec!["f".into(), "s".into(), "v".into()] }
    );
    assert_eq!(metadata("SHOW CREATE TABLE t"), M::ShowCreate { kind: CreateKind::Table, name: vec!["t".into()] });
    assert_eq!(
        parsed("SHOW STATS FOR nation"),
        Statement::ShowStats(StatsTarget::Table(TableReference::bare("nation")))
    );
    assert_eq!(
        parsed("SHOW STATS FOR (SELECT * FROM nation WHERE n_regionkey = 1)"),
        Statement::ShowStats(StatsTarget::Query("SELECT * FROM nation WHERE n_regionkey = 1".into()))
    );
    assert_eq!(error("SHOW TABLES LIKE"), "SYNTAX_ERROR");
    assert_eq!(error("SHOW TABLES FROM a.b.c"), "SYNTAX_ERROR");
    assert_eq!(error("SHOW TABLES LIKE 'x' ESCAPE 'ab'"), "INVALID_FUNCTION_ARGUMENT");
    assert_eq!(error("SHOW NOTHING"), "SYNTAX_ERROR");
    assert_eq!(error("SHOW CATALOGS extra"), "SYNTAX_ERROR");
    // No catalog keeps statistics to collect: said, not pretended.
    assert_eq!(error("ANALYZE tpch.tiny.nation"), "NOT_SUPPORTED");
}

#[test]
fn like_patterns_match_as_sql_does() {
    let l = |p: &str, e: Option<char>, s: &str| Like { pattern: p.into(), escape: e }.matches(s).unwrap();
    assert!(l("n%", None, "nation") && !l("n%", None, "region"));
    assert!(l("_a%", None, "nation") && !l("_a%", None, "orders"));
    assert!(l(r"a\_b", Some('\\'), "a_b") && !l(r"a\_b", Some('\\'), "axb"));
    assert!(l("a.b", None, "a.b") && !l("a.b", None, "axb"), "regular expression characters are plain");
    assert!(Like { pattern: r"a\x".into(), escape: Some('\\') }.matches("ax").is_err());
}

#[test]
fn explain_reads_trinos_options() {
    let explain = |sql: &str| match parsed(sql) {
        Statement::Explain(e) => e,
        other => panic!("{sql}: {other:?}"),
    };
    let e = explain("EXPLAIN SELECT 1");
    assert_eq!((e.kind, e.format, e.statement.as_str()), (ExplainType::Distributed, ExplainFormat::Text, "SELECT 1"));
    let e = explain("explain (type logical, format json) select * from nation;");
    assert_eq!(
        (e.kind, e.format, e.statement.as_str()),
        (ExplainType::Logical, ExplainFormat::Json, "select * from nation")
    );
    let e = explain("EXPLAIN (FORMAT GRAPHVIZ) SELECT 1");
    assert_eq!((e.kind, e.format), (ExplainType::Distributed, ExplainFormat::Graphviz));
    assert_eq!(explain("EXPLAIN (TYPE VALIDATE) SELECT 1").kind, ExplainType::Validate);
    let e = explain("EXPLAIN (TYPE IO, FORMAT TEXT) SELECT 1");
    assert_eq!((e.kind, e.format), (ExplainType::Io, ExplainFormat::Json), "IO is JSON whatever the format");
    assert_eq!(parsed("EXPLAIN ANALYZE SELECT 1"), Statement::Planned("EXPLAIN ANALYZE SELECT 1".into()));
    assert_eq!(error("EXPLAIN (TYPE SIDEWAYS) SELECT 1"), "SYNTAX_ERROR");
    assert_eq!(error("EXPLAIN (TYPE IO, TYPE LOGICAL) SELECT 1"), "SYNTAX_ERROR");
    assert_eq!(error("EXPLAIN (COLOR RED) SELECT 1"), "SYNTAX_ERROR");
    assert_eq!(error("EXPLAIN"), "SYNTAX_ERROR");
}

#[test]
fn prepared_statements_bind_their_parameters_by_token() {
    let prepared: BTreeMap<String, String> = [
        (
            "q".to_string(),
            "SELECT n_name FROM nation WHERE n_nationkey = ? AND n_comment <> '?' -- ?\n AND n_name = ?".to_string(),
        ),
        ("twice".to_string(), "SELECT ? * 2".to_string()),
        ("show".to_string(), "SHOW TABLES LIKE 'n%'".to_string()),
    ]
    .into();
    let run = |sql: &str| parse(sql, &prepared);
    assert_eq!(
        run("EXECUTE q USING 3, 'it''s, here'").unwrap(),
        Statement::Planned(
            "SELECT n_name FROM nation WHERE n_nationkey = 3 AND n_comment <> '?' -- ?\n AND n_name = 'it''s, here'"
                .into()
        )
    );
    // A value that is not an atom keeps its meaning under the operator around it.
    assert_eq!(run("EXECUTE twice USING 1 + 1").unwrap(), Statement::Planned("SELECT (1 + 1) * 2".into()));
    assert_eq!(run("EXECUTE twice USING -4").unwrap(), Statement::Planned("SELECT -4 * 2".into()));
    // A prepared statement of any kind is dispatched as its kind.
    assert!(matches!(run("EXECUTE show").unwrap(), Statement::Metadata(M::ShowTables { .. })));
    assert_eq!(
        run("EXECUTE IMMEDIATE 'SELECT ?, ''?''' USING ARRAY[1, 2]").unwrap(),
        Statement::Planned("SELECT ARRAY[1, 2], '?'".into())
    );
    assert_eq!(run("execute immediate 'SELECT 1'").unwrap(), Statement::Planned("SELECT 1".into()));
    assert_eq!(run("EXECUTE twice").unwrap_err().error_name, "INVALID_PARAMETER_USAGE");
    assert_eq!(run("EXECUTE IMMEDIATE 'SELECT 1' USING 1").unwrap_err().error_name, "INVALID_PARAMETER_USAGE");
    assert_eq!(run("EXECUTE nope").unwrap_err().error_name, "NOT_FOUND");
    assert_eq!(run("EXECUTE IMMEDIATE SELECT 1").unwrap_err().error_name, "SYNTAX_ERROR");
    assert_eq!(
        parsed("PREPARE st1 FROM SELECT * FROM t WHERE a = ?"),
        Statement::Prepare { name: "st1".into(), statement: "SELECT * FROM t WHERE a = ?".into() }
    );
    assert_eq!(parsed("DEALLOCATE PREPARE st1"), Statement::Deallocate { name: "st1".into() });
    assert_eq!(
        run("DESCRIBE OUTPUT q").unwrap(),
        Statement::DescribePrepared { output: true, statement: prepared["q"].clone() }
    );
    assert!(matches!(run("DESCRIBE INPUT twice").unwrap(), Statement::DescribePrepared { output: false, .. }));
    assert_eq!(numbered_parameters("SELECT ?, '?', ? + 1").unwrap(), "SELECT $1, '?', $2 + 1");
}

#[test]
fn session_statements_parse_as_trino_users_write_them() {
    use crate::coordinator::session_statement::SessionStatement as S;
    let session = |sql: &str| match parsed(sql) {
        Statement::Session(s) => s,
        other => panic!("{sql}: {other:?}"),
    };
    assert_eq!(
        session("SET SESSION execution_policy = 'all-at-once'"),
        S::SetSession { name: "execution_policy".into(), value: "all-at-once".into() }
    );
    assert_eq!(
        session("set session hash_partition_count=8;"),
        S::SetSession { name: "hash_partition_count".into(), value: "8".into() }
    );
    assert_eq!(session("SET SESSION x = 'it''s'"), S::SetSession { name: "x".into(), value: "it's".into() });
    assert_eq!(session("SET SESSION x = true"), S::SetSession { name: "x".into(), value: "true".into() });
    assert_eq!(session("RESET SESSION Execution_Policy"), S::ResetSession { name: "execution_policy".into() });
    assert_eq!(session("USE sf1"), S::Use { catalog: None, schema: "sf1".into() });
    assert_eq!(session("use TPCH.\"sf1\""), S::Use { catalog: Some("tpch".into()), schema: "sf1".into() });
    let zone = |z: &str| S::SetTimeZone { zone: Some(z.into()) };
    assert_eq!(session("SET TIME ZONE 'America/Los_Angeles'"), zone("America/Los_Angeles"));
    assert_eq!(session("set time zone interval '-08:00' hour to minute;"), zone("-08:00"));
    assert_eq!(session("SET TIME ZONE INTERVAL '5' HOUR"), zone("+05:00"));
    assert_eq!(session("SET TIME ZONE LOCAL"), S::SetTimeZone { zone: None });
    assert_eq!(session("START TRANSACTION"), S::StartTransaction);
    assert_eq!(session("start transaction read only, isolation level read committed"), S::StartTransaction);
    assert_eq!(session("COMMIT WORK;"), S::Commit);
    assert_eq!(session("rollback"), S::Rollback);
    assert_eq!(error("START TRANSACTION ISOLATION LEVEL SERIALIZABLE"), "UNSUPPORTED_ISOLATION_LEVEL");
    for bad in [
        "SET TIME ZONE 'UTC' 'x'",
        "SET TIME ZONE INTERVAL '1' DAY",
        "COMMIT PLEASE",
        "SET SESSION x",
        "USE a.b.c",
        "SET SESSION x = a b",
        "SET SESSION x = 1 + 1",
    ] {
        assert_eq!(error(bad), "SYNTAX_ERROR", "{bad}");
    }
}

#[test]
fn other_statements_are_left_to_the_planner_as_written() {
    for sql in [
        "SELECT 1",
        "  select 'SHOW TABLES'  ",
        "WITH t AS (SELECT 1) SELECT * FROM t",
        "INSERT INTO t VALUES (1)",
        "CREATE TABLE t (a int)",
        "DELETE FROM t WHERE a = 1",
        "VALUES 1, 2",
    ] {
        assert_eq!(parsed(sql), Statement::Planned(sql.trim().to_string()), "{sql}");
    }
    // A leading comment is no part of the statement's kind.
    assert!(matches!(parsed("-- list them\nSHOW CATALOGS"), Statement::Metadata(M::ShowCatalogs { .. })));
    assert!(matches!(parsed("/* c */ SET SESSION a = 1"), Statement::Session(_)));
}

/// No kind is read from the text: comments and line breaks between a statement's
/// words, which splitting the text on white space cannot see past, change nothing;
/// the words of a literal or of a quoted name are not the statement's.
#[test]
fn kinds_come_from_tokens_not_from_the_text() {
    assert!(matches!(parsed("SHOW/* which */TABLES\n\tFROM tiny"), Statement::Metadata(M::ShowTables { .. })));
    assert!(matches!(parsed("set\n-- the policy\nsession a = 1"), Statement::Session(_)));
    assert!(matches!(parsed("EXPLAIN--\n(TYPE IO)SELECT 1"), Statement::Explain(_)));
    assert!(matches!(parsed("PREPARE\nq\nFROM\nSHOW TABLES"), Statement::Prepare { .. }));
    for sql in ["SELECT 'SHOW TABLES'", "SELECT \"show\" FROM \"use\"", "WITH show AS (SELECT 1) SELECT * FROM show"] {
        assert_eq!(parsed(sql), Statement::Planned(sql.into()), "{sql}");
    }
    // A table named like a keyword is read as a name where the grammar wants one.
    assert_eq!(metadata("DESCRIBE \"tables\""), M::ShowColumns { table: TableReference::bare("tables"), like: None });
}
