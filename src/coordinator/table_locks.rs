//! Table locks on the coordinator: a write's commit and a statement that drops,
//! renames or replaces the same table take turns. `TableCommit::publish` holds its
//! table's lock while it checks that the table is still the one it planned against
//! and publishes; the DDL path (`planning`, `relations`) holds the lock of every table
//! its statement removes or renames while it runs. Whoever comes second sees what
//! the first did: a commit after a `DROP` finds its table gone and fails with
//! `TRANSACTION_CONFLICT`, leaving nothing behind; a `DROP` after a commit drops the
//! table with the rows it added.
//!
//! The locks live as long as somebody holds or waits for them: a map from table name
//! to a mutex, an entry removed when its last guard goes. One map per process, as a
//! coordinator has one set of catalogs.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use datafusion::common::TableReference;
use parking_lot::Mutex;

type Entry = Arc<tokio::sync::Mutex<()>>;

static LOCKS: LazyLock<Mutex<HashMap<String, Entry>>> = LazyLock::new(Default::default);

/// The key of a table: its full name as the catalog spells it.
pub fn key(table: &TableReference) -> String {
    match table {
        TableReference::Full { catalog, schema, table } => format!("{catalog}.{schema}.{table}"),
        other => other.to_string(),
    }
}

/// The locks of some tables, held until dropped.
pub struct TableGuard {
    held: Vec<(String, tokio::sync::OwnedMutexGuard<()>)>,
}

impl Drop for TableGuard {
    fn drop(&mut self) {
        let mut map = LOCKS.lock();
        for (name, guard) in self.held.drain(..) {
            drop(guard);
            // Nobody else holds or waits for it: the map's copy is the last.
            if map.get(&name).is_some_and(|e| Arc::strong_count(e) == 1) {
                map.remove(&name);
            }
        }
    }
}

/// Takes the locks of `tables` (full names), in one order for everybody so that two
/// statements locking the same two tables cannot wait for each other.
pub async fn lock(tables: impl IntoIterator<Item = String>) -> TableGuard {
    let names: BTreeSet<String> = tables.into_iter().collect();
    let mut held = Vec::with_capacity(names.len());
    for name in names {
        let entry = LOCKS.lock().entry(name.clone()).or_default().clone();
        held.push((name, entry.lock_owned().await));
    }
    TableGuard { held }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_holder_waits_and_entries_go_with_their_last_guard() {
        let name = "locks_test.s.t".to_string();
        let first = lock([name.clone()]).await;
        let second = tokio::spawn(lock([name.clone(), "locks_test.s.u".to_string()]));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the second waits for the first");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second).await.unwrap().unwrap();
        assert_eq!(second.held.len(), 2);
        drop(second);
        assert!(!LOCKS.lock().keys().any(|k| k.starts_with("locks_test.")), "no entry outlives its guards");
    }

    #[tokio::test]
    async fn locks_are_taken_in_one_order() {
        // Two statements locking the same tables in opposite orders both finish.
        let (a, b) = ("locks_order.s.a".to_string(), "locks_order.s.b".to_string());
        let runs = (0..50).map(|i| {
            let names = if i % 2 == 0 { vec![a.clone(), b.clone()] } else { vec![b.clone(), a.clone()] };
            tokio::spawn(async move {
                let _g = lock(names).await;
                tokio::task::yield_now().await;
            })
        });
        let all = futures::future::join_all(runs);
        tokio::time::timeout(Duration::from_secs(5), all).await.expect("no deadlock");
    }

    #[test]
    fn keys_are_full_names() {
        assert_eq!(key(&TableReference::full("files", "s", "t")), "files.s.t");
    }
}
