//! How a stack is shown to people, in every view (the report's text, `why`'s text, `diff`'s
//! table, the HTML tables): the rules are data, listed and explained in docs/FRAMES.md.
//!
//! - **Runtime frames folded** ([`RUNTIME`]): runs of the language runtime's scaffolding above
//!   the program's code (Rust's `std`/`core`/`alloc` thread and `main` entry, `catch_unwind`,
//!   closure calls; libc's thread and process start) become one marked line,
//!   `[8 runtime frames: Rust thread start, catch_unwind, thread start]`. The frames from the
//!   leaf to the telling frame are never folded: they say what the wait is (`futex_wait`,
//!   `__lll_lock_wait`, `pthread_mutex_lock`, `std::thread::sleep`).
//! - **Generic parameters elided** ([`elide_generics`]): `do_call<…>`, `HashMap<…>::insert`,
//!   with a qualified path kept readable: `<Box<…> as FnOnce<…>>::call_once`.
//! - **Lines fit** [`TEXT_WIDTH`] columns ([`shorten`]): a name too long after elision loses the
//!   middle of its path to `…`.
//! - **The telling frame** ([`telling_index`]): the program's first frame above the wait
//!   primitive's library, its runtime and the generic wait wrappers of servers
//!   ([`WAIT_WRAPPERS`]: PostgreSQL's `WaitEventSetWait`, InnoDB's `os_event_wait`...): what a
//!   site column names (`take_order_lock`, `XactLockTableWait`).
//!
//! [`StackStyle::Full`] (`--full-stacks`) shows every frame as recorded; JSON always has them
//! all (it is for scripts).

/// The width every line of the text outputs fits in.
pub const TEXT_WIDTH: usize = 100;

/// How stacks are shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StackStyle {
    /// The program's frames: runtime frames folded, generic parameters elided, names shortened to
    /// fit (the default).
    #[default]
    Readable,
    /// Every frame as recorded, full names (`--full-stacks`).
    Full,
}

/// A frame as the rules see it: its function name and, when known, its source file.
#[derive(Clone, Copy, Debug)]
pub struct FrameRef<'a> {
    /// The function's name (or `module+0x..` without a symbol).
    pub name: &'a str,
    /// Its source file, when the debug information gave one.
    pub file: Option<&'a str>,
}

