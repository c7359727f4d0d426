//! Turning captured stack addresses into [`Frame`]s.
//!
//! Kernel stacks go through kallsyms. User stacks never go through the live process: each
//! address is resolved with the `/proc/PID/maps` snapshots of [`MapsCache`] into a mapped file and
//! a file offset, and symbolized from that file (kept open by the cache), so stacks of a target
//! that exited before the recording ended still get their names.

use crate::procmaps::MapsCache;
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use lockscope_probes::symbols::{file_frame, frame_from_sym};
use lockscope_probes::Frame;

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

/// Symbolizes stacks for one recording.
pub struct StackSymbolizer {
    symbolizer: Symbolizer,
    kernel: Source<'static>,
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
        }
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
    pub fn user_frames(&self, maps: &MapsCache, pid: u32, addresses: &[u64]) -> Vec<Frame> {
        addresses
            .iter()
            .enumerate()
            .map(|(i, &address)| self.user_frame(maps, pid, address, i > 0))
            .collect()
    }

    fn user_frame(&self, maps: &MapsCache, pid: u32, address: u64, is_return: bool) -> Frame {
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
        file_frame(
            &self.symbolizer,
            &path,
            address,
            frame.module,
            module_offset,
            is_return,
        )
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
        let frames = StackSymbolizer::new().user_frames(&maps, pid, &[address + 1]);
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
