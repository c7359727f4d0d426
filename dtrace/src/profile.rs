//! Parsed output into a [`Profile`].

use crate::bottleneck::StreamResult;
use crate::catalog::{self, TargetOs};
use crate::parse::{self, GenericRecord, LockscopeRecord, Output, ParsedFrame, Record, Value};
use crate::Error;
use lockscope_probes::bottleneck::{Blame, BottleneckAnalysis, Hop, Root};
use lockscope_probes::{
    AddressSpace, Frame, Metadata, Profile, Stack, StackId, ThreadInfo, WaitKind, WaitRecord,
    WaitStats,
};
use std::collections::{BTreeMap, HashMap};

/// Probe name given to records of generic aggregations (not lockscope's own script).
pub const GENERIC_PROBE: &str = "dtrace";

/// Interns stacks by their frame text. [`lockscope_probes::StackInterner`] keys by address, and
/// frames parsed from text have none.
#[derive(Default)]
struct TextInterner {
    stacks: Vec<Stack>,
    index: HashMap<TextStackKey, StackId>,
}

/// Kernel or not, then each frame's text and annotation.
type TextStackKey = (bool, Vec<(String, Option<String>)>);

/// Turns a user frame's text into a [`Frame`] when something knows better than the text (the
/// Linux recorder's own symbolizer, from the target's mappings); `None` keeps
/// [`parse::parse_frame`]'s reading.
pub type FrameResolver<'a> = &'a dyn Fn(&ParsedFrame) -> Option<Frame>;

/// The frame of `f`: the resolver's, else the text's.
fn frame_of(f: &ParsedFrame, resolve: FrameResolver<'_>) -> Frame {
    let mut frame = resolve(f).unwrap_or_else(|| parse::parse_frame(&f.text));
    if frame.annotation.is_none() {
        frame.annotation = f.annotation.clone();
    }
    frame
}

impl TextInterner {
    fn intern(
        &mut self,
        space: AddressSpace,
        frames: &[ParsedFrame],
        limit: Option<u32>,
        resolve: FrameResolver<'_>,
    ) -> StackId {
        let key = (
            space == AddressSpace::Kernel,
            frames
                .iter()
                .map(|f| (f.text.clone(), f.annotation.clone()))
                .collect::<Vec<_>>(),
        );
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        self.stacks.push(Stack {
            space,
            frames: frames
                .iter()
                .map(|f| match space {
                    AddressSpace::User => frame_of(f, resolve),
                    AddressSpace::Kernel => Frame {
                        annotation: f.annotation.clone(),
                        ..parse::parse_frame(&f.text)
                    },
                })
                .collect(),
            truncated: limit.is_some_and(|limit| frames.len() >= limit as usize),
        });
        self.index.insert(key, id);
        id
    }
}

/// Module names of kernels' frames, to tell a lone kernel stack from a user one.
fn is_kernel_module(module: &str) -> bool {
    matches!(module, "unix" | "genunix" | "kernel" | "mach_kernel")
        || module.starts_with("kernel.")
        || module.ends_with(".ko")
}

fn looks_like_kernel_stack(frames: &[ParsedFrame]) -> bool {
    frames.iter().any(|f| {
        f.text
            .split_once('`')
            .is_some_and(|(module, _)| is_kernel_module(module))
    })
}

