//! Small helpers with no better home.

use std::time::Duration;

use rand::Rng;

/// A SQL text where tokens' places (sqlparser's `Location`: lines and columns from 1,
/// counted in characters) map to byte offsets: the front door's readers, the clauses
/// planning takes off a statement, and time travel's edits slice the text with it.
pub struct SqlText<'a> {
    sql: &'a str,
    /// Byte offset of the start of each line of `sql`.
    lines: Vec<usize>,
}

impl<'a> SqlText<'a> {
    pub fn new(sql: &'a str) -> Self {
        let lines = std::iter::once(0).chain(sql.match_indices('\n').map(|(i, _)| i + 1)).collect();
        SqlText { sql, lines }
    }

    /// Byte offset of `at` in the text; the end of the text for a place past it (or
    /// the unknown place, line 0).
    pub fn offset(&self, at: datafusion::sql::sqlparser::tokenizer::Location) -> usize {
        if at.line == 0 {
            return self.sql.len();
        }
        let start = self.lines.get(at.line as usize - 1).copied().unwrap_or(self.sql.len());
        let rest = &self.sql[start..];
        start + rest.char_indices().nth((at.column as usize).saturating_sub(1)).map_or(rest.len(), |(i, _)| i)
    }
}

/// Runs `tick` every `period` on a tokio task until `stop` turns true (or its sender
/// goes): the housekeeping loops of the coordinator and the workers.
pub fn every(period: Duration, mut stop: tokio::sync::watch::Receiver<bool>, mut tick: impl FnMut() + Send + 'static) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => tick(),
                _ = stop.wait_for(|s| *s) => break,
            }
        }
    });
}

/// Memory freed by ended queries, given back to the system once the process is idle.
/// glibc keeps what a query freed in its arenas (most of an Arrow batch's buffers are
/// below its mmap threshold), so a worker that ran 200 queries stayed a gigabyte
/// larger than before them for good; `malloc_trim` returns the free pages. The
/// coordinator's and each worker's housekeeping tick drive it.
#[derive(Debug, Default)]
pub struct FreedMemory {
    /// Work ran (or memory was dropped) since the last trim.
    dirty: std::sync::atomic::AtomicBool,
    /// Free bytes the allocator kept just after the last trim (what it could not
    /// give back). Memory freed after a trim, by work that ended late (the tasks of
    /// cancelled queries dropping their state), shows as more kept than that.
    kept_after_trim: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Free memory kept past the last trim's that makes an idle process trim again.
const RETRIM_BYTES: u64 = 64 << 20;

impl FreedMemory {
    pub fn note_work(&self) {
        self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Trims, off the caller's thread, when idle and work ran since the last trim,
    /// or when the allocator keeps 64 MiB more free memory than the last trim left.
    pub fn trim_if_idle(&self, idle: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        if !idle {
            self.note_work();
            return;
        }
        let freed_late = kept_free_bytes() > self.kept_after_trim.load(Relaxed) + RETRIM_BYTES;
        if self.dirty.swap(false, Relaxed) || freed_late {
            let kept = self.kept_after_trim.clone();
            tokio::task::spawn_blocking(move || {
                release_free_memory();
                kept.store(kept_free_bytes(), Relaxed);
            });
        }
    }
}

/// Resident bytes the allocator holds free: the resident size less the heap in use
/// (0 where either is not known).
fn kept_free_bytes() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let resident = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|r| r.parse::<u64>().ok()))
        .map_or(0, |pages| pages * page);
    resident.saturating_sub(heap_used_bytes())
}

/// Returns the allocator's free pages to the system (glibc's `malloc_trim`).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes the allocator has handed out and not had back, across all its arenas
/// (glibc's `mallinfo2`): Trino's `heapUsed`. Unlike the resident size it does not
/// move with how much freed memory the allocator still keeps, so a test of "nothing
/// is kept after a query ends" can hold the process to it. 0 where not known.
pub fn heap_used_bytes() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's own counters.
        let info = unsafe { libc::mallinfo2() };
        // Chunks above the mmap threshold are counted apart from the arenas'.
        (info.uordblks + info.hblkhd) as u64
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lowercase letters and digits, for ids that must not collide across processes.
pub fn random_suffix(len: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..len).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}

