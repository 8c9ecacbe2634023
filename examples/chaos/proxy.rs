//! A TCP proxy between one worker and Redis that the nemesis can cut.
//!
//! - **open**: bytes flow both ways.
//! - **black hole**: nothing is read or forwarded, in either direction, and new
//!   connections wait unanswered; what was sent stays queued in the kernel, as it would
//!   behind a real partition that TCP rides out by retransmitting. Commands time out.
//! - **reset**: every connection is closed at once, and new ones are closed on accept.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Open,
    BlackHole,
    Reset,
}

/// A running proxy; it stops with the runtime.
#[derive(Debug)]
pub struct Proxy {
    pub port: u16,
    mode: watch::Sender<Mode>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (mode, _) = watch::channel(Mode::Open);
        let modes = mode.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let _ = client.set_nodelay(true);
                tokio::spawn(forward(client, upstream, modes.subscribe()));
            }
        });
        Ok(Proxy { port, mode })
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

/// Waits while the proxy is a black hole; `false` once it resets.
async fn passable(mode: &mut watch::Receiver<Mode>) -> bool {
    loop {
        match *mode.borrow_and_update() {
            Mode::Open => return true,
            Mode::Reset => return false,
            Mode::BlackHole => {}
        }
        if mode.changed().await.is_err() {
            return false;
        }
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    if !passable(&mut mode).await {
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        if !passable(&mut mode).await {
            return;
        }
        // Reads are cancel safe; each write finishes before the mode is looked at again.
        tokio::select! {
            read = client.read(&mut up) => match read {
                Ok(n) if n > 0 => if server.write_all(&up[..n]).await.is_err() { return },
                _ => return,
            },
            read = server.read(&mut down) => match read {
                Ok(n) if n > 0 => if client.write_all(&down[..n]).await.is_err() { return },
                _ => return,
            },
            changed = mode.changed() => if changed.is_err() { return },
        }
    }
}
