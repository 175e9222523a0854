//! Trino's regular expression functions (`regexp.md`): `regexp_replace` (every match,
//! Trino's `$1` and `${name}` in the replacement; without one, matches are removed),
//! `regexp_extract`, `regexp_extract_all`, `regexp_position` and `regexp_split`.
//! DataFusion's `regexp_like` and `regexp_count` already answer as Trino's do.
//! Patterns are compiled once per distinct pattern in a batch.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use regex::Regex;

use super::invalid_argument;
use super::simple::{evaluate, function};

/// Compiled patterns by their text, for one batch.
#[derive(Default)]
struct Patterns(HashMap<String, Regex>);

impl Patterns {
    fn get(&mut self, pattern: &str) -> Result<&Regex> {
        if !self.0.contains_key(pattern) {
            let re = Regex::new(pattern)
                .map_err(|e| invalid_argument(format!("invalid regular expression '{pattern}': {e}")))?;
            self.0.insert(pattern.to_string(), re);
        }
        Ok(&self.0[pattern])
    }
}

fn strings(a: &ArrayRef) -> &StringArray {
    a.as_string::<i32>()
}

fn int_arg(args: &[ArrayRef], n: usize, row: usize, default: i64) -> Option<i64> {
    match args.get(n) {
        None => Some(default),
        Some(a) => a
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .is_valid(row)
            .then(|| a.as_primitive::<datafusion::arrow::datatypes::Int64Type>().value(row)),
    }
}

/// Trino's replacement text (`$2`, `${name}`, `\$` for a dollar) in Rust's syntax.
fn replacement(text: &str, groups: usize) -> Result<String> {
    let mut out = String::with_capacity(text.len() + 4);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => return Err(invalid_argument("Illegal replacement sequence: a trailing backslash")),
            },
            '$' if chars.peek() == Some(&'{') => {
                out.push('$');
                for c in chars.by_ref() {
                    out.push(c);
                    if c == '}' {
                        break;
                    }
                }
            }
            '$' => {
                // As Java reads it: the longest run of digits naming an existing group.
                let mut group = match chars.next().and_then(|d| d.to_digit(10)) {
                    Some(d) => d as usize,
                    None => return Err(invalid_argument("Illegal group reference in the replacement")),
                };
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    if group * 10 + d as usize > groups {
                        break;
                    }
                    group = group * 10 + d as usize;
                    chars.next();
                }
                if group > groups {
                    return Err(invalid_argument(format!("Illegal group reference: group {group} does not exist")));
                }
                out.push_str(&format!("${{{group}}}"));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn regexp_replace(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0]), strings(&args[1]));
    let with = args.get(2).map(strings);
    let mut patterns = Patterns::default();
    let mut out = StringBuilder::new();
    let mut made = 0;
    for i in 0..text.len() {
        if text.is_null(i) || pattern.is_null(i) || with.is_some_and(|w| w.is_null(i)) {
            out.append_null();
            continue;
        }
        let re = patterns.get(pattern.value(i))?;
        let by = match with {
            Some(w) => replacement(w.value(i), re.captures_len() - 1)?,
            None => String::new(),
        };
        let value = replace_all(re, text.value(i), &by, made)?;
        made += value.len();
        out.append_value(value);
    }
    super::bounded::made(made)?;
    Ok(Arc::new(out.finish()))
}

/// `re.replace_all(text, by)`, checked against the functions' limits as it grows
/// (`made`: what the call made before): an empty pattern matches at every character,
/// so a short text and a long replacement make a value of their lengths' product.
fn replace_all(re: &Regex, text: &str, by: &str, made: usize) -> Result<String> {
    let mut out = String::new();
    let mut last = 0;
    for caps in re.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&text[last..m.start()]);
        caps.expand(by, &mut out);
        last = m.end();
        super::bounded::check_growing("regexp_replace", out.len(), made + out.len())?;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

fn group_of(re: &Regex, group: i64) -> Result<usize> {
    let groups = re.captures_len() - 1;
    match usize::try_from(group) {
        Ok(g) if g <= groups => Ok(g),
        _ => Err(invalid_argument(format!("Pattern has {groups} groups. Cannot access group {group}"))),
    }
}

