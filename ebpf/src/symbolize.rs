//! Turning captured stack addresses into [`Frame`]s.
//!
//! Kernel stacks go through kallsyms. User stacks never go through the live process: each
//! address is resolved with the `/proc/PID/maps` snapshots of [`MapsCache`] into a mapped file and
//! a file offset, and symbolized from that file (kept open by the cache), so stacks of a target
//! that exited before the recording ended still get their names. Those files are the traced
//! program's: blazesym reads them on a guarded worker thread, where one that makes it fail or
//! hang costs its own symbols only (`GuardedFiles`).

use crate::procmaps::MapsCache;
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use lockscope_probes::symbols::{frame_from_sym, try_file_frame, UnreadableSymbols};
use lockscope_probes::Frame;
use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

/// Module name of kernel frames.
const KERNEL_MODULE: &str = "[kernel]";

/// Function-name prefixes of the tracing machinery that runs our BPF program: these frames are
/// lockscope's own, not the target's.
const BPF_FRAME_PREFIXES: &[&str] = &[
    "bpf_prog_",
    "bpf_trampoline_",
    "__bpf_trace_",
    "bpf_trace_run",
];

/// Functions where a user stack legitimately ends (thread and process entry points). A stack
/// whose outermost frame is anything else was cut short by the unwinder.
const USER_STACK_ROOTS: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "__clone",
    "clone3",
    "__clone3",
    "__clone_internal",
    "thread_start",
];

/// Longest a file's symbols may take to look up one address (the first lookup parses the
/// file's symbol tables and DWARF: seconds for a large binary with debug information).
const FILE_DEADLINE: Duration = Duration::from_secs(30);

/// Symbolizes stacks for one recording.
pub struct StackSymbolizer {
    symbolizer: Symbolizer,
    kernel: Source<'static>,
    /// Looks up user frames in the traced processes' files.
    files: GuardedFiles,
}

/// blazesym behind a guard, for the files a traced process maps, which it controls: each lookup
/// runs on a worker thread, and a file that makes blazesym panic, or take longer than
/// [`FILE_DEADLINE`] (a hostile debug link can name a FIFO, which blocks its open), costs only
/// its own symbols. Its frames stay addresses (module and offset), it is named in
/// [`GuardedFiles::failures`], and the next lookup gets a fresh worker (a stuck one is left
/// behind: a thread cannot be stopped).
struct GuardedFiles {
    worker: Option<Worker>,
    /// Frames found, by file, address, offset in the file and whether it is a return address
    /// (all that a lookup reads): the stacks of one
    /// program share most of their frames (its thread entry, its request loop), and each
    /// lookup is a round trip to the worker thread (two context switches).
    found: HashMap<(PathBuf, u64, u64, bool), Frame>,
    /// Files given up on, by path: their frames are not looked up again.
    failed: HashSet<PathBuf>,
    failures: Vec<String>,
}

/// A lookup: the file, the frame's address, its module and offset in the file, whether it is
/// a return address.
struct Lookup {
    path: PathBuf,
    address: u64,
    module: Option<String>,
    file_offset: u64,
    is_return: bool,
}

struct Worker {
    lookups: Sender<Lookup>,
    /// A frame, or why the file cannot be read (blazesym's error, or its panic).
    frames: Receiver<Result<Frame, FileFailure>>,
}

impl Worker {
    fn start() -> Option<Worker> {
        let (lookups, inbox) = channel::<Lookup>();
        let (outbox, frames) = channel();
        std::thread::Builder::new()
            .name("lks-symbolize".into())
            .spawn(move || {
                let mut symbolizer = Symbolizer::new();
                for lookup in inbox {
                    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        try_file_frame(
                            &symbolizer,
                            &lookup.path,
                            lookup.address,
                            lookup.module.clone(),
                            lookup.file_offset,
                            lookup.is_return,
                        )
                        .map_err(FileFailure::from)
                    }))
                    .unwrap_or_else(|panic| {
                        // Whatever it cached of that file may be half-built.
                        symbolizer = Symbolizer::new();
                        Err(FileFailure::Panicked(panic_message(&*panic)))
                    });
                    if outbox.send(result).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Worker { lookups, frames })
    }
}

/// Why a file's symbols could not be used: its frames are addresses, and the file is named in
/// [`StackSymbolizer::failures`] with this.
#[derive(Debug, thiserror::Error)]
enum FileFailure {
    /// blazesym could not parse it.
    #[error(transparent)]
    Unreadable(#[from] UnreadableSymbols),
    /// blazesym panicked on it.
    #[error("the symbolizer failed on it ({0})")]
    Panicked(String),
    /// blazesym took too long on one of its addresses.
    #[error("the symbolizer took more than {} s on one address", FILE_DEADLINE.as_secs())]
    Timeout,
    /// The symbolizer's thread ended.
    #[error("the symbolizer's thread is gone")]
    Gone,
}

/// What a panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

impl GuardedFiles {
    fn new() -> Self {
        GuardedFiles {
            worker: None,
            found: HashMap::new(),
            failed: HashSet::new(),
            failures: Vec::new(),
        }
    }

