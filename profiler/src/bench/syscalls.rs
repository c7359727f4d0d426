//! Latency benchmarks of single system calls and of memory: null call, null I/O, stat,
//! open+close, select, signals, mmap and page faults.

use super::{Fixture, RunError};
use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `getppid()`: a system call that does nothing (and that libc does not cache).
pub(crate) fn null_call(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: getppid has no preconditions and cannot fail.
        black_box(unsafe { libc::getppid() });
    }
    Ok(start.elapsed())
}

/// lmbench's null I/O: the mean of a 1-byte `read` of /dev/zero and a 1-byte `write` to
/// /dev/null.
pub(crate) fn null_io(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let zero = File::open("/dev/zero").map_err(|source| RunError::Open {
        file: "`/dev/zero`",
        source,
    })?;
    let null = OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|source| RunError::Open {
            file: "`/dev/null`",
            source,
        })?;
    let mut byte = [0u8; 1];
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: the fd is open for the whole loop; the buffer is 1 writable byte.
        if unsafe { libc::read(zero.as_raw_fd(), byte.as_mut_ptr().cast(), 1) } != 1 {
            return Err(RunError::last_os_error("read /dev/zero"));
        }
        // SAFETY: the fd is open for the whole loop; the buffer is 1 readable byte.
        if unsafe { libc::write(null.as_raw_fd(), byte.as_ptr().cast(), 1) } != 1 {
            return Err(RunError::last_os_error("write /dev/null"));
        }
    }
    // Each iteration is two operations.
    Ok(start.elapsed() / 2)
}

/// `stat()` of the scratch file.
pub(crate) fn stat(fixture: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    // SAFETY: `struct stat` is plain old data; all zeroes is a valid value.
    let mut status: libc::stat = unsafe { std::mem::zeroed() };
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: the path is NUL-terminated and `status` is writable.
        if unsafe { libc::stat(fixture.scratch_path.as_ptr(), &mut status) } != 0 {
            return Err(RunError::last_os_error("stat the scratch file"));
        }
    }
    Ok(start.elapsed())
}

/// `open()` then `close()` of the scratch file.
pub(crate) fn open_close(fixture: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: the path is NUL-terminated.
        let fd = unsafe { libc::open(fixture.scratch_path.as_ptr(), libc::O_RDONLY) };
        if fd < 0 {
            return Err(RunError::last_os_error("open the scratch file"));
        }
        // SAFETY: `fd` was just opened by us and is closed once.
        unsafe { libc::close(fd) };
    }
    Ok(start.elapsed())
}

/// `select()` for reading on 10 fds of a regular file (always ready).
pub(crate) fn select_10(fixture: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    select(fixture, 10, iterations)
}

/// `select()` for reading on 100 fds of a regular file (always ready).
pub(crate) fn select_100(fixture: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    select(fixture, 100, iterations)
}

/// `select()` on `count` read-ready fds, as lmbench's `lat_select file`.
fn select(fixture: &Fixture, count: usize, iterations: u64) -> Result<Duration, RunError> {
    let path = fixture.path();
    let files = (0..count)
        .map(|_| File::open(path))
        .collect::<std::io::Result<Vec<File>>>()
        .map_err(|source| RunError::Open {
            file: "the scratch file for select",
            source,
        })?;
    let fds: Vec<RawFd> = files.iter().map(AsRawFd::as_raw_fd).collect();
    let highest = fds.iter().copied().max().unwrap_or(0);
    // FD_SETSIZE is a usize on some platforms and a c_int on others; i64 holds both.
    if i64::from(highest) >= libc::FD_SETSIZE as i64 {
        return Err(RunError::FdSetTooSmall { fd: highest });
    }
    // SAFETY: fd_set is plain old data; FD_ZERO initializes it anyway.
    let mut prepared: libc::fd_set = unsafe { std::mem::zeroed() };
    // SAFETY: `prepared` is a valid fd_set and every fd is below FD_SETSIZE (checked above).
    unsafe {
        libc::FD_ZERO(&mut prepared);
        for &fd in &fds {
            libc::FD_SET(fd, &mut prepared);
        }
    }
    let start = Instant::now();
    for _ in 0..iterations {
        // select() overwrites its set: start each call from the prepared copy.
        let mut readable = prepared;
        let mut timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        // SAFETY: `readable` and `timeout` are valid for the call; the other sets are null.
        let ready = unsafe {
            libc::select(
                highest + 1,
                &mut readable,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut timeout,
            )
        };
        if ready < 0 {
            return Err(RunError::last_os_error("select"));
        }
    }
    let elapsed = start.elapsed();
    drop(files);
    Ok(elapsed)
}

/// The signal the signal rows use.
const BENCH_SIGNAL: libc::c_int = libc::SIGUSR1;

/// Signals caught by [`count_signal`].
static SIGNALS_CAUGHT: AtomicU64 = AtomicU64::new(0);

