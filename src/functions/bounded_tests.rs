//! The limits on what a function call makes, on one DataFusion context with the
//! library registered: the probes of a hostile user refused with their codes, values
//! of everyday sizes still answered, and the planning budget leaving the rest to run
//! time.

use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::SessionContext;

use super::{while_planning, CALL_LIMIT, PLANNING_LIMIT, VALUE_LIMIT};
use crate::error_code::ErrorCode;

fn context() -> SessionContext {
    let mut ctx = SessionContext::new();
    crate::functions::register(&mut ctx).unwrap();
    ctx
}

async fn value(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let b = batches.iter().find(|b| b.num_rows() == 1).unwrap_or_else(|| panic!("one row for {sql}"));
    let text = ArrayFormatter::try_new(b.column(0).as_ref(), &FormatOptions::new()).unwrap().value(0).to_string();
    text
}

async fn refused(ctx: &SessionContext, sql: &str) -> (Option<ErrorCode>, String) {
    let e = match ctx.sql(sql).await {
        Ok(df) => df.collect().await.expect_err(sql),
        Err(e) => e,
    };
    (crate::plan::checked_arithmetic::arithmetic_error_code(&e), e.to_string())
}

#[tokio::test]
async fn a_hostile_users_constants_are_refused_with_their_codes() {
    let ctx = context();
    let memory = Some(ErrorCode::ExceededFunctionMemoryLimit);
    for sql in [
        "SELECT cardinality(repeat('x', 2000000000))",
        "SELECT length(lpad('x', 2000000000))",
        "SELECT length(rpad('x', 2000000000, 'ab'))",
        "SELECT length(lpad('x', 20000000, 'é'))",
        "SELECT length(replace(lpad('', 100, 'b'), 'b', lpad('', 200000, 'x')))",
        "SELECT length(replace(lpad('', 100000, 'b'), '', lpad('', 200, 'x')))",
        "SELECT length(regexp_replace('abc', '', lpad('', 8000000, 'y')))",
        "SELECT length(regexp_replace('abc', 'b', lpad('', 8000000, 'y'), 'g'))",
        "SELECT cardinality(array_repeat(1, 100000000))",
        "SELECT cardinality(array_resize([1], 100000000))",
        "SELECT cardinality(generate_series(1, 100000000))",
        "SELECT cardinality(range(100000000))",
        "SELECT length(format('%999999999d', 1))",
    ] {
        let (code, message) = refused(&ctx, sql).await;
        assert_eq!(code, memory, "{sql}: {message}");
        assert!(message.contains("more than the"), "{sql}: {message}");
    }
    // Trino's limit on a sequence, with Trino's code and message, whatever the
    // sequence's type or the function around it (lambdas, which need the Trino
    // dialect, are in the integration test).
    let entries = Some(ErrorCode::InvalidFunctionArgument);
    for sql in [
        "SELECT cardinality(sequence(1, 100000000))",
        "SELECT count(*) FROM unnest(sequence(1, 100000000))",
        "SELECT cardinality(sequence(1, 10001))",
        "SELECT cardinality(sequence(20001, 1, -2))",
        "SELECT cardinality(sequence(DATE '2000-01-01', DATE '2027-05-19', INTERVAL '1' DAY))",
        "SELECT cardinality(sequence(TIMESTAMP '2000-01-01 00:00:00', TIMESTAMP '2002-01-01 00:00:00', INTERVAL '1' HOUR))",
    ] {
        let (code, message) = refused(&ctx, sql).await;
        assert_eq!(code, entries, "{sql}: {message}");
        assert!(message.contains("result of sequence function must not have more than 10000 entries"), "{message}");
    }
}

