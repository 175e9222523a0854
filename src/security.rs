//! Who may do what on the coordinator, in Trino's formats.
//!
//! - `PasswordFile`: Trino's password file, one `user:hash` per line, the hash bcrypt
//!   (`$2y$...`) or PBKDF2 (`iterations:salt:hash`, hex, HMAC-SHA256). Checked on every
//!   client request when `http-server.authentication.type=PASSWORD`; a good password
//!   is remembered for a minute, so a paging client does not pay bcrypt per page.
//! - `GroupFile`: Trino's file group provider, `group:user1,user2` per line.
//! - `AccessRules`: Trino's file-based access control (`rules.json`): catalog rules
//!   (`allow`: `all`, `read-only` or `none`, first match wins, no match denies), schema
//!   rules (`owner`: may create and drop there) and impersonation rules (whom a logged
//!   in user may run queries as). The coordinator checks a statement's tables before
//!   planning runs anything.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use regex::Regex;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Bad { path: String, line: usize, message: String },
}

pub mod throttle;

#[derive(Clone)]
enum Hash {
    Bcrypt(String),
    Pbkdf2 { iterations: u32, salt: Vec<u8>, hash: Vec<u8> },
}

impl Hash {
    fn matches(&self, password: &str) -> bool {
        match self {
            Hash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            Hash::Pbkdf2 { iterations, salt, hash } => {
                let mut out = vec![0u8; hash.len()];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), salt, *iterations, &mut out);
                crate::util::constant_time_eq(&out, hash)
            }
        }
    }
}

/// How long a verified password is taken without hashing it again.
const REMEMBER: Duration = Duration::from_secs(60);

pub struct PasswordFile {
    users: HashMap<String, Hash>,
    /// The file's first hash: an unknown user's password is checked against it, so
    /// that an unknown user takes as long to refuse as a known one and the time of
    /// an answer does not tell which users exist.
    decoy: Option<Hash>,
    /// (user, SHA-256 of the password) verified at that time.
    verified: Mutex<HashMap<(String, [u8; 32]), Instant>>,
}

fn hex(s: &str) -> Option<Vec<u8>> {
    (s.len().is_multiple_of(2) && !s.is_empty())
        .then(|| (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect())
        .flatten()
}

impl PasswordFile {
    pub fn load(path: &Path) -> Result<Self, SecurityError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SecurityError::Read { path: path.display().to_string(), source })?;
        Self::parse(&path.display().to_string(), &text)
    }

    pub fn parse(path: &str, text: &str) -> Result<Self, SecurityError> {
        let mut users = HashMap::new();
        let mut decoy = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |message: &str| SecurityError::Bad { path: path.into(), line: i + 1, message: message.into() };
            let (user, rest) = line.split_once(':').ok_or_else(|| bad("expected user:hash"))?;
            let hash = if rest.starts_with("$2") {
                Hash::Bcrypt(rest.to_string())
            } else {
                let parts: Vec<&str> = rest.split(':').collect();
                match parts.as_slice() {
                    [iterations, salt, hash] => Hash::Pbkdf2 {
                        iterations: iterations.parse().map_err(|_| bad("PBKDF2 iterations are not a number"))?,
                        salt: hex(salt).ok_or_else(|| bad("PBKDF2 salt is not hex"))?,
                        hash: hex(hash).ok_or_else(|| bad("PBKDF2 hash is not hex"))?,
                    },
                    _ => return Err(bad("the hash is neither bcrypt ($2y$...) nor PBKDF2 (iterations:salt:hash)")),
                }
            };
            decoy.get_or_insert_with(|| hash.clone());
            users.insert(user.to_string(), hash);
        }
        Ok(PasswordFile { users, decoy, verified: Mutex::new(HashMap::new()) })
    }

    pub fn verify(&self, user: &str, password: &str) -> bool {
        use sha2::Digest;
        let key = (user.to_string(), <[u8; 32]>::from(sha2::Sha256::digest(password.as_bytes())));
        if self.verified.lock().get(&key).is_some_and(|at| at.elapsed() < REMEMBER) {
            return true;
        }
        let ok = match self.users.get(user) {
            Some(hash) => hash.matches(password),
            None => {
                let _ = self.decoy.as_ref().map(|d| d.matches(password));
                false
            }
        };
        if ok {
            let mut verified = self.verified.lock();
            verified.retain(|_, at| at.elapsed() < REMEMBER);
            verified.insert(key, Instant::now());
        }
        ok
    }
}

