//! TLS for the servers and the clients: a coordinator or worker with a certificate
//! serves HTTPS only (Trino's `http-server.https.*`), and every node's internal client
//! and the CLI trust the system's roots plus an optional CA file (Trino's
//! `internal-communication.https.truststore.path`; `flotilla sql --ca`). rustls with
//! the `ring` provider; the PEM files are read at start-up, so a bad one stops it.
//!
//! The HTTPS listener hands axum connections whose handshake has finished; handshakes
//! run on their own tasks, so a slow or stuck client does not hold up the others,
//! and a plain-HTTP request to the HTTPS port just fails its handshake.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A server certificate: the chain and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    pub cert_chain: PathBuf,
    /// The key's file; None when it is in the chain's file (Trino's single PEM).
    pub private_key: Option<PathBuf>,
}

fn provider() -> Arc<tokio_rustls::rustls::crypto::CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}

fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {what}: {e}", path.display()))
}

impl TlsConfig {
    /// Reads and checks the files: the server's rustls configuration.
    pub fn server_config(&self) -> io::Result<Arc<tokio_rustls::rustls::ServerConfig>> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert_chain)
            .map_err(|e| bad(&self.cert_chain, "cannot read certificates", e))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&self.cert_chain, "bad certificate", e))?;
        if chain.is_empty() {
            return Err(bad(&self.cert_chain, "no certificate", "the file holds no CERTIFICATE block"));
        }
        let key_path = self.private_key.as_deref().unwrap_or(&self.cert_chain);
        let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| bad(key_path, "no usable private key", e))?;
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad(&self.cert_chain, "certificate and key do not go together", e))?;
        Ok(Arc::new(config))
    }
}

/// Connections whose TLS handshake has finished, for `axum::serve`.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

/// A handshake that takes longer is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<tokio_rustls::rustls::ServerConfig>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // TLS writes a response as several records; without NODELAY the later
                // ones wait for the peer's delayed ACK.
                let _ = tcp.set_nodelay(true);
                let (handshake, ready) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = ready.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Extra roots a client trusts besides the system's: a PEM file of CA certificates.
pub fn read_ca(path: &Path) -> io::Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path).map_err(|e| bad(path, "cannot read", e))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(path, "bad CA certificate", e))?;
    if certs.is_empty() {
        return Err(bad(path, "no CA certificate", "the file holds no CERTIFICATE block"));
    }
    Ok(certs)
}
