//! The differential tester's queries: drawn from a seed over the tester's tables
//! (`tables`), as a small structure the reducer can take apart. Every query is
//! deterministic (no `LIMIT` without a total order, no `row_number()` over ties), and
//! keeps to what Trino and DataFusion mean alike, except the forms whose oracle
//! computes its own answer (`Oracle::Multiset`, `Oracle::Rewritten`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The tables, each read under the aliases `x` and `y`.
pub const TABLES: [&str; 3] = ["dt0", "dt1", "dt2"];

/// One select block.
#[derive(Clone, Debug, PartialEq)]
pub struct Select {
    pub distinct: bool,
    pub items: Vec<String>,
    /// `dt0 x`.
    pub from: String,
    /// `LEFT JOIN dt1 y ON ...`: the join keyword, the relation, the condition.
    pub join: Option<(String, String, Option<String>)>,
    pub filter: Option<String>,
    /// Whether the filter holds a subquery.
    pub filter_subquery: bool,
    pub group_by: Option<String>,
    pub having: Option<String>,
}

/// A generated query and how its answer is checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    Select(Select),
    /// `left op right`.
    SetOperation {
        op: &'static str,
        left: Select,
        right: Select,
    },
    /// A query of ours and a query meaning the same in a form DataFusion answers
    /// right (subqueries outside `WHERE`).
    Rewritten {
        ours: Select,
        plain: Select,
    },
    /// A query DataFusion, the oracle, is known to answer wrongly: an `IN (subquery)`
    /// under `OR` or `NOT`, which its mark join makes true or false, never NULL
    /// (`plan::subquery_marks`), or an `EXISTS` of a correlated aggregation without
    /// grouping. Checked by its TLP partitions and DuckDB only.
    Blind(Box<Query>),
}

impl Select {
    /// The SQL, every item named `c0`, `c1`, ...: DataFusion, the oracle, names an item
    /// by its text (`CAST(x.a AS VARCHAR)` is `x.a`) and refuses two of one name; and a
    /// set operation whose side has two items of one column name (`x.b, y.b`) fails in
    /// flotilla's planning, open in `docs/testing.md`.
    pub fn sql(&self) -> String {
        let items: Vec<String> = self.items.iter().enumerate().map(|(i, e)| format!("{e} AS c{i}")).collect();
        let mut sql = format!("SELECT {}{}", if self.distinct { "DISTINCT " } else { "" }, items.join(", "));
        sql.push_str(&format!(" FROM {}", self.from));
        if let Some((kind, relation, on)) = &self.join {
            sql.push_str(&format!(" {kind} {relation}"));
            if let Some(on) = on {
                sql.push_str(&format!(" ON {on}"));
            }
        }
        if let Some(f) = &self.filter {
            sql.push_str(&format!(" WHERE {f}"));
        }
        if let Some(g) = &self.group_by {
            sql.push_str(&format!(" GROUP BY {g}"));
        }
        if let Some(h) = &self.having {
            sql.push_str(&format!(" HAVING {h}"));
        }
        sql
    }

    fn aggregates(&self) -> bool {
        self.group_by.is_some()
    }
}

impl Query {
    /// The SQL run on the cluster.
    pub fn sql(&self) -> String {
        match self {
            Query::Select(s) => s.sql(),
            Query::SetOperation { op, left, right } => format!("{} {op} {}", left.sql(), right.sql()),
            Query::Rewritten { ours, .. } => ours.sql(),
            Query::Blind(q) => q.sql(),
        }
    }

    /// The select block whose TLP partitions are checked, if the query is one.
    pub fn select(&self) -> Option<&Select> {
        match self {
            Query::Select(s) => Some(s),
            Query::Blind(q) => q.select(),
            _ => None,
        }
    }
}

struct Draw {
    rng: StdRng,
    /// Whether `y` is in scope.
    joined: bool,
    /// Whether a form DataFusion answers wrongly was drawn (see `Query::Blind`).
    blind: bool,
    /// Whether a subquery predicate was drawn since `plain` last reset it.
    subqueries: bool,
}

