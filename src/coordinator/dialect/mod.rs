//! Trino's SQL on DataFusion's parser: the dialect the coordinator parses every
//! statement with (`planning::plan_here`).
//!
//! `TrinoDialect` is sqlparser's generic dialect (it reports the generic dialect's type,
//! so the parser's dialect checks treat it as one) with what Trino reads differently:
//! lambdas (`x -> x + 1`), digit separators (`1_000`). What no sqlparser setting
//! reaches is rewritten around the parser: in the token stream before it (`tokens`:
//! `VALUES 1, 2` without parentheses, Trino's type syntax `ARRAY(T)` and `ROW(a T)`) and
//! in the statement after it (`rewrite`: `IF(...)`, zoned and short timestamp
//! literals, `DECIMAL '...'` with the literal's own precision, `JSON '...'`), and the
//! SQL/JSON calls' clauses (`json_clauses`), and unqualified columns of chained
//! `USING` joins (`using_joins`). Trino's `JSON` and `MAP(K, V)` types
//! are planned by `functions::types`. The README lists each
//! spelling where Trino's meaning wins over DataFusion's.

mod calls;
mod json_clauses;
mod named_windows;
pub mod output_names;
mod query_clauses;
mod rewrite;
mod star_aliases;
mod tokens;
mod unnest_relations;
pub mod using_joins;
mod view_rename;

use datafusion::common::Result;
use datafusion::sql::parser::{DFParserBuilder, Statement};
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Function, FunctionArguments, Ident, ObjectName};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, TokenizerError};

/// sqlparser's generic dialect with Trino's lambdas and digit separators.
#[derive(Debug, Default, Clone, Copy)]
pub struct TrinoDialect;

/// Answers `$name` as the generic dialect does.
macro_rules! as_generic {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool { GenericDialect.$name() })*
    };
}

impl Dialect for TrinoDialect {
    fn dialect(&self) -> std::any::TypeId {
        std::any::TypeId::of::<GenericDialect>()
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        GenericDialect.is_identifier_part(ch)
    }
    fn supports_lambda_functions(&self) -> bool {
        true
    }
    fn supports_numeric_literal_underscores(&self) -> bool {
        true
    }
    /// `(row).*`: the row's fields as columns (`coordinator::stars` expands it).
    fn supports_select_expr_star(&self) -> bool {
        true
    }
    /// `current_schema` without parentheses is a call, as `current_user` and
    /// `current_catalog` already are for the parser (their values are written in by
    /// `calls`).
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<SqlExpr, ParserError>> {
        match parser.peek_tokens::<2>() {
            [Token::Word(w), next]
                if w.quote_style.is_none() && w.keyword == Keyword::CURRENT_SCHEMA && next != Token::LParen =>
            {
                parser.next_token();
                Some(Ok(SqlExpr::Function(Function {
                    name: ObjectName::from(vec![Ident::new("current_schema")]),
                    uses_odbc_syntax: false,
                    parameters: FunctionArguments::None,
                    args: FunctionArguments::None,
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: Vec::new(),
                })))
            }
            _ => None,
        }
    }
    /// Trino's statements sqlparser does not read: `ALTER VIEW ... RENAME TO`.
    fn parse_statement(
        &self,
        parser: &mut Parser,
    ) -> Option<Result<datafusion::sql::sqlparser::ast::Statement, ParserError>> {
        view_rename::parse(parser)
    }
    as_generic!(
        supports_unicode_string_literal,
        supports_partition_by_after_order_by,
        supports_array_join_syntax,
        supports_group_by_expr,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
        supports_connect_by,
        supports_match_recognize,
        supports_pipe_operator,
        supports_start_transaction_modifier,
        supports_window_function_null_treatment_arg,
        supports_dictionary_syntax,
        supports_window_clause_named_window_reference,
        supports_parenthesized_set_variables,
        supports_select_wildcard_except,
        support_map_literal_syntax,
        allow_extract_custom,
        allow_extract_single_quotes,
        supports_extract_comma_syntax,
        supports_create_view_comment_syntax,
        supports_parens_around_table_factor,
        supports_values_as_table_factor,
        supports_create_index_with_clause,
        supports_explain_with_utility_options,
        supports_limit_comma,
        supports_update_order_by,
        supports_from_first_select,
        supports_projection_trailing_commas,
        supports_asc_desc_in_column_definition,
        supports_try_convert,
        supports_bitwise_shift_operators,
        supports_comment_on,
        supports_load_extension,
        supports_named_fn_args_with_assignment_operator,
        supports_struct_literal,
        supports_empty_projections,
        supports_nested_comments,
        supports_multiline_comment_hints,
        supports_user_host_grantee,
        supports_string_escape_constant,
        supports_array_typedef_with_brackets,
        supports_match_against,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_filter_during_aggregation,
        supports_select_wildcard_exclude,
        supports_data_type_signed_suffix,
        supports_interval_options,
        supports_quote_delimited_string,
        supports_select_wildcard_replace,
        supports_select_wildcard_ilike,
        supports_select_wildcard_rename,
        supports_optimize_table,
        supports_install,
        supports_detach,
        supports_prewhere,
        supports_with_fill,
        supports_limit_by,
        supports_interpolate,
        supports_settings,
        supports_select_format,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
        supports_key_column_option,
        supports_comma_separated_trim,
        supports_cte_without_as,
        supports_select_item_multi_column_alias,
        supports_xml_expressions,
    );
}

