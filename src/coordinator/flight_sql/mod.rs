//! Arrow Flight SQL on its own port (`flight-sql.port`, `--flight-sql-port`), for
//! Arrow-native clients (ADBC, Flight SQL JDBC, Grafana). Statements run as any
//! client's queries: the same planning, scheduling, access rules, admission and error
//! codes; rows go out as Arrow record batches straight from the results channel.
//! The service here is thin: who calls (`auth`), what runs and streams (`results`),
//! prepared statements (`prepared`), metadata (`catalog`) and errors (`status`) are
//! their own modules. Started by `start_coordinator`, stopped with it.

mod auth;
mod catalog;
mod prepared;
mod results;
mod status;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::metadata::{SqlInfoData, XdbcTypeInfoData};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, ActionClosePreparedStatementRequest,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any, CommandGetCatalogs,
    CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor, FlightEndpoint,
    FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use futures::{Stream, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::CoordinatorState;
use auth::{Caller, Tokens};
use prepared::PreparedStatements;
use status::invalid;

type DoGetStream = Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send + 'static>>;

/// The Flight SQL service over one coordinator.
pub struct FlightSqlServer {
    coord: Arc<CoordinatorState>,
    tokens: Tokens,
    prepared: PreparedStatements,
    sql_info: SqlInfoData,
    xdbc_types: XdbcTypeInfoData,
}

/// Serves Flight SQL on `listener` (with the node's certificate when there is one)
/// until `shutdown` completes.
pub async fn serve(
    coord: Arc<CoordinatorState>,
    listener: tokio::net::TcpListener,
    tls: Option<&crate::tls::TlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let service = FlightSqlServer {
        coord,
        tokens: Tokens::default(),
        prepared: PreparedStatements::default(),
        sql_info: catalog::sql_info(),
        xdbc_types: catalog::xdbc_types(),
    };
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        // tonic builds its rustls configuration with the process's default crypto
        // provider: ring, as the HTTP servers' (already installed is fine).
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let cert = std::fs::read(&tls.cert_chain)?;
        let key = std::fs::read(tls.private_key.as_ref().unwrap_or(&tls.cert_chain))?;
        let identity = tonic::transport::Identity::from_pem(cert, key);
        server = server
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(std::io::Error::other)?;
    }
    // Bound parameters and ingested rows arrive in requests; results are never
    // limited (the encoder splits them into messages of 2 MiB).
    let service = FlightServiceServer::new(service).max_decoding_message_size(64 << 20);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let router = server.add_service(service);
    Ok(tokio::spawn(async move {
        if let Err(e) = router.serve_with_incoming_shutdown(incoming, shutdown).await {
            tracing::error!("the Flight SQL server failed: {e}");
        }
    }))
}

/// The address of a Flight SQL port beside the HTTP server's `bind`.
pub fn address(bind: SocketAddr, port: u16) -> SocketAddr {
    SocketAddr::new(bind.ip(), port)
}

fn packed_ticket(message: &impl ProstMessageExt) -> Ticket {
    Ticket { ticket: message.as_any().encode_to_vec().into() }
}

/// A `FlightInfo` whose one endpoint's ticket is `ticket`, read over this connection.
fn flight_info(schema: &SchemaRef, ticket: Ticket, descriptor: FlightDescriptor) -> Result<FlightInfo, Status> {
    let info = FlightInfo::new().try_with_schema(schema).map_err(|e| Status::internal(e.to_string()))?;
    Ok(info.with_endpoint(FlightEndpoint::new().with_ticket(ticket)).with_descriptor(descriptor).with_total_records(-1))
}

/// Batches as a `DoGet` stream, the schema first (sent even without rows).
fn encode(
    schema: SchemaRef,
    batches: impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static,
) -> Response<DoGetStream> {
    let stream = FlightDataEncoderBuilder::new().with_schema(schema).build(batches).map_err(Status::from);
    Response::new(Box::pin(stream))
}

fn one_batch(batch: RecordBatch) -> Response<DoGetStream> {
    encode(batch.schema(), futures::stream::iter([Ok(batch)]))
}