/// Users' groups, from `group:user1,user2` lines.
#[derive(Default)]
pub struct GroupFile {
    groups: HashMap<String, BTreeSet<String>>,
}

impl GroupFile {
    pub fn load(path: &Path) -> Result<Self, SecurityError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SecurityError::Read { path: path.display().to_string(), source })?;
        let mut groups: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (group, users) = line.split_once(':').ok_or_else(|| SecurityError::Bad {
                path: path.display().to_string(),
                line: i + 1,
                message: "expected group:user1,user2".into(),
            })?;
            for u in users.split(',').map(str::trim).filter(|u| !u.is_empty()) {
                groups.entry(u.to_string()).or_default().insert(group.trim().to_string());
            }
        }
        Ok(GroupFile { groups })
    }

    pub fn groups_of(&self, user: &str) -> BTreeSet<String> {
        self.groups.get(user).cloned().unwrap_or_default()
    }
}

/// What a catalog rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allow {
    All,
    ReadOnly,
    None,
}

fn anything() -> String {
    ".*".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogRuleSpec {
    #[serde(default = "anything")]
    user: String,
    #[serde(default = "anything")]
    group: String,
    #[serde(default = "anything")]
    catalog: String,
    allow: Allow,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaRuleSpec {
    #[serde(default = "anything")]
    user: String,
    #[serde(default = "anything")]
    group: String,
    #[serde(default = "anything")]
    catalog: String,
    #[serde(default = "anything")]
    schema: String,
    owner: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImpersonationSpec {
    original_user: String,
    new_user: String,
    #[serde(default = "yes")]
    allow: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesSpec {
    catalogs: Option<Vec<CatalogRuleSpec>>,
    schemas: Option<Vec<SchemaRuleSpec>>,
    impersonation: Option<Vec<ImpersonationSpec>>,
}

/// A regex matching the whole name, as Trino's rules do.
fn whole(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("bad pattern '{pattern}': {e}"))
}

/// A rule list's patterns compiled; an absent list stays absent (it allows all).
fn compile<S, R>(specs: Option<Vec<S>>, rule: impl Fn(S) -> Result<R, String>) -> Result<Option<Vec<R>>, String> {
    specs.map(|v| v.into_iter().map(rule).collect()).transpose()
}

struct CatalogRule {
    user: Regex,
    group: Regex,
    catalog: Regex,
    allow: Allow,
}

struct SchemaRule {
    user: Regex,
    group: Regex,
    catalog: Regex,
    schema: Regex,
    owner: bool,
}

struct ImpersonationRule {
    original: Regex,
    new: Regex,
    allow: bool,
}

pub struct AccessRules {
    catalogs: Option<Vec<CatalogRule>>,
    schemas: Option<Vec<SchemaRule>>,
    impersonation: Option<Vec<ImpersonationRule>>,
    groups: GroupFile,
}

/// Who is asking: the user and their groups.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user: String,
    pub groups: BTreeSet<String>,
}

impl Identity {
    fn matches(&self, user: &Regex, group: &Regex) -> bool {
        user.is_match(&self.user) && (group.as_str() == "^(?:.*)$" || self.groups.iter().any(|g| group.is_match(g)))
    }
}

/// One thing a statement touches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub catalog: String,
    pub schema: String,
    /// Creates, changes or drops something (rather than reading).
    pub write: bool,
}

impl AccessRules {
    pub fn load(path: &Path, groups: GroupFile) -> Result<Self, SecurityError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SecurityError::Read { path: path.display().to_string(), source })?;
        Self::parse(&path.display().to_string(), &text, groups)
    }

    pub fn parse(path: &str, text: &str, groups: GroupFile) -> Result<Self, SecurityError> {
        let bad = |message: String| SecurityError::Bad { path: path.into(), line: 0, message };
        let spec: RulesSpec = serde_json::from_str(text).map_err(|e| SecurityError::Bad {
            path: path.into(),
            line: e.line(),
            message: e.to_string(),
        })?;
        let catalogs = compile(spec.catalogs, |r| {
            Ok(CatalogRule {
                user: whole(&r.user)?,
                group: whole(&r.group)?,
                catalog: whole(&r.catalog)?,
                allow: r.allow,
            })
        })
        .map_err(bad)?;
        let schemas = compile(spec.schemas, |r| {
            Ok(SchemaRule {
                user: whole(&r.user)?,
                group: whole(&r.group)?,
                catalog: whole(&r.catalog)?,
                schema: whole(&r.schema)?,
                owner: r.owner,
            })
        })
        .map_err(bad)?;
        let impersonation = compile(spec.impersonation, |r| {
            Ok(ImpersonationRule { original: whole(&r.original_user)?, new: whole(&r.new_user)?, allow: r.allow })
        })
        .map_err(bad)?;
        Ok(AccessRules { catalogs, schemas, impersonation, groups })
    }

    pub fn identity(&self, user: &str) -> Identity {
        Identity { user: user.to_string(), groups: self.groups.groups_of(user) }
    }

    /// What `who` may do in `catalog`: the first matching rule; no rules, everything.
    pub fn catalog_access(&self, who: &Identity, catalog: &str) -> Allow {
        match &self.catalogs {
            None => Allow::All,
            Some(rules) => rules
                .iter()
                .find(|r| who.matches(&r.user, &r.group) && r.catalog.is_match(catalog))
                .map_or(Allow::None, |r| r.allow),
        }
    }

    fn owns_schema(&self, who: &Identity, catalog: &str, schema: &str) -> bool {
        match &self.schemas {
            None => true,
            Some(rules) => rules
                .iter()
                .find(|r| who.matches(&r.user, &r.group) && r.catalog.is_match(catalog) && r.schema.is_match(schema))
                .is_some_and(|r| r.owner),
        }
    }

    /// The first access denied, as Trino words it.
    pub fn check(&self, who: &Identity, accesses: &[Access]) -> Result<(), String> {
        for a in accesses {
            let allow = self.catalog_access(who, &a.catalog);
            let denied = match (allow, a.write) {
                (Allow::None, _) => Some(format!("Cannot access catalog {}", a.catalog)),
                (Allow::ReadOnly, true) => Some(format!("Cannot write to catalog {}, which is read-only", a.catalog)),
                (Allow::All, true) if !self.owns_schema(who, &a.catalog, &a.schema) => {
                    Some(format!("Cannot create or change objects in schema {}.{}", a.catalog, a.schema))
                }
                _ => None,
            };
            if let Some(what) = denied {
                return Err(format!("Access Denied: {what} (user {})", who.user));
            }
        }
        Ok(())
    }

    /// Whether `original` may run queries as `new` (always as itself).
    pub fn may_impersonate(&self, original: &str, new: &str) -> bool {
        if original == new {
            return true;
        }
        self.impersonation.as_ref().is_some_and(|rules| {
            rules.iter().find(|r| r.original.is_match(original) && r.new.is_match(new)).is_some_and(|r| r.allow)
        })
    }
}

