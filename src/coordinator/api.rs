//! The coordinator's HTTP surface: the routes (the statement protocol's handlers
//! live in `statement`, the web UI's in `ui`), logins, worker announcements, query
//! listing, info and cancellation, `/metrics` and `/v1/info`. `start_coordinator`
//! serves [`router`]; everything here reads or asks `CoordinatorState`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};

use super::{planning, statement, ui, CoordinatorError, CoordinatorState, Viewer};
use crate::protocol::Announcement;

pub(super) fn router(state: Arc<CoordinatorState>) -> Router {
    let auth = crate::http::InternalAuth(state.config.shared_secret.as_deref().map(Arc::from));
    let internal = Router::new()
        .route("/v1/announcement", post(announce))
        .route_layer(axum::middleware::from_fn_with_state(auth, crate::http::require_internal));
    // A statement may be as long as MAX_QUERY_LENGTH; a longer one is refused by
    // `post_statement` as a failed query, so the body limit sits a little above it.
    let statement_limit = axum::extract::DefaultBodyLimit::max(planning::MAX_QUERY_LENGTH + (1 << 20));
    // What clients use needs a login when PASSWORD authentication is on.
    let client = Router::new()
        .route("/v1/statement", post(statement::post_statement).layer(statement_limit))
        .route(
            "/v1/statement/executing/{query_id}/{slug}/{token}",
            get(statement::get_results).head(statement::heartbeat).delete(statement::cancel_query),
        )
        .route("/v1/node", get(list_nodes))
        .route("/v1/query", get(list_queries))
        .route("/v1/query/{query_id}", get(query_info).delete(cancel))
        .route("/v1/query/{query_id}/cancel", delete(cancel))
        .merge(ui::routes())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .merge(internal)
        .merge(client)
        // Trino's clients fetch segments without credentials: the id is the key.
        .route("/v1/spooled/download/{id}", get(super::spooling::download))
        .route("/v1/spooled/ack/{id}", get(super::spooling::acknowledge))
        .route("/v1/info", get(info))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(crate::http::json_errors))
        .with_state(state)
}

type St = State<Arc<CoordinatorState>>;

async fn not_found() -> Response {
    let mut r = CoordinatorError::BadRequest("no such endpoint".into()).into_response();
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

/// The user a request logged in as (PASSWORD authentication).
#[derive(Clone, Debug)]
pub struct Authenticated(pub String);

/// Checks HTTP basic credentials against the password file; without one, every
/// request passes (the user is whoever `X-Trino-User` names).
async fn authenticate(State(s): St, mut req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if s.config.security.passwords.is_none() {
        return next.run(req).await;
    }
    let credentials =
        req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(basic_credentials);
    let Some((user, password)) = credentials else {
        return unauthorized("this server needs a user and password (HTTP basic authentication)");
    };
    let address = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    if let Err(e) = verify_login(&s.config.security, &user, password, address).await {
        return match e {
            CoordinatorError::Unauthenticated(m) => unauthorized(&m),
            e => e.into_response(),
        };
    }
    req.extensions_mut().insert(Authenticated(user));
    next.run(req).await
}

/// The user and password of an `Authorization: Basic ...` value, its base64 with or
/// without padding (Go's Flight clients, ADBC's among them, leave it out).
pub(crate) fn basic_credentials(value: &str) -> Option<(String, String)> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::Engine::decode(&LENIENT, encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':').map(|(u, p)| (u.to_string(), p.to_string()))
}

/// Checks a user's password against the password file, with the throttle of failed
/// logins; both the HTTP servers and Flight SQL's handshake log in through it.
pub(crate) async fn verify_login(
    security: &crate::security::Security,
    user: &str,
    password: String,
    address: Option<std::net::IpAddr>,
) -> Result<(), CoordinatorError> {
    let Some(passwords) = security.passwords.clone() else { return Ok(()) };
    let logins = security.logins.clone();
    if let Some(wait) = logins.wait(user, address, std::time::Instant::now()) {
        return Err(CoordinatorError::TooManyFailedLogins(format!(
            "too many failed logins for user {user} or from this address; try again in {:.1} s",
            wait.as_secs_f64()
        )));
    }
    // bcrypt is slow on purpose: off the runtime's threads.
    let checked = user.to_string();
    let ok = tokio::task::spawn_blocking(move || passwords.verify(&checked, &password)).await.unwrap_or(false);
    if !ok {
        logins.failed(user, address, std::time::Instant::now());
        let from = address.map_or_else(|| "an unknown address".to_string(), |a| a.to_string());
        tracing::warn!("failed login for user {user} from {from}");
        return Err(CoordinatorError::Unauthenticated("wrong user or password".into()));
    }
    logins.succeeded(user, address);
    Ok(())
}

fn unauthorized(message: &str) -> Response {
    let mut resp = CoordinatorError::Unauthenticated(message.to_string()).into_response();
    resp.headers_mut()
        .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Basic realm=\"flotilla\""));
    resp
}

