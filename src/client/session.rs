//! The session a client sends with each statement (catalog, schema, properties), and
//! how a server's answer changes it, as Trino's clients keep theirs.

/// What a client sends with each statement, as Trino's clients keep it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSession {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    /// Session properties, in the order they were set.
    pub properties: Vec<(String, String)>,
}

impl ClientSession {
    pub(super) fn set(&mut self, key: String, value: String) {
        self.properties.retain(|(k, _)| *k != key);
        self.properties.push((key, value));
    }

    /// The changes a server's answer asks for: `X-Trino-Set-Catalog`, `-Set-Schema`,
    /// `-Set-Session` (`name=form-encoded value`) and `-Clear-Session`.
    pub(super) fn apply(&mut self, headers: &reqwest::header::HeaderMap) {
        let values = |name: &str| -> Vec<String> {
            headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
        };
        if let Some(c) = values("x-trino-set-catalog").pop() {
            self.catalog = Some(c);
        }
        if let Some(s) = values("x-trino-set-schema").pop() {
            self.schema = Some(s);
        }
        for pair in values("x-trino-set-session") {
            if let Some((k, v)) = pair.split_once('=') {
                self.set(k.trim().to_string(), crate::util::form_decode(v.trim()));
            }
        }
        for name in values("x-trino-clear-session") {
            self.properties.retain(|(k, _)| *k != name.trim());
        }
    }
}