fn clamp(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Symbols of a stack, leaf first, without their module, for [`WaitKind::classify_user_wait`].
fn symbols(frames: &[ParsedFrame], resolve: FrameResolver<'_>) -> Vec<String> {
    frames
        .iter()
        .map(|f| {
            let name = frame_of(f, resolve).display_name();
            name.split_once('`')
                .map_or(name.clone(), |(_, symbol)| symbol.to_string())
        })
        .collect()
}

/// The names of the probes whose records [`resolve_kind`] decodes by name, from their
/// descriptors, as constants a `match` arm can take.
const FUTEX: &str = lockscope_probes::catalog::FUTEX.name;
const MUTEX_HOLD: &str = lockscope_probes::catalog::MUTEX_HOLD.name;

/// The category and decoded operation of a lockscope record.
fn resolve_kind(record: &LockscopeRecord, resolve: FrameResolver<'_>) -> (WaitKind, String) {
    let by_stack = |fallback: WaitKind| {
        let names = symbols(&record.user_stack, resolve);
        WaitKind::classify_user_wait(names.iter().map(String::as_str), fallback)
    };
    // Holds are holds whatever the script said: scripts before the `hold` kind wrote `mutex`.
    if record.probe == MUTEX_HOLD {
        return (WaitKind::Hold, record.op.clone());
    }
    if record.kind != "auto" {
        let kind = WaitKind::ALL
            .into_iter()
            .find(|k| k.name() == record.kind)
            .unwrap_or(WaitKind::Wait);
        return (kind, record.op.clone());
    }
    match record.probe.as_str() {
        FUTEX => {
            // `op/ctx`: the futex op, and the libc entry point it ran under (0: none).
            let (op, ctx) = record.op.split_once('/').unwrap_or((&record.op, "0"));
            let op: u64 = op.parse().unwrap_or(0);
            let names = symbols(&record.user_stack, resolve);
            (
                catalog::futex_kind(op, ctx.parse().unwrap_or(0), &names),
                catalog::futex_op_name(op),
            )
        }
        "umtx" => match record.op.parse().ok().and_then(catalog::decode_umtx_op) {
            Some((name, WaitKind::Wait)) => (by_stack(WaitKind::Wait), name.to_string()),
            Some((name, kind)) => (kind, name.to_string()),
            None => (by_stack(WaitKind::Wait), format!("_umtx_op({})", record.op)),
        },
        "ulock" => {
            let (function, op) = record.op.split_once('/').unwrap_or((&record.op, "0"));
            let (name, kind) = catalog::decode_ulock_op(op.parse().unwrap_or(0));
            let kind = if kind == WaitKind::Wait {
                by_stack(WaitKind::Wait)
            } else {
                kind
            };
            (kind, format!("{function} {name}"))
        }
        _ => match catalog::kind_of_operation(&record.op) {
            Some(kind) => (kind, record.op.clone()),
            None => (by_stack(WaitKind::Wait), record.op.clone()),
        },
    }
}

/// Builds a profile from parsed output.
///
/// lockscope records keep their probe, category, thread, object and statistics. Generic records
/// (a capture's `@[ustack()] = count()` and the like) get probe [`GENERIC_PROBE`] (`dtrace`) and
/// [`WaitKind::Wait`], pid and tid 0, and their value as a **count**: a scalar goes to
/// `WaitStats::count` (negative values become 0) with `total_ns` 0; a histogram goes to
/// `WaitStats::histogram` when it is a `quantize()` (its counts summed into `count`), else only
/// its summed count is kept; a stack traced without a value (the `ustack()` action) counts 1.
/// Text and number keys become the record's `operation` (joined by a
/// space); stacks: with two groups the first is the kernel stack and the second the user stack;
/// a lone group is a kernel stack when its modules are a kernel's (`unix`, `genunix`, `kernel`,
/// `mach_kernel`, `*.ko`), else a user stack.
///
/// `ustack_frames` marks stacks with that many frames as truncated.
pub fn to_profile(output: &Output, os: Option<TargetOs>, ustack_frames: Option<u32>) -> Profile {
    to_profile_with(output, os, ustack_frames, &|_| None)
}

/// [`to_profile`] with user frames read by `resolve` where it knows them (the Linux recorder
/// symbolizes addresses itself from the target's mappings): the categories that depend on the
/// user stack are decided on the resolved names.
pub fn to_profile_with(
    output: &Output,
    os: Option<TargetOs>,
    ustack_frames: Option<u32>,
    resolve: FrameResolver<'_>,
) -> Profile {
    to_profile_streamed(output, os, ustack_frames, resolve, None)
}

/// [`to_profile_with`] and the bottleneck stream's analysis ([`crate::bottleneck`]): its blame with
/// stacks interned beside the records' (`Profile::bottleneck`), the threads' times and names.
pub(crate) fn to_profile_streamed(
    output: &Output,
    os: Option<TargetOs>,
    ustack_frames: Option<u32>,
    resolve: FrameResolver<'_>,
    stream: Option<StreamResult>,
) -> Profile {
    let mut interner = TextInterner::default();
    let mut waits = Vec::new();
    // A thread's names by how many of its events carry each: a thread runs under its creator's
    // name until it names itself, so the few events of those moments must not name it.
    let mut names: BTreeMap<(u32, u32), BTreeMap<String, u64>> = BTreeMap::new();
    let os_name = os
        .map(TargetOs::name)
        .or_else(|| {
            output
                .begin
                .iter()
                .find(|(k, _)| k == "os")
                .map(|(_, v)| v.as_str())
        })
        .unwrap_or_default()
        .to_string();
    for record in &output.records {
        match record {
            Record::Lockscope(r) => {
                *names
                    .entry((r.pid, r.tid))
                    .or_default()
                    .entry(r.thread.clone())
                    .or_default() += clamp(r.count).max(1);
                waits.push(lockscope_wait(r, &mut interner, ustack_frames, resolve));
            }
            Record::Generic(r) => waits.push(generic_wait(r, &mut interner)),
        }
    }
    let mut threads = named_threads(names);
    let mut bottleneck = None;
    let mut thread_times = Vec::new();
    if let Some(stream) = stream {
        for (thread, name) in &stream.names {
            if !threads
                .iter()
                .any(|t| t.pid == thread.pid && t.tid == thread.tid)
            {
                threads.push(ThreadInfo {
                    pid: thread.pid,
                    tid: thread.tid,
                    name: name.clone(),
                });
            }
        }
        thread_times = stream.thread_times.clone();
        bottleneck = Some(streamed_bottleneck(
            stream,
            &mut interner,
            ustack_frames,
            resolve,
        ));
    }
    threads.sort_by_key(|t| (t.pid, t.tid));
    let events = waits
        .iter()
        .fold(0u64, |sum, w| sum.saturating_add(w.stats.count));
    let mut profile = Profile {
        metadata: Metadata {
            lockscope_version: env!("CARGO_PKG_VERSION").to_string(),
            backend: "dtrace".to_string(),
            os: os_name,
            events,
            ..Metadata::default()
        },
        threads,
        stacks: interner.stacks,
        waits,
        thread_times,
        bottleneck,
        ..Profile::default()
    };
    // A futex sleep `offcpu` saw is `mutex`, `condvar`... as on the eBPF backend.
    lockscope_probes::overlap::classify_offcpu_sleeps(&mut profile);
    profile
}

/// One of lockscope's own records as a wait of the profile, its stacks interned.
fn lockscope_wait(
    r: &LockscopeRecord,
    interner: &mut TextInterner,
    ustack_frames: Option<u32>,
    resolve: FrameResolver<'_>,
) -> WaitRecord {
    let (kind, operation) = resolve_kind(r, resolve);
    let user_stack =
        Some(interner.intern(AddressSpace::User, &r.user_stack, ustack_frames, resolve));
    let kernel_stack = r
        .kernel_stack
        .as_ref()
        .map(|frames| interner.intern(AddressSpace::Kernel, frames, None, resolve));
    let stats = WaitStats {
        count: clamp(r.count),
        total_ns: r.total_ns.map_or(0, clamp),
        max_ns: r.max_ns.map_or(0, clamp),
        histogram: r
            .histogram
            .as_ref()
            .and_then(parse::Distribution::to_log2)
            .unwrap_or_default(),
    };
    WaitRecord {
        probe: r.probe.clone(),
        kind,
        pid: r.pid,
        tid: r.tid,
        object: r.object,
        operation,
        user_stack,
        kernel_stack,
        woken_by: None,
        stats,
    }
}

/// Each thread named by the name most of its events carry (ties: the first by name).
fn named_threads(names: BTreeMap<(u32, u32), BTreeMap<String, u64>>) -> Vec<ThreadInfo> {
    names
        .into_iter()
        .filter_map(|((pid, tid), by_name)| {
            let name = by_name
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?
                .0;
            Some(ThreadInfo { pid, tid, name })
        })
        .collect()
}

/// The stream's blame in profile terms: stacks interned (user frames read by `resolve`), calls
/// named.
fn streamed_bottleneck(
    stream: StreamResult,
    interner: &mut TextInterner,
    ustack_frames: Option<u32>,
    resolve: FrameResolver<'_>,
) -> BottleneckAnalysis {
    let mut ids: HashMap<u32, StackId> = HashMap::new();
    let mut stack = |handle: Option<u32>| -> Option<StackId> {
        let handle = handle?;
        if let Some(&id) = ids.get(&handle) {
            return Some(id);
        }
        let (space, frames) = stream.stacks.get(handle as usize)?;
        let limit = (*space == AddressSpace::User)
            .then_some(ustack_frames)
            .flatten();
        let id = interner.intern(*space, frames, limit, resolve);
        ids.insert(handle, id);
        Some(id)
    };
    let call = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| stream.calls.get(i).cloned())
    };
    let mut blame: Vec<Blame> = stream
        .blame
        .into_iter()
        .map(|b| Blame {
            thread: b.wait.thread,
            part: b.wait.part,
            call: call(b.wait.call),
            object: b.wait.object,
            user_stack: stack(b.wait.user_stack),
            kernel_stack: stack(b.wait.kernel_stack),
            woken_by: b.wait.woken_by,
            waker: b.wait.waker,
            root: Root {
                kind: b.root.kind,
                thread: b.root.thread,
                call: call(b.root.call),
                user_stack: stack(b.root.user_stack),
                kernel_stack: stack(b.root.kernel_stack),
                woken_by: b.root.woken_by,
                waker_name: b.root.waker_name,
                holder: b.root.holder,
                holder_name: b.root.holder_name,
            },
            depth: b.depth,
            chain: b
                .chain
                .into_iter()
                .map(|(thread, s)| Hop {
                    thread,
                    user_stack: stack(s),
                })
                .collect(),
            waits: b.waits,
            total_ns: b.total_ns,
        })
        .collect();
    blame.sort_by_key(|b| std::cmp::Reverse(b.total_ns));
    BottleneckAnalysis {
        max_depth: stream.limits.max_depth,
        history_ns: stream.limits.history_ns,
        intervals: stream.counts.intervals,
        lost_intervals: stream.counts.lost_intervals,
        spurious_wakeups: stream.counts.spurious_wakeups,
        spurious_wakeup_ns: stream.counts.spurious_wakeup_ns,
        stackless_ns: stream.counts.stackless_ns,
        blame,
        sampled: Vec::new(),
    }
}