impl<'a> FrameRef<'a> {
    /// A frame known by its name alone.
    pub fn named(name: &'a str) -> FrameRef<'a> {
        FrameRef { name, file: None }
    }
}

/// How a runtime frame is recognised.
#[derive(Clone, Copy, Debug)]
enum Match {
    /// The last path segment, generic parameters removed, is exactly this.
    Name(&'static str),
    /// The name (generic parameters elided) contains this.
    Contains(&'static str),
    /// The source file contains this.
    File(&'static str),
}

/// A rule of [`RUNTIME`]: what it matches and the words of the folded line.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeRule {
    matches: Match,
    /// What the folded line says the frames were.
    pub label: &'static str,
}

const fn rule(matches: Match, label: &'static str) -> RuntimeRule {
    RuntimeRule { matches, label }
}

/// The language runtime's frames between a thread's (or the process') start and the program's
/// code, folded into one line. Each says nothing about what the program did: every thread has
/// them, in the same order.
pub const RUNTIME: &[RuntimeRule] = &[
    // Rust: std's marker frame around every spawned thread's closure and around `main`.
    rule(Match::Name("__rust_begin_short_backtrace"), "Rust entry"),
    // Rust: std's thread entry (`<std::sys::thread::unix::Thread>::new::thread_start`).
    rule(Match::Contains("::thread_start"), "Rust thread start"),
    // Rust: `main`'s entry through std's runtime (`std::rt::lang_start::{{closure}}` too).
    rule(Match::Name("lang_start"), "Rust main start"),
    rule(Match::Name("lang_start_internal"), "Rust main start"),
    rule(Match::Contains("std::rt::lang_start"), "Rust main start"),
    // Rust: the panic boundary std puts around every thread and `main`.
    rule(Match::Name("catch_unwind"), "catch_unwind"),
    rule(Match::Name("do_call"), "catch_unwind"),
    rule(Match::Contains("std::panicking::"), "catch_unwind"),
    // Rust: calling the thread's boxed closure (`<Box<…> as FnOnce<…>>::call_once`).
    rule(Match::Name("call_once"), "closure call"),
    rule(Match::Contains("FnOnce"), "closure call"),
    // Rust: anything else compiled from the standard library's sources (std's closures around a
    // thread's, iterator adapters) above the program's code.
    rule(Match::File("/library/std/"), "Rust std"),
    rule(Match::File("/library/core/"), "Rust core"),
    rule(Match::File("/library/alloc/"), "Rust alloc"),
    // libc: a new thread's first frames (glibc, musl, bionic, macOS, FreeBSD).
    rule(Match::Name("start_thread"), "thread start"),
    rule(Match::Name("clone3"), "thread start"),
    rule(Match::Name("clone"), "thread start"),
    rule(Match::Name("__clone"), "thread start"),
    rule(Match::Name("__clone3"), "thread start"),
    rule(Match::Name("_pthread_start"), "thread start"),
    rule(Match::Name("thread_start"), "thread start"),
    // libc: the process' start before `main`.
    rule(Match::Name("__libc_start_main"), "libc start"),
    rule(Match::Name("__libc_start_main_impl"), "libc start"),
    rule(Match::Name("__libc_start_call_main"), "libc start"),
    rule(Match::Name("_start"), "libc start"),
];

/// Generic wait wrappers of servers, skipped when naming a site: each is called by every wait of
/// its kind, so the frame that tells the waits apart is its caller's.
pub const WAIT_WRAPPERS: &[&str] = &[
    // PostgreSQL: the latch and wait-event layer under every sleep of a backend.
    "WaitEventSetWait",
    "WaitEventSetWaitBlock",
    "WaitLatch",
    "WaitLatchOrSocket",
    "ConditionVariableSleep",
    "ConditionVariableTimedSleep",
    "PGSemaphoreLock",
    // PostgreSQL: the heavyweight lock manager's sleep under every row, transaction and relation
    // lock (its caller says which: `XactLockTableWait`, `heapam_tuple_lock`).
    "ProcSleep",
    "WaitOnLock",
    "LockAcquireExtended",
    "LockAcquire",
    // InnoDB (MySQL, MariaDB): its event and sync-array waits and its mutex and rw-lock policies.
    "os_event_wait",
    "os_event_wait_low",
    "os_event_wait_time_low",
    "os_event::wait_low",
    "os_event::wait",
    "sync_array_wait_event",
    "wait_and_lock",
    "wait_and_lock_slow",
    "rd_wait",
    "wr_wait",
    // MySQL, MariaDB: the instrumented mutex and condition variable wrappers.
    "inline_mysql_mutex_lock",
    "inline_mysql_cond_wait",
    "inline_mysql_cond_timedwait",
    "psi_mutex_lock",
    "psi_cond_wait",
    "psi_cond_timedwait",
    "my_cond_wait",
    "my_cond_timedwait",
    // A bare method named for the lock operation alone (a program's own wrapper of
    // `pthread_mutex_lock`, Rust's inlined `lock`): the kind column says as much.
    "lock",
    "lock_slow",
    "lock_contended",
    "wait",
    "wait_while",
    "wait_timeout",
    "acquire",
    "enter",
    "join",
    // Rust's atomics and spin hint under a user-space spin, inlined and so named alone: the spin
    // is the wait, its caller the site.
    "spin_loop",
    "atomic_load",
    "atomic_compare_exchange",
    "atomic_compare_exchange_weak",
    "load",
    "compare_exchange",
    "compare_exchange_weak",
];

/// Prefixes (after leading underscores and glibc's `GI_`) of the library frames between a wait
/// and the code that asked for it: the C library's and Rust's synchronization and system-call
/// plumbing.
const WAIT_PLUMBING: &[&str] = &[
    "pthread_",
    "lll_",
    // glibc's condition-variable internals (`__condvar_quiesce_and_switch_g1` under
    // `pthread_cond_signal`, `__condvar_dec_grefs`...).
    "condvar_",
    "futex",
    "sem_",
    "new_sem_",
    "clock_nanosleep",
    "nanosleep",
    "syscall",
    "poll",
    "ppoll",
    "epoll_",
    "select",
    "pselect",
    "libc_",
    "std::sys::",
    "std::sync::",
    "std::thread::",
    "core::",
    "parking_lot",
    // System-call wrappers a sampled or preempted thread is often in: the call, not the caller.
    "[vdso]",
    "clock_gettime",
    "sched_yield",
];

/// True for a frame of the synchronization or system-call plumbing rather than the caller's code.
pub fn is_wait_plumbing(name: &str) -> bool {
    if lockscope_probes::wait::canonical_wait_frame(name).is_some() {
        return true;
    }
    let trimmed = name.trim_start_matches('_');
    let trimmed = trimmed
        .strip_prefix("GI_")
        .map_or(trimmed, |n| n.trim_start_matches('_'));
    WAIT_PLUMBING.iter().any(|p| trimmed.starts_with(p))
}

/// The index of the `>` that closes the `<` at `open`, or `None` (`->` is not a bracket).
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '<' => depth += 1,
            '>' if i > 0 && chars[i - 1] == '-' => {}
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `alloc::boxed::Box<…>` → `Box<…>`: a type or trait's path cut to its last segment.
fn last_path_segment(text: &str) -> &str {
    let head_end = text.find('<').unwrap_or(text.len());
    match text[..head_end].rfind("::") {
        Some(at) if !text[..head_end].contains(' ') => &text[at + 2..],
        _ => text,
    }
}

/// A name with its generic parameters elided: `do_call<…>`, `HashMap<…>::insert`; a qualified
/// path stays readable, its types and traits by their last segment:
/// `<alloc::boxed::Box<dyn FnOnce<()>> as core::ops::FnOnce<()>>::call_once` →
/// `<Box<…> as FnOnce<…>>::call_once`.
pub fn elide_generics(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '<' {
            out.push(c);
            i += 1;
            continue;
        }
        // `operator<`, `operator<<` and unbalanced text are left as they are.
        let Some(end) = closing(&chars, i) else {
            out.extend(&chars[i..]);
            break;
        };
        // A `<` that opens the name, or a path segment with `as` or `impl` in it, is a qualified
        // path (`<T as Trait>::f`, `<T>::f`, `alloc::vec::<impl Vec<T>>::push`); `f::<T>` after
        // a segment is a turbofish, generic parameters.
        let inner: String = chars[i + 1..end].iter().collect();
        let qualified = out.is_empty()
            || (out.ends_with("::")
                && (inner.starts_with("impl ") || split_top_level(&inner, " as ").len() > 1));
        if qualified {
            let parts: Vec<String> = split_top_level(&inner, " as ")
                .into_iter()
                .map(|part| match part.strip_prefix("impl ") {
                    Some(rest) => format!("impl {}", last_path_segment(&elide_generics(rest))),
                    None => last_path_segment(&elide_generics(part)).to_string(),
                })
                .collect();
            out.push('<');
            out.push_str(&parts.join(" as "));
            out.push('>');
        } else {
            out.push_str("<…>");
        }
        i = end + 1;
    }
    out
}

/// `text` split at `separator` where it is outside every `<…>`.
fn split_top_level<'t>(text: &'t str, separator: &str) -> Vec<&'t str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] != b'-' => depth -= 1,
            _ => {}
        }
        if depth == 0 && text[i..].starts_with(separator) {
            parts.push(&text[start..i]);
            i += separator.len();
            start = i;
            continue;
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts
}

