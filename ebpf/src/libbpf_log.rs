//! libbpf's messages, captured while objects load so that a rejected program is reported by the
//! verifier's own last line (the reason) instead of thousands of lines on stderr.

use libbpf_rs::PrintLevel;
use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// Messages of the loads under way on this thread (libbpf prints from the calling thread).
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Where libbpf's warnings go: into the capture of this thread, else to stderr as libbpf would.
fn print(_level: PrintLevel, message: String) {
    CAPTURED.with(|captured| match &mut *captured.borrow_mut() {
        Some(messages) => messages.push(message),
        None => eprint!("{message}"),
    });
}

/// Runs `load` with libbpf's warnings captured; returns its result and, when it failed, the
/// reason libbpf and the verifier gave (see [`rejection_reason`]).
pub(crate) fn capture<T, E>(load: impl FnOnce() -> Result<T, E>) -> (Result<T, E>, Option<String>) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        libbpf_rs::set_print(Some((PrintLevel::Warn, print)));
    });
    let outer = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let result = load();
    let messages = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    let reason = match (&result, messages) {
        (Err(_), Some(messages)) => rejection_reason(&messages.concat()),
        _ => None,
    };
    (result, reason)
}

/// The reason in libbpf's output of a failed load: the verifier's last line with the program it
/// rejected (``prog `lks_offcpu_waking`: combined stack size of 4 calls is 528. Too large``), or
/// else libbpf's last warning.
pub(crate) fn rejection_reason(output: &str) -> Option<String> {
    const BEGIN: &str = "-- BEGIN PROG LOAD LOG --";
    const END: &str = "-- END PROG LOAD LOG --";
    if let (Some(begin), Some(end)) = (output.rfind(BEGIN), output.rfind(END)) {
        if begin < end {
            let program = output[..begin]
                .rsplit_once("prog '")
                .and_then(|(_, rest)| rest.split_once('\''))
                .map(|(name, _)| name);
            let last = output[begin + BEGIN.len()..end]
                .lines()
                .map(str::trim)
                .rfind(|line| !line.is_empty() && !is_verifier_statistics(line));
            if let Some(last) = last {
                return Some(match program {
                    Some(name) => format!("prog `{name}`: {last}"),
                    None => last.to_owned(),
                });
            }
        }
    }
    let lines = || {
        output
            .lines()
            .map(|line| line.trim().trim_start_matches("libbpf: "))
            .filter(|line| !line.is_empty())
    };
    // The first complaint about a program carries the cause (a relocation, an attach target the
    // kernel lacks); the lines after it only say that loading stopped.
    lines()
        .find_map(|line| {
            let (name, rest) = line.strip_prefix("prog '")?.split_once("': ")?;
            Some(format!("prog `{name}`: {rest}"))
        })
        .or_else(|| lines().next_back().map(str::to_owned))
}

/// The verifier's closing statistics, which end every log and explain nothing.
fn is_verifier_statistics(line: &str) -> bool {
    line.starts_with("processed ")
        || line.starts_with("verification time")
        || line.starts_with("stack depth")
        || line.starts_with("max_states_per_insn")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason is the verifier's last line before its statistics, named by program.
    #[test]
    fn verifier_last_line() {
        let output =
            "libbpf: prog 'lks_offcpu_waking': BPF program load failed: Permission denied\n\
                      libbpf: prog 'lks_offcpu_waking': -- BEGIN PROG LOAD LOG --\n\
                      0: R1=ctx() R10=fp0\n\
                      ; int BPF_PROG(lks_offcpu_waking, struct task_struct *p)\n\
                      combined stack size of 4 calls is 528. Too large\n\
                      verification time 1363 usec\n\
                      stack depth 208+56+264+0\n\
                      processed 1393 insns (limit 1000000) max_states_per_insn 4 total_states 85\n\
                      -- END PROG LOAD LOG --\n\
                      libbpf: prog 'lks_offcpu_waking': failed to load: -13\n";
        assert_eq!(
            rejection_reason(output).as_deref(),
            Some("prog `lks_offcpu_waking`: combined stack size of 4 calls is 528. Too large")
        );
    }

    /// Without a verifier log (an attach target or relocation failed before loading), libbpf's
    /// first complaint about a program.
    #[test]
    fn libbpf_first_complaint() {
        let output = "libbpf: prog 'lks_klock_begin': failed to find kernel BTF type ID of \
                      'contention_begin': -3\n\
                      libbpf: prog 'lks_klock_begin': failed to prepare load attributes: -3\n\
                      libbpf: failed to load object 'klock_bpf'\n";
        assert_eq!(
            rejection_reason(output).as_deref(),
            Some("prog `lks_klock_begin`: failed to find kernel BTF type ID of 'contention_begin': -3")
        );
        assert_eq!(
            rejection_reason("libbpf: failed to load object 'x'\n").as_deref(),
            Some("failed to load object 'x'")
        );
    }
}
