//! Entry points of the cargo-fuzz target `unwind_table` (`ebpf/fuzz/`), built only with the
//! `fuzzing` feature: not an API. They run the paths every file a traced process maps goes
//! through (the ELF reader, the CFI table builder, the page index, the cache's encoding, the
//! symbolizer) on arbitrary bytes, without the recorder's panic guard, so that a panic is a
//! finding, and check what must hold of whatever they build.

use crate::unwind::fuzzing as unwind;
use lockscope_probes::symbols::file_frame;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `image` as an ELF file of a traced process: its headers, build-id and needed libraries, its
/// unwind table (rows sorted, page index consistent, a cache entry that decodes to the same
/// table), then its symbols at a few file offsets.
pub fn unwind_table(image: &[u8]) {
    let offsets = unwind::check_image(image);
    guarded_symbolize(image, &offsets);
}

/// Where a panic in blazesym is written down (`file:line` and the input's size, one a line)
/// instead of failing the target: the recorder's symbolizer runs blazesym behind a panic guard
/// (a panic costs that file's symbols), so it is a finding for blazesym, not a failure of
/// lockscope. A panic anywhere else still fails the target.
pub const GUARDED_PANICS_ENV: &str = "LOCKSCOPE_FUZZ_GUARDED_PANICS";

fn guarded_symbolize(image: &[u8], offsets: &[u64]) {
    use std::sync::Mutex;
    static LOCATION: Mutex<Option<String>> = Mutex::new(None);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut location) = LOCATION.lock() {
            *location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()));
        }
    }));
    let result = std::panic::catch_unwind(|| symbolize(image, offsets));
    std::panic::set_hook(previous);
    if result.is_ok() {
        return;
    }
    let location = LOCATION
        .lock()
        .ok()
        .and_then(|l| l.clone())
        .unwrap_or_default();
    if !location.contains("/blazesym-") {
        eprintln!("panic at {location}");
        std::process::abort();
    }
    if let Some(path) = std::env::var_os(GUARDED_PANICS_ENV) {
        if let Ok(mut log) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = writeln!(log, "{location} {} bytes", image.len());
        }
    }
}

/// Symbolizes `offsets` of `image`, as the recorder does: through `/proc/self/fd/N` of the file
/// (here a memfd holding the image), with a symbolizer of its own (blazesym caches by path).
fn symbolize(image: &[u8], offsets: &[u64]) {
    // SAFETY: memfd_create takes a NUL-terminated name; a descriptor it returns is ours.
    let fd = unsafe { libc::memfd_create(c"lockscope-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return;
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    if file.write_all(image).is_err() {
        return;
    }
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let symbolizer = blazesym::symbolize::Symbolizer::new();
    for (i, &offset) in offsets.iter().enumerate() {
        let frame = file_frame(&symbolizer, &path, offset, None, offset, i > 0);
        assert_eq!(frame.module_offset, Some(offset));
    }
}
