//! The JSON library over Arrow arrays and its path language, without a planner.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, ListArray};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type};
use serde_json::{json, Value};

use super::path;
use super::sql::query_for_tests;
use super::value::{from_json, json_field, to_json_texts};

fn items(path_text: &str, document: Value) -> Result<Vec<Value>, path::PathError> {
    path::parse(path_text).expect("a valid path").evaluate(&document)
}

#[test]
fn lax_paths_unwrap_arrays_and_skip_what_is_missing() {
    let doc = json!({"comment": "nice", "children": [10, 13, 16]});
    assert_eq!(items("lax $.children[*]?(@ > 10)", doc.clone()), Ok(vec![json!(13), json!(16)]));
    assert_eq!(items("lax $.children[last]", doc.clone()), Ok(vec![json!(16)]));
    assert_eq!(items("lax $.children[0 to 1]", doc.clone()), Ok(vec![json!(10), json!(13)]));
    assert_eq!(items("lax $.children[last - 1]", doc.clone()), Ok(vec![json!(13)]));
    assert_eq!(items("lax $.missing", doc.clone()), Ok(vec![]));
    assert_eq!(items("lax $.children[7]", doc.clone()), Ok(vec![]));
    assert_eq!(items("lax $.children.size()", doc.clone()), Ok(vec![json!(3)]));
    assert_eq!(items("lax $.*", json!({"a": 1, "b": [2]})), Ok(vec![json!(1), json!([2])]));
}

#[test]
fn strict_paths_fail_where_lax_ones_skip() {
    let doc = json!({"children": [8, 11]});
    assert!(items("strict $.children[2]", doc.clone()).is_err());
    assert!(items("strict $.comment", doc.clone()).is_err());
    assert_eq!(items("strict $.children[1]", doc.clone()), Ok(vec![json!(11)]));
    assert_eq!(items("strict $.children[*]?(@ > 12)", doc), Ok(vec![]));
    assert_eq!(items(r#"strict $["a b"]"#, json!({"a b": true})), Ok(vec![json!(true)]));
}

#[test]
fn filters_are_three_valued() {
    let doc = json!([1, "x", 3]);
    assert_eq!(items("lax $[*]?(@ > 2 || @ == \"x\")", doc.clone()), Ok(vec![json!("x"), json!(3)]));
    assert_eq!(items("lax $[*]?(!(@ > 2))", doc.clone()), Ok(vec![json!(1)]));
    assert_eq!(items("lax $[*]?((@ > 2) is unknown)", doc), Ok(vec![json!("x")]));
}

#[test]
fn query_wraps_and_quotes_as_its_clauses_say() {
    assert_eq!(query_for_tests(vec![json!(13), json!(16)], "WITH ARRAY WRAPPER"), Ok(Some("[13,16]".into())));
    assert!(query_for_tests(vec![json!(13), json!(16)], "WITHOUT ARRAY WRAPPER").is_err());
    assert_eq!(query_for_tests(vec![json!("nice")], "OMIT QUOTES"), Ok(Some("nice".into())));
    assert_eq!(query_for_tests(vec![json!("nice")], "KEEP QUOTES"), Ok(Some("\"nice\"".into())));
    let conditional = "WITH CONDITIONAL ARRAY WRAPPER";
    assert_eq!(query_for_tests(vec![json!([1])], conditional), Ok(Some("[1]".into())));
    assert_eq!(query_for_tests(vec![json!(1)], conditional), Ok(Some("[1]".into())));
}

#[test]
fn arrays_go_to_json_and_back() {
    let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), None, Some(456)]),
        None,
        Some(vec![]),
    ]));
    let field = Field::new("a", list.data_type().clone(), true);
    let texts = to_json_texts(&list, &field).expect("lists go to JSON");
    assert_eq!(texts, vec![Some("[1,null,456]".to_string()), None, Some("[]".to_string())]);
    let values: Vec<Value> = texts.iter().flatten().map(|t| serde_json::from_str(t).expect("JSON")).collect();
    let refs = vec![Some(&values[0]), None, Some(&values[1])];
    let back = from_json(&refs, &field).expect("JSON goes back to lists");
    assert_eq!(back.as_ref(), list.as_ref());
}

#[test]
fn rows_read_objects_by_name_and_arrays_by_position() {
    let fields = vec![Field::new("v1", DataType::Int64, true), Field::new("v2", DataType::Utf8, true)];
    let row = Field::new("r", DataType::Struct(fields.into()), true);
    let (by_name, by_position) = (json!({"V2": "abc", "v1": 123}), json!([123, "abc"]));
    let out = from_json(&[Some(&by_name), Some(&by_position)], &row).expect("rows");
    let out = out.as_struct();
    assert_eq!(out.column(0).as_primitive::<datafusion::arrow::datatypes::Int64Type>().values(), &[123, 123]);
    assert_eq!(out.column(1).as_string::<i32>().value(1), "abc");
}

#[test]
fn wrong_shapes_are_invalid_casts_and_json_elements_keep_null() {
    let int = Field::new("i", DataType::Int32, true);
    let err = from_json(&[Some(&json!([1]))], &int).expect_err("an array is no integer");
    assert!(err.to_string().contains("Cannot cast JSON"), "{err}");
    let date = Field::new("d", DataType::Date32, true);
    assert!(from_json(&[Some(&json!(42))], &date).is_err());
    let of_json = Field::new("l", DataType::List(Arc::new(json_field("item"))), true);
    let out = from_json(&[Some(&json!([null, [1, 23]]))], &of_json).expect("array(json)");
    let values = out.as_list::<i32>().values().as_string::<i32>().clone();
    assert_eq!((values.value(0), values.value(1)), ("null", "[1,23]"));
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None]));
    let texts = to_json_texts(&ints, &Field::new("i", DataType::Int32, true)).expect("integers");
    assert_eq!(texts, vec![Some("1".to_string()), None]);
    assert!(!out.is_null(0));
}
