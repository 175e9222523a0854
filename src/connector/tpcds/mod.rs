//! The built-in `tpcds` catalog: the 24 TPC-DS tables generated on the fly, as
//! `tpch` does for TPC-H.
//!
//! Every schema is a scale factor named as `tpch` names them (`tiny` = 0.01,
//! `sf0_1`, `sf1`, any `sfN`). Rows come from `tpcdsgen` / `tpcdsgen-arrow` while the
//! query runs and are never written to disk; each partition of a large table is a
//! range of the generator's source rows, so any process can produce any slice by
//! itself. Column types are the generator's, which follow the specification:
//! surrogate keys `INTEGER` (ticket and order numbers `BIGINT`), money
//! `DECIMAL(7,2)`, dates `DATE`, text `VARCHAR`.
//!
//! The catalog, its tables and the scan ([`TpcdsScanExec`]) are `generated`'s, over
//! [`TpcdsTableKind`]; `TpcdsConnector` is the catalog's `Connector`, its scans
//! travel as `TpcdsScanExec::to_bytes`.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::CatalogProvider;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use tpcdsgen::config::{Scaling, Table};

use super::generated::{boxed, Batches, GeneratedCatalog, GeneratedScanExec, GeneratedTable};
use super::Connector;

/// The built-in catalog's name.
pub const TPCDS_CATALOG_NAME: &str = "tpcds";

/// Source rows a partition gets at the least: fewer would cost more than they save.
const MIN_PARTITION_ROWS: u64 = 500;

/// Leaf plan that generates one TPC-DS table: partition `p` is the `p`-th of
/// consecutive ranges of the generator's source rows.
pub type TpcdsScanExec = GeneratedScanExec<TpcdsTableKind>;

/// The `tpcds` catalog: a schema per scale factor, each with the 24 tables.
pub type TpcdsCatalog = GeneratedCatalog<TpcdsTableKind>;

macro_rules! tables {
    ($(($kind:ident, $name:literal, $arrow:ident, $splittable:literal)),* $(,)?) => {
        /// The 24 TPC-DS tables (the generator's `dbgen_version` is not one of them).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum TpcdsTableKind {
            $($kind),*
        }

        impl TpcdsTableKind {
            /// All tables, in the order a schema lists them.
            pub const ALL: [Self; 24] = [$(Self::$kind),*];

            /// SQL table name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$kind => $name),*
                }
            }

            /// Full (unprojected) Arrow schema, exactly as the generator emits it.
            pub fn schema(self) -> SchemaRef {
                match self {
                    $(Self::$kind => tpcdsgen_arrow::$arrow::schema_ref()),*
                }
            }

            fn table(self) -> Table {
                match self {
                    $(Self::$kind => Table::$kind),*
                }
            }

            /// Whether its rows may be generated in ranges of source rows. Tables that
            /// keep history (items, stores, web pages: a row's values follow the
            /// revision before it) are generated whole.
            fn splittable(self) -> bool {
                match self {
                    $(Self::$kind => $splittable),*
                }
            }
        }

        /// The generator of `kind`'s source rows `rows` (1-based, inclusive).
        fn generator(
            kind: TpcdsTableKind,
            session: tpcdsgen::config::Session,
            rows: std::ops::RangeInclusive<u64>,
            batch_size: usize,
        ) -> Batches {
            match kind {
                $(TpcdsTableKind::$kind => boxed(
                    tpcdsgen_arrow::$arrow::new(session)
                        .with_source_row_range(*rows.start(), *rows.end())
                        .with_batch_size(batch_size),
                )),*
            }
        }
    };
}

tables![
    (CallCenter, "call_center", CallCenterArrow, false),
    (CatalogPage, "catalog_page", CatalogPageArrow, false),
    (CatalogReturns, "catalog_returns", CatalogReturnsArrow, true),
    (CatalogSales, "catalog_sales", CatalogSalesArrow, true),
    (Customer, "customer", CustomerArrow, true),
    (CustomerAddress, "customer_address", CustomerAddressArrow, true),
    (CustomerDemographics, "customer_demographics", CustomerDemographicsArrow, true),
    (DateDim, "date_dim", DateDimArrow, false),
    (HouseholdDemographics, "household_demographics", HouseholdDemographicsArrow, false),
    (IncomeBand, "income_band", IncomeBandArrow, false),
    (Inventory, "inventory", InventoryArrow, true),
    (Item, "item", ItemArrow, false),
    (Promotion, "promotion", PromotionArrow, false),
    (Reason, "reason", ReasonArrow, false),
    (ShipMode, "ship_mode", ShipModeArrow, false),
    (Store, "store", StoreArrow, false),
    (StoreReturns, "store_returns", StoreReturnsArrow, true),
    (StoreSales, "store_sales", StoreSalesArrow, true),
    (TimeDim, "time_dim", TimeDimArrow, false),
    (Warehouse, "warehouse", WarehouseArrow, false),
    (WebPage, "web_page", WebPageArrow, false),
    (WebReturns, "web_returns", WebReturnsArrow, true),
    (WebSales, "web_sales", WebSalesArrow, true),
    (WebSite, "web_site", WebSiteArrow, false),
];

