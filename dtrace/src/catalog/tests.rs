//! Unit tests of the DTrace probe catalog: its consistency with the Linux descriptors, every
//! descriptor implemented or absent with a reason on each OS, futex wait classification and the
//! decoding of wait operations.

use super::*;

/// Every probe has hooks, and each OS has at least one default kernel wait probe.
#[test]
fn catalog_is_consistent() {
    for p in DTRACE_CATALOG {
        assert!(!p.hooks.is_empty(), "{} has no hooks", p.name);
        assert!(!p.kinds.is_empty(), "{} has no kinds", p.name);
        // A Linux namesake means the same concept: the same categories, so `lockscope diff`
        // lines a Mac's `offcpu` up with a Linux `offcpu`.
        if let Some(linux) = lockscope_probes::catalog::find(p.name) {
            assert_eq!(
                linux.kinds, p.kinds,
                "{} differs from its Linux namesake",
                p.name
            );
        }
    }
    for os in TargetOs::ALL {
        assert!(defaults_for(os, false).count() > 0, "{os} has no defaults");
        assert_eq!(TargetOs::from_name(os.name()), Some(os));
    }
    // macOS plockstat is a default only when lockscope launches the target.
    assert!(defaults_for(TargetOs::MacOs, true).any(|p| p.name == "plockstat"));
    assert!(!defaults_for(TargetOs::MacOs, false).any(|p| p.name == "plockstat"));
    assert!(defaults_for(TargetOs::Illumos, false).any(|p| p.name == "plockstat"));
}

/// Every probe of the OS-neutral catalog has, on every OS, a DTrace implementation, a stated
/// absence ([`DtraceProbe::absent`], [`has_wait_for`], the descriptor's `dtrace_absence`: the
/// script then refuses it with that reason), or a reason here why the DTrace backend does not
/// offer it on that OS (its namesake is another probe there).
#[test]
fn every_descriptor_is_implemented_or_absent() {
    use lockscope_probes::catalog as model;
    let not_offered: &[(&str, Option<TargetOs>, &str)] = &[
        (
            model::KLOCK.name,
            Some(TargetOs::MacOs),
            "macOS has no lockstat provider",
        ),
        // Where the kernel wait primitive differs, the probe's name does (see the overview).
        (
            model::FUTEX.name,
            Some(TargetOs::MacOs),
            "macOS waits in psynch and ulock",
        ),
        (
            model::FUTEX.name,
            Some(TargetOs::FreeBsd),
            "FreeBSD waits in umtx",
        ),
        (
            model::FUTEX.name,
            Some(TargetOs::Illumos),
            "illumos waits in lwp-park",
        ),
        (
            model::MUTEX_HOLD.name,
            Some(TargetOs::FreeBsd),
            "FreeBSD has no plockstat provider",
        ),
    ];
    let mut gaps = Vec::new();
    for descriptor in model::CATALOG {
        for os in TargetOs::ALL {
            let implemented =
                find(descriptor.name).is_some_and(|p| p.supports(os) || p.absent_on(os).is_some());
            let stated = (descriptor.name == model::WAITFOR.name && !has_wait_for(os))
                || descriptor.dtrace_absence.is_some();
            let offered_not = not_offered
                .iter()
                .any(|(name, on, _)| *name == descriptor.name && on.is_none_or(|o| o == os));
            if !(implemented || stated || offered_not) {
                gaps.push(format!("{} on {os}", descriptor.name));
            }
        }
    }
    assert!(
        gaps.is_empty(),
        "no DTrace implementation and no stated absence: {}",
        gaps.join(", ")
    );
}

/// Linux futex ops are named as the eBPF backend names them, and a futex wait's category
/// comes from its op, its user stack, the libc entry point it ran under, or glibc's
/// condvar helper as the leaf, in that order.
#[test]
fn futex_waits_classify() {
    assert_eq!(futex_op_name(128), "FUTEX_WAIT_PRIVATE");
    assert_eq!(
        futex_op_name(9 | 128 | 256),
        "FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME"
    );
    assert_eq!(futex_op_name(6), "FUTEX_LOCK_PI");
    assert_eq!(futex_op_name(1), "FUTEX_CMD_1");
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let bitset = 9 | 128 | 256;
    // PI locks are mutexes whatever the stack.
    assert_eq!(futex_kind(6 | 128, 0, &[]), WaitKind::Mutex);
    // glibc's mutex slow path, even as a one-frame stack.
    let lll = names(&["__GI___lll_lock_wait", "start_thread"]);
    assert_eq!(futex_kind(128, 0, &lll), WaitKind::Mutex);
    // A condvar's mutex re-acquire is a mutex wait although pthread_cond_wait is probed.
    assert_eq!(futex_kind(128, 1, &lll), WaitKind::Mutex);
    let abstimed = names(&["__futex_abstimed_wait_common"]);
    let join = FUTEX_ENTRY_POINTS
        .iter()
        .position(|(f, _)| *f == "pthread_join")
        .map(|i| i as u64 + 1)
        .expect("pthread_join");
    assert_eq!(futex_kind(bitset, join, &abstimed), WaitKind::Join);
    // No probed entry point claimed it: pthread_cond_wait@@GLIBC_2.3.2.
    assert_eq!(futex_kind(bitset, 0, &abstimed), WaitKind::Condvar);
    // A full stack decides before the entry point.
    let rust = names(&[
        "syscall",
        "std::sys::sync::mutex::futex::Mutex::lock_contended",
    ]);
    assert_eq!(futex_kind(bitset, 0, &rust), WaitKind::Mutex);
    assert_eq!(futex_kind(bitset, 0, &names(&["syscall"])), WaitKind::Wait);
    assert_eq!(futex_kind(128, 99, &[]), WaitKind::Wait);
}

/// umtx and ulock operations decode to the documented names and categories.
#[test]
fn operations_decode() {
    assert_eq!(
        decode_umtx_op(17),
        Some(("UMTX_OP_MUTEX_WAIT", WaitKind::Mutex))
    );
    assert_eq!(
        decode_umtx_op(8),
        Some(("UMTX_OP_CV_WAIT", WaitKind::Condvar))
    );
    assert_eq!(decode_umtx_op(3), None, "UMTX_OP_WAKE never blocks");
    for op in UMTX_WAIT_OPS {
        assert!(decode_umtx_op(op).is_some(), "op {op}");
    }
    assert_eq!(
        decode_ulock_op(0x0100_0002),
        ("UL_UNFAIR_LOCK", WaitKind::Mutex)
    );
    assert_eq!(decode_ulock_op(1).1, WaitKind::Wait);
}