/// The address other hosts most likely reach this one at, for a server bound to a
/// wildcard address: the interface of the default route, else the first non-loopback
/// IPv4 interface that is up, else what the host name resolves to. None when every
/// candidate is a loopback address.
pub fn host_address() -> Option<std::net::IpAddr> {
    default_route_address().or_else(first_interface_address).or_else(hostname_address)
}

/// A UDP "connection" sends nothing; it only asks the kernel which source address
/// the route to a public address would use.
fn default_route_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[cfg(unix)]
fn first_interface_address() -> Option<std::net::IpAddr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we walk read-only and free once.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return None;
        }
        let mut found = None;
        let mut cur = head;
        while !cur.is_null() {
            let ifa = &*cur;
            let up = ifa.ifa_flags & (libc::IFF_UP as u32) != 0;
            let loopback = ifa.ifa_flags & (libc::IFF_LOOPBACK as u32) != 0;
            if up && !loopback && !ifa.ifa_addr.is_null() && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                found = Some(std::net::IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                break;
            }
            cur = ifa.ifa_next;
        }
        libc::freeifaddrs(head);
        found
    }
}

#[cfg(not(unix))]
fn first_interface_address() -> Option<std::net::IpAddr> {
    None
}

fn hostname_address() -> Option<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/etc/hostname").ok()?;
    (name.trim(), 0).to_socket_addrs().ok()?.map(|a| a.ip()).find(|ip| !ip.is_loopback())
}

/// The URL a server bound at `addr` announces: `advertise` if given (a URL, or a host
/// name or address taking the bound port), else `addr`, with a wildcard address
/// replaced by the host's address (never 0.0.0.0).
pub fn announced_url(scheme: &str, addr: std::net::SocketAddr, advertise: Option<&str>) -> String {
    match advertise {
        Some(url) if url.contains("://") => return url.trim_end_matches('/').to_string(),
        Some(host) if host.contains(':') && !host.starts_with('[') => {
            return format!("{scheme}://[{host}]:{}", addr.port())
        }
        Some(host) => return format!("{scheme}://{host}:{}", addr.port()),
        None => {}
    }
    let ip = if addr.ip().is_unspecified() {
        host_address().unwrap_or(if addr.is_ipv4() {
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        } else {
            std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        })
    } else {
        addr.ip()
    };
    format!("{scheme}://{}", std::net::SocketAddr::new(ip, addr.port()))
}

/// Turns the terminal's echo off until dropped (typing a password).
pub struct EchoOff(#[cfg(unix)] Option<libc::termios>);

impl EchoOff {
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            // SAFETY: tcgetattr/tcsetattr on stdin with a termios we own.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(0, &mut t) != 0 {
                    return EchoOff(None);
                }
                let saved = t;
                t.c_lflag &= !libc::ECHO;
                libc::tcsetattr(0, libc::TCSANOW, &t);
                EchoOff(Some(saved))
            }
        }
        #[cfg(not(unix))]
        EchoOff()
    }
}

impl Default for EchoOff {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.0 {
            // SAFETY: restores the settings read in `new`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, saved);
            }
        }
    }
}