async fn announce(State(s): St, body: Bytes) -> Result<Response, CoordinatorError> {
    let a: Announcement = serde_json::from_slice(&body)
        .map_err(|e| CoordinatorError::BadRequest(format!("malformed announcement: {e}")))?;
    if !a.url.starts_with("http://") && !a.url.starts_with("https://") {
        return Err(CoordinatorError::BadRequest(format!("worker url '{}' is not http(s)", a.url)));
    }
    if s.config.https_required && !a.url.starts_with("https://") {
        return Err(CoordinatorError::BadRequest(format!(
            "internal communication requires HTTPS (internal-communication.https.required), worker '{}' announced {}",
            a.node_id, a.url
        )));
    }
    if let Some(env) = a.environment.as_deref().filter(|e| *e != s.config.environment) {
        if s.refused.lock().insert(a.node_id.clone()) {
            tracing::warn!(
                "refusing worker {} ({}): its node.environment is '{env}', this coordinator's is '{}'",
                a.node_id,
                a.url,
                s.config.environment
            );
        }
        return Err(CoordinatorError::WrongEnvironment(format!(
            "this coordinator's node.environment is '{}', the worker's is '{env}'",
            s.config.environment
        )));
    }
    if let Err(why) = s.nodes.heartbeat(&a.node_id, &a.url, a.shutting_down) {
        if s.refused.lock().insert(format!("{} {}", a.node_id, a.url)) {
            tracing::warn!("refusing worker {} ({}): {why}", a.node_id, a.url);
        }
        return Err(CoordinatorError::DuplicateNodeId(why));
    }
    s.cluster_memory.report(&a.node_id, a.query_memory, a.query_memory_capacity);
    let files_directories = s.connectors.files_directories().iter().map(|d| d.display().to_string()).collect();
    let answer =
        crate::protocol::AnnouncementAnswer { coordinator_incarnation: Some(s.incarnation.clone()), files_directories };
    Ok(Json(answer).into_response())
}

async fn list_nodes(State(s): St) -> Response {
    Json(s.nodes.all()).into_response()
}

type Login = Option<axum::Extension<Authenticated>>;

/// The queries the asker may see: their own (see `Viewer`).
async fn list_queries(State(s): St, login: Login, headers: HeaderMap) -> Response {
    let viewer = Viewer::of(login.map(|axum::Extension(a)| a).as_ref(), &headers);
    let mut v: Vec<_> = s.queries().iter().filter(|q| s.may_see(&viewer, q)).map(|q| q.summary()).collect();
    v.sort_by(|a, b| a.query_id.cmp(&b.query_id));
    Json(v).into_response()
}

/// `?slug=`: the query's secret from its `infoUri`, which opens it to whoever holds it
/// (the web page a client links to), logins permitting.
#[derive(serde::Deserialize)]
struct SlugParam {
    slug: Option<String>,
}

/// A query by id for the asker: one they may see, or one whose slug they hold.
fn query_asked(
    s: &CoordinatorState,
    login: Login,
    headers: &HeaderMap,
    id: &str,
    slug: Option<&str>,
) -> Result<Arc<super::query::QueryExecution>, CoordinatorError> {
    let login = login.map(|axum::Extension(a)| a);
    if let Some(slug) = slug {
        if let Ok(q) = s.query(id) {
            if q.has_slug(slug) {
                s.check_login_sees(login.as_ref(), &q)?;
                return Ok(q);
            }
        }
    }
    s.query_for(id, &Viewer::of(login.as_ref(), headers))
}

async fn query_info(
    State(s): St,
    login: Login,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(p): Query<SlugParam>,
) -> Result<Response, CoordinatorError> {
    Ok(Json(query_asked(&s, login, &headers, &id, p.slug.as_deref())?.detail()).into_response())
}

async fn cancel(
    State(s): St,
    login: Login,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(p): Query<SlugParam>,
) -> Result<Response, CoordinatorError> {
    query_asked(&s, login, &headers, &id, p.slug.as_deref())?.cancel();
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn metrics(State(s): St) -> Response {
    use crate::scheduling::state_machine::QueryState::*;
    let states: Vec<_> = s.queries().iter().map(|q| q.state()).collect();
    let mut e = crate::metrics::Exposition::default();
    let all = [Queued, Planning, Starting, Running, Finishing, Finished, Failed];
    e.state_counts("flotilla_queries", "Queries known to the coordinator, by state.", &all, &states);
    e.counter(
        "flotilla_queries_submitted_total",
        "Queries submitted to this coordinator.",
        crate::metrics::QUERIES_SUBMITTED.load(Ordering::Relaxed),
    );
    e.gauge("flotilla_workers_alive", "Workers with a recent heartbeat.", s.nodes.live_workers().len() as f64);
    e.latency_histogram(
        "flotilla_query_latency_seconds",
        "Time from submission to the end of a query.",
        &crate::metrics::QUERY_LATENCY,
    );
    e.exchange_counters();
    ([(axum::http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], e.finish()).into_response()
}

async fn info(State(s): St) -> Response {
    Json(serde_json::json!({
        "nodeVersion": {"version": env!("CARGO_PKG_VERSION")},
        "coordinator": true,
        "starting": false,
        "workers": s.nodes.live_workers().len(),
        "heapUsed": crate::util::heap_used_bytes(),
    }))
    .into_response()
}
