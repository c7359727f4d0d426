//! The `plockstat` probe's clauses: user-level mutex and reader/writer lock blocking, from the
//! `plockstat` provider.

use super::family::{family_of, Family};
use crate::catalog::TargetOs;
use std::fmt::Write as _;

pub(super) fn emit_plockstat(out: &mut String, families: &mut Vec<Family>, os: TargetOs) {
    let family = family_of("plockstat", "plockstat", "auto", false, true);
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
    if os == TargetOs::Illumos {
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
