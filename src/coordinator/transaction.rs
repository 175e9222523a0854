//! Trino's transactions, in autocommit semantics: `START TRANSACTION` opens one and
//! answers its id (`X-Trino-Started-Transaction-Id`), which the client then sends with
//! every statement (`X-Trino-Transaction-Id`); `COMMIT` and `ROLLBACK` close it and
//! tell the client to forget it (`X-Trino-Clear-Transaction-Id`). What a transaction
//! promises here: each statement in it sees the data as of its own start and commits
//! on its own, and no statement inside one may write, so a `ROLLBACK` has nothing to
//! undo and never claims to undo what it cannot (writes answer `NOT_SUPPORTED`, as
//! Trino's Hive connector answers writes it cannot make transactional).
//!
//! `Transactions` is the coordinator's table of open transactions, owned by
//! `CoordinatorState`; one unused for `IDLE_TIMEOUT` is forgotten (Trino's
//! `transaction.idle-timeout`), and its id then answers `UNKNOWN_TRANSACTION`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::planner::QueryError;
use crate::error_code::ErrorCode;

/// Trino's default `transaction.idle-timeout`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The id a client sends when it has no transaction.
const NO_TRANSACTION: &str = "NONE";

/// The transaction a request names, if any (`X-Trino-Transaction-Id`, `NONE` for none).
pub fn named(header: Option<&str>) -> Option<String> {
    header.map(str::trim).filter(|id| !id.is_empty() && !id.eq_ignore_ascii_case(NO_TRANSACTION)).map(str::to_string)
}

#[derive(Default)]
pub struct Transactions {
    /// Open transactions by id, with when each was last used.
    open: parking_lot::Mutex<HashMap<String, Instant>>,
}

impl Transactions {
    fn expire(open: &mut HashMap<String, Instant>, now: Instant) {
        open.retain(|_, used| now.duration_since(*used) < IDLE_TIMEOUT);
    }

    /// Opens a transaction for a client that has none; its id.
    pub fn begin(&self, current: Option<&str>, now: Instant) -> Result<String, QueryError> {
        if current.is_some() {
            return Err(QueryError::new(ErrorCode::NotSupported, "Nested transactions not supported"));
        }
        let id = format!("{:032x}", rand::random::<u128>());
        let mut open = self.open.lock();
        Self::expire(&mut open, now);
        open.insert(id.clone(), now);
        Ok(id)
    }

    /// Checks that `id` is open and marks it used.
    pub fn touch(&self, id: &str, now: Instant) -> Result<(), QueryError> {
        let mut open = self.open.lock();
        Self::expire(&mut open, now);
        match open.get_mut(id) {
            Some(used) => {
                *used = now;
                Ok(())
            }
            None => Err(QueryError::new(ErrorCode::UnknownTransaction, format!("Unknown transaction ID: {id}"))),
        }
    }

    /// Closes the client's transaction (`COMMIT`, `ROLLBACK`).
    pub fn end(&self, current: Option<&str>, now: Instant) -> Result<(), QueryError> {
        let Some(id) = current else {
            return Err(QueryError::new(ErrorCode::NotInTransaction, "No transaction in progress"));
        };
        self.touch(id, now)?;
        self.open.lock().remove(id);
        Ok(())
    }

    /// How many transactions are open (for tests and the UI).
    pub fn open(&self) -> usize {
        self.open.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl std::fmt::Debug, QueryError>) -> Option<ErrorCode> {
        r.unwrap_err().error_name.known()
    }

    #[test]
    fn a_transaction_opens_is_used_and_closes_once() {
        let (t, now) = (Transactions::default(), Instant::now());
        let id = t.begin(None, now).unwrap();
        t.touch(&id, now).unwrap();
        assert_eq!(code(t.begin(Some(&id), now)), Some(ErrorCode::NotSupported));
        t.end(Some(&id), now).unwrap();
        assert_eq!(code(t.end(Some(&id), now)), Some(ErrorCode::UnknownTransaction));
        assert_eq!(code(t.end(None, now)), Some(ErrorCode::NotInTransaction));
        assert_eq!(t.open(), 0);
    }

    #[test]
    fn an_idle_transaction_is_forgotten() {
        let (t, now) = (Transactions::default(), Instant::now());
        let id = t.begin(None, now).unwrap();
        let later = now + IDLE_TIMEOUT - Duration::from_secs(1);
        t.touch(&id, later).unwrap();
        assert_eq!(code(t.touch(&id, later + IDLE_TIMEOUT)), Some(ErrorCode::UnknownTransaction));
        assert_eq!(t.open(), 0);
    }

    #[test]
    fn none_names_no_transaction() {
        assert_eq!(named(Some("NONE")), None);
        assert_eq!(named(Some(" ")), None);
        assert_eq!(named(Some("abc")), Some("abc".into()));
    }
}