/// The benchmark's signal handler: counts (an atomic add is async-signal-safe).
extern "C" fn count_signal(_: libc::c_int) {
    SIGNALS_CAUGHT.fetch_add(1, Ordering::Relaxed);
}

/// A `sigaction` that runs [`count_signal`].
fn counting_action() -> libc::sigaction {
    // SAFETY: sigaction is plain old data; all zeroes is "default handler, no flags, empty mask".
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    let handler: extern "C" fn(libc::c_int) = count_signal;
    action.sa_sigaction = handler as libc::sighandler_t;
    // SAFETY: `sa_mask` is a valid sigset_t to initialize.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    action
}

/// Installs `action` for [`BENCH_SIGNAL`], returning the previous action.
fn install(action: &libc::sigaction) -> Result<libc::sigaction, RunError> {
    // SAFETY: as in counting_action.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid sigactions; the handler is async-signal-safe.
    if unsafe { libc::sigaction(BENCH_SIGNAL, action, &mut previous) } != 0 {
        return Err(RunError::last_os_error("sigaction SIGUSR1"));
    }
    Ok(previous)
}

/// `sigaction()` installing a handler (lmbench's "sig inst").
pub(crate) fn signal_install(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let action = counting_action();
    let previous = install(&action)?;
    let start = Instant::now();
    let mut result = Ok(());
    for _ in 0..iterations {
        // SAFETY: `action` is a valid sigaction whose handler is async-signal-safe.
        if unsafe { libc::sigaction(BENCH_SIGNAL, &action, std::ptr::null_mut()) } != 0 {
            result = Err(RunError::last_os_error("sigaction SIGUSR1"));
            break;
        }
    }
    let elapsed = start.elapsed();
    install(&previous)?;
    result.map(|()| elapsed)
}

/// `raise()` a signal and run its handler (lmbench's "sig hndl"). `raise` targets the calling
/// thread, so the handler runs here even in a multi-threaded process.
pub(crate) fn signal_catch(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let previous = install(&counting_action())?;
    let before = SIGNALS_CAUGHT.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut result = Ok(());
    for _ in 0..iterations {
        // SAFETY: the signal has our counting handler, so raising it only bumps a counter.
        if unsafe { libc::raise(BENCH_SIGNAL) } != 0 {
            result = Err(RunError::last_os_error("raise SIGUSR1"));
            break;
        }
    }
    let elapsed = start.elapsed();
    let caught = SIGNALS_CAUGHT.load(Ordering::Relaxed) - before;
    install(&previous)?;
    result?;
    if caught < iterations {
        return Err(RunError::SignalsLost {
            raised: iterations,
            caught,
        });
    }
    Ok(elapsed)
}

/// The page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// A private anonymous mapping, unmapped on drop.
struct Mapping {
    address: *mut u8,
    length: usize,
}

impl Mapping {
    fn new(length: usize) -> Result<Mapping, RunError> {
        // SAFETY: a fresh private anonymous mapping at an address of the kernel's choosing
        // touches no existing memory.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANON,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(RunError::last_os_error("mmap"));
        }
        Ok(Mapping {
            address: address.cast(),
            length,
        })
    }

    /// Writes one byte in every page, faulting each in.
    fn touch(&self, page: usize) {
        let mut offset = 0;
        while offset < self.length {
            // SAFETY: offset < length, inside our writable mapping.
            unsafe { std::ptr::write_volatile(self.address.add(offset), 1) };
            offset += page;
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing points into it any more.
        unsafe { libc::munmap(self.address.cast(), self.length) };
    }
}

/// `mmap()` 1 MiB, write every page, `munmap()`.
pub(crate) fn mmap_touch_unmap(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let page = page_size();
    let start = Instant::now();
    for _ in 0..iterations {
        let mapping = Mapping::new(1 << 20)?;
        mapping.touch(page);
        drop(mapping);
    }
    Ok(start.elapsed())
}

/// First write to a page of fresh anonymous memory; one operation is one page. Only the
/// touching is timed, not `mmap`/`munmap`.
pub(crate) fn page_fault(_: &Fixture, iterations: u64) -> Result<Duration, RunError> {
    let page = page_size();
    /// Pages mapped at a time (4 MiB with 4 KiB pages).
    const CHUNK_PAGES: u64 = 1024;
    let mut elapsed = Duration::ZERO;
    let mut remaining = iterations;
    while remaining > 0 {
        let pages = remaining.min(CHUNK_PAGES);
        let length = usize::try_from(pages).unwrap_or(1) * page;
        let mapping = Mapping::new(length)?;
        #[cfg(target_os = "linux")]
        // SAFETY: advice on our own mapping; it only keeps transparent huge pages away, which
        // would turn 512 faults into one.
        unsafe {
            libc::madvise(mapping.address.cast(), length, libc::MADV_NOHUGEPAGE);
        }
        let start = Instant::now();
        mapping.touch(page);
        elapsed += start.elapsed();
        drop(mapping);
        remaining -= pages;
    }
    Ok(elapsed)
}