fn generic_wait(r: &GenericRecord, interner: &mut TextInterner) -> WaitRecord {
    let (kernel, user): (Option<&[ParsedFrame]>, Option<&[ParsedFrame]>) = match r.stacks.as_slice()
    {
        [] => (None, None),
        [only] if looks_like_kernel_stack(only) => (Some(only), None),
        [only] => (None, Some(only)),
        [kernel, user, ..] => (Some(kernel), Some(user)),
    };
    let stats = match &r.value {
        Value::Scalar(v) => WaitStats {
            count: clamp(*v),
            ..WaitStats::default()
        },
        Value::Traced => WaitStats {
            count: 1,
            ..WaitStats::default()
        },
        Value::Distribution(d) => match d.to_log2() {
            Some(histogram) => WaitStats {
                count: histogram.total_count(),
                histogram,
                ..WaitStats::default()
            },
            None => WaitStats {
                count: clamp(d.total()),
                ..WaitStats::default()
            },
        },
    };
    WaitRecord {
        probe: GENERIC_PROBE.to_string(),
        kind: WaitKind::Wait,
        pid: 0,
        tid: 0,
        object: 0,
        operation: r.keys.join(" "),
        user_stack: user.map(|f| interner.intern(AddressSpace::User, f, None, &|_| None)),
        kernel_stack: kernel.map(|f| interner.intern(AddressSpace::Kernel, f, None, &|_| None)),
        woken_by: None,
        stats,
    }
}

