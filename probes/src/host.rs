//! What both backends ask of the host they run on, written once: `uname`, the online CPUs and
//! the C library's version (for a profile's metadata), and ending a process lockscope launched
//! (SIGTERM, then SIGKILL after a grace period).
//!
//! POSIX only, so OS-neutral for every OS lockscope runs on (Linux, macOS, FreeBSD, illumos): it
//! lives here because the backends may not depend on each other.

use std::time::{Duration, Instant};

/// What `uname(2)` says about this host; empty fields when it fails.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Uname {
    /// Host name (`uname -n`).
    pub nodename: String,
    /// Kernel release (`uname -r`).
    pub release: String,
    /// Machine architecture (`uname -m`).
    pub machine: String,
}

impl Uname {
    /// Asks the kernel.
    pub fn current() -> Uname {
        // SAFETY: utsname is plain old data (arrays of c_char), so all zeroes is a valid value.
        let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `uts` is a valid, writable utsname; uname fills it or fails.
        if unsafe { libc::uname(&mut uts) } != 0 {
            return Uname::default();
        }
        Uname {
            nodename: c_chars(&uts.nodename),
            release: c_chars(&uts.release),
            machine: c_chars(&uts.machine),
        }
    }
}

/// A NUL-terminated `c_char` array (of any length: utsname fields differ between OSes).
fn c_chars(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        // c_char is i8 or u8 depending on the platform; the cast reinterprets the byte.
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The host's CPUs online now (at least 1): the machine's, not the ones lockscope may run on
/// (`available_parallelism` would count an affinity mask or a cgroup quota).
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

/// `glibc 2.36` when lockscope runs with glibc (a traced program almost always has the same
/// one); `None` with another C library, which is not named.
pub fn glibc_version() -> Option<String> {
    glibc::version()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    pub fn version() -> Option<String> {
        // SAFETY: gnu_get_libc_version takes nothing and returns a pointer to a static,
        // NUL-terminated string.
        let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        Some(format!("glibc {}", version.to_string_lossy()))
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod glibc {
    pub fn version() -> Option<String> {
        None
    }
}

/// How [`terminate`] ended a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It was already gone, or went within the grace period.
    Exited,
    /// It was still there after the grace period: it got SIGKILL.
    Killed,
}

/// Ends process `pid`: SIGTERM and SIGCONT (a stopped process handles the SIGTERM once
/// continued), then, if `gone` is still false after `grace` (asked every 20 ms; it is where
/// the caller reaps its child), SIGKILL. The caller reaps a killed child afterwards.
///
/// `pid` must be one the caller knows is still that process: its own unreaped child, or one it
/// checks in `gone` (a pid is reused only once the process is reaped).
pub fn terminate(pid: u32, grace: Duration, mut gone: impl FnMut() -> bool) -> Ended {
    if gone() {
        return Ended::Exited;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Ended::Exited;
    };
    // SAFETY: kill has no memory-safety preconditions; the caller vouches for the pid (above).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if gone() {
            return Ended::Exited;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if gone() {
        return Ended::Exited;
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    Ended::Killed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// uname names this host's kernel release and architecture (as the OS's `uname` does).
    #[test]
    fn uname_names_this_host() {
        let uname = Uname::current();
        assert!(!uname.release.is_empty());
        // Rust's name of the architecture is Linux's (x86_64, aarch64); macOS says arm64.
        let arch = std::env::consts::ARCH;
        assert!(
            uname.machine == arch || (arch == "aarch64" && uname.machine == "arm64"),
            "{uname:?}"
        );
    }

    /// The C library names itself where it is glibc; some CPU is online.
    #[test]
    fn names_the_c_library_and_counts_cpus() {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(glibc_version().expect("glibc").starts_with("glibc 2."));
        }
        assert!(online_cpus() >= 1);
    }

    /// A child that ends at SIGTERM exits within the grace period; one that ignores it is
    /// killed after it.
    #[test]
    fn terminate_then_kill() {
        let mut polite = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("start sleep");
        let started = Instant::now();
        let ended = terminate(polite.id(), Duration::from_secs(5), || {
            matches!(polite.try_wait(), Ok(Some(_)))
        });
        assert_eq!(ended, Ended::Exited);
        assert!(started.elapsed() < Duration::from_secs(5));

        let mut stubborn = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; echo ready; sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(stubborn.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("ready line");
        let ended = terminate(stubborn.id(), Duration::from_millis(200), || {
            matches!(stubborn.try_wait(), Ok(Some(_)))
        });
        assert_eq!(ended, Ended::Killed);
        let status = stubborn.wait().expect("reap");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
}