/// The last path segment of a name without its generic parameters: `do_call<…>` → `do_call`,
/// `<Box<…> as FnOnce<…>>::call_once` → `call_once`, `std::thread::sleep` → `sleep`.
fn bare_name(elided: &str) -> &str {
    let elided = elided.strip_suffix("::<…>").unwrap_or(elided);
    let mut depth = 0i32;
    let mut last = 0;
    let bytes = elided.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && i + 1 < bytes.len() && bytes[i + 1] == b':' => last = i + 2,
            _ => {}
        }
    }
    let tail = &elided[last.min(elided.len())..];
    tail.split('<').next().unwrap_or(tail)
}

/// A name without a C++ parameter list: `os_event::wait_low(long)` → `os_event::wait_low`.
fn without_parameters(name: &str) -> &str {
    let mut depth = 0i32;
    for (i, b) in name.bytes().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b'(' if depth == 0 && i > 0 => return &name[..i],
            _ => {}
        }
    }
    name
}

/// The name as the rules read it: no DTrace module, no `+0x..` offset, no glibc `__GI_` alias,
/// generic parameters elided.
fn rule_name(name: &str) -> String {
    let symbol = name.rsplit_once('`').map_or(name, |(_, symbol)| symbol);
    let symbol = match symbol.rsplit_once("+0x") {
        Some((base, offset))
            if !base.is_empty() && offset.chars().all(|c| c.is_ascii_hexdigit()) =>
        {
            base
        }
        _ => symbol,
    };
    let elided = elide_generics(symbol.strip_prefix("__GI_").unwrap_or(symbol));
    without_parameters(&elided).to_string()
}

/// The rule of [`RUNTIME`] that folds `frame`, if any.
pub fn runtime_rule(frame: FrameRef<'_>) -> Option<&'static RuntimeRule> {
    let name = rule_name(frame.name);
    let bare = bare_name(&name);
    RUNTIME.iter().find(|r| match r.matches {
        Match::Name(exact) => bare == exact,
        Match::Contains(part) => name.contains(part),
        Match::File(part) => frame.file.is_some_and(|f| f.contains(part)),
    })
}

/// True for a generic wait wrapper of [`WAIT_WRAPPERS`] (by its last path segment, or its whole
/// C++ `class::method`).
pub fn is_wait_wrapper(name: &str) -> bool {
    let name = rule_name(name);
    let bare = bare_name(&name);
    WAIT_WRAPPERS.iter().any(|w| *w == bare || *w == name)
}

/// The telling frame of a stack given leaf first: the first frame that is neither the wait's
/// plumbing ([`is_wait_plumbing`]), nor the runtime ([`RUNTIME`]), nor a generic wait wrapper
/// ([`WAIT_WRAPPERS`]); `None` when every frame is one of those.
pub fn telling_index(frames: &[FrameRef<'_>]) -> Option<usize> {
    let telling = |f: &FrameRef<'_>| {
        !is_wait_plumbing(f.name) && runtime_rule(*f).is_none() && !is_wait_wrapper(f.name)
    };
    // A frame without a symbol (a stripped binary's static function: PostgreSQL's `WaitOnLock`
    // as `postgres+0x45d95d`) says less than the named caller above it (`XactLockTableWait`).
    frames
        .iter()
        .position(|f| telling(f) && !is_unnamed(f.name))
        .or_else(|| frames.iter().position(telling))
}

/// True for a frame no symbol names: `module+0x1f2e` or `[module]`.
fn is_unnamed(name: &str) -> bool {
    name.starts_with('[')
        || name.rsplit_once("+0x").is_some_and(|(module, offset)| {
            !module.is_empty()
                && !module.contains(' ')
                && offset.chars().all(|c| c.is_ascii_hexdigit())
        })
}

/// The frame that names a site: the telling frame ([`telling_index`]); without one (a stack of
/// the wait's plumbing alone, cut short), its outermost frame that is not the runtime's, which is
/// the nearest to the program; else its leaf. `None` for no frame.
pub fn site_index(frames: &[FrameRef<'_>]) -> Option<usize> {
    if frames.is_empty() {
        return None;
    }
    telling_index(frames)
        .or_else(|| frames.iter().rposition(|f| runtime_rule(*f).is_none()))
        .or(Some(0))
}

/// [`site_index`] of frames known by their names alone.
pub fn site_name_index<S: AsRef<str>>(names: &[S]) -> Option<usize> {
    let frames: Vec<FrameRef<'_>> = names.iter().map(|n| FrameRef::named(n.as_ref())).collect();
    site_index(&frames)
}

/// [`telling_index`] of frames known by their names alone.
pub fn telling_name<S: AsRef<str>>(names: &[S]) -> Option<usize> {
    let frames: Vec<FrameRef<'_>> = names.iter().map(|n| FrameRef::named(n.as_ref())).collect();
    telling_index(&frames)
}

/// A line of a shown stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// The frame at this index.
    Frame(usize),
    /// `count` runtime frames from `first` on, folded, with what they were.
    Folded {
        /// Index of the first folded frame.
        first: usize,
        /// How many.
        count: usize,
        /// The labels of their rules, each once, leaf first.
        labels: Vec<&'static str>,
    },
}

impl Line {
    /// The folded line's text in at most `max` characters, its labels as many as fit (`…` for
    /// the others): `[8 runtime frames: Rust entry, catch_unwind, thread start]`; `None` for a
    /// frame.
    pub fn folded_text(&self, max: usize) -> Option<String> {
        let Line::Folded { count, labels, .. } = self else {
            return None;
        };
        let mut text = format!("[{count} runtime frames: ");
        for (i, label) in labels.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let last = i + 1 == labels.len();
            // Room for this label, and for `, …]` when more follow.
            let need = sep.len() + label.chars().count() + if last { 1 } else { 4 };
            if i > 0 && text.chars().count() + need > max {
                text.push_str(", …");
                break;
            }
            text.push_str(sep);
            text.push_str(label);
        }
        text.push(']');
        Some(text)
    }
}

