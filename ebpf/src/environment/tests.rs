//! Unit tests of the environment checks: capability sets sufficient or missing for each probe,
//! uprobes and CAP_SYS_ADMIN, memlock before 5.11, unreadable targets, optional capabilities as
//! warnings, this process's own facts, a missing BTF file.

use super::*;
use lockscope_probes::catalog::{CPU, FUTEX, MUTEX_HOLD};

fn caps(list: &[Capability]) -> CapabilitySet {
    CapabilitySet(list.iter().fold(0, |set, c| set | 1u64 << *c as u32))
}

/// A machine with a new kernel, where the checks find nothing in the way.
fn facts(capabilities: CapabilitySet) -> Facts {
    Facts {
        capabilities,
        kernel: Some((6, 18)),
        memlock: (Some(8 << 20), Some(8 << 20)),
        map_bytes: 40 << 20,
        uprobes_allowed: None,
        kernel_symbols_visible: true,
        tracefs_closed: false,
        target: TargetAccess::Readable,
    }
}

fn info(name: &'static str) -> ProbeInfo {
    probes::all()
        .into_iter()
        .map(|r| r.info)
        .find(|info| info.serves(name))
        .expect("a probe of that name")
}

fn missing(probes: &[&ProbeInfo], facts: &Facts) -> Option<MissingCapabilities> {
    assess(probes, facts).missing(facts.capabilities)
}

const BASE: [Capability; 2] = [Capability::Bpf, Capability::Perfmon];

/// Root's full set, CAP_BPF+CAP_PERFMON alone and CAP_SYS_ADMIN alone all suffice for the
/// default probe on a current kernel; the hex of /proc/PID/status parses.
#[test]
fn sufficient_capability_sets() {
    let futex = info(FUTEX.name);
    for set in [
        CapabilitySet::from_hex("000001ffffffffff"),
        CapabilitySet::from_hex(&format!("{:016x}\n", 1u64 << 21)),
        caps(&BASE),
    ] {
        assert_eq!(missing(&[&futex], &facts(set)), None, "{set:?}");
    }
    assert_eq!(CapabilitySet::from_hex("garbage"), CapabilitySet(0));
}

/// Without capabilities, the message names CAP_BPF and CAP_PERFMON for every probe, and the
/// setcap line grants them to this very program.
#[test]
fn missing_base_capabilities_named() {
    let futex = info(FUTEX.name);
    let found = missing(&[&futex], &facts(CapabilitySet(0))).expect("missing");
    assert_eq!(found.names(), ["CAP_BPF", "CAP_PERFMON"]);
    let text = MissingCapabilities {
        program: "/usr/bin/lockscope".into(),
        ..found
    }
    .to_string();
    assert_eq!(
        text,
        "missing capabilities CAP_BPF, CAP_PERFMON (every probe: loading BPF tracing programs \
         and opening perf events): run lockscope as root (sudo) or grant them with \
         `setcap cap_bpf,cap_perfmon=ep /usr/bin/lockscope`"
    );
    let only_bpf = missing(&[&futex], &facts(caps(&[Capability::Bpf]))).expect("missing");
    assert_eq!(only_bpf.names(), ["CAP_PERFMON"]);
}

/// mutex-hold needs CAP_SYS_ADMIN exactly when the kernel refuses uprobes to this process;
/// the other probes never do.
#[test]
fn uprobes_need_sys_admin_where_the_kernel_says_so() {
    let hold = info(MUTEX_HOLD.name);
    let mut refused = facts(caps(&BASE));
    refused.uprobes_allowed = Some(false);
    let found = missing(&[&hold], &refused).expect("missing");
    assert_eq!(found.names(), ["CAP_SYS_ADMIN"]);
    assert_eq!(
        found.grant,
        [Capability::Bpf, Capability::Perfmon, Capability::SysAdmin]
    );
    assert!(
        found.to_string().starts_with(
            "missing capabilities CAP_SYS_ADMIN (mutex-hold: this kernel lets only \
             CAP_SYS_ADMIN create uprobes)"
        ),
        "{found}"
    );
    let mut allowed = refused.clone();
    allowed.uprobes_allowed = Some(true);
    assert_eq!(missing(&[&hold], &allowed), None);
    let others = probes::all()
        .into_iter()
        .map(|r| r.info)
        .filter(|info| !info.serves(MUTEX_HOLD.name));
    for other in others {
        assert_eq!(missing(&[&other], &refused), None, "{}", other.name());
    }
}