const INT_COLUMNS: [&str; 3] = ["k", "a", "b"];

impl Draw {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.rng.random_range(0..xs.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn alias(&mut self) -> &'static str {
        if self.joined && self.chance(0.4) {
            "y"
        } else {
            "x"
        }
    }

    fn int_column(&mut self) -> String {
        format!("{}.{}", self.alias(), self.pick(&INT_COLUMNS))
    }

    fn int_expr(&mut self, depth: u32) -> String {
        match self.rng.random_range(0..if depth > 1 { 2 } else { 8 }) {
            0 | 1 => self.int_column(),
            2 => format!("{}", self.rng.random_range(-2..6)),
            3 => format!("({} + {})", self.int_expr(depth + 1), self.int_expr(depth + 1)),
            4 => format!("({} * 2)", self.int_expr(depth + 1)),
            5 => format!("coalesce({}, {})", self.int_column(), self.rng.random_range(0..3)),
            6 => format!(
                "CASE WHEN {} THEN {} ELSE {} END",
                self.predicate(depth + 1, false),
                self.int_expr(depth + 1),
                self.int_expr(depth + 1)
            ),
            _ => format!("(-{})", self.int_column()),
        }
    }

    fn value_expr(&mut self, depth: u32) -> String {
        let alias = self.alias();
        match self.rng.random_range(0..6) {
            0 => format!("{alias}.d"),
            1 => format!("{alias}.s"),
            2 => format!("CAST({alias}.a AS VARCHAR)"),
            3 => format!("upper({alias}.s)"),
            _ => self.int_expr(depth),
        }
    }

