//! The `plockstat` probe, its catalog entry and its D clauses: user-level mutex and reader/writer
//! lock blocking, from the `plockstat` provider.

use crate::catalog::{DtraceProbe, TargetOs};
use crate::script::family::{family_of, Family};
use crate::script::ScriptOptions;
use lockscope_probes::{CostClass, WaitKind};
use std::fmt::Write as _;

/// The probe's entry in [`crate::DTRACE_CATALOG`].
pub(crate) const PROBE: DtraceProbe = DtraceProbe {
    name: "plockstat",
    description: "user-level mutex and rwlock contention as libpthread/libc sees it \
                  (block-to-blocked time); on macOS only with the introspection libpthread",
    kinds: &[WaitKind::Mutex, WaitKind::RwlockRead, WaitKind::RwlockWrite],
    cost: CostClass::OnContention,
    hooks: &[
        (
            TargetOs::MacOs,
            &[
                "plockstat$target:::mutex-block/mutex-blocked",
                "plockstat$target:::rw-block/rw-blocked",
            ],
        ),
        (
            TargetOs::Illumos,
            &[
                "plockstat$target:::mutex-block/mutex-blocked",
                "plockstat$target:::mutex-spin/mutex-spun",
                "plockstat$target:::rw-block/rw-blocked",
            ],
        ),
    ],
    default: true,
    macos_needs_launch: true,
    absent: &[(
        TargetOs::Linux,
        "DTrace for Linux has no plockstat provider (glibc has no plockstat probes)",
    )],
    clauses,
};

/// Writes the probe's clauses into `out` and the aggregation families they fill into
/// `families`.
fn clauses(out: &mut String, families: &mut Vec<Family>, options: &ScriptOptions) {
    let family = family_of("plockstat", PROBE.name, "auto", false, true);
    // mutex-block fires before the thread blocks, mutex-blocked after (arg1: acquired or not).
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-block\n{{\n\tself->lockscope_plock_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(
        out,
        "plockstat$target:::mutex-blocked\n/self->lockscope_plock_ts/\n{{"
    );
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_plock_ts;");
    family.aggregate(out, "\"mutex-block\"", "arg0", "this->ns");
    let _ = writeln!(out, "\tself->lockscope_plock_ts = 0;\n}}\n");
    if options.os == TargetOs::Illumos {
        // mutex-spin/mutex-spun never fire on macOS (its libpthread does not spin that way).
        let _ = writeln!(
            out,
            "plockstat$target:::mutex-spin\n{{\n\tself->lockscope_spin_ts = timestamp;\n}}\n"
        );
        let _ = writeln!(
            out,
            "plockstat$target:::mutex-spun\n/self->lockscope_spin_ts/\n{{"
        );
        let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_spin_ts;");
        family.aggregate(out, "\"mutex-spin\"", "arg0", "this->ns");
        let _ = writeln!(out, "\tself->lockscope_spin_ts = 0;\n}}\n");
    }
    // rw-block/rw-blocked: arg1 is non-zero for a writer.
    let _ = writeln!(
        out,
        "plockstat$target:::rw-block\n{{\n\tself->lockscope_rw_ts = timestamp;\n}}\n"
    );
    let _ = writeln!(
        out,
        "plockstat$target:::rw-blocked\n/self->lockscope_rw_ts/\n{{"
    );
    let _ = writeln!(out, "\tthis->ns = timestamp - self->lockscope_rw_ts;");
    family.aggregate(
        out,
        "arg1 ? \"rw-wrlock\" : \"rw-rdlock\"",
        "arg0",
        "this->ns",
    );
    let _ = writeln!(out, "\tself->lockscope_rw_ts = 0;\n}}\n");
    families.push(family);
}
