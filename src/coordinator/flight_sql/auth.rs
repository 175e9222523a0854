//! Who a Flight SQL call is from, and the session it runs in. The handshake checks
//! `Authorization: Basic` against the password file (the same check and throttle as
//! the HTTP servers) and answers with a bearer token; later calls carry the token.
//! A token also holds its connection's session: Flight SQL has no headers that come
//! back to the client, so what `USE` or `SET SESSION` change is kept here and applied
//! to the connection's next statements. Called by the service for every call; owns
//! the tokens, which expire when unused for `TOKEN_IDLE`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::status::coordinator_status;
use crate::coordinator::planner::SessionSpec;
use crate::coordinator::session_statement::SessionChange;
use crate::coordinator::{Authenticated, CoordinatorError, CoordinatorState};

/// A token unused this long is forgotten; its client logs in again.
const TOKEN_IDLE: Duration = Duration::from_secs(3600);

/// The caller of one call: its user, whether it logged in, and its token.
#[derive(Debug, Clone)]
pub struct Caller {
    pub login: Option<Authenticated>,
    pub token: Option<String>,
    pub session: SessionSpec,
}

struct TokenEntry {
    user: String,
    /// Whether the password was checked (false without a password file).
    logged_in: bool,
    /// The session changes of the connection's statements, in order.
    changes: Vec<SessionChange>,
    last_used: Instant,
}

/// The bearer tokens handed out by handshakes.
#[derive(Default)]
pub struct Tokens {
    entries: Mutex<HashMap<String, TokenEntry>>,
}

fn header(metadata: &MetadataMap, name: &str) -> Option<String> {
    metadata.get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())
}

impl Tokens {
    /// The handshake: checks the basic credentials (when there is a password file)
    /// and returns a new token for the user.
    pub async fn handshake(
        &self,
        coord: &CoordinatorState,
        metadata: &MetadataMap,
        address: Option<IpAddr>,
    ) -> Result<String, Status> {
        let authorization = header(metadata, "authorization");
        let credentials = authorization.as_deref().and_then(crate::coordinator::api::basic_credentials);
        if authorization.is_some() && credentials.is_none() {
            return Err(Status::unauthenticated("UNAUTHENTICATED: the handshake's credentials are not basic ones"));
        }
        let passwords = coord.config.security.passwords.is_some();
        let (user, logged_in) =
            match credentials {
                Some((user, password)) => {
                    crate::coordinator::api::verify_login(&coord.config.security, &user, password, address)
                        .await
                        .map_err(|e| coordinator_status(&e))?;
                    (user, passwords)
                }
                None if passwords => return Err(Status::unauthenticated(
                    "UNAUTHENTICATED: this server needs a user and password (basic authentication in the handshake)",
                )),
                None => (header(metadata, "x-trino-user").unwrap_or_else(|| SessionSpec::default().user), false),
            };
        let token = format!("{}{}", crate::util::random_suffix(24), crate::util::random_suffix(24));
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.retain(|_, e| now.duration_since(e.last_used) < TOKEN_IDLE);
        entries.insert(token.clone(), TokenEntry { user, logged_in, changes: Vec::new(), last_used: now });
        Ok(token)
    }

