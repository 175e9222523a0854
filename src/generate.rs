//! `flotilla tpch-gen`: writes the 8 TPC-H tables (or, with `--benchmark tpcds`, the
//! 24 TPC-DS tables) to files (Parquet or CSV), one folder per table with several
//! part files, so that a `files` table over them is scanned in splits. The rows are
//! the `tpch` (`tpcds`) catalog's: the same generator, split into the same parts.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::csv::WriterBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};

use crate::connector::generated::{GeneratedScanExec, GeneratedTable};
use crate::connector::tpcds::TpcdsTableKind;
use crate::connector::tpch::TpchTableKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileFormat {
    Parquet,
    Csv,
}

/// Which benchmark's tables to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Benchmark {
    Tpch,
    Tpcds,
}

/// Part files of a table of `rows` rows: about 250k rows each, at most 64.
fn parts_for(rows: u64) -> usize {
    (rows as usize / 250_000).clamp(1, 64)
}

/// A table to write: its name, its estimated rows and the scan of its parts.
struct TableToWrite {
    name: &'static str,
    rows: u64,
    scan: Arc<dyn ExecutionPlan>,
}

/// Every table of a generated catalog, each scanned in parts of about 250k rows.
fn tables_of<T: GeneratedTable>(scale: f64) -> Result<Vec<TableToWrite>, String> {
    let mut out = Vec::new();
    for &kind in T::all() {
        let rows = kind.rows(scale, None);
        let scan = GeneratedScanExec::try_new(kind, scale, parts_for(rows), None).map_err(|e| e.to_string())?;
        out.push(TableToWrite { name: kind.name(), rows, scan: Arc::new(scan) });
    }
    Ok(out)
}

fn tables(benchmark: Benchmark, scale: f64) -> Result<Vec<TableToWrite>, String> {
    match benchmark {
        Benchmark::Tpch => tables_of::<TpchTableKind>(scale),
        Benchmark::Tpcds => tables_of::<TpcdsTableKind>(scale),
    }
}

enum Sink {
    Parquet(ArrowWriter<File>),
    Csv(datafusion::arrow::csv::Writer<File>),
}

impl Sink {
    fn create(path: &Path, format: FileFormat, batch: &RecordBatch) -> Result<Sink, String> {
        let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(match format {
            FileFormat::Parquet => {
                Sink::Parquet(ArrowWriter::try_new(file, batch.schema(), None).map_err(|e| e.to_string())?)
            }
            FileFormat::Csv => Sink::Csv(WriterBuilder::new().with_header(true).build(file)),
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), String> {
        match self {
            Sink::Parquet(w) => w.write(batch).map_err(|e| e.to_string()),
            Sink::Csv(w) => w.write(batch).map_err(|e| e.to_string()),
        }
    }

    fn close(self) -> Result<(), String> {
        match self {
            Sink::Parquet(w) => w.close().map(|_| ()).map_err(|e| e.to_string()),
            Sink::Csv(_) => Ok(()),
        }
    }
}

/// Writes every table under `output/<table>/part-N.<ext>`; returns the folders.
pub async fn generate(
    benchmark: Benchmark,
    scale: f64,
    output: &Path,
    format: FileFormat,
) -> Result<Vec<PathBuf>, String> {
    let ctx = SessionContext::new().task_ctx();
    let tables = tables(benchmark, scale)?;
    let total: u64 = tables.iter().map(|t| t.rows).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} rows {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ext = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::Csv => "csv",
    };
    let mut folders = Vec::new();
    for TableToWrite { name, scan, .. } in tables {
        bar.set_message(name);
        let dir = output.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for p in 0..scan.output_partitioning().partition_count() {
            let path = dir.join(format!("part-{p}.{ext}"));
            let mut stream = scan.execute(p, ctx.clone()).map_err(|e| e.to_string())?;
            let mut sink = None;
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(|e| e.to_string())?;
                let s = match &mut sink {
                    Some(s) => s,
                    None => sink.insert(Sink::create(&path, format, &batch)?),
                };
                s.write(&batch)?;
                bar.inc(batch.num_rows() as u64);
            }
            if let Some(s) = sink {
                s.close()?;
            }
        }
        folders.push(dir);
    }
    bar.finish_and_clear();
    Ok(folders)
}
