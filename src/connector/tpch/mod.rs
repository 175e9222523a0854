//! The built-in `tpch` catalog: TPC-H tables generated on the fly.
//!
//! Every schema of the catalog is a scale factor (`tiny` = 0.01, `sf1`,
//! `sf0_1` = 0.1, any `sfN` with `_` as the decimal point), and every schema
//! holds the eight TPC-H tables. Rows are produced by `tpchgen` /
//! `tpchgen-arrow` while the query runs and are never written to disk, so a
//! benchmark needs no data loading and every process can produce any slice of
//! any table by itself.
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

use datafusion::arrow::datatypes::SchemaRef;
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
}

impl TpchConnector {
    pub fn new(name: &str) -> Self {
        TpchConnector { name: name.to_string() }
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
        Arc::new(TpchCatalog::default())
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
