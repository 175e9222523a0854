//! `FlotillaCodec`: the plan codec, the one module that may know every plan node of
//! every layer. It is datafusion-proto's extension codec for the nodes that are
//! ours (connectors' scans, `RemoteSourceExec`, the table writer, the two nodes of a
//! dynamic filter), so fragments travel as proto bytes.
//! A connector's scan travels as its catalog's name and the bytes the connector made
//! of it. The coordinator encodes fragments with it; a worker decodes with a codec
//! that carries the task's `SourceResolver`, which it plants into every remote source
//! it decodes.

use datafusion::common::{internal_datafusion_err, internal_err, not_impl_err, plan_datafusion_err};
use std::sync::Arc;

use base64::Engine;
use datafusion::arrow::datatypes::Schema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::Partitioning;
use datafusion_proto::physical_plan::from_proto::parse_protobuf_partitioning;
use datafusion_proto::physical_plan::to_proto::serialize_partitioning;
use datafusion_proto::physical_plan::{
    DeduplicatingProtoConverter, PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::connector::Connectors;
use crate::exchange::remote_source::{ExchangeMode, RemoteSourceExec, SourceResolver};
use crate::plan::dynamic_filter_exec::{
    hashes_from_bytes, hashes_to_bytes, DynamicFilterExec, DynamicFilterSourceExec,
};
use crate::plan::grouping_sets::EmptyGroupingSets;
use crate::plan::table_writer::{TableWriterExec, WriteTarget};
use crate::util::{schema_from_bytes, schema_to_bytes};

/// `[1][catalog name length][catalog name][the connector's bytes]`
const TAG_CONNECTOR_SCAN: u8 = 1;
const TAG_REMOTE_SOURCE: u8 = 2;
/// `[3][the write target as JSON]`, with the writers' input as its one child.
const TAG_TABLE_WRITER: u8 = 3;
/// `[4][filter id and key columns as JSON]`, with one child.
const TAG_DYNAMIC_FILTER_SOURCE: u8 = 4;
/// `[5][JSON length, u32 LE][key columns as JSON][hashes, u64 LE each]`, with one
/// child: the hashes stay binary, as a build side may have a million of them.
const TAG_DYNAMIC_FILTER: u8 = 5;
/// `[6][number of sets, u32 LE]`, with the aggregate as its one child
/// (`plan::grouping_sets`).
const TAG_EMPTY_GROUPING_SETS: u8 = 6;

#[derive(Debug, Clone)]
pub struct FlotillaCodec {
    connectors: Connectors,
    resolver: Option<Arc<dyn SourceResolver>>,
}

#[derive(Serialize, Deserialize)]
struct DynamicFilterProto {
    #[serde(default)]
    id: usize,
    keys: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
struct RemoteSourceProto {
    stage: usize,
    mode: ExchangeMode,
    partitions: usize,
    /// Arrow IPC stream holding only the schema, base64.
    schema: String,
    /// The partitioning it declares (`RemoteSourceExec::with_partitioning`) as
    /// datafusion-proto's `Partitioning` message, base64; absent for an unknown one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partitioning: Option<String>,
}

/// The plan with its file scans' statistics dropped: the table's and each file's
/// (row counts, and every column's minimum and maximum, long strings included). They
/// served planning, which is over; a task only runs the plan. They were most of a
/// fragment's bytes, coded on the coordinator and decoded on every worker for every
/// task. A scan that declares an output ordering keeps them: DataFusion checks with
/// them that the files of a group follow one another, and without them would drop the
/// ordering on decoding.
fn without_file_statistics(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::common::Statistics;
    use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig, FileScanConfigBuilder};
    use datafusion::datasource::source::DataSourceExec;
    let stripped = plan.transform_up(|node| {
        let Some(exec) = (node.as_ref() as &dyn std::any::Any).downcast_ref::<DataSourceExec>() else {
            return Ok(Transformed::no(node));
        };
        let Some(conf) = (exec.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<FileScanConfig>() else {
            return Ok(Transformed::no(node));
        };
        if !conf.output_ordering.is_empty() {
            return Ok(Transformed::no(node));
        }
        let groups = conf
            .file_groups
            .iter()
            .map(|g| {
                FileGroup::new(
                    g.files()
                        .iter()
                        .map(|f| {
                            let mut f = f.clone();
                            f.statistics = None;
                            f
                        })
                        .collect(),
                )
            })
            .collect();
        let table = conf.file_source().table_schema().table_schema().clone();
        let bare = FileScanConfigBuilder::from(conf.clone())
            .with_file_groups(groups)
            .with_statistics(Statistics::new_unknown(&table))
            .build();
        Ok(Transformed::yes(DataSourceExec::from_data_source(bare) as Arc<dyn ExecutionPlan>))
    })?;
    Ok(stripped.data)
}

impl FlotillaCodec {
    pub fn new(connectors: Connectors) -> Self {
        FlotillaCodec { connectors, resolver: None }
    }

    /// The same codec, planting `resolver` into the remote sources it decodes.
    pub fn with_resolver(&self, resolver: Arc<dyn SourceResolver>) -> Self {
        FlotillaCodec { connectors: self.connectors.clone(), resolver: Some(resolver) }
    }

    /// Serializes a fragment plan to proto bytes, its file scans without statistics
    /// (see [`without_file_statistics`]).
    pub fn encode_plan(&self, plan: Arc<dyn ExecutionPlan>) -> Result<Vec<u8>> {
        on_deep_stack(|| {
            let plan = crate::plan::grouping_sets::mark(without_file_statistics(plan)?)?;
            let bytes = datafusion_proto::bytes::physical_plan_to_bytes_with_proto_converter(
                plan,
                self,
                &DeduplicatingProtoConverter {},
            )?;
            Ok(bytes.to_vec())
        })
    }

    /// Decodes a fragment. An expression the plan holds in several places (a hash
    /// join's dynamic filter and the scans it was pushed into) comes back as one
    /// shared object, as it was coded, so what the join writes the scans read.
    /// Scans of tables whose columns match by field id get their adapter back
    /// (`connector::field_ids`), and window functions their `IGNORE NULLS`
    /// (`plan::window_nulls`): DataFusion's encoding carries neither.
    pub fn decode_plan(&self, bytes: &[u8], ctx: &TaskContext) -> Result<Arc<dyn ExecutionPlan>> {
        on_deep_stack(|| {
            let plan = datafusion_proto::bytes::physical_plan_from_bytes_with_proto_converter(
                bytes,
                ctx,
                self,
                &DeduplicatingProtoConverter {},
            )?;
            crate::connector::field_ids::attach(crate::plan::window_nulls::restore(plan)?)
        })
    }

    /// A remote source's partitioning from its coded form, its expressions over the
    /// source's schema.
    fn decode_partitioning(
        &self,
        encoded: &str,
        schema: &Schema,
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Partitioning> {
        let bad = |e: String| internal_datafusion_err!("bad RemoteSourceExec partitioning: {e}");
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| bad(e.to_string()))?;
        let proto =
            datafusion_proto::protobuf::Partitioning::decode(bytes.as_slice()).map_err(|e| bad(e.to_string()))?;
        let decode_ctx = PhysicalPlanDecodeContext::new(ctx, self);
        parse_protobuf_partitioning(Some(&proto), &decode_ctx, schema, proto_converter)?
            .ok_or_else(|| bad("empty".into()))
    }
}

/// Stack for coding one plan. Protobuf coding and DataFusion's conversions recurse
/// once or more per plan node and expression level: a 100-way join or a 1,000-term
/// sum goes deeper than a runtime thread's 2 MiB allow. Only the pages touched cost
/// memory, and the mapping lasts as long as the call.
const CODEC_STACK: usize = 256 << 20;

/// Runs `f` on a stack of `CODEC_STACK` bytes, grown for the call.
fn on_deep_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::grow(CODEC_STACK, f)
}

fn decode_dynamic_filter(tag: u8, body: &[u8], input: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let bad = |what: &str| internal_datafusion_err!("bad dynamic filter node: {what}");
    let (json, hashes) = if tag == TAG_DYNAMIC_FILTER {
        let (len, rest) = body.split_first_chunk::<4>().ok_or_else(|| bad("truncated"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(bad("truncated"));
        }
        rest.split_at(len)
    } else {
        (body, &[][..])
    };
    let p: DynamicFilterProto = serde_json::from_slice(json).map_err(|e| bad(&e.to_string()))?;
    if let Some(k) = p.keys.iter().find(|k| **k >= input.schema().fields().len()) {
        return Err(bad(&format!("key column {k} is out of range")));
    }
    if tag == TAG_DYNAMIC_FILTER_SOURCE {
        return Ok(Arc::new(DynamicFilterSourceExec::new(input, p.id, p.keys)));
    }
    let hashes = hashes_from_bytes(hashes).ok_or_else(|| bad("truncated"))?;
    Ok(Arc::new(DynamicFilterExec::new(input, p.keys, hashes.into())))
}

impl PhysicalExtensionCodec for FlotillaCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (tag, body) = buf.split_first().ok_or_else(|| internal_datafusion_err!("empty extension node"))?;
        if *tag == TAG_TABLE_WRITER {
            let [input] = inputs else {
                return internal_err!("a table writer has one input");
            };
            let target: WriteTarget =
                serde_json::from_slice(body).map_err(|e| internal_datafusion_err!("bad TableWriterExec: {e}"))?;
            return Ok(Arc::new(TableWriterExec::new(input.clone(), target)));
        }
        if *tag == TAG_DYNAMIC_FILTER_SOURCE || *tag == TAG_DYNAMIC_FILTER {
            let [input] = inputs else {
                return internal_err!("a dynamic filter node has one input");
            };
            return decode_dynamic_filter(*tag, body, input.clone());
        }
        if *tag == TAG_EMPTY_GROUPING_SETS {
            let ([input], Some(sets)) = (inputs, body.first_chunk::<4>()) else {
                return internal_err!("bad EmptyGroupingSets node");
            };
            return crate::plan::grouping_sets::restore(input.clone(), u32::from_le_bytes(*sets) as usize);
        }
        if !inputs.is_empty() {
            return internal_err!("flotilla scans and remote sources are leaves");
        }
        match *tag {
            TAG_CONNECTOR_SCAN => {
                let (&len, rest) =
                    body.split_first().ok_or_else(|| internal_datafusion_err!("empty connector scan"))?;
                if rest.len() < len as usize {
                    return internal_err!("truncated connector scan");
                }
                let (name, scan) = rest.split_at(len as usize);
                let catalog = std::str::from_utf8(name)
                    .map_err(|_| internal_datafusion_err!("connector scan with a non-UTF-8 catalog name"))?;
                self.connectors.decode_scan(catalog, scan)
            }
            TAG_REMOTE_SOURCE => {
                let p: RemoteSourceProto =
                    serde_json::from_slice(body).map_err(|e| internal_datafusion_err!("bad RemoteSourceExec: {e}"))?;
                let schema_bytes = base64::engine::general_purpose::STANDARD
                    .decode(p.schema)
                    .map_err(|e| internal_datafusion_err!("bad RemoteSourceExec schema: {e}"))?;
                let schema = schema_from_bytes(&schema_bytes)?;
                let mut node = RemoteSourceExec::new(p.stage, p.mode, p.partitions, schema.clone());
                if let Some(encoded) = p.partitioning {
                    node = node.with_partitioning(self.decode_partitioning(&encoded, &schema, ctx, proto_converter)?);
                }
                if let Some(r) = &self.resolver {
                    node = node.with_resolver(r.clone());
                }
                Ok(Arc::new(node))
            }
            other => internal_err!("unknown extension node tag {other}"),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let any = node.as_ref() as &dyn std::any::Any;
        if let Some((catalog, bytes)) = self.connectors.encode_scan(node.as_ref()) {
            let len = u8::try_from(catalog.len())
                .map_err(|_| plan_datafusion_err!("catalog name '{catalog}' is too long"))?;
            buf.push(TAG_CONNECTOR_SCAN);
            buf.push(len);
            buf.extend_from_slice(catalog.as_bytes());
            buf.extend_from_slice(&bytes);
            Ok(())
        } else if let Some(rs) = any.downcast_ref::<RemoteSourceExec>() {
            let partitioning = match rs.partitioning() {
                Partitioning::UnknownPartitioning(_) => None,
                known => {
                    let proto = serialize_partitioning(known, self, proto_converter)?;
                    Some(base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec()))
                }
            };
            let proto = RemoteSourceProto {
                stage: rs.stage(),
                mode: rs.mode(),
                partitions: rs.partitions(),
                schema: base64::engine::general_purpose::STANDARD.encode(schema_to_bytes(&rs.schema())?),
                partitioning,
            };
            buf.push(TAG_REMOTE_SOURCE);
            buf.extend_from_slice(&serde_json::to_vec(&proto).map_err(|e| DataFusionError::External(Box::new(e)))?);
            Ok(())
        } else if let Some(d) = any.downcast_ref::<DynamicFilterSourceExec>() {
            buf.push(TAG_DYNAMIC_FILTER_SOURCE);
            let proto = DynamicFilterProto { id: d.id(), keys: d.keys().to_vec() };
            buf.extend_from_slice(&serde_json::to_vec(&proto).map_err(|e| DataFusionError::External(Box::new(e)))?);
            Ok(())
        } else if let Some(d) = any.downcast_ref::<DynamicFilterExec>() {
            buf.push(TAG_DYNAMIC_FILTER);
            let proto = DynamicFilterProto { id: 0, keys: d.keys().to_vec() };
            let json = serde_json::to_vec(&proto).map_err(|e| DataFusionError::External(Box::new(e)))?;
            buf.extend_from_slice(&(json.len() as u32).to_le_bytes());
            buf.extend_from_slice(&json);
            hashes_to_bytes(d.hashes(), buf);
            Ok(())
        } else if let Some(m) = any.downcast_ref::<EmptyGroupingSets>() {
            buf.push(TAG_EMPTY_GROUPING_SETS);
            let sets = u32::try_from(m.sets()).map_err(|_| plan_datafusion_err!("too many grouping sets"))?;
            buf.extend_from_slice(&sets.to_le_bytes());
            Ok(())
        } else if let Some(w) = any.downcast_ref::<TableWriterExec>() {
            buf.push(TAG_TABLE_WRITER);
            buf.extend_from_slice(&serde_json::to_vec(w.target()).map_err(|e| DataFusionError::External(Box::new(e)))?);
            Ok(())
        } else {
            not_impl_err!("cannot serialize plan node {}", node.name())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::physical_plan::{collect, ExecutionPlanProperties};
    use datafusion::prelude::SessionContext;

    fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn ExecutionPlan>> {
        let mut out: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().flat_map(scans).collect();
        if plan.children().is_empty() {
            out.push(plan.clone());
        }
        out
    }

    /// A fragment travels without its scans' statistics, in fewer bytes, and runs to
    /// the same rows.
    #[tokio::test]
    async fn fragments_travel_without_file_statistics() {
        let dir_tmp = tempfile::Builder::new().prefix("flotilla-codec-").tempdir().unwrap();
        let dir = dir_tmp.path().to_path_buf();
        std::fs::create_dir_all(&dir).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("comment", DataType::Utf8, false),
        ]));
        for file in 0..3i64 {
            let keys = Int64Array::from_iter_values(file * 1000..(file + 1) * 1000);
            let comments = StringArray::from_iter_values(keys.values().iter().map(|k| format!("{k:>40}")));
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(keys), Arc::new(comments)]).unwrap();
            let out = std::fs::File::create(dir.join(format!("part-{file}.parquet"))).unwrap();
            let mut writer = datafusion::parquet::arrow::ArrowWriter::try_new(out, schema.clone(), None).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
        }
        let config = datafusion::prelude::SessionConfig::new().with_collect_statistics(true);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_parquet("t", &format!("{}/", dir.display()), Default::default()).await.unwrap();
        let df = ctx.sql("SELECT k, comment FROM t WHERE k % 7 = 3 ORDER BY k").await.unwrap();
        let plan = df.create_physical_plan().await.unwrap();
        // Rows by the files' statistics and by the table's.
        let row_count = |p: &Arc<dyn ExecutionPlan>| {
            use datafusion::datasource::physical_plan::FileScanConfig;
            use datafusion::datasource::source::DataSourceExec;
            let scan = scans(p).remove(0);
            let exec = (scan.as_ref() as &dyn std::any::Any).downcast_ref::<DataSourceExec>().unwrap();
            let conf = (exec.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<FileScanConfig>().unwrap();
            let files = conf.file_groups.iter().flat_map(|g| g.files()).filter_map(|f| f.statistics.as_ref());
            let by_files = files.map(|s| s.num_rows.get_value().copied().unwrap_or(0)).sum::<usize>();
            (by_files, conf.statistics().num_rows.get_value().copied())
        };
        assert_eq!(row_count(&plan).0, 3000, "the planned scan has statistics: {:?}", row_count(&plan));
        let codec = FlotillaCodec::new(Connectors::benchmark());
        let bytes = codec.encode_plan(plan.clone()).unwrap();
        let whole = datafusion_proto::bytes::physical_plan_to_bytes_with_extension_codec(plan.clone(), &codec).unwrap();
        assert!(bytes.len() < whole.len(), "{} bytes stripped against {} whole", bytes.len(), whole.len());
        let back = codec.decode_plan(&bytes, &ctx.task_ctx()).unwrap();
        assert_eq!(row_count(&back), (0, None));
        assert_eq!(back.output_partitioning().partition_count(), plan.output_partitioning().partition_count());
        let want = collect(plan, ctx.task_ctx()).await.unwrap();
        let got = collect(back, ctx.task_ctx()).await.unwrap();
        assert_eq!(got, want);
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 429);
    }

    /// `IGNORE NULLS` survives the trip: the first non-NULL of (NULL, 3, 4) is 3 on
    /// every row, by hand; DataFusion's encoding alone would answer NULL.
    #[tokio::test]
    async fn window_functions_keep_ignore_nulls() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t AS VALUES (CAST(NULL AS BIGINT)), (3), (4)").await.unwrap().collect().await.unwrap();
        let sql = "SELECT first_value(column1) IGNORE NULLS OVER () AS f, \
                   last_value(column1) IGNORE NULLS OVER (ORDER BY column1 NULLS LAST \
                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS l FROM t";
        let plan = ctx.sql(sql).await.unwrap().create_physical_plan().await.unwrap();
        let codec = FlotillaCodec::new(Connectors::benchmark());
        let back = codec.decode_plan(&codec.encode_plan(plan).unwrap(), &ctx.task_ctx()).unwrap();
        let got = collect(back, ctx.task_ctx()).await.unwrap();
        let rows = crate::plan::rule_tests::printed_rows(&got).unwrap();
        assert_eq!(rows, ["|3|4|", "|3|4|", "|3|4|"]);
    }
}
