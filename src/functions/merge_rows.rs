//! The two functions a `MERGE`'s plan uses (`coordinator::merge`), registered on
//! every node so that the plan runs on workers: `__flotilla_row_id()` names each
//! target row uniquely (the plan's join can repeat a row, once per matching source
//! row), and `__flotilla_merge_check(fired, operation)` fails the statement as Trino
//! does when one target row matched more than one source row for which a `WHEN`
//! clause applies, and answers `operation` otherwise.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{exec_err, DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::error_code::ErrorCode;

pub const ROW_ID: &str = "__flotilla_row_id";
pub const MERGE_CHECK: &str = "__flotilla_merge_check";

/// The type of a row id: 64 random bits per batch, then the row's place in it.
pub const ROW_ID_TYPE: DataType = DataType::Decimal128(38, 0);

pub fn functions() -> Vec<ScalarUDF> {
    let check = super::simple::function(
        MERGE_CHECK,
        Signature::exact(vec![DataType::Int64, DataType::Int8], Volatility::Immutable),
        |_| Ok(DataType::Int8),
        check,
    );
    vec![ScalarUDF::new_from_impl(RowId { signature: Signature::nullary(Volatility::Volatile) }), check]
}

/// The error of a target row matched twice.
pub fn multiple_matches() -> DataFusionError {
    DataFusionError::External(Box::new(super::FunctionError {
        code: ErrorCode::MergeTargetRowMultipleMatches,
        message: "One MERGE target table row matched more than one source row".to_string(),
    }))
}

fn check(args: &[ArrayRef]) -> Result<ArrayRef> {
    let fired = args[0].as_primitive::<Int64Type>();
    if fired.iter().any(|n| n.is_some_and(|n| n > 1)) {
        return Err(multiple_matches());
    }
    Ok(args[1].clone())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RowId {
    signature: Signature,
}

/// Batches named by this process so far: with a random start per process, two
/// batches anywhere in a cluster share a name with odds of about 2^-64.
static BATCHES: AtomicU64 = AtomicU64::new(0);

fn batch_name() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(rand::random::<u64>);
    start.wrapping_add(BATCHES.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

impl ScalarUDFImpl for RowId {
    fn name(&self) -> &str {
        ROW_ID
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(ROW_ID_TYPE)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        if rows as u64 > u32::MAX as u64 {
            return exec_err!("{ROW_ID}: a batch of {rows} rows");
        }
        let base = (batch_name() as i128) << 32;
        let ids: Decimal128Array = (0..rows as i128).map(|i| Some(base | i)).collect();
        Ok(ColumnarValue::Array(Arc::new(ids.with_precision_and_scale(38, 0)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::array::Int8Array;

    #[test]
    fn a_row_matched_twice_fails_and_others_pass() {
        let ops: ArrayRef = Arc::new(Int8Array::from(vec![0, 1, 2]));
        let once: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), Some(1), None]));
        assert_eq!(check(&[once, ops.clone()]).unwrap().as_ref(), ops.as_ref());
        let twice: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 1]));
        assert!(check(&[twice, ops]).unwrap_err().to_string().contains("more than one source row"));
    }

    #[test]
    fn row_ids_differ_within_and_between_batches() {
        let id = ScalarUDF::new_from_impl(RowId { signature: Signature::nullary(Volatility::Volatile) });
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let args = ScalarFunctionArgs {
                args: vec![],
                arg_fields: vec![],
                number_rows: 1000,
                return_field: Arc::new(datafusion::arrow::datatypes::Field::new("id", ROW_ID_TYPE, false)),
                config_options: Arc::new(Default::default()),
            };
            let ColumnarValue::Array(a) = id.invoke_with_args(args).unwrap() else { panic!("an array") };
            let a = a.as_primitive::<datafusion::arrow::datatypes::Decimal128Type>();
            assert!(a.iter().all(|v| seen.insert(v.unwrap())));
        }
        assert_eq!(seen.len(), 3000);
    }
}
