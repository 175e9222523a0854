//! Trino's column aliases for a star: `t.* AS (a, b)` and `(row).* AS (a, b)`.
//! sqlparser reads no alias list after `.*`, so `take` lifts each `AS (...)` that
//! follows `.*` off the tokens, keyed by the place of its `*`, and `attach` hands the
//! names to the parsed select item, as `SelectItem::ExprWithAliases` whose expression
//! is the star (`Expr::QualifiedWildcard` for `t.*`, the row's own expression for
//! `(row).*`). The dialect reads no other `expr AS (a, b)`, so that item means this
//! and only this; `coordinator::stars` expands it once the relation's columns or the
//! row's fields are known. Called by `dialect::parse_tokens`.

use std::ops::ControlFlow;

use datafusion::common::{plan_err, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Query, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan};

/// The names written after one `.*`, and where its `.` and `*` are (the parser keeps
/// the `*` of `t.*` as the item's token, but the `.` of `(row).*`).
#[derive(Debug)]
pub struct StarAliases {
    period: Location,
    star: Location,
    names: Vec<Ident>,
}

/// The tokens without the alias lists that follow `.*`, and those lists.
pub fn take(tokens: Vec<TokenWithSpan>) -> Result<(Vec<TokenWithSpan>, Vec<StarAliases>)> {
    let sig: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let at = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    let mut taken = Vec::new();
    let mut drop = vec![false; tokens.len()];
    for k in 1..sig.len() {
        let starts = at(k - 1) == Some(&Token::Period) && at(k) == Some(&Token::Mul);
        let as_list = matches!(at(k + 1), Some(Token::Word(w)) if w.keyword == Keyword::AS && w.quote_style.is_none())
            && at(k + 2) == Some(&Token::LParen);
        if !(starts && as_list) {
            continue;
        }
        let (period, star) = (tokens[sig[k - 1]].span.start, tokens[sig[k]].span.start);
        if star.line == 0 || period.line == 0 {
            return plan_err!("column aliases after .* in rewritten text are not supported");
        }
        let mut names = Vec::new();
        let mut j = k + 3;
        loop {
            match at(j) {
                Some(Token::Word(w)) => {
                    names.push(Ident { value: w.value.clone(), quote_style: w.quote_style, span: tokens[sig[j]].span })
                }
                _ => return plan_err!("expected a column name in the alias list after .* at {star}"),
            }
            match at(j + 1) {
                Some(Token::Comma) => j += 2,
                Some(Token::RParen) => break,
                _ => return plan_err!("expected ',' or ')' in the alias list after .* at {star}"),
            }
        }
        drop[sig[k + 1]..=sig[j + 1]].fill(true);
        taken.push(StarAliases { period, star, names });
    }
    if taken.is_empty() {
        return Ok((tokens, taken));
    }
    let kept = tokens.into_iter().zip(drop).filter(|(_, d)| !d).map(|(t, _)| t).collect();
    Ok((kept, taken))
}

/// Gives each alias list to the select item whose `*` it followed.
pub fn attach<V: VisitMut>(statement: &mut V, lists: Vec<StarAliases>) -> Result<()> {
    if lists.is_empty() {
        return Ok(());
    }
    let mut attach = Attach { lists };
    let _ = statement.visit(&mut attach);
    match attach.lists.first() {
        // Every `.*` the tokens had is a select item unless it sits elsewhere.
        Some(left) => plan_err!("column aliases after .* at {} are allowed only in a select list", left.star),
        None => Ok(()),
    }
}

struct Attach {
    lists: Vec<StarAliases>,
}

impl Attach {
    fn in_set(&mut self, set: &mut SetExpr) {
        match set {
            SetExpr::Select(select) => {
                for item in &mut select.projection {
                    self.in_item(item);
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.in_set(left);
                self.in_set(right);
            }
            _ => {}
        }
    }

    fn in_item(&mut self, item: &mut SelectItem) {
        let SelectItem::QualifiedWildcard(kind, options) = item else { return };
        let token = options.wildcard_token.0.span.start;
        let Some(at) = self.lists.iter().position(|l| l.star == token || l.period == token) else { return };
        let aliases = self.lists.remove(at).names;
        let expr = match kind {
            SelectItemQualifiedWildcardKind::ObjectName(name) => {
                Expr::QualifiedWildcard(name.clone(), options.wildcard_token.clone())
            }
            SelectItemQualifiedWildcardKind::Expr(e) => e.clone(),
        };
        *item = SelectItem::ExprWithAliases { expr, aliases };
    }
}

impl VisitorMut for Attach {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.in_set(query.body.as_mut());
        ControlFlow::Continue(())
    }
}