/// The labels of [`RUNTIME`]'s rules by source file, left out of a folded line that has others.
const GENERIC_LABELS: &[&str] = &["Rust std", "Rust core", "Rust alloc"];

/// True for a Rust closure's frame (`{closure#0}<…>`).
fn is_closure(name: &str) -> bool {
    bare_name(&rule_name(name)).starts_with("{closure")
}

/// The lines of a stack given leaf first: in [`StackStyle::Full`] every frame; else the frames
/// from the leaf to the telling frame as they are, and above it every run of two or more runtime
/// frames folded into one line.
pub fn lines(frames: &[FrameRef<'_>], style: StackStyle) -> Vec<Line> {
    let keep = match style {
        StackStyle::Full => frames.len(),
        StackStyle::Readable => telling_index(frames).unwrap_or(frames.len()),
    };
    let mut out: Vec<Line> = (0..keep.min(frames.len())).map(Line::Frame).collect();
    let mut i = keep;
    while i < frames.len() {
        let mut end = i;
        let mut labels: Vec<&'static str> = Vec::new();
        while let Some(frame) = frames.get(end) {
            match runtime_rule(*frame) {
                Some(rule) => {
                    if !labels.contains(&rule.label) {
                        labels.push(rule.label);
                    }
                }
                // A closure between two runtime frames is the runtime's (std's closures around a
                // thread's, named `{closure#0}<…>` alone when the stack has no source files).
                None if !labels.is_empty()
                    && is_closure(frame.name)
                    && frames
                        .get(end + 1)
                        .is_some_and(|f| runtime_rule(*f).is_some()) => {}
                None => break,
            }
            end += 1;
        }
        // A run's own rules say more than "compiled from std's sources".
        if labels.iter().any(|l| !GENERIC_LABELS.contains(l)) {
            labels.retain(|l| !GENERIC_LABELS.contains(l));
        }
        if end - i >= 2 {
            out.push(Line::Folded {
                first: i,
                count: end - i,
                labels,
            });
            i = end;
        } else {
            out.push(Line::Frame(i));
            i += 1;
        }
    }
    out
}

/// The text of each line of a stack of names given leaf first: names shown per `style` (see
/// [`show_name`], at most `max` characters) and folded lines.
pub fn shown_names<S: AsRef<str>>(names: &[S], style: StackStyle, max: usize) -> Vec<String> {
    let frames: Vec<FrameRef<'_>> = names.iter().map(|n| FrameRef::named(n.as_ref())).collect();
    lines(&frames, style)
        .iter()
        .map(|line| match line {
            Line::Frame(i) => show_name(frames[*i].name, style, max),
            folded => folded.folded_text(max).unwrap_or_default(),
        })
        .collect()
}

/// A name as shown: in [`StackStyle::Full`] as it is; else its generic parameters elided and
/// [`shorten`]ed to `max` characters.
pub fn show_name(name: &str, style: StackStyle, max: usize) -> String {
    match style {
        StackStyle::Full => name.to_string(),
        StackStyle::Readable => shorten(name, max),
    }
}

/// A name at most `max` characters long: its generic parameters elided first, then the middle of
/// its path cut to `…` at whole segments (`lockscope_demo::…::wait_for_signal`, `…::f`), else
/// the middle of its characters (the start and the end, which names the function, kept).
pub fn shorten(name: &str, max: usize) -> String {
    let elided = elide_generics(name);
    if elided.chars().count() <= max {
        return elided;
    }
    // The middle of the path first, whole segments: `a::…::f`, then `…::f`.
    let segments = split_top_level(&elided, "::");
    if segments.len() > 1 {
        let last = segments[segments.len() - 1];
        for candidate in [format!("{}::…::{last}", segments[0]), format!("…::{last}")] {
            if candidate.chars().count() <= max {
                return candidate;
            }
        }
    }
    cut_middle(&elided, max)
}

/// `text` at most `max` characters: its middle replaced by `…` when longer, the end (a
/// function's own name) given two thirds of the room.
pub fn cut_middle(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max || max < 3 {
        return text.to_string();
    }
    let tail = (max - 1) * 2 / 3;
    let head = max - 1 - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(count - tail).collect();
    format!("{start}…{end}")
}

/// `text` at most `max` characters, its end cut to `…` when longer.
pub fn cut_end(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A site's name for a column, from its stack given leaf first: its [`site_index`] frame, shown
/// per `style` in at most `max` characters.
pub fn site_name<S: AsRef<str>>(names: &[S], style: StackStyle, max: usize) -> Option<String> {
    let at = site_name_index(names).unwrap_or(0);
    names.get(at).map(|n| show_name(n.as_ref(), style, max))
}

/// A stack given leaf first as one line from its [`site_index`] frame up, `a <- b <- c`, at most `max`
/// characters (whole frames; ` <- …` when some are left out), runtime frames folded as
/// [`shown_names`] folds them; in [`StackStyle::Full`] every frame, whole.
pub fn leaf_first_line<S: AsRef<str>>(names: &[S], style: StackStyle, max: usize) -> String {
    if style == StackStyle::Full {
        return names
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(" <- ");
    }
    let from = site_name_index(names).unwrap_or(0);
    leaf_first_line_from(names, from, style, max)
}

/// [`leaf_first_line`] from the frame at `from` (one leafward of the site's frame says what
/// its wait was in, where two sites share their callers).
pub fn leaf_first_line_from<S: AsRef<str>>(
    names: &[S],
    from: usize,
    style: StackStyle,
    max: usize,
) -> String {
    let from = from.min(names.len());
    // The runtime says nothing in a one-line summary, folded or not.
    let frames: Vec<FrameRef<'_>> = names[from..]
        .iter()
        .map(|n| FrameRef::named(n.as_ref()))
        .collect();
    let shown: Vec<String> = lines(&frames, style)
        .iter()
        .filter_map(|line| match line {
            Line::Frame(i) if *i > 0 && runtime_rule(frames[*i]).is_some() => None,
            Line::Frame(i) => Some(show_name(frames[*i].name, style, max)),
            Line::Folded { .. } => None,
        })
        .collect();
    let mut line = String::new();
    for (i, name) in shown.iter().enumerate() {
        let sep = if i == 0 { "" } else { " <- " };
        let more = if i + 1 < shown.len() { " <- …" } else { "" };
        if line.chars().count() + sep.len() + name.chars().count() + more.chars().count() > max
            && i > 0
        {
            line.push_str(" <- …");
            return line;
        }
        line.push_str(sep);
        line.push_str(name);
    }
    cut_end(&line, max)
}

/// `text` wrapped at its spaces into lines of at most `width` columns, the first after `first`,
/// the others after `indent`, joined by newlines. Spacing within a line is kept; a word longer
/// than a line stays whole, and a time unit (`s`, `ms`, `µs`, `ns`: `1.20 s`) stays with the
/// number before it.
pub fn wrap(text: &str, first: &str, indent: &str, width: usize) -> String {
    // Words with the spaces before them; a unit (`s`, `ms`, `µs`) is one word with its number,
    // so that a line breaks before the number rather than between the two.
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut spaces = 0usize;
    for word in text.split(' ') {
        if word.is_empty() {
            spaces += 1;
            continue;
        }
        let unit = ["s", "ms", "µs", "ns"]
            .contains(&word.trim_end_matches(|c: char| c.is_ascii_punctuation()));
        match words.last_mut() {
            Some((_, last)) if unit => {
                last.extend(std::iter::repeat_n(' ', spaces + 1));
                last.push_str(word);
            }
            _ => words.push((spaces + 1, word.to_string())),
        }
        spaces = 0;
    }
    let mut out = String::from(first);
    let mut column = first.chars().count();
    let mut line_empty = true;
    for (gap, word) in words {
        let len = word.chars().count();
        let gap = if line_empty { 0 } else { gap };
        if !line_empty && column + gap + len > width {
            out.push('\n');
            out.push_str(indent);
            column = indent.chars().count();
        } else {
            out.extend(std::iter::repeat_n(' ', gap));
            column += gap;
        }
        out.push_str(&word);
        column += len;
        line_empty = false;
    }
    out
}

/// Thread names merged by group (`mutex-waiter-* ×4, main`), in at most `max` characters (`and
/// N more` when some do not fit).
pub fn thread_list<S: AsRef<str>>(names: &[S], max: usize) -> String {
    // (group, the first name in it, how many).
    let mut groups: Vec<(String, &str, usize)> = Vec::new();
    for name in names {
        let group = crate::analysis::canonical::thread_group(name.as_ref());
        match groups.iter_mut().find(|(g, ..)| *g == group) {
            Some(entry) => entry.2 += 1,
            None => groups.push((group, name.as_ref(), 1)),
        }
    }
    let items: Vec<String> = groups
        .into_iter()
        .map(|(group, first, n)| {
            if n == 1 {
                first.to_string()
            } else {
                format!("{group} ×{n}")
            }
        })
        .collect();
    let mut line = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let rest = items.len() - i;
        let more = if rest > 1 {
            format!(" and {} more", rest - 1)
        } else {
            String::new()
        };
        if i > 0
            && line.chars().count() + sep.len() + item.chars().count() + more.chars().count() > max
        {
            line.push_str(&format!(" and {rest} more"));
            return cut_end(&line, max);
        }
        line.push_str(sep);
        line.push_str(item);
    }
    cut_end(&line, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's mutex waiter as the README shows it, leaf first, with each frame's file.
    fn demo_stack() -> Vec<(&'static str, Option<&'static str>)> {
        let std = |p: &'static str| Some(p);
        vec![
            ("futex_wait", Some("./nptl/../sysdeps/nptl/futex-internal.h")),
            ("__GI___lll_lock_wait", Some("./nptl/lowlevellock.c")),
            ("lll_mutex_lock_optimized", Some("./nptl/pthread_mutex_lock.c")),
            ("___pthread_mutex_lock", Some("./nptl/pthread_mutex_lock.c")),
            ("lock", Some("profiler/src/bin/lockscope-demo.rs")),
            ("take_order_lock", Some("profiler/src/bin/lockscope-demo.rs")),
            ("place_order", Some("profiler/src/bin/lockscope-demo.rs")),
            ("{closure#0}", Some("profiler/src/bin/lockscope-demo.rs")),
            (
                "__rust_begin_short_backtrace<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>",
                std("/rustc/5980/library/std/src/sys/backtrace.rs"),
            ),
            (
                "{closure#0}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>",
                std("/rustc/5980/library/std/src/thread/lifecycle.rs"),
            ),
            (
                "call_once<core::time::Duration, std::thread::lifecycle::spawn_unchecked::{closure#1}::{closure_env#0}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>>",
                std("/rustc/5980/library/core/src/panic/unwind_safe.rs"),
            ),
            (
                "do_call<core::panic::unwind_safe::AssertUnwindSafe<std::thread::lifecycle::spawn_unchecked::{closure#1}::{closure_env#0}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>>, core::time::Duration>",
                std("/rustc/5980/library/std/src/panicking.rs"),
            ),
            (
                "catch_unwind<core::time::Duration, core::panic::unwind_safe::AssertUnwindSafe<std::thread::lifecycle::spawn_unchecked::{closure#1}::{closure_env#0}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>>>",
                std("/rustc/5980/library/std/src/panicking.rs"),
            ),
            (
                "catch_unwind<core::panic::unwind_safe::AssertUnwindSafe<std::thread::lifecycle::spawn_unchecked::{closure#1}::{closure_env#0}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>>, core::time::Duration>",
                std("/rustc/5980/library/std/src/panic.rs"),
            ),
            (
                "{closure#1}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>",
                std("/rustc/5980/library/std/src/thread/lifecycle.rs"),
            ),
            (
                "call_once<std::thread::lifecycle::spawn_unchecked::{closure_env#1}<lockscope_demo::main::{closure#0}::{closure_env#0}, core::time::Duration>, ()>",
                std("/rustc/5980/library/core/src/ops/function.rs"),
            ),
            (
                "<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()> + core::marker::Send> as core::ops::function::FnOnce<()>>::call_once",
                std("/rustc/5980/library/alloc/src/boxed.rs"),
            ),
            (
                "<std::sys::thread::unix::Thread>::new::thread_start",
                std("/rustc/5980/library/std/src/sys/thread/unix.rs"),
            ),
            ("start_thread", Some("./nptl/pthread_create.c")),
            ("clone3", Some("./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S")),
        ]
    }

    fn refs(stack: &[(&'static str, Option<&'static str>)]) -> Vec<FrameRef<'static>> {
        stack
            .iter()
            .map(|&(name, file)| FrameRef { name, file })
            .collect()
    }

    /// The demo's stack: the wait primitive's frames at the leaf and the program's kept, the 12
    /// runtime frames from `__rust_begin_short_backtrace` to `clone3` one marked line, and the
    /// site named `take_order_lock`, past the program's own `lock` wrapper.
    #[test]
    fn demo_stack_folds_the_runtime_and_names_take_order_lock() {
        let stack = demo_stack();
        let frames = refs(&stack);
        assert_eq!(telling_index(&frames), Some(5));
        let lines = lines(&frames, StackStyle::Readable);
        assert_eq!(
            lines[..8],
            (0..8).map(Line::Frame).collect::<Vec<_>>()[..],
            "leaf to the program's closure shown"
        );
        assert_eq!(lines.len(), 9);
        assert_eq!(
            lines[8].folded_text(100).as_deref(),
            Some("[12 runtime frames: Rust entry, closure call, catch_unwind, Rust thread start, thread start]")
        );
        assert_eq!(
            super::lines(&frames, StackStyle::Full).len(),
            stack.len(),
            "full stacks keep every frame"
        );
        // Without source files (why's and the on-CPU section's names), std's closures between
        // runtime frames fold with them.
        let names: Vec<&str> = stack.iter().map(|f| f.0).collect();
        let shown = shown_names(&names, StackStyle::Readable, 98);
        assert_eq!(shown.len(), 9, "{shown:?}");
        assert_eq!(shown[5], "take_order_lock");
        assert_eq!(
            shown[8],
            "[12 runtime frames: Rust entry, closure call, catch_unwind, Rust thread start, thread \
             start]"
        );
        assert_eq!(
            lines[8].folded_text(50).as_deref(),
            Some("[12 runtime frames: Rust entry, closure call, …]"),
            "labels that do not fit are left out"
        );
        assert!(shown.iter().all(|l| l.chars().count() <= 98));
    }

    /// A Rust wait in std's own mutex keeps std's frames at the leaf: they are the wait.
    #[test]
    fn std_frames_at_the_leaf_are_kept() {
        let std_file = Some("/rustc/5980/library/std/src/sys/sync/mutex/futex.rs");
        let frames = [
            FrameRef {
                name: "futex_wait",
                file: std_file,
            },
            FrameRef {
                name: "lock_contended",
                file: std_file,
            },
            FrameRef {
                name: "lock",
                file: std_file,
            },
            FrameRef::named("app::flush_queue"),
            FrameRef::named("start_thread"),
            FrameRef::named("clone3"),
        ];
        let lines = lines(&frames, StackStyle::Readable);
        assert_eq!(lines[..4], [0, 1, 2, 3].map(Line::Frame));
        assert_eq!(
            lines[4].folded_text(100).as_deref(),
            Some("[2 runtime frames: thread start]")
        );
    }

    /// PostgreSQL's row lock: the latch layer and the lock manager's sleep are wrappers, the
    /// site is the caller that says which lock (`XactLockTableWait`).
    #[test]
    fn postgres_row_lock_is_named_by_its_lock_manager_caller() {
        let names = [
            "epoll_wait",
            "WaitEventSetWaitBlock",
            "WaitEventSetWait",
            "WaitLatch",
            "ProcSleep",
            "WaitOnLock",
            "LockAcquireExtended",
            "XactLockTableWait",
            "heapam_tuple_lock",
            "table_tuple_lock",
            "ExecUpdate",
            "standard_ExecutorRun",
            "PostgresMain",
            "BackendMain",
            "postmaster_child_launch",
            "ServerLoop",
            "PostmasterMain",
            "main",
            "__libc_start_call_main",
            "__libc_start_main_impl",
            "_start",
        ];
        assert_eq!(
            site_name(&names, StackStyle::Readable, 40).as_deref(),
            Some("XactLockTableWait")
        );
        let shown = shown_names(&names, StackStyle::Readable, 60);
        assert_eq!(shown.len(), names.len() - 2);
        assert_eq!(
            shown.last().map(String::as_str),
            Some("[3 runtime frames: libc start]")
        );
        // The client wait is named by what reads from the client.
        let client = [
            "epoll_wait",
            "WaitEventSetWait",
            "secure_read",
            "pq_recvbuf",
        ];
        assert_eq!(
            site_name(&client, StackStyle::Readable, 40).as_deref(),
            Some("secure_read")
        );
        // A window of plumbing alone (why's hops) is named by its outermost frame.
        let sleep = [
            "__GI___clock_nanosleep",
            "std::sys::thread::unix::sleep::nanosleep",
            "std::thread::functions::sleep",
        ];
        assert_eq!(
            site_name(&sleep, StackStyle::Readable, 40).as_deref(),
            Some("std::thread::functions::sleep")
        );
        assert_eq!(
            site_name(&["start_thread", "clone3"], StackStyle::Readable, 40).as_deref(),
            Some("start_thread")
        );
        // The lock manager's semaphore: its LWLock caller.
        let lwlock = [
            "__futex_abstimed_wait_common",
            "__new_sem_wait_slow64",
            "PGSemaphoreLock",
            "LWLockAcquire",
        ];
        assert_eq!(
            site_name(&lwlock, StackStyle::Readable, 40).as_deref(),
            Some("LWLockAcquire")
        );
    }

    /// InnoDB's and MariaDB's wrappers are skipped to the waiting code.
    #[test]
    fn innodb_wrappers_are_skipped() {
        let names = [
            "futex_wait",
            "__GI___lll_lock_wait",
            "___pthread_cond_wait",
            "os_event::wait_low(long)",
            "sync_array_wait_event(sync_array_t*, sync_cell_t*&)",
            "TTASEventMutex<GenericPolicy>::enter(unsigned int, unsigned int, char const*, unsigned int)",
            "lock_rec_lock",
        ];
        assert_eq!(telling_name(&names), Some(6));
        assert_eq!(
            site_name(&names, StackStyle::Readable, 60).as_deref(),
            Some("lock_rec_lock")
        );
        assert_eq!(
            shorten(names[5], 100),
            "TTASEventMutex<…>::enter(unsigned int, unsigned int, char const*, unsigned int)"
        );
    }

    /// A frame no symbol names (a stripped binary's static function) is passed over for the
    /// named caller above it; a stack of unnamed frames alone is still named by its first.
    #[test]
    fn unnamed_frames_give_way_to_named_callers() {
        let names = [
            "epoll_wait",
            "WaitEventSetWait",
            "WaitLatch",
            "ProcSleep",
            "postgres+0x45d95d",
            "LockAcquireExtended",
            "XactLockTableWait",
            "heapam_tuple_lock",
        ];
        assert_eq!(telling_name(&names), Some(6));
        assert_eq!(telling_name(&["nginx+0x54174", "[nginx]"]), Some(0));
        assert!(!is_unnamed("operator+(int)"));
    }

    /// glibc's condition-variable internals under a signal are plumbing: nginx's thread pool
    /// signalling its task queue is at `ngx_thread_cond_signal`.
    #[test]
    fn condvar_internals_are_plumbing() {
        let names = [
            "futex_wait",
            "__condvar_quiesce_and_switch_g1",
            "___pthread_cond_signal",
            "ngx_thread_cond_signal",
            "ngx_thread_task_post",
        ];
        assert_eq!(telling_name(&names), Some(3));
    }

    /// Generic parameters are elided, a qualified path kept readable by its last segments.
    #[test]
    fn generics_are_elided() {
        let cases = [
            (
                "do_call<core::panic::unwind_safe::AssertUnwindSafe<std::thread::X>, ()>",
                "do_call<…>",
            ),
            (
                "std::collections::HashMap<K, V, S>::insert",
                "std::collections::HashMap<…>::insert",
            ),
            (
                "<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()> + core::marker::Send> as core::ops::function::FnOnce<()>>::call_once",
                "<Box<…> as FnOnce<…>>::call_once",
            ),
            (
                "<std::sys::thread::unix::Thread>::new::thread_start",
                "<Thread>::new::thread_start",
            ),
            ("take_order_lock", "take_order_lock"),
            ("operator<<", "operator<<"),
            ("f<fn() -> u32>", "f<…>"),
            (
                "std::panic::catch_unwind::<&dyn core::ops::Fn() -> i32 + Sync, i32>",
                "std::panic::catch_unwind::<…>",
            ),
            (
                "alloc::vec::<impl alloc::vec::Vec<T>>::push",
                "alloc::vec::<impl Vec<…>>::push",
            ),
        ];
        for (name, elided) in cases {
            assert_eq!(elide_generics(name), elided, "{name}");
        }
    }

    /// A name too long after elision loses whole path segments in its middle, else characters
    /// in its middle, keeping its start and its end (the function) within the width.
    #[test]
    fn long_names_lose_the_middle_of_their_path() {
        let name = "very::long::module::path::of::a::crate::with::many::segments::the_function";
        assert_eq!(shorten(name, 40), "very::…::the_function");
        let flat = "a_very_long_function_name_without_any_path_segments_at_all";
        let short = shorten(flat, 20);
        assert_eq!(short.chars().count(), 20);
        assert!(short.ends_with("at_all"), "{short}");
        assert!(short.starts_with("a_ve"), "{short}");
        assert!(short.contains('…'));
        assert_eq!(shorten("short", 40), "short");
        assert_eq!(
            shorten("lockscope_demo::orders::wait_for_signal", 35),
            "lockscope_demo::…::wait_for_signal"
        );
        assert_eq!(
            shorten("lockscope_demo::wait_for_signal", 23),
            "…::wait_for_signal"
        );
    }

    /// A leaf-first line starts at the telling frame and stops at whole frames within the width.
    #[test]
    fn leaf_first_line_starts_at_the_telling_frame() {
        let stack = demo_stack();
        let names: Vec<&str> = stack.iter().map(|f| f.0).collect();
        let line = leaf_first_line(&names, StackStyle::Readable, 60);
        assert!(line.starts_with("take_order_lock <- place_order"), "{line}");
        assert!(line.chars().count() <= 60, "{line}");
        let full = leaf_first_line(&names, StackStyle::Full, 60);
        assert!(full.starts_with("futex_wait <- "));
        assert!(full.contains("AssertUnwindSafe"));
    }

    /// Wrapped text keeps every word, in order, within the width.
    #[test]
    fn wrapped_lines_fit() {
        let text = "who ended the sleeps: not recorded: record with --probes futex,offcpu; so \
                    contention is told by the kind";
        let wrapped = wrap(text, "  ", "    ", 30);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 30),
            "{wrapped}"
        );
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("    ")));
        let words: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
        // Spacing within a line is kept, and a unit stays with its number.
        assert_eq!(
            wrap("A    a.lsp: over 1.20 s, 9 waits", "  ", "    ", 26),
            "  A    a.lsp: over 1.20 s,\n    9 waits"
        );
        // Where a number and its unit do not fit, both go to the next line: no line overflows.
        let held = wrap(
            "held by: rustc (53.6 ms), lockscope (48.1 ms)",
            "",
            "  ",
            24,
        );
        assert!(held.lines().all(|l| l.chars().count() <= 24), "{held}");
        assert_eq!(held, "held by: rustc\n  (53.6 ms), lockscope\n  (48.1 ms)");
    }

    /// docs/FRAMES.md lists every generic wait wrapper and every word of a folded line, so that
    /// what the page says is folded and skipped is what the code does.
    #[test]
    fn the_rules_are_documented() {
        let doc = include_str!("../../../docs/FRAMES.md");
        for wrapper in WAIT_WRAPPERS {
            assert!(
                doc.contains(&format!("`{wrapper}`")),
                "{wrapper} is not in FRAMES.md"
            );
        }
        for rule in RUNTIME {
            assert!(
                doc.contains(rule.label),
                "{} is not in FRAMES.md",
                rule.label
            );
            let pattern = match rule.matches {
                Match::Name(p) | Match::Contains(p) | Match::File(p) => p,
            };
            let bare = pattern.trim_start_matches(':');
            assert!(doc.contains(bare), "{pattern} is not in FRAMES.md");
        }
    }

    /// Threads are merged by group and the list fits its room.
    #[test]
    fn thread_lists_merge_groups_and_fit() {
        let names = [
            "mutex-waiter-4",
            "mutex-waiter-3",
            "mutex-waiter-2",
            "mutex-waiter-1",
            "main",
        ];
        assert_eq!(thread_list(&names, 40), "mutex-waiter-* ×4, main");
        assert_eq!(thread_list(&["worker-1"], 40), "worker-1");
        let many: Vec<String> = (0..20).map(|i| format!("pool{i}-worker")).collect();
        let cut = thread_list(&["a-very-long-thread-name", "b-other", "c-third"], 40);
        assert_eq!(cut, "a-very-long-thread-name and 2 more");
        assert!(cut.ends_with("more"), "{cut}");
        assert_eq!(thread_list(&many, 40), "pool*-worker ×20");
    }
}