/// What a statement reads of its session: the terms that name it (`current_user`,
/// `current_timezone()`, ...) are its values, written into the statement. A value
/// not given (`None`) leaves its term a call the planner does not know, an error:
/// a view's definition, planned once for every user, has none.
#[derive(Debug, Clone, Default)]
pub struct SessionValues {
    pub time_zone: String,
    pub user: Option<String>,
    pub catalog: Option<String>,
    pub schema: Option<String>,
    /// The user's groups (`current_groups()`), from the access rules' group file.
    pub groups: Option<Vec<String>>,
}

impl SessionValues {
    /// A session in UTC of no one in particular (view definitions, tests).
    pub fn utc() -> Self {
        SessionValues { time_zone: "UTC".into(), ..Default::default() }
    }

    /// The values a view's definition may read: its time zone only.
    fn for_view(&self) -> Self {
        SessionValues { time_zone: self.time_zone.clone(), ..Default::default() }
    }
}

/// One statement of Trino's SQL, parsed and rewritten for DataFusion's planner, in a
/// session whose time zone is UTC.
#[cfg(test)]
pub fn parse(sql: &str, recursion_limit: usize) -> Result<Statement> {
    parse_in(sql, recursion_limit, &SessionValues::utc())
}

/// One statement of Trino's SQL, parsed and rewritten for DataFusion's planner, in
/// `session`.
pub fn parse_in(sql: &str, recursion_limit: usize, session: &SessionValues) -> Result<Statement> {
    parse_tokens(tokenize(sql)?, recursion_limit, session)
}

/// The tokens of `sql` in Trino's dialect, with their places.
pub fn tokens(sql: &str) -> std::result::Result<Vec<TokenWithSpan>, TokenizerError> {
    Tokenizer::new(&TrinoDialect, sql).tokenize_with_location()
}

/// `tokens`, failing as DataFusion's parser fails.
pub fn tokenize(sql: &str) -> Result<Vec<TokenWithSpan>> {
    tokens(sql).map_err(|e| datafusion::error::DataFusionError::SQL(Box::new(e.into()), None))
}

/// One statement from its tokens (`tokenize`'s, perhaps with clauses taken off),
/// parsed and rewritten for DataFusion's planner, in `session`.
pub fn parse_tokens(tokens: Vec<TokenWithSpan>, recursion_limit: usize, session: &SessionValues) -> Result<Statement> {
    let dialect = TrinoDialect;
    let mut tokens = tokens::rewrite(tokens);
    if json_clauses::mentions(&tokens) {
        tokens = json_clauses::rewrite(tokens).map_err(|e| datafusion::common::plan_datafusion_err!("{e}"))?;
    }
    let (tokens, star_aliases) = star_aliases::take(tokens)?;
    let mut statements = DFParserBuilder::new(tokens)
        .with_dialect(&dialect)
        .with_recursion_limit(recursion_limit)
        .build()?
        .parse_statements()?;
    if statements.len() > 1 {
        return datafusion::common::not_impl_err!("The context currently only supports a single SQL statement");
    }
    let mut statement = statements.pop_front().ok_or_else(|| {
        datafusion::common::plan_datafusion_err!("No SQL statements were provided in the query string")
    })?;
    rewrite::statement(&mut statement, session)?;
    attach_star_aliases(&mut statement, star_aliases)?;
    qualify_using_columns(&mut statement);
    rewrite_select_lists(&mut statement)?;
    Ok(statement)
}

/// `query_clauses`, `unnest_relations`, `output_names` and `named_windows` over the statement, and the one an `EXPLAIN`
/// explains.
fn rewrite_select_lists(statement: &mut Statement) -> Result<()> {
    match statement {
        Statement::Statement(s) => {
            query_clauses::rewrite(s.as_mut())?;
            unnest_relations::rewrite(s.as_mut())?;
            output_names::name(s.as_mut());
            named_windows::resolve(s.as_mut())
        }
        Statement::Explain(e) => rewrite_select_lists(e.statement.as_mut()),
        _ => Ok(()),
    }
}

/// `star_aliases::attach` over the statement, and the one an `EXPLAIN` explains.
fn attach_star_aliases(statement: &mut Statement, lists: Vec<star_aliases::StarAliases>) -> Result<()> {
    match statement {
        Statement::Statement(s) => star_aliases::attach(s.as_mut(), lists),
        Statement::Explain(e) => attach_star_aliases(e.statement.as_mut(), lists),
        _ if lists.is_empty() => Ok(()),
        _ => datafusion::common::plan_err!("column aliases after .* are allowed only in a select list"),
    }
}

/// `using_joins` over the statement, and the one an `EXPLAIN` explains.
fn qualify_using_columns(statement: &mut Statement) {
    match statement {
        Statement::Statement(s) => using_joins::qualify(s.as_mut()),
        Statement::Explain(e) => qualify_using_columns(e.statement.as_mut()),
        _ => {}
    }
}

#[cfg(test)]
#[path = "dialect_tests.rs"]
mod tests;
