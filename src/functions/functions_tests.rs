//! Trino's documented results for the library's functions, on one DataFusion context.

use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::SessionContext;

use crate::error_code::ErrorCode;

fn context() -> SessionContext {
    let mut ctx = SessionContext::new();
    super::register(&mut ctx).unwrap();
    ctx
}

/// The single value `sql` answers, as Arrow displays it.
async fn value(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1, "{sql}");
    let b = batches.iter().find(|b| b.num_rows() == 1).unwrap();
    let text = ArrayFormatter::try_new(b.column(0).as_ref(), &FormatOptions::new()).unwrap().value(0).to_string();
    text
}

async fn error_code(ctx: &SessionContext, sql: &str) -> Option<ErrorCode> {
    let e = match ctx.sql(sql).await {
        Ok(df) => df.collect().await.unwrap_err(),
        Err(e) => e,
    };
    crate::plan::checked_arithmetic::arithmetic_error_code(&e)
}

#[tokio::test]
async fn regexp_replace_replaces_every_match() {
    let ctx = context();
    // Trino's documented results; DataFusion's own replaces the first match only.
    assert_eq!(value(&ctx, r"SELECT regexp_replace('1a 2b 14m', '(\d+)([ab]) ', '3c$2 ')").await, "3ca 3cb 14m");
    assert_eq!(value(&ctx, r"SELECT regexp_replace('1a 2b 14m', '\d+[ab] ')").await, "14m");
    // Over a column, not only a constant.
    let sql =
        r"SELECT string_agg(regexp_replace(s, '[aeiou]', '_'), ',' ORDER BY s) FROM (VALUES ('banana'), ('kiwi')) t(s)";
    assert_eq!(value(&ctx, sql).await, "b_n_n_,k_w_");
}

#[tokio::test]
async fn regexp_extract_and_position_follow_trino() {
    let ctx = context();
    assert_eq!(value(&ctx, r"SELECT regexp_extract('1a 2b 14m', '(\d+)([a-z]+)', 2)").await, "a");
    assert_eq!(value(&ctx, r"SELECT regexp_extract_all('1a 2b 14m', '\d+')").await, "[1, 2, 14]");
    assert_eq!(
        value(&ctx, r"SELECT regexp_position('I have 23 apples, 5 pears and 13 oranges', '\b\d+\b', 5, 2)").await,
        "19"
    );
    let bad_group = r"SELECT regexp_extract('1a', '(\d+)', 2)";
    assert_eq!(error_code(&ctx, bad_group).await, Some(ErrorCode::InvalidFunctionArgument));
}

#[tokio::test]
async fn bitwise_functions_and_their_errors() {
    let ctx = context();
    assert_eq!(value(&ctx, "SELECT bit_count(-7, 8)").await, "6");
    assert_eq!(value(&ctx, "SELECT bitwise_right_shift_arithmetic(-45, 64)").await, "-1");
    assert_eq!(value(&ctx, "SELECT bitwise_xor(19, 25)").await, "10");
    assert_eq!(error_code(&ctx, "SELECT bit_count(300, 8)").await, Some(ErrorCode::InvalidFunctionArgument));
}

#[tokio::test]
async fn url_parts() {
    let ctx = context();
    let url = "'https://user@example.com:8080/a/b?x=1&y=two#frag'";
    assert_eq!(value(&ctx, &format!("SELECT url_extract_host({url})")).await, "example.com");
    assert_eq!(value(&ctx, &format!("SELECT url_extract_port({url})")).await, "8080");
    assert_eq!(value(&ctx, &format!("SELECT url_extract_parameter({url}, 'y')")).await, "two");
    assert_eq!(value(&ctx, "SELECT url_encode('a b/c')").await, "a+b%2Fc");
}

#[tokio::test]
async fn element_at_of_arrays_and_maps() {
    let ctx = context();
    // Trino's documented results: from 1, from the end when negative, NULL past the end.
    assert_eq!(value(&ctx, "SELECT element_at(make_array(1, 2, 3), 2)").await, "2");
    assert_eq!(value(&ctx, "SELECT element_at(make_array(1, 2, 3), -1)").await, "3");
    assert_eq!(value(&ctx, "SELECT element_at(make_array(1, 2, 3), 5) IS NULL").await, "true");
    // A map's value itself, not a list of it; NULL for a missing key.
    assert_eq!(value(&ctx, "SELECT element_at(map(make_array('k', 'j'), make_array(7, 8)), 'j')").await, "8");
    assert_eq!(value(&ctx, "SELECT element_at(map(make_array('k'), make_array(7)), 'x') IS NULL").await, "true");
    // Over a column of arrays.
    let sql = "SELECT sum(element_at(a, 1)) FROM (VALUES (make_array(1, 2)), (make_array(10))) t(a)";
    assert_eq!(value(&ctx, sql).await, "11");
    assert_eq!(error_code(&ctx, "SELECT element_at(make_array(1), 0)").await, Some(ErrorCode::InvalidFunctionArgument));
}