#[tokio::test]
async fn values_of_everyday_sizes_are_answered() {
    let ctx = context();
    for (sql, want) in [
        ("SELECT repeat('ab', 3)", "[ab, ab, ab]"),
        ("SELECT replace('abc', '', 'x')", "xaxbxcx"),
        ("SELECT replace('abcb', 'b')", "ac"),
        ("SELECT lpad('7', 3, '0')", "007"),
        ("SELECT rpad('ab', 5, 'é')", "abééé"),
        ("SELECT replace('abcb', 'b', 'xx')", "axxcxx"),
        ("SELECT array_repeat(1, 3)", "[1, 1, 1]"),
        ("SELECT array_resize([1], 3, 0)", "[1, 0, 0]"),
        ("SELECT sequence(1, 5, 2)", "[1, 3, 5]"),
        ("SELECT generate_series(3, 1, -1)", "[3, 2, 1]"),
        // Exactly Trino's limit, in every type: 10,000 entries.
        ("SELECT cardinality(sequence(1, 10000))", "10000"),
        ("SELECT cardinality(sequence(-10000, -1))", "10000"),
        ("SELECT cardinality(sequence(DATE '2000-01-01', DATE '2027-05-18', INTERVAL '1' DAY))", "10000"),
        ("SELECT cardinality(sequence(DATE '2000-01-01', DATE '2833-04-01', INTERVAL '1' MONTH))", "10000"),
        // One value just under the limit: 16 MiB.
        ("SELECT length(lpad('', 16777216, 'x'))", "16777216"),
        ("SELECT length(regexp_replace(lpad('', 2000, 'ab'), 'b', 'xyz'))", "4000"),
        ("SELECT length(format('%10d', 1))", "10"),
    ] {
        assert_eq!(value(&ctx, sql).await, want, "{sql}");
    }
}

#[tokio::test]
async fn a_batch_is_bounded_as_a_whole_and_each_row_on_its_own() {
    let ctx = context();
    // 100 rows of 8 MB each: every value fits, the batch (800 MB) does not.
    let batch = "SELECT max(length(lpad('x', 8000000 + n))) FROM unnest(sequence(1, 100)) t(n)";
    let (code, message) = refused(&ctx, batch).await;
    assert_eq!(code, Some(ErrorCode::ExceededFunctionMemoryLimit), "{message}");
    assert!(message.contains(&CALL_LIMIT.to_string()), "{message}");
    // One row past the value limit among small ones.
    let row = "SELECT max(length(lpad('', n, 'x'))) FROM (VALUES (1), (20000000)) t(n)";
    let (code, message) = refused(&ctx, row).await;
    assert_eq!(code, Some(ErrorCode::ExceededFunctionMemoryLimit), "{message}");
    assert!(message.contains(&VALUE_LIMIT.to_string()), "{message}");
    // Rows of everyday sizes over a column.
    let column = "SELECT sum(length(lpad(CAST(n AS VARCHAR), 1000, '0'))) FROM unnest(sequence(1, 5000)) t(n)";
    assert_eq!(value(&ctx, column).await, "5000000");
    // A sequence per row, each under Trino's limit, and one row over it.
    let per_row = "SELECT sum(cardinality(sequence(1, n))) FROM (VALUES (10), (10000)) t(n)";
    assert_eq!(value(&ctx, per_row).await, "10010");
    let over = "SELECT sum(cardinality(sequence(1, n))) FROM (VALUES (10), (10001)) t(n)";
    assert_eq!(refused(&ctx, over).await.0, Some(ErrorCode::InvalidFunctionArgument));
}

#[test]
fn planning_folds_constants_up_to_its_budget_and_leaves_the_rest_to_run_time() {
    let ctx = context();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let optimized = |sql: &str| {
        let plan = rt.block_on(async { ctx.sql(sql).await.unwrap().into_optimized_plan().unwrap() });
        let text = plan.display_indent().to_string();
        text
    };
    // Two 10 MB constants: the first folds, the second is past the 16 MiB budget.
    const { assert!(20_000_000 > PLANNING_LIMIT && 10_000_000 < PLANNING_LIMIT) };
    let sql = "SELECT length(lpad('', 10000000, 'x')) + length(lpad('', 10000000, 'y'))";
    let text = while_planning(|| optimized(sql));
    assert!(text.contains("Projection: Int32(10000000) + character_length(lpad("), "{text}");
    // Off the planning thread the budget is gone: both fold, and the answer is right.
    let folded = optimized(sql);
    assert!(folded.starts_with("Projection: Int32(20000000) AS"), "{folded}");
    assert_eq!(rt.block_on(value(&ctx, sql)), "20000000");
    // And a budget is the statement's: the next one starts afresh.
    let text = while_planning(|| optimized("SELECT length(lpad('', 10000000, 'x'))"));
    assert!(text.starts_with("Projection: Int32(10000000) AS"), "{text}");
}