    /// The frame of `lookup`, or `None` when its file failed (now or before).
    fn frame(&mut self, lookup: Lookup, name: &str) -> Option<Frame> {
        if self.failed.contains(&lookup.path) {
            return None;
        }
        let key = (
            lookup.path.clone(),
            lookup.address,
            lookup.file_offset,
            lookup.is_return,
        );
        if let Some(frame) = self.found.get(&key) {
            return Some(frame.clone());
        }
        if self.worker.is_none() {
            self.worker = Worker::start();
        }
        let worker = self.worker.as_ref()?;
        let path = lookup.path.clone();
        let why = match worker.lookups.send(lookup) {
            Err(_) => FileFailure::Gone,
            Ok(()) => match worker.frames.recv_timeout(FILE_DEADLINE) {
                Ok(Ok(frame)) => {
                    self.found.insert(key, frame.clone());
                    return Some(frame);
                }
                Ok(Err(why)) => why,
                Err(RecvTimeoutError::Timeout) => {
                    // Left behind, still stuck: its answer would come for the wrong lookup.
                    self.worker = None;
                    FileFailure::Timeout
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.worker = None;
                    FileFailure::Gone
                }
            },
        };
        self.failed.insert(path);
        self.failures.push(format!("{name}: {why}"));
        None
    }
}

impl Default for StackSymbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl StackSymbolizer {
    /// A symbolizer with source locations, inlined functions and demangling.
    pub fn new() -> Self {
        let kernel = Kernel {
            // kallsyms only: searching for a vmlinux image is slow and rarely finds one.
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        Self {
            symbolizer: Symbolizer::new(),
            kernel: Source::Kernel(kernel),
            files: GuardedFiles::new(),
        }
    }

    /// Files whose symbols could not be read (blazesym failed on them, or took too long), with
    /// why: their frames are addresses.
    pub fn failures(&self) -> &[String] {
        &self.files.failures
    }

    /// Kernel frames of `addresses` (leaf first), without the BPF tracing machinery's frames.
    pub fn kernel_frames(&self, addresses: &[u64]) -> Vec<Frame> {
        let symbolized = self
            .symbolizer
            .symbolize(&self.kernel, Input::AbsAddr(addresses))
            .unwrap_or_default();
        addresses
            .iter()
            .enumerate()
            .map(|(i, &address)| {
                let mut frame = match symbolized.get(i) {
                    Some(Symbolized::Sym(sym)) => frame_from_sym(address, sym, 0),
                    _ => Frame::unsymbolized(address),
                };
                frame.module = Some(KERNEL_MODULE.to_owned());
                frame
            })
            .filter(|frame| !is_bpf_frame(frame))
            .collect()
    }

    /// User frames of `addresses` (leaf first) of process `pid`.
    pub fn user_frames(&mut self, maps: &MapsCache, pid: u32, addresses: &[u64]) -> Vec<Frame> {
        addresses
            .iter()
            .enumerate()
            .map(|(i, &address)| self.user_frame(maps, pid, address, i > 0))
            .collect()
    }

    fn user_frame(&mut self, maps: &MapsCache, pid: u32, address: u64, is_return: bool) -> Frame {
        let mut frame = Frame::unsymbolized(address);
        let Some(mapping) = maps.resolve(pid, address) else {
            return frame;
        };
        let module_offset = mapping.file_offset(address);
        frame.module = mapping.module_name();
        frame.module_offset = Some(module_offset);
        let Some(path) = mapping.readable_path() else {
            return frame;
        };
        let lookup = Lookup {
            path,
            address,
            module: frame.module.clone(),
            file_offset: module_offset,
            is_return,
        };
        self.files.frame(lookup, &mapping.path).unwrap_or(frame)
    }
}

/// True when the frame belongs to the BPF tracing machinery rather than to the traced thread.
fn is_bpf_frame(frame: &Frame) -> bool {
    frame
        .function
        .as_deref()
        .is_some_and(|f| BPF_FRAME_PREFIXES.iter().any(|p| f.starts_with(p)))
}

/// True when a user stack ends (outermost frame) in a known entry point.
pub fn user_stack_complete(frames: &[Frame]) -> bool {
    frames
        .last()
        .and_then(|f| f.function.as_deref())
        .is_some_and(|f| USER_STACK_ROOTS.contains(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function_for_symbolization() -> u64 {
        std::hint::black_box(42)
    }

    /// A function of this test binary symbolizes by name from a maps snapshot and file offset.
    #[test]
    fn symbolizes_own_function_from_snapshot() {
        let mut maps = MapsCache::new();
        let pid = std::process::id();
        assert!(maps.snapshot(pid));
        let address = marker_function_for_symbolization as fn() -> u64 as usize as u64;
        let mut symbolizer = StackSymbolizer::new();
        let frames = symbolizer.user_frames(&maps, pid, &[address + 1]);
        assert!(symbolizer.failures().is_empty());
        let function = frames[0].function.as_deref().expect("symbolized");
        assert!(
            function.ends_with("marker_function_for_symbolization"),
            "got {function}"
        );
        assert_eq!(frames[0].function_offset, Some(1));
        assert!(frames[0].module.is_some());
    }

    /// Frames of the BPF machinery are recognized by name.
    #[test]
    fn bpf_frames_recognized() {
        let mut frame = Frame::unsymbolized(1);
        frame.function = Some("bpf_prog_6deef7357e7b4530_lks_exit_btf".into());
        assert!(is_bpf_frame(&frame));
        frame.function = Some("do_syscall_64".into());
        assert!(!is_bpf_frame(&frame));
        assert!(!is_bpf_frame(&Frame::unsymbolized(1)));
    }
}