/// Each row of `(text, pattern[, group])` in turn: the compiled pattern, the text and
/// the group to take (checked against the pattern), or `None` for a NULL argument.
fn each_group(args: &[ArrayRef], mut row: impl FnMut(Option<(&Regex, &str, usize)>)) -> Result<()> {
    let (text, pattern) = (strings(&args[0]), strings(&args[1]));
    let mut patterns = Patterns::default();
    for i in 0..text.len() {
        let (false, false, Some(group)) = (text.is_null(i), pattern.is_null(i), int_arg(args, 2, i, 0)) else {
            row(None);
            continue;
        };
        let re = patterns.get(pattern.value(i))?;
        let group = group_of(re, group)?;
        row(Some((re, text.value(i), group)));
    }
    Ok(())
}

fn regexp_extract(args: &[ArrayRef]) -> Result<ArrayRef> {
    let mut out = StringBuilder::new();
    each_group(args, |row| {
        let found = row.and_then(|(re, text, group)| re.captures(text)?.get(group));
        out.append_option(found.map(|m| m.as_str()));
    })?;
    Ok(Arc::new(out.finish()))
}

fn regexp_extract_all(args: &[ArrayRef]) -> Result<ArrayRef> {
    let mut out = ListBuilder::new(StringBuilder::new());
    each_group(args, |row| match row {
        None => out.append_null(),
        Some((re, text, group)) => {
            for c in re.captures_iter(text) {
                out.values().append_option(c.get(group).map(|m| m.as_str()));
            }
            out.append(true);
        }
    })?;
    Ok(Arc::new(out.finish()))
}

/// The 1-based character position of the `occurrence`th match at or after the
/// character `start`, or -1.
fn position(re: &Regex, text: &str, start: i64, occurrence: i64) -> Result<i64> {
    if start < 1 {
        return Err(invalid_argument("start position cannot be smaller than 1"));
    }
    if occurrence < 1 {
        return Err(invalid_argument("occurrence cannot be smaller than 1"));
    }
    let Some((from, _)) = text.char_indices().nth(start as usize - 1) else { return Ok(-1) };
    let Some(m) = re.find_iter(&text[from..]).nth(occurrence as usize - 1) else { return Ok(-1) };
    Ok(start + text[from..from + m.start()].chars().count() as i64)
}

fn regexp_position(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0]), strings(&args[1]));
    let mut patterns = Patterns::default();
    let mut out = Vec::with_capacity(text.len());
    for i in 0..text.len() {
        let (start, occurrence) = (int_arg(args, 2, i, 1), int_arg(args, 3, i, 1));
        let (false, false, Some(start), Some(occurrence)) = (text.is_null(i), pattern.is_null(i), start, occurrence)
        else {
            out.push(None);
            continue;
        };
        out.push(Some(position(patterns.get(pattern.value(i))?, text.value(i), start, occurrence)?));
    }
    Ok(Arc::new(Int64Array::from(out)))
}

fn regexp_split(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0]), strings(&args[1]));
    let mut patterns = Patterns::default();
    let mut out = ListBuilder::new(StringBuilder::new());
    for i in 0..text.len() {
        if text.is_null(i) || pattern.is_null(i) {
            out.append_null();
            continue;
        }
        for piece in patterns.get(pattern.value(i))?.split(text.value(i)) {
            out.values().append_value(piece);
        }
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
}

/// Exactly `(varchar, varchar)` followed by each of `tails` of `bigint`s.
fn text_pattern(tails: &[usize]) -> Signature {
    let forms = tails
        .iter()
        .map(|&n| {
            let mut types = vec![DataType::Utf8, DataType::Utf8];
            types.extend(std::iter::repeat_n(DataType::Int64, n));
            TypeSignature::Exact(types)
        })
        .collect();
    Signature::one_of(forms, Volatility::Immutable)
}

fn varchar(_: &[DataType]) -> Result<DataType> {
    Ok(DataType::Utf8)
}

fn varchar_array(_: &[DataType]) -> Result<DataType> {
    Ok(DataType::new_list(DataType::Utf8, true))
}

/// Trino's `regexp_replace`, with DataFusion's four-argument form (flags: `g` for
/// every match, `i`; `\\1` for a group) kept for the SQL written for it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RegexpReplace {
    signature: Signature,
}

impl ScalarUDFImpl for RegexpReplace {
    fn name(&self) -> &str {
        "regexp_replace"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.len() == 4 {
            let growth = super::bounded::Growth::PatternReplace;
            super::bounded::check("regexp_replace", growth, super::bounded::estimate(growth, &args)?)?;
            return datafusion::functions::regex::regexp_replace().invoke_with_args(args);
        }
        evaluate(&args.args, regexp_replace)
    }
}

