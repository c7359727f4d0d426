//! Loopback TCP benchmarks (127.0.0.1 only): 1-byte round trip and connect.

use super::Fixture;
use anyhow::{Context, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A listener on an ephemeral port of 127.0.0.1.
fn loopback_listener() -> Result<(TcpListener, SocketAddr)> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot listen on 127.0.0.1")?;
    let address = listener
        .local_addr()
        .context("cannot get the listener's address")?;
    Ok((listener, address))
}

/// Echoes single bytes on `stream` until the peer closes it.
fn echo(mut stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true).context("cannot set TCP_NODELAY")?;
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return Ok(()),
            Ok(_) => stream.write_all(&byte).context("echo write failed")?,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(anyhow::Error::new(error).context("echo read failed")),
        }
    }
}

/// One 1-byte round trip over TCP between this thread and an echo thread (lmbench's `lat_tcp`
/// uses processes; on loopback the kernel path is the same).
pub(crate) fn tcp_round_trip(_: &Fixture, iterations: u64) -> Result<Duration> {
    let (listener, address) = loopback_listener()?;
    std::thread::scope(|scope| {
        let server = std::thread::Builder::new()
            .name("bench-echo".into())
            .spawn_scoped(scope, move || -> Result<()> {
                let (stream, _) = listener.accept().context("accept failed")?;
                echo(stream)
            })
            .context("cannot spawn a thread")?;
        let measured = (|| -> Result<Duration> {
            let mut client = TcpStream::connect(address).context("cannot connect to 127.0.0.1")?;
            client.set_nodelay(true).context("cannot set TCP_NODELAY")?;
            let mut byte = [b't'];
            let mut round_trip = |client: &mut TcpStream| -> Result<()> {
                client.write_all(&byte).context("write failed")?;
                client.read_exact(&mut byte).context("read failed")
            };
            // First round trip outside the timing: the echo thread is surely running after it.
            round_trip(&mut client)?;
            let start = Instant::now();
            for _ in 0..iterations {
                round_trip(&mut client)?;
            }
            Ok(start.elapsed())
            // `client` drops here: the echo thread reads EOF and returns.
        })();
        let served = server
            .join()
            .map_err(|_| anyhow::anyhow!("the echo thread panicked"))?;
        let elapsed = measured?;
        served?;
        Ok(elapsed)
    })
}

/// `connect()` to a listener on 127.0.0.1 then `close()` (lmbench's `lat_connect`); a thread
/// accepts and closes the server side.
pub(crate) fn tcp_connect(_: &Fixture, iterations: u64) -> Result<Duration> {
    let (listener, address) = loopback_listener()?;
    let stopping = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let acceptor = std::thread::Builder::new()
            .name("bench-accept".into())
            .spawn_scoped(scope, || {
                while !stopping.load(Ordering::Relaxed) {
                    // Errors (e.g. ECONNABORTED) only lose that connection; keep accepting.
                    drop(listener.accept());
                }
            })
            .context("cannot spawn a thread")?;
        let measured = (|| -> Result<Duration> {
            let start = Instant::now();
            for _ in 0..iterations {
                drop(TcpStream::connect(address).context("cannot connect to 127.0.0.1")?);
            }
            Ok(start.elapsed())
        })();
        stopping.store(true, Ordering::Relaxed);
        // Wakes the acceptor from accept() so it sees `stopping`.
        let woken = TcpStream::connect(address).context("cannot connect to 127.0.0.1");
        acceptor
            .join()
            .map_err(|_| anyhow::anyhow!("the accepting thread panicked"))?;
        woken?;
        measured
    })
}