impl TpcdsTableKind {
    /// The generator's source rows at `scale_factor`: rows for most tables; tickets
    /// and orders for the sales tables (about ten rows each) and for their returns
    /// (about one row in ten of those).
    pub fn source_rows(self, scale_factor: f64) -> u64 {
        Scaling::new(scale_factor).get_row_count(self.table())
    }
}

impl GeneratedTable for TpcdsTableKind {
    /// Trino's `tpcds` has the specification's names and types, as the generator.
    type Spelling = ();
    const NATIVE: () = ();
    const BENCHMARK: &'static str = "TPC-DS";
    const SCAN: &'static str = "TpcdsScanExec";
    const MAX_SCALE: f64 = 100_000.0;
    const MAX_PARTITIONS: usize = 4096;

    fn all() -> &'static [Self] {
        &Self::ALL
    }

    fn name(self) -> &'static str {
        TpcdsTableKind::name(self)
    }

    fn schema(self) -> SchemaRef {
        TpcdsTableKind::schema(self)
    }

    fn spelled_schema(self, _: ()) -> SchemaRef {
        TpcdsTableKind::schema(self)
    }

    fn partitions(self, scale_factor: f64, wanted: usize) -> usize {
        if !self.splittable() {
            return 1;
        }
        let most = self.source_rows(scale_factor) / MIN_PARTITION_ROWS;
        wanted.clamp(1, usize::try_from(most).unwrap_or(usize::MAX).max(1))
    }

    fn rows(self, scale_factor: f64, part: Option<(usize, usize)>) -> u64 {
        let source = self.source_rows(scale_factor);
        let source = match part {
            Some((p, parts)) => {
                let r = source_range(source, p, parts);
                if r.is_empty() {
                    0
                } else {
                    r.end() - r.start() + 1
                }
            }
            None => source,
        };
        match self {
            Self::StoreSales | Self::CatalogSales | Self::WebSales => source.saturating_mul(10),
            _ => source,
        }
    }

    fn batches(self, scale_factor: f64, part: usize, parts: usize, batch_size: usize) -> Batches {
        let rows = source_range(self.source_rows(scale_factor), part, parts);
        if rows.is_empty() {
            return Box::new(std::iter::empty());
        }
        match tpcdsgen::config::SessionBuilder::new().with_scale_factor(scale_factor).build() {
            Ok(session) => generator(self, session, rows, batch_size),
            Err(e) => Box::new(std::iter::once(datafusion::common::plan_err!(
                "the TPC-DS generator refused scale {scale_factor}: {e}"
            ))),
        }
    }
}

/// Source rows of partition `part` (0-based) of `parts`: consecutive ranges of
/// nearly equal size covering `1..=total` once.
pub fn source_range(total: u64, part: usize, parts: usize) -> std::ops::RangeInclusive<u64> {
    let (part, parts) = (part as u64, parts.max(1) as u64);
    let start = total * part / parts + 1;
    let end = total * (part + 1) / parts;
    start..=end
}

/// A `tpcds` catalog as a connector; its scans travel as `TpcdsScanExec::to_bytes`.
#[derive(Debug, Clone)]
pub struct TpcdsConnector {
    name: String,
}

impl TpcdsConnector {
    pub fn new(name: &str) -> Self {
        TpcdsConnector { name: name.to_string() }
    }
}

impl Connector for TpcdsConnector {
    fn catalog_name(&self) -> &str {
        &self.name
    }

    fn connector_name(&self) -> &str {
        "tpcds"
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        Arc::new(TpcdsCatalog::new(()))
    }

    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn std::any::Any).is::<TpcdsScanExec>()
    }

    fn encode_scan(&self, plan: &dyn ExecutionPlan) -> Option<Vec<u8>> {
        (plan as &dyn std::any::Any).downcast_ref::<TpcdsScanExec>().map(TpcdsScanExec::to_bytes)
    }

    fn decode_scan(&self, bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(TpcdsScanExec::from_bytes(bytes)?))
    }
}

#[cfg(test)]
#[path = "tpcds_tests.rs"]
mod tests;
