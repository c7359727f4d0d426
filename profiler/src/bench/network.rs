//! Loopback TCP benchmarks (127.0.0.1 only): 1-byte round trip and connect.

use super::{Fixture, RunError};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A listener on an ephemeral port of 127.0.0.1.
fn loopback_listener() -> Result<(TcpListener, SocketAddr), RunError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(RunError::tcp("failed to listen on 127.0.0.1"))?;
    let address = listener
        .local_addr()
        .map_err(RunError::tcp("failed to get the listener's address"))?;
    Ok((listener, address))
}

/// Echoes single bytes on `stream` until the peer closes it.
fn echo(mut stream: TcpStream) -> Result<(), RunError> {
    stream
        .set_nodelay(true)
        .map_err(RunError::tcp("failed to set TCP_NODELAY"))?;
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return Ok(()),
            Ok(_) => stream
                .write_all(&byte)
                .map_err(RunError::tcp("echo write failed"))?,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(RunError::tcp("echo read failed")(error)),
        }
    }
}

/// One 1-byte round trip over TCP between this thread and an echo thread (lmbench's `lat_tcp`
/// uses processes; on loopback the kernel path is the same).
pub(crate) fn tcp_round_trip(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let (listener, address) = loopback_listener()?;
    std::thread::scope(|scope| {
        let server = std::thread::Builder::new()
            .spawn_scoped(scope, move || -> Result<(), RunError> {
                let (stream, _) = listener.accept().map_err(RunError::tcp("accept failed"))?;
                echo(stream)
            })
            .map_err(RunError::spawn)?;
        let measured = (|| -> Result<Duration, RunError> {
            let mut client = TcpStream::connect(address)
                .map_err(RunError::tcp("failed to connect to 127.0.0.1"))?;
            client
                .set_nodelay(true)
                .map_err(RunError::tcp("failed to set TCP_NODELAY"))?;
            let mut byte = [b't'];
            let mut round_trip = |client: &mut TcpStream| -> Result<(), RunError> {
                client
                    .write_all(&byte)
                    .map_err(RunError::tcp("write failed"))?;
                client
                    .read_exact(&mut byte)
                    .map_err(RunError::tcp("read failed"))
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
        let served = server.join().map_err(|_| RunError::Panicked {
            thread: "the echo thread",
        })?;
        let elapsed = measured?;
        served?;
        Ok(elapsed)
    })
}

/// Closes `stream` with a reset (`SO_LINGER` 0) instead of a FIN handshake, so it leaves no
/// TIME_WAIT socket behind: hundreds of those would make the loopback reuse ports of
/// connections the server has not closed yet and stall a `connect` for a 1 s SYN retransmit.
fn close_with_reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid open socket and a valid `linger` of the size given; failure only means a
    // normal close.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

/// `connect()` to a listener on 127.0.0.1 (lmbench's `lat_connect`); only the connect is timed.
/// This thread then accepts the connection itself (connect completes on the SYN-ACK, without
/// waiting for accept), so the accept queue never fills: a full queue drops SYNs, and each drop
/// costs a 1 s retransmit. Both ends close untimed, the client with a reset.
pub(crate) fn tcp_connect(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let (listener, address) = loopback_listener()?;
    let mut elapsed = Duration::ZERO;
    for _ in 0..iterations {
        let start = Instant::now();
        let client =
            TcpStream::connect(address).map_err(RunError::tcp("failed to connect to 127.0.0.1"))?;
        elapsed += start.elapsed();
        let (server, _) = listener.accept().map_err(RunError::tcp("accept failed"))?;
        close_with_reset(client);
        drop(server);
    }
    Ok(elapsed)
}