pub fn functions() -> Vec<ScalarUDF> {
    let replace = Signature::one_of(
        (2..=4).map(|n| TypeSignature::Exact(vec![DataType::Utf8; n])).collect(),
        Volatility::Immutable,
    );
    vec![
        ScalarUDF::new_from_impl(RegexpReplace { signature: replace }),
        function("regexp_extract", text_pattern(&[0, 1]), varchar, regexp_extract),
        function("regexp_extract_all", text_pattern(&[0, 1]), varchar_array, regexp_extract_all),
        function("regexp_position", text_pattern(&[0, 1, 2]), |_| Ok(DataType::Int64), regexp_position),
        function("regexp_split", text_pattern(&[0]), varchar_array, regexp_split),
    ]
}

/// `regexp_replace(s, pattern, x -> ...)` (planned as `regexp_replace_by`): each match
/// replaced by the lambda's value for the array of its capture groups. The lambda is
/// evaluated once per batch over every match of every row.
pub fn lambda_functions() -> Vec<Arc<datafusion::logical_expr::HigherOrderUDF>> {
    use super::higher_order::lambda;
    let groups = |_: super::higher_order::ArgFields| {
        let item = Arc::new(datafusion::arrow::datatypes::Field::new("item", DataType::Utf8, true));
        let groups = datafusion::arrow::datatypes::Field::new("groups", DataType::List(item), true);
        Ok(vec![vec![Arc::new(groups)]])
    };
    let returns = |_: &[datafusion::logical_expr::ValueOrLambda<_, _>]| {
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new("regexp_replace", DataType::Utf8, true)))
    };
    vec![lambda("regexp_replace_by", 2, 1, groups, returns, regexp_replace_by)]
}

fn regexp_replace_by(call: &super::higher_order::Call) -> Result<ArrayRef> {
    use datafusion::arrow::compute::cast;
    let text = cast(&call.values[0], &DataType::Utf8)?;
    let pattern = cast(&call.values[1], &DataType::Utf8)?;
    let (text, pattern) = (strings(&text), strings(&pattern));
    let mut patterns = Patterns::default();
    // Every match: its row, its byte range, its groups.
    let mut matches: Vec<(usize, usize, usize)> = Vec::new();
    let mut groups = ListBuilder::new(StringBuilder::new());
    for i in 0..text.len() {
        if text.is_null(i) || pattern.is_null(i) {
            continue;
        }
        let re = patterns.get(pattern.value(i))?;
        for caps in re.captures_iter(text.value(i)) {
            let whole = caps.get(0).expect("group 0 is the match");
            matches.push((i, whole.start(), whole.end()));
            for g in 1..caps.len() {
                groups.values().append_option(caps.get(g).map(|m| m.as_str()));
            }
            groups.append(true);
        }
    }
    let rows = datafusion::arrow::array::UInt32Array::from(matches.iter().map(|m| m.0 as u32).collect::<Vec<_>>());
    let groups: ArrayRef = Arc::new(groups.finish());
    let replaced = cast(&super::higher_order::apply(call.lambdas[0], &[groups], &rows)?, &DataType::Utf8)?;
    let replaced = strings(&replaced);
    let mut out = StringBuilder::new();
    let mut next = 0usize;
    for i in 0..text.len() {
        if text.is_null(i) || pattern.is_null(i) {
            out.append_null();
            continue;
        }
        let value = text.value(i);
        let mut result = String::with_capacity(value.len());
        let mut at = 0;
        let mut null = false;
        while next < matches.len() && matches[next].0 == i {
            let (_, start, end) = matches[next];
            result.push_str(&value[at..start]);
            match replaced.is_null(next) {
                true => null = true,
                false => result.push_str(replaced.value(next)),
            }
            at = end;
            next += 1;
        }
        result.push_str(&value[at..]);
        if null {
            out.append_null();
        } else {
            out.append_value(result);
        }
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::replacement;

    #[test]
    fn replacements_read_as_java_reads_them() {
        assert_eq!(replacement("3c$2 ", 2).unwrap(), "3c${2} ");
        assert_eq!(replacement("$12", 2).unwrap(), "${1}2");
        assert_eq!(replacement("$12", 12).unwrap(), "${12}");
        assert_eq!(replacement(r"\$1 ${name}", 1).unwrap(), "$$1 ${name}");
        assert!(replacement("$3", 2).is_err());
    }
}