impl FlightSqlServer {
    async fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        let address = request.remote_addr().map(|a| a.ip());
        self.tokens.caller(&self.coord, request.metadata(), address).await
    }

    /// Runs `sql` for `caller` as far as its schema; the ticket reads its rows.
    async fn statement_info(
        &self,
        caller: &Caller,
        sql: String,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        self.check_session_statement(caller, &sql)?;
        let (q, schema) = results::start(&self.coord, sql, caller.session.clone()).await?;
        if let Some(token) = &caller.token {
            self.tokens.keep_changes(token, results::session_changes(&q));
        }
        let ticket = packed_ticket(&TicketStatementQuery { statement_handle: results::handle_of(&q).into() });
        Ok(Response::new(flight_info(&schema, ticket, descriptor)?))
    }

    /// A metadata call's `FlightInfo`: its answer's schema, and the command itself as
    /// the ticket that `DoGet` answers.
    async fn metadata_info(
        &self,
        request: Request<FlightDescriptor>,
        schema: &SchemaRef,
        command: &impl ProstMessageExt,
    ) -> Result<Response<FlightInfo>, Status> {
        self.caller(&request).await?;
        Ok(Response::new(flight_info(schema, packed_ticket(command), request.into_inner())?))
    }

    /// A statement that changes the session needs one to change: the token's.
    fn check_session_statement(&self, caller: &Caller, sql: &str) -> Result<(), Status> {
        let parsed = crate::coordinator::sql_parser::parse(sql, &caller.session.prepared);
        let changes_session = parsed.is_ok_and(|s| s.changes_session());
        if changes_session && caller.token.is_none() {
            let e = crate::error_code::QueryError::new(
                crate::error_code::ErrorCode::NotSupported,
                "a session statement over Flight SQL needs a session: connect with a user name, \
                 whose handshake keeps the connection's session",
            );
            return Err(status::query_status(&e));
        }
        Ok(())
    }

    async fn run_update(&self, caller: &Caller, sql: String) -> Result<i64, Status> {
        self.check_session_statement(caller, &sql)?;
        let (q, count) = results::run_to_end(&self.coord, sql, caller.session.clone()).await?;
        if let Some(token) = &caller.token {
            self.tokens.keep_changes(token, results::session_changes(&q));
        }
        Ok(count)
    }

    /// The parameter rows a `DoPut` carries.
    async fn parameters(stream: PeekableFlightDataStream) -> Result<Vec<prepared::ParameterRow>, Status> {
        let batches: Vec<RecordBatch> =
            arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(stream.map_err(FlightError::from))
                .try_collect()
                .await
                .map_err(Status::from)?;
        prepared::parameter_rows(&batches)
    }

    fn cancel_ticket(&self, caller: &Caller, info: &FlightInfo) -> Result<(), Status> {
        let endpoint = info.endpoint.first().ok_or_else(|| invalid("a FlightInfo without an endpoint"))?;
        let ticket = endpoint.ticket.as_ref().ok_or_else(|| invalid("an endpoint without a ticket"))?;
        let any = Any::decode(ticket.ticket.as_ref()).map_err(|e| invalid(e.to_string()))?;
        let statement: TicketStatementQuery =
            any.unpack().map_err(|e| invalid(e.to_string()))?.ok_or_else(|| invalid("not a statement's ticket"))?;
        let q = results::query_of_handle(&self.coord, &statement.statement_handle, caller.login.as_ref())?;
        q.cancel();
        Ok(())
    }
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlServer {
    type FlightService = FlightSqlServer;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>, Status> {
        let address = request.remote_addr().map(|a| a.ip());
        let token = self.tokens.handshake(&self.coord, request.metadata(), address).await?;
        let answer = HandshakeResponse { protocol_version: 0, payload: token.clone().into() };
        let stream: Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>> =
            Box::pin(futures::stream::iter([Ok(answer)]));
        let mut response = Response::new(stream);
        let bearer = MetadataValue::try_from(format!("Bearer {token}")).map_err(|e| Status::internal(e.to_string()))?;
        response.metadata_mut().insert("authorization", bearer);
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request).await?;
        self.statement_info(&caller, query.query, request.into_inner()).await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request).await?;
        let (sql, rows) = self.prepared.statement(&cmd.prepared_statement_handle, &caller.session.user)?;
        if rows.len() > 1 {
            return Err(invalid(format!("a query binds one row of parameters, not {}", rows.len())));
        }
        let sql = prepared::bind_row(&sql, rows.first())?;
        self.statement_info(&caller, sql, request.into_inner()).await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.sql_info).schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder(&self.xdbc_types).schema();
        self.metadata_info(request, &schema, &query).await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let q = results::query_of_handle(&self.coord, &ticket.statement_handle, caller.login.as_ref())?;
        let schema = results::flight_schema(
            &q.schema().unwrap_or_else(|| Arc::new(datafusion::arrow::datatypes::Schema::empty())),
        );
        Ok(encode(schema.clone(), results::stream_results(q, schema)))
    }

    async fn do_get_catalogs(
        &self,
        _query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        Ok(one_batch(catalog::catalogs(&self.coord, &caller.session)?))
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        Ok(one_batch(catalog::schemas(&self.coord, &caller.session, query)?))
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        Ok(one_batch(catalog::tables(&self.coord, &caller.session, query).await?))
    }

    async fn do_get_table_types(
        &self,
        _query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        Ok(one_batch(catalog::table_types()?))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        let batch = query.into_builder(&self.sql_info).build().map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        let batch = query.into_builder(&self.xdbc_types).build().map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn do_put_statement_update(
        &self,
        cmd: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request).await?;
        self.run_update(&caller, cmd.query).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let caller = self.caller(&request).await?;
        let rows = Self::parameters(request.into_inner()).await?;
        self.prepared.bind(&cmd.prepared_statement_handle, &caller.session.user, rows)?;
        Ok(DoPutPreparedStatementResult { prepared_statement_handle: Some(cmd.prepared_statement_handle) })
    }

    async fn do_put_prepared_statement_update(
        &self,
        cmd: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request).await?;
        let user = caller.session.user.clone();
        let sent = Self::parameters(request.into_inner()).await?;
        let (sql, bound) = self.prepared.statement(&cmd.prepared_statement_handle, &user)?;
        let rows = if sent.is_empty() { bound } else { sent };
        if rows.is_empty() {
            return self.run_update(&caller, prepared::bind_row(&sql, None)?).await;
        }
        // Batched where the statement is an INSERT ... VALUES, else one execution per
        // row, in order; bounded either way, and the counts add up.
        let mut total = 0;
        for statement in prepared::executions(&sql, &rows)? {
            total += self.run_update(&caller, statement).await?;
        }
        Ok(total)
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let caller = self.caller(&request).await?;
        let handle = self.prepared.create(query.query, &caller.session.user);
        // The result's schema is known once the statement runs (its FlightInfo).
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema: Default::default(),
            parameter_schema: Default::default(),
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        let caller = self.caller(&request).await?;
        self.prepared.close(&query.prepared_statement_handle, &caller.session.user)
    }

    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let caller = self.caller(&request).await?;
        let info = FlightInfo::decode(query.info.as_ref()).map_err(|e| invalid(e.to_string()))?;
        self.cancel_ticket(&caller, &info)?;
        // `CancelResult::Cancelled`, which arrow-flight does not export.
        Ok(ActionCancelQueryResult { result: 1 })
    }

    /// Flight's own `CancelFlightInfo`, which newer clients send instead of
    /// Flight SQL's `CancelQuery`.
    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        let caller = self.caller(&request).await?;
        if request.get_ref().r#type != "CancelFlightInfo" {
            return Err(invalid(format!("unknown action {:?}", request.get_ref().r#type)));
        }
        let cancel =
            CancelFlightInfoRequest::decode(request.get_ref().body.as_ref()).map_err(|e| invalid(e.to_string()))?;
        let info = cancel.info.ok_or_else(|| invalid("CancelFlightInfo without a FlightInfo"))?;
        self.cancel_ticket(&caller, &info)?;
        let result = CancelFlightInfoResult { status: CancelStatus::Cancelled as i32 };
        let body = arrow_flight::Result { body: result.encode_to_vec().into() };
        Ok(Response::new(Box::pin(futures::stream::iter([Ok(body)]))))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