thread_local! {
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`; a panic inside becomes `None`, without the message and backtrace the
/// panic hook would print. For checking untrusted bytes by letting a library's own
/// bounds assertions fire (an Arrow page with bad offsets): there the panic is the
/// answer "malformed", not a bug worth a backtrace in the worker's log. Panics on
/// other threads, and outside `f`, still reach the previous hook.
pub fn catch_quietly<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> Option<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                previous(info)
            }
        }));
    });
    let outer = QUIET_PANICS.with(|q| q.replace(true));
    let result = std::panic::catch_unwind(f);
    QUIET_PANICS.with(|q| q.set(outer));
    result.ok()
}

/// Names the process owning a worker's directory (its spool, its spill files).
pub const OWNER_FILE: &str = "owner.pid";

/// Makes `dir` an empty directory owned by this process, after removing the sibling
/// directories whose owning process is gone: a worker killed, or a test's cluster
/// torn down, before it could clean up. Siblings of live processes (the other
/// workers of `flotilla local`) and directories without an owner file (not ours)
/// are left alone.
pub fn prepare_owned_dir(dir: &std::path::Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        sweep_dead_owners(parent);
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string())
}

fn sweep_dead_owners(parent: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).ok().and_then(|t| t.trim().parse::<u32>().ok());
        if let Some(pid) = owner.filter(|pid| path.is_dir() && !process_alive(*pid)) {
            tracing::info!(pid, "removing the directory of a worker that is gone: {}", path.display());
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether a process exists; without /proc nothing counts as gone, so nothing is swept.
fn process_alive(pid: u32) -> bool {
    let proc_root = std::path::Path::new("/proc");
    !proc_root.is_dir() || proc_root.join(pid.to_string()).exists()
}

/// A schema as the bytes of an Arrow IPC stream that holds no batch: how our plan
/// nodes carry a schema through the plan codec.
pub fn schema_to_bytes(schema: &datafusion::arrow::datatypes::Schema) -> datafusion::error::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = datafusion::arrow::ipc::writer::StreamWriter::try_new(&mut out, schema)?;
    w.finish()?;
    drop(w);
    Ok(out)
}

/// The schema [`schema_to_bytes`] wrote.
pub fn schema_from_bytes(bytes: &[u8]) -> datafusion::error::Result<datafusion::arrow::datatypes::SchemaRef> {
    Ok(datafusion::arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?.schema())
}

/// The inverse of the form encoding of Trino's header values (`+` is a space,
/// `%XX` a byte): `session_statement::form_encode`'s, read by the client's session,
/// the prepared statements a client sends, and Flight SQL's kept sessions.
pub fn form_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_never_announces_the_wildcard() {
        let wildcard: std::net::SocketAddr = "0.0.0.0:8081".parse().unwrap();
        let url = announced_url("http", wildcard, None);
        assert!(!url.contains("0.0.0.0") && url.ends_with(":8081"), "{url}");
        assert_eq!(announced_url("http", "127.0.0.1:5".parse().unwrap(), None), "http://127.0.0.1:5");
        assert_eq!(announced_url("https", "127.0.0.1:5".parse().unwrap(), None), "https://127.0.0.1:5");
        assert_eq!(announced_url("http", wildcard, Some("http://w1.example:8081/")), "http://w1.example:8081");
        assert_eq!(announced_url("https", wildcard, Some("10.1.2.3")), "https://10.1.2.3:8081");
        assert_eq!(announced_url("http", wildcard, Some("fd00::3")), "http://[fd00::3]:8081");
    }

    #[test]
    fn a_quiet_panic_is_none_and_the_thread_is_loud_again_after() {
        assert_eq!(catch_quietly(|| 7), Some(7));
        assert_eq!(catch_quietly(|| -> u8 { panic!("bad offsets") }), None);
        assert_eq!(catch_quietly(|| catch_quietly(|| -> u8 { panic!("inner") }).is_none()), Some(true));
        assert!(!QUIET_PANICS.with(|q| q.get()), "the flag is restored");
    }

    #[test]
    fn a_worker_sweeps_spools_of_dead_workers_only() {
        let root = std::env::temp_dir().join(format!("flotilla-owned-test-{}", random_suffix(6)));
        let dead = root.join("worker-1-dead");
        std::fs::create_dir_all(dead.join("q.1.0.0")).unwrap();
        // No process has this pid (above the kernel's pid_max).
        std::fs::write(dead.join(OWNER_FILE), "4194305").unwrap();
        let dead_named_otherwise = root.join("node-7");
        std::fs::create_dir_all(&dead_named_otherwise).unwrap();
        std::fs::write(dead_named_otherwise.join(OWNER_FILE), "4194305").unwrap();
        let sibling = root.join("worker-2-live");
        prepare_owned_dir(&sibling).unwrap();
        std::fs::create_dir_all(sibling.join("q.1.0.0")).unwrap();
        let foreign = root.join("not-a-worker");
        std::fs::create_dir_all(&foreign).unwrap();
        let me = root.join("worker-3-me");
        prepare_owned_dir(&me).unwrap();
        if std::path::Path::new("/proc").is_dir() {
            assert!(!dead.exists(), "the dead worker's spool is swept");
            assert!(!dead_named_otherwise.exists(), "whatever the node id (node.id)");
        }
        assert!(sibling.join("q.1.0.0").exists(), "a live worker's spool stays");
        assert!(foreign.exists());
        assert_eq!(std::fs::read_to_string(me.join(OWNER_FILE)).unwrap(), std::process::id().to_string());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn secrets_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"", b"abc"));
    }
}
