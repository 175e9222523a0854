//! `TpchScanExec`: the `tpch` catalog's scan, `generated`'s over the TPC-H tables.
//! Output partition `p` is `tpchgen` part `p + 1` of the partition count, so the
//! partitions together hold each row once; nation and region (whose generators
//! ignore parts) are one partition.

use datafusion::arrow::datatypes::SchemaRef;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow, SupplierArrow,
};

use super::TpchTableKind;
use crate::connector::generated::{boxed, Batches, GeneratedScanExec, GeneratedTable};

/// Leaf plan that generates one TPC-H table.
pub type TpchScanExec = GeneratedScanExec<TpchTableKind>;

impl GeneratedTable for TpchTableKind {
    type Spelling = super::TpchSpelling;
    const NATIVE: super::TpchSpelling = super::TpchSpelling::GENERATED;
    const BENCHMARK: &'static str = "TPC-H";
    const SCAN: &'static str = "TpchScanExec";
    const MAX_SCALE: f64 = f64::MAX;
    // tpchgen takes part numbers as i32; more partitions than this are never asked.
    const MAX_PARTITIONS: usize = 1 << 16;

    fn all() -> &'static [Self] {
        &Self::ALL
    }

    fn name(self) -> &'static str {
        TpchTableKind::name(self)
    }

    fn schema(self) -> SchemaRef {
        TpchTableKind::schema(self)
    }

    fn spelled_schema(self, spelling: super::TpchSpelling) -> SchemaRef {
        TpchTableKind::spelled_schema(self, spelling)
    }

    fn partitions(self, _scale_factor: f64, wanted: usize) -> usize {
        if self.is_splittable() {
            wanted
        } else {
            1
        }
    }

    fn rows(self, scale_factor: f64, part: Option<(usize, usize)>) -> u64 {
        let (part, parts) = part.unwrap_or((0, 1));
        // Both fit in i32: at most MAX_PARTITIONS.
        self.part_row_count(scale_factor, part as i32 + 1, parts as i32)
    }

    fn batches(self, scale_factor: f64, part: usize, parts: usize, batch_size: usize) -> Batches {
        let (sf, part, n, bs) = (scale_factor, part as i32 + 1, parts as i32, batch_size);
        macro_rules! boxed {
            ($arrow:ident, $generator:ident) => {
                boxed($arrow::new($generator::new(sf, part, n)).with_batch_size(bs))
            };
        }
        match self {
            TpchTableKind::Nation => boxed!(NationArrow, NationGenerator),
            TpchTableKind::Region => boxed!(RegionArrow, RegionGenerator),
            TpchTableKind::Part => boxed!(PartArrow, PartGenerator),
            TpchTableKind::Supplier => boxed!(SupplierArrow, SupplierGenerator),
            TpchTableKind::PartSupp => boxed!(PartSuppArrow, PartSuppGenerator),
            TpchTableKind::Customer => boxed!(CustomerArrow, CustomerGenerator),
            TpchTableKind::Orders => boxed!(OrderArrow, OrderGenerator),
            TpchTableKind::LineItem => boxed!(LineItemArrow, LineItemGenerator),
        }
    }
}