/// Imports DTrace output captured elsewhere (`dtrace -n '... { @[ustack()] = count(); }' -o
/// out.txt`, as FlameGraph's README makes them, or the output of a lockscope script).
///
/// See [`to_profile`] for how generic records map onto the model: probe `dtrace`, kind `wait`,
/// the aggregated value in `WaitStats::count`, `total_ns` 0. `os` only fills the metadata.
/// Errors with [`Error::NotDtraceOutput`] when the input has text but nothing DTrace prints.
pub fn import_capture(bytes: &[u8], os: Option<TargetOs>) -> Result<Profile, Error> {
    let output = parse::parse_output(bytes);
    let recognized = !output.records.is_empty()
        || output.header_lines > 0
        || !output.begin.is_empty()
        || output.done;
    let has_text = bytes.iter().any(|b| !b.is_ascii_whitespace());
    if has_text && !recognized {
        return Err(Error::NotDtraceOutput {
            reason: format!(
                "{} lines of text without a stack, a count or a DTrace header",
                output.skipped_lines
            ),
        });
    }
    let mut profile = to_profile(&output, os, None);
    profile.metadata.end_reason = "imported".to_string();
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mutex-hold probe's records are holds, whether the script said `kind=hold` or, as
    /// scripts before the `hold` kind did, `kind=mutex`.
    #[test]
    fn mutex_hold_records_are_holds() {
        for kind in ["hold", "mutex"] {
            let text = format!(
                "\n=== lockscope record probe=mutex-hold kind={kind}\n\
                 === key op=hold pid=42 tid=43 object=0x1000\n\
                 === thread worker\n\
                 === ustack\n              libc.so.1`mutex_unlock+0x10\n\n\
                 === count 2\n=== total_ns 500\n=== max_ns 300\n=== histogram\n=== end\n"
            );
            let output = crate::parse::parse_output(text.as_bytes());
            let profile = to_profile(&output, Some(TargetOs::Illumos), None);
            let kinds: Vec<WaitKind> = profile.waits.iter().map(|w| w.kind).collect();
            assert_eq!(kinds, [WaitKind::Hold], "kind={kind}");
            assert_eq!(profile.waits[0].stats.total_ns, 500);
        }
    }
}
