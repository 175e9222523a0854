//! The built-in `tpch` catalog: TPC-H tables generated on the fly.
//!
//! Every schema of the catalog is a scale factor (`tiny` = 0.01, `sf1`,
//! `sf0_1` = 0.1, any `sfN` with `_` as the decimal point), and every schema
//! holds the eight TPC-H tables. Rows are produced by `tpchgen` /
//! `tpchgen-arrow` while the query runs and are never written to disk, so a
//! benchmark needs no data loading and every process can produce any slice of
//! any table by itself.
//!
//! Tables are spelled as Trino's tpch connector spells them ([`TpchSpelling`]): by
//! default without the specification's column prefixes (`name`, `orderkey`) and
//! with money as DOUBLE; `tpch.column-naming=STANDARD` keeps the prefixes
//! (`n_name`) and `tpch.double-type-mapping=DECIMAL` makes money `decimal(12,2)`.
//! Identifiers stay BIGINT, counts INTEGER, dates DATE and text VARCHAR.
//!
//! The catalog, its tables and the scan ([`TpchScanExec`]) are `generated`'s, over
//! [`TpchTableKind`] (its generator in `scan`). `TpchConnector` is the catalog's
//! `Connector`: session setup registers its catalog, and the plan codec ships its
//! scans with `TpchScanExec::to_bytes`.

mod scan;

pub use super::generated::parse_schema_name;
pub use scan::TpchScanExec;

use super::generated::{GeneratedCatalog, GeneratedTable};
use super::Connector;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::CatalogProvider;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use tpchgen::generators::{CustomerGenerator, OrderGenerator, PartGenerator, PartSuppGenerator, SupplierGenerator};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow, SupplierArrow,
};

/// The built-in catalog's name.
pub const TPCH_CATALOG_NAME: &str = "tpch";

/// Schemas the catalog lists (any other valid `sfN` still resolves): the ones every
/// generated catalog lists.
pub const LISTED_SCHEMAS: [&str; 4] = <TpchTableKind as GeneratedTable>::LISTED_SCHEMAS;

/// `tpch.column-naming`: whether columns keep the specification's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColumnNaming {
    /// `name`, `orderkey` (Trino's default).
    Simplified,
    /// `n_name`, `o_orderkey`: the specification's, and the TPC-H queries'.
    Standard,
}

/// `tpch.double-type-mapping`: the type of money and quantities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DoubleTypeMapping {
    /// DOUBLE (Trino's default).
    Double,
    /// `decimal(12,2)`, Trino's DECIMAL mapping.
    Decimal,
    /// `decimal(15,2)`, the generator's own (files written by `flotilla generate`).
    Generated,
}

/// How a `tpch` catalog spells its tables (its catalog properties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TpchSpelling {
    pub column_naming: ColumnNaming,
    pub double_type_mapping: DoubleTypeMapping,
}

impl Default for TpchSpelling {
    /// Trino's tpch connector's defaults.
    fn default() -> Self {
        TpchSpelling { column_naming: ColumnNaming::Simplified, double_type_mapping: DoubleTypeMapping::Double }
    }
}

impl TpchSpelling {
    /// As the TPC-H queries spell the tables, with exact money: what our tests and
    /// benchmarks run (`tpch.column-naming=STANDARD`, `tpch.double-type-mapping=DECIMAL`).
    pub const BENCHMARK: TpchSpelling =
        TpchSpelling { column_naming: ColumnNaming::Standard, double_type_mapping: DoubleTypeMapping::Decimal };

    /// `BENCHMARK` as the flags of `flotilla coordinator` and `flotilla local`, for
    /// the clusters the benchmarks and the tests start as processes.
    pub const BENCHMARK_FLAGS: [&'static str; 4] =
        ["--tpch-column-naming", "STANDARD", "--tpch-double-type-mapping", "DECIMAL"];

    /// The generator's own: prefixed names, `decimal(15,2)`.
    pub const GENERATED: TpchSpelling =
        TpchSpelling { column_naming: ColumnNaming::Standard, double_type_mapping: DoubleTypeMapping::Generated };

    /// From a catalog's `tpch.column-naming` and `tpch.double-type-mapping` values
    /// (case-insensitive, as Trino's configuration reads enums).
    pub fn from_properties(column_naming: Option<&str>, double_type_mapping: Option<&str>) -> Result<Self, String> {
        let mut spelling = TpchSpelling::default();
        if let Some(v) = column_naming {
            spelling.column_naming = match v.trim().to_ascii_uppercase().as_str() {
                "SIMPLIFIED" => ColumnNaming::Simplified,
                "STANDARD" => ColumnNaming::Standard,
                _ => return Err(format!("tpch.column-naming must be SIMPLIFIED or STANDARD, not '{v}'")),
            };
        }
        if let Some(v) = double_type_mapping {
            spelling.double_type_mapping = match v.trim().to_ascii_uppercase().as_str() {
                "DOUBLE" => DoubleTypeMapping::Double,
                "DECIMAL" => DoubleTypeMapping::Decimal,
                _ => return Err(format!("tpch.double-type-mapping must be DOUBLE or DECIMAL, not '{v}'")),
            };
        }
        Ok(spelling)
    }

    /// A generator column as this spelling shows it.
    fn field(self, field: &Field) -> Field {
        let name = match self.column_naming {
            // Every generator column is `prefix_name`.
            ColumnNaming::Simplified => field.name().split_once('_').map_or(field.name().as_str(), |(_, n)| n),
            ColumnNaming::Standard => field.name().as_str(),
        };
        let data_type = match (field.data_type(), self.double_type_mapping) {
            (DataType::Decimal128(..), DoubleTypeMapping::Double) => DataType::Float64,
            (DataType::Decimal128(..), DoubleTypeMapping::Decimal) => DataType::Decimal128(12, 2),
            (other, _) => other.clone(),
        };
        Field::new(name, data_type, field.is_nullable())
    }
}

/// The eight TPC-H tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TpchTableKind {
    Nation,
    Region,
    Part,
    Supplier,
    PartSupp,
    Customer,
    Orders,
    LineItem,
}

