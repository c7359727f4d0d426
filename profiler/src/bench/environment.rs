//! The environment fingerprint stored with every bench run: which machine, kernel and libc the
//! numbers belong to, so two JSON files from two machines can be told apart in `bench diff`.

use serde::{Deserialize, Serialize};
#[cfg(any(target_os = "macos", target_os = "freebsd"))]
use std::ffi::CStr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a bench run was made. Every field is best effort: `"unknown"` when the OS would not say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Environment {
    /// Operating system, as Rust names it (`linux`, `macos`, `freebsd`).
    pub os: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Machine architecture (`uname -m`).
    pub machine: String,
    /// CPU model name (`/proc/cpuinfo` on Linux, `sysctl` on macOS and FreeBSD).
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpu_count: u32,
    /// The C library and its version when known (`glibc 2.36`).
    pub libc: String,
    /// Host name.
    pub hostname: String,
    /// Version of the lockscope that made the run.
    pub lockscope_version: String,
    /// When the run started, UTC, ISO 8601 (`2026-11-30T09:12:53Z`).
    pub date: String,
}

impl Environment {
    /// Fingerprints the machine this process runs on, now.
    pub fn current() -> Environment {
        let uname = lockscope_probes::host::Uname::current();
        let known = |field: String| {
            if field.is_empty() {
                UNKNOWN.to_string()
            } else {
                field
            }
        };
        Environment {
            os: std::env::consts::OS.to_string(),
            kernel_release: known(uname.release),
            machine: known(uname.machine),
            cpu_model: cpu_model(),
            cpu_count: std::thread::available_parallelism()
                .map(|count| u32::try_from(count.get()).unwrap_or(u32::MAX))
                .unwrap_or(1),
            libc: libc_name(),
            hostname: known(uname.nodename),
            lockscope_version: env!("CARGO_PKG_VERSION").to_string(),
            date: iso8601_utc(SystemTime::now()),
        }
    }
}

const UNKNOWN: &str = "unknown";

#[cfg(target_os = "linux")]
fn cpu_model() -> String {
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        return UNKNOWN.to_string();
    };
    // x86 says "model name"; some arm64 kernels only say "Hardware" or nothing useful.
    ["model name", "Hardware", "Processor", "cpu model"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                (name.trim() == *key && !value.trim().is_empty()).then(|| value.trim().to_string())
            })
        })
        .unwrap_or_else(|| UNKNOWN.to_string())
}

#[cfg(any(target_os = "macos", target_os = "freebsd"))]
fn cpu_model() -> String {
    #[cfg(target_os = "macos")]
    const NAME: &CStr = c"machdep.cpu.brand_string";
    #[cfg(target_os = "freebsd")]
    const NAME: &CStr = c"hw.model";
    let mut buffer = [0u8; 256];
    let mut length: libc::size_t = buffer.len() - 1;
    // SAFETY: NAME is NUL-terminated; `buffer` and `length` describe a writable buffer that
    // sysctlbyname fills with at most `length` bytes; no new value is set (null, 0).
    let rc = unsafe {
        libc::sysctlbyname(
            NAME.as_ptr(),
            buffer.as_mut_ptr().cast(),
            &mut length,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return UNKNOWN.to_string();
    }
    let bytes = &buffer[..length.min(buffer.len())];
    let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).trim().to_string()
}

#[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "freebsd")))]
fn cpu_model() -> String {
    UNKNOWN.to_string()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn libc_name() -> String {
    lockscope_probes::host::glibc_version().unwrap_or_else(|| UNKNOWN.to_string())
}

#[cfg(all(target_os = "linux", target_env = "musl"))]
fn libc_name() -> String {
    "musl".to_string()
}

#[cfg(target_os = "macos")]
fn libc_name() -> String {
    "libSystem".to_string()
}

#[cfg(target_os = "freebsd")]
fn libc_name() -> String {
    "FreeBSD libc".to_string()
}

#[cfg(not(any(
    all(target_os = "linux", any(target_env = "gnu", target_env = "musl")),
    target_os = "macos",
    target_os = "freebsd"
)))]
fn libc_name() -> String {
    UNKNOWN.to_string()
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ` (UTC), as recordings do.
pub(crate) fn iso8601_utc(time: SystemTime) -> String {
    let ns = time
        .duration_since(UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    crate::render::units::format_unix_ns(ns)
}

#[cfg(test)]
mod tests {
    use super::iso8601_utc;
    use std::time::{Duration, UNIX_EPOCH};

    /// Dates around the epoch, a leap day and a year end format as `date -u` prints them.
    #[test]
    fn dates() {
        let at = |seconds| iso8601_utc(UNIX_EPOCH + Duration::from_secs(seconds));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_798_761_599), "2026-12-31T23:59:59Z");
    }
}