    /// The caller of a call other than the handshake, from its bearer token or basic
    /// credentials; without a password file also from `X-Trino-User` alone. The
    /// session is read from Trino's headers (`X-Trino-Catalog`, `-Schema`,
    /// `-Session`, which ADBC sends as call headers), then changed by what the
    /// connection's statements set.
    pub async fn caller(
        &self,
        coord: &CoordinatorState,
        metadata: &MetadataMap,
        address: Option<IpAddr>,
    ) -> Result<Caller, Status> {
        let headers = metadata.clone().into_headers();
        let mut session =
            crate::coordinator::statement::session_from_headers(&headers).map_err(|e| coordinator_status(&e))?;
        let authorization = header(metadata, "authorization");
        let bearer = authorization.as_deref().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
        let (user, logged_in, token) =
            match (bearer, authorization.as_deref()) {
                (Some(token), _) => {
                    let mut entries = self.entries.lock();
                    let entry = entries.get_mut(token).ok_or_else(|| {
                        Status::unauthenticated("UNAUTHENTICATED: unknown or expired token: log in again")
                    })?;
                    entry.last_used = Instant::now();
                    for (name, value) in &entry.changes {
                        apply_change(&mut session, name, value);
                    }
                    (entry.user.clone(), entry.logged_in, Some(token.to_string()))
                }
                (None, Some(value)) if value.starts_with("Basic ") => {
                    let (user, password) = crate::coordinator::api::basic_credentials(value)
                        .ok_or_else(|| Status::unauthenticated("UNAUTHENTICATED: malformed basic credentials"))?;
                    crate::coordinator::api::verify_login(&coord.config.security, &user, password, address)
                        .await
                        .map_err(|e| coordinator_status(&e))?;
                    let logged_in = coord.config.security.passwords.is_some();
                    (user, logged_in, None)
                }
                _ if coord.config.security.passwords.is_some() => return Err(Status::unauthenticated(
                    "UNAUTHENTICATED: this server needs a user and password (basic authentication in the handshake)",
                )),
                _ => (header(metadata, "x-trino-user").unwrap_or(session.user.clone()), false, None),
            };
        let login = logged_in.then(|| Authenticated(user.clone()));
        // A logged-in user may name another to act as, if the access rules let them.
        let named = header(metadata, "x-trino-user").filter(|u| !u.is_empty());
        session.user = named.clone().unwrap_or(user.clone());
        if let (Some(named), Some(rules)) = (named, &coord.config.security.rules) {
            if logged_in && named != user && !rules.may_impersonate(&user, &named) {
                return Err(coordinator_status(&CoordinatorError::PermissionDenied(format!(
                    "Access Denied: User {user} cannot impersonate user {named}"
                ))));
            }
        }
        Ok(Caller { login, token, session })
    }

    /// Keeps a finished statement's session changes for the token's next calls.
    pub fn keep_changes(&self, token: &str, changes: Vec<SessionChange>) {
        if let Some(entry) = self.entries.lock().get_mut(token) {
            entry.changes.extend(changes);
        }
    }
}

/// Applies one of Trino's session-changing response headers to a session.
pub fn apply_change(session: &mut SessionSpec, name: &str, value: &str) {
    match name {
        "x-trino-set-catalog" => session.catalog = value.to_string(),
        "x-trino-set-schema" => session.schema = value.to_string(),
        "x-trino-set-session" => {
            if let Some((k, v)) = value.split_once('=') {
                let v = crate::util::form_decode(v.trim());
                session.properties.insert(k.trim().to_string(), v);
            }
        }
        "x-trino-clear-session" => {
            session.properties.remove(value.trim());
        }
        "x-trino-started-transaction-id" => session.transaction = Some(value.to_string()),
        "x-trino-clear-transaction-id" => session.transaction = None,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_read_with_or_without_padding() {
        let want = Some(("bob".to_string(), "x".to_string()));
        // Go's Flight clients encode without padding ("bob:x" is 5 bytes).
        assert_eq!(crate::coordinator::api::basic_credentials("Basic Ym9iOng"), want);
        assert_eq!(crate::coordinator::api::basic_credentials("Basic Ym9iOng="), want);
        assert_eq!(crate::coordinator::api::basic_credentials("Bearer Ym9iOng="), None);
    }

    #[test]
    fn session_changes_apply_in_order() {
        let mut s = SessionSpec::default();
        apply_change(&mut s, "x-trino-set-catalog", "lake");
        apply_change(&mut s, "x-trino-set-schema", "web");
        apply_change(&mut s, "x-trino-set-session", "query_max_memory=1GB+a%2Cb");
        assert_eq!((s.catalog.as_str(), s.schema.as_str()), ("lake", "web"));
        assert_eq!(s.properties.get("query_max_memory").map(String::as_str), Some("1GB a,b"));
        apply_change(&mut s, "x-trino-clear-session", "query_max_memory");
        assert!(s.properties.is_empty());
        apply_change(&mut s, "x-trino-started-transaction-id", "tx1");
        assert_eq!(s.transaction.as_deref(), Some("tx1"));
        apply_change(&mut s, "x-trino-clear-transaction-id", "true");
        assert_eq!(s.transaction, None);
    }
}