impl TpchTableKind {
    /// All tables, in the order `table_names` reports them.
    pub const ALL: [Self; 8] = [
        Self::Nation,
        Self::Region,
        Self::Part,
        Self::Supplier,
        Self::PartSupp,
        Self::Customer,
        Self::Orders,
        Self::LineItem,
    ];

    /// SQL table name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nation => "nation",
            Self::Region => "region",
            Self::Part => "part",
            Self::Supplier => "supplier",
            Self::PartSupp => "partsupp",
            Self::Customer => "customer",
            Self::Orders => "orders",
            Self::LineItem => "lineitem",
        }
    }

    /// Full (unprojected) Arrow schema as a catalog spelled `spelling` shows it.
    pub fn spelled_schema(self, spelling: TpchSpelling) -> SchemaRef {
        let native = self.schema();
        if spelling == TpchSpelling::GENERATED {
            return native;
        }
        Arc::new(Schema::new(native.fields().iter().map(|f| spelling.field(f)).collect::<Vec<_>>()))
    }

    /// Full (unprojected) Arrow schema, exactly as the generator emits it.
    pub fn schema(self) -> SchemaRef {
        match self {
            Self::Nation => NationArrow::schema_ref(),
            Self::Region => RegionArrow::schema_ref(),
            Self::Part => PartArrow::schema_ref(),
            Self::Supplier => SupplierArrow::schema_ref(),
            Self::PartSupp => PartSuppArrow::schema_ref(),
            Self::Customer => CustomerArrow::schema_ref(),
            Self::Orders => OrderArrow::schema_ref(),
            Self::LineItem => LineItemArrow::schema_ref(),
        }
    }

    /// Total row count at `scale_factor`. Exact for every table except
    /// lineitem, whose lines per order are random; there it is an estimate.
    pub fn row_count(self, scale_factor: f64) -> u64 {
        self.part_row_count(scale_factor, 1, 1)
    }

    /// Whether the generator honours its part arguments. The nation and
    /// region generators ignore them and always emit the whole table, so
    /// splitting those would duplicate rows.
    pub fn is_splittable(self) -> bool {
        !matches!(self, Self::Nation | Self::Region)
    }

    /// Row count of generator part `part` (1-based) of `parts`.
    pub(super) fn part_row_count(self, sf: f64, part: i32, parts: i32) -> u64 {
        let rows = match self {
            Self::Nation => 25,
            Self::Region => 5,
            Self::Part => PartGenerator::calculate_row_count(sf, part, parts),
            Self::Supplier => SupplierGenerator::calculate_row_count(sf, part, parts),
            // calculate_row_count counts parts; each has four partsupp rows.
            Self::PartSupp => PartSuppGenerator::calculate_row_count(sf, part, parts).saturating_mul(4),
            Self::Customer => CustomerGenerator::calculate_row_count(sf, part, parts),
            Self::Orders => OrderGenerator::calculate_row_count(sf, part, parts),
            // Lineitem is split by order; 1..=7 lines per order, 4 on average.
            Self::LineItem => OrderGenerator::calculate_row_count(sf, part, parts).saturating_mul(4),
        };
        u64::try_from(rows).unwrap_or(0)
    }
}

/// A `tpch` catalog as a connector (named `tpch` unless configured otherwise); its
/// scans travel as `TpchScanExec::to_bytes`.
#[derive(Debug, Clone)]
pub struct TpchConnector {
    name: String,
    spelling: TpchSpelling,
}

impl TpchConnector {
    pub fn new(name: &str, spelling: TpchSpelling) -> Self {
        TpchConnector { name: name.to_string(), spelling }
    }
}

impl Connector for TpchConnector {
    fn catalog_name(&self) -> &str {
        &self.name
    }

    fn connector_name(&self) -> &str {
        "tpch"
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        Arc::new(TpchCatalog::new(self.spelling))
    }

    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn std::any::Any).is::<TpchScanExec>()
    }

    fn encode_scan(&self, plan: &dyn ExecutionPlan) -> Option<Vec<u8>> {
        (plan as &dyn std::any::Any).downcast_ref::<TpchScanExec>().map(TpchScanExec::to_bytes)
    }

    /// The generator's text pool (300 MB of random sentences every comment column is
    /// cut from) is built on first use, which took 0.8 s here: the first tpch query
    /// on each worker waited for it.
    fn warm_up(&self) {
        warm_up_text_pool();
    }

    fn decode_scan(&self, bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(TpchScanExec::from_bytes(bytes)?))
    }
}

/// Builds the generator's text pool on a thread of its own, once per process.
pub fn warm_up_text_pool() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new().name("tpch-text-pool".into()).spawn(|| {
            tpchgen::text::TextPool::get_or_init_default();
        });
    });
}

/// The `tpch` catalog: a schema per scale factor, each with the eight tables.
pub type TpchCatalog = GeneratedCatalog<TpchTableKind>;

#[cfg(test)]
#[path = "tpch_tests.rs"]
mod tests;
