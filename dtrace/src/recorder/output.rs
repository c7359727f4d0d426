//! dtrace's output: its stdout fed to the parser (and the bottleneck stream), the pipe of its own
//! it writes to when a `-c` command shares its stdout, and its stderr lines.

use crate::bottleneck::BottleneckStream;
use crate::parse::{Output, Parser};
use crate::Error;
use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What dtrace's stdout has shown so far.
#[derive(Default)]
pub(super) struct StdoutFlags {
    /// The script's `=== lockscope begin` line (its BEGIN clause: every probe is enabled).
    pub(super) began: AtomicBool,
    /// The `=== lockscope done` line (the end of END: every aggregation is printed).
    pub(super) done: AtomicBool,
}

/// Feeds dtrace's stdout to the parser and sets `flags` on the script's begin and done lines;
/// with `echo`, lines between `BEGIN` and END's first record (a `-c` command's output) go to
/// lockscope's stdout instead.
pub(super) fn read_stdout(
    stdout: Option<impl Read>,
    flags: &StdoutFlags,
    echo: bool,
    mut stream: Option<BottleneckStream>,
) -> (Output, Option<BottleneckStream>) {
    let mut parser = Parser::new();
    let mut in_end = false;
    if let Some(stdout) = stdout {
        for_each_line(stdout, |line| {
            let content = line.strip_suffix(b"\n").unwrap_or(line);
            if content == &OUTPUT_EOF[1..OUTPUT_EOF.len() - 1] {
                return ControlFlow::Break(());
            }
            if content.starts_with(b"=== lockscope begin") {
                flags.began.store(true, Ordering::Release);
            }
            // The bottleneck stream's lines, as they come (never the target's output, never a
            // record of END).
            if let Some(stream) = stream.as_mut() {
                if stream.feed_line(&String::from_utf8_lossy(content)) {
                    return ControlFlow::Continue(());
                }
            }
            in_end |= content.starts_with(b"=== lockscope record")
                || content.starts_with(b"=== lockscope done");
            // Empty lines are not passed on: dtrace prints one itself when
            // interrupted, before END (the command's own empty lines are lost).
            if echo
                && !in_end
                && !content.is_empty()
                && flags.began.load(Ordering::Relaxed)
                && !content.starts_with(b"=== lockscope begin")
            {
                let mut out = std::io::stdout().lock();
                let _ = std::io::Write::write_all(&mut out, line);
                let _ = std::io::Write::flush(&mut out);
                return ControlFlow::Continue(());
            }
            parser.feed_bytes(content);
            if content.starts_with(b"=== lockscope done") {
                flags.done.store(true, Ordering::Release);
                // Nothing comes after it, and the pipe may stay open for seconds
                // while the kernel tears dtrace's probes down.
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
    }
    (parser.finish(), stream)
}

/// Where dtrace writes its output when it has a pipe of its own (see [`OutputPipe`]).
pub(super) const OUTPUT_FD_PATH: &str = "/dev/fd/3";

/// What the recorder writes into dtrace's output pipe once dtrace has exited: the reader stops
/// there (a `-c` command that outlives dtrace still holds the pipe open).
pub(super) const OUTPUT_EOF: &[u8] = b"\n=== lockscope output ends\n";

/// A pipe for dtrace's output (`-o /dev/fd/3`): its write end becomes dtrace's fd 3, its read
/// end is the recorder's; the recorder keeps a write end too, for [`OUTPUT_EOF`].
pub(super) struct OutputPipe {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
}

impl OutputPipe {
    pub(super) fn new() -> Result<OutputPipe, Error> {
        use std::os::fd::FromRawFd;
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(Error::Process {
                action: "make an output pipe for",
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: pipe just returned these two descriptors, owned by nothing else.
        let (read, write) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        for fd in [&read, &write] {
            use std::os::fd::AsRawFd;
            // SAFETY: fcntl on a descriptor this function owns.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        Ok(OutputPipe { read, write })
    }

    /// Makes the write end fd 3 of the child `command` starts.
    pub(super) fn give_to(&self, command: &mut Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let write = self.write.as_raw_fd();
        // SAFETY: between fork and exec only async-signal-safe calls are made (dup2, fcntl).
        unsafe {
            command.pre_exec(move || {
                if write == 3 {
                    // dup2 onto itself keeps close-on-exec: clear it.
                    if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(write, 3) != 3 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The read end, and the recorder's write end.
    pub(super) fn split(self) -> (std::fs::File, std::fs::File) {
        (
            std::fs::File::from(self.read),
            std::fs::File::from(self.write),
        )
    }
}

/// Passes what a command launched by `dtrace -c` prints on to lockscope's stdout (`echo`), or
/// drains it, when dtrace's own output has a pipe of its own.
pub(super) fn copy_target_output(stdout: impl Read, echo: bool) {
    for_each_line(stdout, |line| {
        if echo {
            let mut out = std::io::stdout().lock();
            let _ = std::io::Write::write_all(&mut out, line);
            let _ = std::io::Write::flush(&mut out);
        }
        ControlFlow::Continue(())
    });
}

/// Collects dtrace's stderr lines into `lines` as they come, so that they can be read before
/// dtrace has exited (see [`DONE_GRACE`](super::supervise::DONE_GRACE)).
pub(super) fn read_stderr(stderr: Option<impl Read>, lines: &Mutex<Vec<String>>) {
    let Some(stderr) = stderr else {
        return;
    };
    for_each_line(stderr, |line| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']);
        if !text.trim().is_empty() {
            if let Ok(mut lines) = lines.lock() {
                lines.push(text.to_string());
            }
        }
        ControlFlow::Continue(())
    });
}

/// Calls `each` with every line `reader` gives as it comes (its `\n` included; the last one may
/// lack it) until the end, a read error (a pipe's reader has nothing better to do), or `each`
/// breaks.
fn for_each_line(reader: impl Read, mut each: impl FnMut(&[u8]) -> ControlFlow<()>) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if each(&line).is_break() {
                    break;
                }
            }
        }
    }
}
