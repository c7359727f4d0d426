//! What recording needs from the machine, checked before anything is loaded.

use crate::error::Error;
use std::path::Path;

/// Where the running kernel exposes its BTF.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Capability numbers (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Checks what recording needs (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN, in the effective set;
/// kernel BTF at [`KERNEL_BTF`]) without loading anything.
pub fn check_environment() -> Result<(), Error> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::io("read `/proc/self/status`", e))?;
    let cap_eff = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .unwrap_or("0");
    check_capabilities(cap_eff)?;
    check_kernel_btf(Path::new(KERNEL_BTF))
}

/// Checks an effective capability set, as the hex string of `CapEff:` in `/proc/PID/status`.
pub fn check_capabilities(cap_eff_hex: &str) -> Result<(), Error> {
    let missing = missing_capabilities(cap_eff_hex);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::MissingCapabilities { missing })
    }
}

/// Names of the capabilities that `cap_eff_hex` lacks for recording (empty when it has them).
/// An unparsable set counts as empty.
fn missing_capabilities(cap_eff_hex: &str) -> Vec<&'static str> {
    let caps = u64::from_str_radix(cap_eff_hex.trim(), 16).unwrap_or(0);
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) {
        return Vec::new();
    }
    let mut missing = Vec::new();
    if !has(CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    missing
}

/// Checks that kernel BTF exists at `path`.
pub fn check_kernel_btf(path: &Path) -> Result<(), Error> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::NoKernelBtf {
            path: path.display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root's full set, CAP_BPF+CAP_PERFMON alone and CAP_SYS_ADMIN alone all suffice.
    #[test]
    fn sufficient_capability_sets() {
        assert!(check_capabilities("000001ffffffffff").is_ok());
        assert!(check_capabilities(&format!("{:016x}", (1u64 << 38) | (1u64 << 39))).is_ok());
        assert!(check_capabilities(&format!("{:016x}\n", 1u64 << 21)).is_ok());
    }

    /// Missing capabilities are named in the error, in a fixed order.
    #[test]
    fn missing_capabilities_named() {
        let err = check_capabilities("0000000000000000").expect_err("no caps");
        assert_eq!(
            err.to_string(),
            "missing capabilities CAP_BPF, CAP_PERFMON: run lockscope as root (sudo) or grant \
             them with `setcap cap_bpf,cap_perfmon,cap_sys_ptrace=ep <path>`"
        );
        let only_bpf = format!("{:016x}", 1u64 << 39);
        assert_eq!(missing_capabilities(&only_bpf), vec!["CAP_PERFMON"]);
        assert_eq!(
            missing_capabilities("garbage"),
            vec!["CAP_BPF", "CAP_PERFMON"]
        );
    }

    /// A missing BTF file gives the documented message with its path.
    #[test]
    fn btf_missing_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vmlinux");
        let err = check_kernel_btf(&path).expect_err("missing btf accepted");
        assert_eq!(
            err.to_string(),
            format!(
                "kernel BTF not found at {}: lockscope needs a kernel built with \
                 CONFIG_DEBUG_INFO_BTF=y",
                path.display()
            )
        );
        std::fs::write(&path, b"btf").expect("write");
        assert!(check_kernel_btf(&path).is_ok());
    }
}