/// Before 5.11 CAP_SYS_RESOURCE is needed unless the locked-memory limit holds the maps or
/// its hard limit is unlimited (libbpf raises the soft one then).
#[test]
fn memlock_before_5_11() {
    let futex = info(FUTEX.name);
    let mut old = facts(caps(&BASE));
    old.kernel = Some((5, 10));
    let found = missing(&[&futex], &old).expect("missing");
    assert_eq!(found.names(), ["CAP_SYS_RESOURCE"]);
    assert!(
        found.to_string().contains(
            "CAP_SYS_RESOURCE (every probe: Linux 5.10 charges BPF maps to the locked-memory \
             limit, 8 MiB here, and lockscope's take 40 MiB"
        ),
        "{found}"
    );
    assert!(found
        .to_string()
        .contains("`setcap cap_bpf,cap_perfmon,cap_sys_resource=ep"));
    for memlock in [(Some(8 << 20), None), (Some(64 << 20), Some(64 << 20))] {
        let roomy = Facts {
            memlock,
            ..old.clone()
        };
        assert_eq!(missing(&[&futex], &roomy), None, "{memlock:?}");
    }
    let mut with_it = old.clone();
    with_it.capabilities = caps(&[
        Capability::Bpf,
        Capability::Perfmon,
        Capability::SysResource,
    ]);
    assert_eq!(missing(&[&futex], &with_it), None);
}

/// A running process this one may not read needs CAP_SYS_PTRACE, named with its pid and
/// owner; every missing capability is named at once, each with its reason.
#[test]
fn unreadable_target_needs_ptrace() {
    let futex = info(FUTEX.name);
    let mut other = facts(caps(&[Capability::Bpf]));
    other.target = TargetAccess::Denied {
        pid: 42,
        uid: Some(106),
    };
    let found = missing(&[&futex], &other).expect("missing");
    assert_eq!(found.names(), ["CAP_PERFMON", "CAP_SYS_PTRACE"]);
    let text = found.to_string();
    assert!(
        text.contains(
            "CAP_SYS_PTRACE (pid 42: reading the files it maps, through /proc/PID/root, of \
             a process of another user, uid 106 or a more privileged one)"
        ),
        "{text}"
    );
    assert!(
        text.contains("`setcap cap_bpf,cap_perfmon,cap_sys_ptrace=ep"),
        "{text}"
    );
}

/// Hidden kernel symbols and a closed tracefs are warnings naming the capability that helps,
/// not errors; with CAP_SYSLOG there is no symbol warning.
#[test]
fn optional_capabilities_are_warnings() {
    let futex = info(FUTEX.name);
    let mut limited = facts(caps(&BASE));
    limited.kernel_symbols_visible = false;
    limited.tracefs_closed = true;
    let found = assess(&[&futex], &limited);
    assert_eq!(found.missing(limited.capabilities), None);
    assert_eq!(found.warnings.len(), 2, "{:?}", found.warnings);
    assert!(found.warnings[0].contains("CAP_DAC_READ_SEARCH"));
    assert!(found.warnings[1].starts_with("kernel frames stay addresses"));
    limited.capabilities = caps(&[Capability::Bpf, Capability::Perfmon, Capability::Syslog]);
    assert_eq!(assess(&[&futex], &limited).warnings.len(), 1);
    // tracefs matters to futex only.
    assert_eq!(assess(&[&info(CPU.name)], &limited).warnings.len(), 0);
}

/// This process's own facts can be gathered without privileges (and without a probe that
/// needs anything asked).
#[test]
fn gathers_own_facts() {
    let set = CapabilitySet::of_this_process().expect("status");
    let facts = Facts::gather(set, &[], None);
    assert!(facts.kernel.is_some_and(|k| k >= (5, 0)));
    assert_eq!(facts.target, TargetAccess::Readable);
    assert_eq!(facts.uprobes_allowed, None);
    assert!(shared_map_bytes() > 16 << 20, "{}", shared_map_bytes());
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