    fn comparison(&mut self) -> &'static str {
        const COMPARISONS: [&str; 6] = ["=", "<>", "<", "<=", ">", ">="];
        COMPARISONS[self.rng.random_range(0..COMPARISONS.len())]
    }

    fn predicate(&mut self, depth: u32, subqueries: bool) -> String {
        let top = if depth > 1 {
            4
        } else if subqueries {
            12
        } else {
            8
        };
        match self.rng.random_range(0..top) {
            0 | 1 => format!("{} {} {}", self.int_expr(depth + 1), self.comparison(), self.int_expr(depth + 1)),
            2 => format!("{} IS NULL", self.int_column()),
            3 => {
                let a = self.alias();
                format!("{a}.d {} {}", self.comparison(), self.pick(&["0.5", "1.5", "-2.0", "CAST('NaN' AS DOUBLE)"]))
            }
            4 => {
                let a = self.alias();
                format!("{a}.s {} '{}'", self.pick(&["=", "<", ">=", "LIKE"]), self.pick(&["a", "b%", "", "ab"]))
            }
            5 => format!(
                "{} BETWEEN {} AND {}",
                self.int_column(),
                self.rng.random_range(-2..2),
                self.rng.random_range(0..5)
            ),
            6 => format!("({} OR {})", self.predicate(depth + 1, subqueries), self.predicate(depth + 1, subqueries)),
            7 => format!("NOT ({})", self.predicate(depth + 1, subqueries)),
            8 | 9 => self.subquery_predicate(depth),
            10 => format!("{} IN (1, 2, NULL)", self.int_column()),
            _ => format!("({} AND {})", self.predicate(depth + 1, false), self.predicate(depth + 1, false)),
        }
    }

    /// `EXISTS`, `IN`, a quantified or a scalar comparison, correlated on `k` (by
    /// equality or an inequality, which DataFusion cannot pull past an aggregation) or
    /// not, or only through a subquery inside it.
    fn subquery_predicate(&mut self, depth: u32) -> String {
        self.subqueries = true;
        let table = *self.pick(&TABLES);
        let correlated = self.chance(0.6);
        let outer = self.alias();
        // Now and then a subquery inside, reading both the subquery's row and the
        // outer one.
        let extra = match self.chance(0.15) {
            true => format!(
                "EXISTS (SELECT 1 FROM {} w WHERE w.k {} z.k AND w.a {} {outer}.a)",
                self.pick(&TABLES),
                self.pick(&["=", "<"]),
                self.comparison()
            ),
            false => format!("z.{} {} {}", self.pick(&INT_COLUMNS), self.comparison(), self.rng.random_range(-1..4)),
        };
        let link = *self.pick(&["=", "=", "<", ">="]);
        let filter = match correlated {
            true => format!(" WHERE z.k {link} {outer}.k AND {extra}"),
            false => format!(" WHERE {extra}"),
        };
        let column = self.pick(&INT_COLUMNS);
        // Now and then the subquery reads a join whose sides are both correlated.
        let table = match correlated && self.chance(0.15) {
            true => {
                let (left, right) = (self.pick(&TABLES), self.pick(&TABLES));
                let (l, r) = (self.comparison(), self.comparison());
                let join = self.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]);
                format!(
                    "(SELECT z1.k, z1.a, z2.b FROM (SELECT * FROM {left} WHERE a {l} {outer}.a) z1 {join} \
                     (SELECT * FROM {right} WHERE b {r} {outer}.b) z2 ON z1.k = z2.k)"
                )
            }
            false => table.to_string(),
        };
        match self.rng.random_range(0..7) {
            0 | 1 => {
                // Now and then over an aggregation without grouping, which answers a
                // row for every outer row; DataFusion, correlated, does not
                // (apache/datafusion#24960).
                let listed = match self.chance(0.2) {
                    true => {
                        self.blind |= correlated;
                        *self.pick(&["count(*)", "max(z.a)"])
                    }
                    false => "1",
                };
                let not = if self.chance(0.5) { "NOT " } else { "" };
                format!("{not}EXISTS (SELECT {listed} FROM {table} z{filter})")
            }
            2 => {
                self.blind |= depth > 0;
                format!("{outer}.{column} IN (SELECT z.{column} FROM {table} z{filter})")
            }
            3 if !correlated => {
                self.blind |= depth > 0;
                format!("{outer}.{column} NOT IN (SELECT z.{column} FROM {table} z{filter})")
            }
            4 => format!(
                "{outer}.{column} {} {} (SELECT z.{column} FROM {table} z{filter})",
                self.comparison(),
                self.pick(&["ALL", "ANY", "SOME"])
            ),
            5 => format!("{outer}.{column} {} (SELECT count(*) FROM {table} z{filter})", self.comparison()),
            _ => format!("{outer}.{column} {} (SELECT max(z.{column}) FROM {table} z{filter})", self.comparison()),
        }
    }

    fn relation(&mut self, alias: &str) -> String {
        format!("{} {alias}", self.pick(&TABLES))
    }

    fn join(&mut self) -> Option<(String, String, Option<String>)> {
        if self.chance(0.35) {
            return None;
        }
        if self.chance(0.12) {
            self.joined = true;
            return Some(self.lateral());
        }
        let kind = self.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]).to_string();
        let relation = self.relation("y");
        self.joined = true;
        let on = match kind.as_str() {
            "CROSS JOIN" => None,
            _ => Some(match self.rng.random_range(0..5) {
                0 | 1 => "x.k = y.k".to_string(),
                2 => format!("x.k = y.k AND {}", self.predicate(1, false)),
                3 => format!("x.a {} y.b", self.comparison()),
                _ => "(x.k = y.k OR x.a = y.a)".to_string(),
            }),
        };
        Some((kind, relation, on))
    }

    /// A lateral join `y` over `x`'s rows, correlated on any comparison of the keys:
    /// the first rows by a total order, an aggregation (one row per `x` row), or a
    /// projection of `x`'s column. Its columns are the tables' own names.
    fn lateral(&mut self) -> (String, String, Option<String>) {
        let table = self.pick(&TABLES);
        let link = *self.pick(&["=", "<", ">=", "<>"]);
        let extra = match self.chance(0.5) {
            true => format!(" AND z.a {} {}", self.comparison(), self.rng.random_range(-1..4)),
            false => String::new(),
        };
        let filter = format!("WHERE z.k {link} x.k{extra}");
        let body = match self.rng.random_range(0..3) {
            0 => format!(
                "SELECT z.k, z.a, z.b, z.d, z.s FROM {table} z {filter} ORDER BY z.a NULLS LAST, z.b NULLS LAST, \
                 z.s NULLS LAST, z.k NULLS LAST, z.d NULLS LAST LIMIT {}",
                self.rng.random_range(1..3)
            ),
            1 => format!(
                "SELECT count(*) AS k, sum(z.a) AS a, max(z.b) AS b, sum(z.d) AS d, max(z.s) AS s FROM {table} z {filter}"
            ),
            _ => format!("SELECT z.k, z.a + x.a AS a, z.b, z.d, z.s FROM {table} z {filter}"),
        };
        match self.chance(0.5) {
            true => ("CROSS JOIN".into(), format!("LATERAL ({body}) y"), None),
            false => ("LEFT JOIN".into(), format!("LATERAL ({body}) y"), Some("true".into())),
        }
    }

    fn plain(&mut self) -> Select {
        self.joined = false;
        let from = self.relation("x");
        let join = self.join();
        let items = unique((0..self.rng.random_range(1..4)).map(|_| self.value_expr(0)).collect());
        self.subqueries = false;
        let filter = self.chance(0.7).then(|| self.predicate(0, true));
        let filter_subquery = std::mem::take(&mut self.subqueries);
        Select { distinct: self.chance(0.15), items, from, join, filter, filter_subquery, group_by: None, having: None }
    }

    /// A grouping key: a column, now and then a subquery correlated on one (then true).
    fn group_key(&mut self) -> (String, bool) {
        let column = self.int_column();
        match self.chance(0.1) {
            true => {
                let (table, op) = (self.pick(&TABLES), self.pick(&["=", "<"]));
                (format!("(SELECT count(*) FROM {table} z WHERE z.k {op} {column})"), true)
            }
            false => (column, false),
        }
    }

    fn aggregate(&mut self) -> Select {
        let mut s = self.plain();
        s.distinct = false;
        let drawn: Vec<(String, bool)> = (0..self.rng.random_range(1..3)).map(|_| self.group_key()).collect();
        // The parser takes no subquery inside `ROLLUP`, `CUBE` or `GROUPING SETS`.
        let plain = drawn.iter().any(|(_, subquery)| *subquery);
        let keys: Vec<String> = drawn.into_iter().map(|(k, _)| k).collect();
        let aggregates = [
            "count(*)".to_string(),
            format!("count({})", self.value_expr(1)),
            format!("sum({})", self.int_column()),
            // Not of `d`: DataFusion's min and max of doubles with a NaN depend on the
            // order partial results meet (open, `docs/testing.md`).
            format!("min({})", self.int_expr(1)),
            format!("max({})", self.int_column().replace(".k", ".s")),
            format!("count(DISTINCT {})", self.int_column()),
        ];
        let mut items = keys.clone();
        for _ in 0..self.rng.random_range(1..4) {
            items.push(self.pick(&aggregates).clone());
        }
        let group_by = match self.rng.random_range(0..6) {
            _ if plain => keys.join(", "),
            0 if keys.len() == 2 => format!("GROUPING SETS (({}), ({}), ())", keys[0], keys[1]),
            1 => format!("ROLLUP ({})", keys.join(", ")),
            2 => format!("CUBE ({})", keys.join(", ")),
            _ => keys.join(", "),
        };
        s.items = unique(items);
        s.group_by = Some(group_by);
        s.having = self.chance(0.3).then(|| format!("count(*) > {}", self.rng.random_range(0..3)));
        s
    }

    fn window(&mut self) -> Select {
        let mut s = self.plain();
        s.distinct = false;
        let part = self.int_column();
        let order = self.int_column();
        let window = [
            format!("rank() OVER (PARTITION BY {part} ORDER BY {order})"),
            format!("dense_rank() OVER (ORDER BY {order})"),
            format!("sum({order}) OVER (PARTITION BY {part})"),
            format!("count(*) OVER (PARTITION BY {part} ORDER BY {order})"),
        ];
        // No `row_number()` and no `ROWS` frame: over ties of the window's ORDER BY
        // they depend on the order rows come in.
        let w = self.pick(&window).clone();
        s.items.push(w);
        s.items = unique(std::mem::take(&mut s.items));
        s
    }

    /// A select-list `EXISTS` and the same as a join with counts.
    fn select_list_exists(&mut self) -> Query {
        self.joined = false;
        let from = self.relation("x");
        let table = *self.pick(&TABLES);
        let (column, op, bound) = (self.pick(&INT_COLUMNS), self.comparison(), self.rng.random_range(-1..4));
        let filter = self.chance(0.5).then(|| self.predicate(1, false));
        let ours = Select {
            distinct: false,
            items: vec![
                "x.k".into(),
                "x.a".into(),
                format!("EXISTS (SELECT 1 FROM {table} z WHERE z.k = x.k AND z.{column} {op} {bound})"),
            ],
            from: from.clone(),
            join: None,
            filter: filter.clone(),
            filter_subquery: false,
            group_by: None,
            having: None,
        };
        let counted = format!("(SELECT z.k, count(*) c FROM {table} z WHERE z.{column} {op} {bound} GROUP BY z.k) m");
        let plain = Select {
            distinct: false,
            items: vec!["x.k".into(), "x.a".into(), "coalesce(m.c, 0) > 0".into()],
            from,
            join: Some(("LEFT JOIN".into(), counted, Some("m.k = x.k".into()))),
            filter,
            filter_subquery: false,
            group_by: None,
            having: None,
        };
        Query::Rewritten { ours, plain }
    }

    fn set_operation(&mut self) -> Query {
        let op = *self.pick(&["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]);
        let width = self.rng.random_range(1..3);
        let side = |d: &mut Draw| {
            let mut s = d.plain();
            s.items = (0..width).map(|_| d.int_column()).collect();
            s
        };
        let left = side(self);
        let right = side(self);
        Query::SetOperation { op, left, right }
    }
}

/// `items` without repeats: single-node DataFusion, the oracle, refuses two items of
/// one name (flotilla names them `_colN`).
fn unique(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The query of `seed`.
pub fn query(seed: u64) -> Query {
    let mut d = Draw { rng: StdRng::seed_from_u64(seed), joined: false, blind: false, subqueries: false };
    let q = match d.rng.random_range(0..10) {
        0..=2 => Query::Select(d.plain()),
        3..=4 => Query::Select(d.aggregate()),
        5 => Query::Select(d.window()),
        6 => d.select_list_exists(),
        _ => d.set_operation(),
    };
    match d.blind {
        true => Query::Blind(Box::new(q)),
        false => q,
    }
}

/// Smaller forms of `s`, each one part dropped, for the reducer.
pub fn smaller(s: &Select) -> Vec<Select> {
    let mut out = Vec::new();
    let mut push = |f: &dyn Fn(&mut Select)| {
        let mut t = s.clone();
        f(&mut t);
        if t != *s {
            out.push(t);
        }
    };
    push(&|t| {
        t.filter = None;
        t.filter_subquery = false;
    });
    push(&|t| t.having = None);
    push(&|t| t.distinct = false);
    if !s.items.iter().any(|i| i.contains("y.")) && !s.filter.as_deref().unwrap_or("").contains("y.") {
        push(&|t| t.join = None);
    }
    if s.items.len() > 1 {
        for i in 0..s.items.len() {
            let keep_key = s.aggregates() && s.group_by.as_deref().is_some_and(|g| g.contains(s.items[i].as_str()));
            if !keep_key {
                push(&|t| {
                    t.items.remove(i);
                });
            }
        }
    }
    out
}