/// The coordinator's security: logins and rules, either optional.
#[derive(Default, Clone)]
pub struct Security {
    pub passwords: Option<Arc<PasswordFile>>,
    pub rules: Option<Arc<AccessRules>>,
    /// Failed logins by user and address (see `throttle`).
    pub logins: Arc<throttle::LoginThrottle>,
}

impl Security {
    /// Loads the files that are given: passwords, groups, rules.
    pub fn load(
        password_file: Option<&Path>,
        access_rules: Option<&Path>,
        group_file: Option<&Path>,
    ) -> Result<Self, SecurityError> {
        let passwords = password_file.map(PasswordFile::load).transpose()?.map(Arc::new);
        let groups = group_file.map(GroupFile::load).transpose()?.unwrap_or_default();
        let rules = access_rules.map(|p| AccessRules::load(p, groups)).transpose()?.map(Arc::new);
        Ok(Security { passwords, rules, logins: Default::default() })
    }
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("passwords", &self.passwords.as_ref().map(|p| p.users.len()))
            .field("rules", &self.rules.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcrypt_and_pbkdf2_entries_verify() {
        let bcrypt_hash = bcrypt::hash("secret1", 4).unwrap().replacen("$2b$", "$2y$", 1);
        let mut out = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<sha2::Sha256>(b"secret2", b"salty", 1000, &mut out);
        let pbkdf2_hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        let salt_hex: String = b"salty".iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("# users\nalice:{bcrypt_hash}\nbob:1000:{salt_hex}:{pbkdf2_hex}\n");
        let f = PasswordFile::parse("password.db", &text).unwrap();
        assert!(f.verify("alice", "secret1"));
        assert!(f.verify("alice", "secret1"), "remembered");
        assert!(!f.verify("alice", "secret2"));
        assert!(f.verify("bob", "secret2"));
        assert!(!f.verify("bob", "secret1"));
        assert!(!f.verify("carol", "secret1"));
        let e = PasswordFile::parse("password.db", "alice:plaintext\n").err().unwrap().to_string();
        assert!(e.starts_with("password.db:1:"), "{e}");
    }

    #[test]
    fn an_unknown_user_takes_as_long_to_refuse_as_a_known_one() {
        // bcrypt at cost 10 takes tens of milliseconds: long enough to see whether a
        // refusal hashed at all. The fastest of a few runs of each is compared.
        let text = format!("alice:{}\n", bcrypt::hash("right", 10).unwrap());
        let f = PasswordFile::parse("password.db", &text).unwrap();
        let fastest = |user: &str| {
            (0..3)
                .map(|_| {
                    let started = Instant::now();
                    assert!(!f.verify(user, "wrong"));
                    started.elapsed()
                })
                .min()
                .unwrap()
        };
        let (known, unknown) = (fastest("alice"), fastest("mallory"));
        assert!(unknown * 2 >= known, "known user refused in {known:?}, unknown in {unknown:?}");
    }

    #[test]
    fn catalog_schema_and_impersonation_rules() {
        let rules = r#"{
            "catalogs": [
                {"user": "admin", "allow": "all"},
                {"group": "analysts", "catalog": "tpch", "allow": "read-only"},
                {"user": "alice", "catalog": "files", "allow": "all"},
                {"catalog": "tpch", "allow": "read-only"}
            ],
            "schemas": [{"user": "admin|alice", "schema": "default", "owner": true}],
            "impersonation": [{"original_user": "admin", "new_user": ".*"}]
        }"#;
        let groups = GroupFile { groups: [("dave".to_string(), ["analysts".to_string()].into())].into() };
        let r = AccessRules::parse("rules.json", rules, groups).unwrap();
        let read = |c: &str| Access { catalog: c.into(), schema: "default".into(), write: false };
        let write = |c: &str| Access { catalog: c.into(), schema: "default".into(), write: true };
        let (admin, alice, dave, eve) =
            (r.identity("admin"), r.identity("alice"), r.identity("dave"), r.identity("eve"));
        assert!(r.check(&admin, &[write("files"), read("tpch")]).is_ok());
        assert!(r.check(&alice, &[write("files"), read("tpch")]).is_ok());
        assert!(r.check(&dave, &[read("tpch")]).is_ok());
        assert!(r.check(&dave, &[write("tpch")]).unwrap_err().contains("read-only"));
        let denied = r.check(&eve, &[read("files")]).unwrap_err();
        assert!(denied.contains("Cannot access catalog files") && denied.contains("eve"), "{denied}");
        assert!(r.check(&dave, &[read("files")]).is_err(), "no rule matches: denied");
        let other_schema = Access { catalog: "files".into(), schema: "staging".into(), write: true };
        assert!(r.check(&alice, &[other_schema]).unwrap_err().contains("schema files.staging"));
        assert!(
            r.may_impersonate("admin", "eve") && r.may_impersonate("eve", "eve") && !r.may_impersonate("eve", "admin")
        );
        let e = AccessRules::parse("rules.json", r#"{"catalogs": [{"allow": "maybe"}]}"#, GroupFile::default());
        assert!(e.is_err());
        let open = AccessRules::parse("rules.json", "{}", GroupFile::default()).unwrap();
        assert!(open.check(&eve, &[write("anything")]).is_ok());
    }
}
