//! A TCP proxy that delays every byte by a fixed time each way, to measure at a
//! network distance on one machine (`tc netem` needs privileges these machines do not
//! give). Plain threads and `std::thread::sleep`: tokio's timers tick in whole
//! milliseconds, too coarse for 100 µs. The proxy's own cost is measured next to the
//! figures (a `PING` through it against a direct one).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running delay proxy; stops accepting when dropped (connections already made run
/// until either side closes them).
#[derive(Debug)]
pub struct DelayProxy {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`,
    /// delaying each chunk of bytes by `delay` in each direction.
    ///
    /// # Errors
    /// If the port cannot be bound.
    pub fn start(upstream: SocketAddr, delay: Duration) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        thread::spawn(move || {
            while !stopped.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((client, _)) => {
                        if let Err(error) = forward(client, upstream, delay) {
                            eprintln!("delay proxy: cannot reach {upstream}: {error}");
                        }
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(2));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(Self { address, stop })
    }

    /// Where to connect to reach the upstream through the proxy.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `url` (a single server, `redis://[user:password@]host:port[/db]`) pointed at the
    /// proxy instead, and the upstream address it named.
    ///
    /// # Errors
    /// If `url` is not a single server's `redis://` URL or its host does not resolve.
    pub fn upstream_of(
        url: &str,
    ) -> Result<(SocketAddr, impl Fn(SocketAddr) -> String + use<>), String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("the network-distance mode needs a single server's redis:// URL")?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, host) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let host = if host.contains(':') {
            host.to_owned()
        } else {
            format!("{host}:6379")
        };
        let upstream = host
            .to_socket_addrs()
            .map_err(|error| format!("cannot resolve {host}: {error}"))?
            .next()
            .ok_or_else(|| format!("{host} resolves to no address"))?;
        let (userinfo, tail) = (userinfo.to_owned(), tail.to_owned());
        Ok((upstream, move |proxy: SocketAddr| {
            format!("redis://{userinfo}{proxy}{tail}")
        }))
    }
}

/// The proxy's own cost: `count` `PING`s through `proxied` next to `count` on `direct`
/// (alternating), as the p50 round trip with the direct one as its floor.
///
/// # Errors
/// If a `PING` fails.
pub async fn ping_cost(
    direct: &fred::clients::Client,
    proxied: &fred::clients::Client,
    count: u64,
) -> super::BenchResult<super::Figure> {
    use fred::interfaces::ClientLike;
    let ping = |client: &fred::clients::Client| {
        let client = client.clone();
        async move {
            let started = Instant::now();
            let _: String = client.ping(None).await?;
            Ok(started.elapsed())
        }
    };
    let (floor, through, _) = super::samples::alternate(
        count,
        |_| {},
        || ping(direct),
        || ping(proxied),
        || async { Ok(Duration::ZERO) },
    )
    .await?;
    Ok(super::Figure::new(
        super::Workload::Net,
        "PING p50 via proxy",
        through.percentile(50.0),
        super::Unit::Millis,
    )
    .floor("PING direct", floor.percentile(50.0)))
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Connects to `upstream` and pumps both ways with `delay`.
fn forward(client: TcpStream, upstream: SocketAddr, delay: Duration) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect(upstream)?;
    for stream in [&client, &server] {
        stream.set_nodelay(true)?;
    }
    pump(client.try_clone()?, server.try_clone()?, delay);
    pump(server, client, delay);
    Ok(())
}

/// Copies `from` to `to`, each chunk written `delay` after it was read, in order: a
/// reader thread stamps chunks, a writer thread sleeps until each is due.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    if chunks
                        .send((Instant::now() + delay, buffer[..read].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        // Dropping `chunks` ends the writer once it has written what was read.
    });
    thread::spawn(move || {
        for (at, chunk) in due {
            let now = Instant::now();
            if at > now {
                thread::sleep(at - now);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_pointed_at_the_proxy_with_their_credentials_and_database() {
        let (upstream, through) = DelayProxy::upstream_of("redis://u:p@127.0.0.1:7000/2").unwrap();
        assert_eq!(upstream, "127.0.0.1:7000".parse().unwrap());
        let proxy: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(through(proxy), "redis://u:p@127.0.0.1:9/2");
        assert!(DelayProxy::upstream_of("redis-cluster://127.0.0.1:7000").is_err());
    }

    #[test]
    fn bytes_arrive_in_order_and_late_by_the_delay_each_way() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = echo.local_addr().unwrap();
        thread::spawn(move || {
            let (mut stream, _) = echo.accept().unwrap();
            let mut buffer = [0u8; 1024];
            while let Ok(read) = stream.read(&mut buffer) {
                if read == 0 || stream.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
        });
        let delay = Duration::from_millis(20);
        let proxy = DelayProxy::start(upstream, delay).unwrap();
        let mut stream = TcpStream::connect(proxy.address()).unwrap();
        let sent = Instant::now();
        stream.write_all(b"ping pong").unwrap();
        let mut reply = [0u8; 9];
        stream.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"ping pong");
        assert!(sent.elapsed() >= delay * 2, "{:?}", sent.elapsed());
    }
}
