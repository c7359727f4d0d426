//! What both backends' Linux symbolizers share (the eBPF backend's, and the DTrace recorder's on
//! Linux, which symbolizes user frames itself): parsing `/proc/PID/maps` lines, opening the files
//! they name as the process sees them ([`open_in_root`]), and turning a blazesym symbol into a
//! profile [`Frame`]. Linux only; the rest of this crate is OS-neutral.

use crate::profile::{Frame, InlinedFrame};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolized, Symbolizer};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Most symbolic links followed while resolving one path (as the kernel's own limit).
const MAX_LINKS: usize = 40;

/// A line of `/proc/PID/maps`, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The mapping is executable.
    pub executable: bool,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Inode of the mapped file (0: not a file).
    pub inode: u64,
    /// Path (`/usr/lib/x86_64-linux-gnu/libc.so.6`, with ` (deleted)` when it was), pseudo-name
    /// (`[vdso]`), or empty for anonymous memory.
    pub path: &'a str,
}

/// Parses one line of `/proc/PID/maps` (`start-end perms offset dev inode path`); `None` for a
/// malformed line.
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _device = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
    })
}

/// Opens, read-only, the regular file at `path` as process `pid` sees it: resolved inside the
/// process's root (`/proc/PID/root`, its mount namespace and chroot), where an absolute link or
/// `..` stays inside that root as they do for the process itself, and no "magic" link
/// (`/proc/self/...`) is followed. A traced process (a container) controls its files and links:
/// whatever they say, this opens nothing outside its root, and nothing but a regular file (no
/// FIFO to block on, no device to open).
///
/// `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` (Linux 5.6) does the resolution; where it
/// is refused (a seccomp filter answering ENOSYS or EPERM, as container runtimes' default
/// profiles did) the same resolution runs in user space, one component at a time with
/// `O_PATH | O_NOFOLLOW`, links read and resolved against the root, `..` never above it.
/// Reading `/proc/PID/root` needs ptrace access to the process (the same user, or
/// CAP_SYS_PTRACE).
pub fn open_in_root(pid: u32, path: &str) -> io::Result<File> {
    let root = open_path(
        libc::AT_FDCWD,
        &format!("/proc/{pid}/root"),
        libc::O_DIRECTORY,
    )?;
    open_under(&root, path, Resolver::Kernel)
}

/// Who resolves a path in a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolver {
    /// openat2, and user space where the kernel refuses it.
    Kernel,
    /// User space only (the tests check it gives what openat2 gives).
    #[cfg(test)]
    UserSpace,
}

/// [`open_in_root`] with the root given as a directory descriptor.
fn open_under(root: &OwnedFd, path: &str, resolver: Resolver) -> io::Result<File> {
    let relative = path.trim_start_matches('/');
    if relative.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    }
    let found = match resolver {
        Resolver::Kernel => match openat2_in_root(root, relative) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                resolve_in_root(root, relative)?
            }
            other => other?,
        },
        #[cfg(test)]
        Resolver::UserSpace => resolve_in_root(root, relative)?,
    };
    reopen_regular_file(&found)
}

/// `openat(dir, path, O_PATH | O_CLOEXEC | flags)`.
fn open_path(dir: libc::c_int, path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: openat reads a NUL-terminated path; a descriptor it returns is ours alone.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `relative` under `root` by openat2, as an O_PATH descriptor (a rename racing with a `..`
/// makes the kernel answer EAGAIN: tried again a few times).
fn openat2_in_root(root: &OwnedFd, relative: &str) -> io::Result<OwnedFd> {
    let path = CString::new(relative).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain integers, valid zeroed (mode 0).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    for _ in 0..8 {
        // SAFETY: openat2 reads the NUL-terminated path and `how` (its size given), both
        // alive for the call; a descriptor it returns is ours alone.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a fresh descriptor nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EAGAIN) {
            return Err(error);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// What openat2's RESOLVE_IN_ROOT does, in user space: `relative` walked from `root` one
/// component at a time, never following anything by itself (`O_PATH | O_NOFOLLOW`); a link's
/// target is read and walked in its place (from `root` when absolute), `..` goes back along the
/// directories walked and never above `root`. Without RESOLVE_NO_MAGICLINKS there is nothing to
/// stop at a magic link by kind, but none is followed: every link is read as text and resolved
/// here, and `/proc/self/...` inside the root means the process's own procfs if it has one.
fn resolve_in_root(root: &OwnedFd, relative: &str) -> io::Result<OwnedFd> {
    // The directories walked so far, the root first (`..` pops, never the root).
    let mut walked: Vec<OwnedFd> = vec![open_path(root.as_raw_fd(), ".", libc::O_DIRECTORY)?];
    let mut pending: Vec<String> = components(relative);
    pending.reverse();
    let mut links = 0;
    while let Some(name) = pending.pop() {
        let here = walked.last().map_or(root.as_raw_fd(), |d| d.as_raw_fd());
        match name.as_str() {
            "." => continue,
            ".." => {
                if walked.len() > 1 {
                    walked.pop();
                }
                continue;
            }
            _ => {}
        }
        let fd = open_path(here, &name, libc::O_NOFOLLOW)?;
        let meta = File::from(fd.try_clone()?).metadata()?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = read_link_at(here, &name)?;
            if target.starts_with('/') {
                walked.truncate(1);
            }
            pending.extend(components(&target).into_iter().rev());
        } else if pending.is_empty() {
            return Ok(fd);
        } else if meta.is_dir() {
            walked.push(fd);
        } else {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
    }
    // The path named a directory (or the root itself): not a file.
    Err(io::Error::from_raw_os_error(libc::EISDIR))
}

/// The non-empty components of a path.
fn components(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The target of link `name` in directory `dir`.
fn read_link_at(dir: libc::c_int, name: &str) -> io::Result<String> {
    let name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf, which lives for the call.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    String::from_utf8(buf).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// A readable descriptor of the regular file `found` (an O_PATH descriptor) refers to, opened
/// through `/proc/self/fd/N` (this process's own descriptor: the very file, no path resolved
/// again); anything but a regular file is refused before it is opened.
fn reopen_regular_file(found: &OwnedFd) -> io::Result<File> {
    let meta = File::from(found.try_clone()?).metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    File::open(format!("/proc/self/fd/{}", found.as_raw_fd()))
}

/// The frame of `address` that blazesym found in `sym` (looked up `adjust` bytes before the
/// address: a return address's call), with its source location and inlined functions. Its
/// module is left to the caller, which knows the mapping.
pub fn frame_from_sym(address: u64, sym: &Sym<'_>, adjust: u64) -> Frame {
    let (file, line) = code_location(sym.code_info.as_deref());
    Frame {
        address,
        function: Some(sym.name.to_string()),
        function_offset: Some(sym.offset as u64 + adjust),
        module: None,
        module_offset: None,
        file,
        line,
        inlined: sym
            .inlined
            .iter()
            .map(|inlined| {
                let (file, line) = code_location(inlined.code_info.as_ref());
                InlinedFrame {
                    function: inlined.name.to_string(),
                    file,
                    line,
                }
            })
            .collect(),
        annotation: None,
    }
}

/// The user frame of `address`, which is `file_offset` in the ELF file at `path` (named
/// `module` in frames), symbolized with `symbolizer` when it can be; `is_return` for every frame
/// but the leaf. A file blazesym cannot read gives an unsymbolized frame (see
/// [`try_file_frame`] for why).
pub fn file_frame(
    symbolizer: &Symbolizer,
    path: &Path,
    address: u64,
    module: Option<String>,
    file_offset: u64,
    is_return: bool,
) -> Frame {
    try_file_frame(
        symbolizer,
        path,
        address,
        module.clone(),
        file_offset,
        is_return,
    )
    .unwrap_or_else(|_| {
        let mut frame = Frame::unsymbolized(address);
        frame.module = module;
        frame.module_offset = Some(file_offset);
        frame
    })
}

/// Why blazesym could not read a file's symbols (its error and causes, `: `-separated).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct UnreadableSymbols(pub blazesym::Error);

/// [`file_frame`], or why blazesym could not read the file (an address without a symbol is a
/// frame, unsymbolized; a file it cannot parse is an error).
pub fn try_file_frame(
    symbolizer: &Symbolizer,
    path: &Path,
    address: u64,
    module: Option<String>,
    file_offset: u64,
    is_return: bool,
) -> Result<Frame, UnreadableSymbols> {
    // A return address points after its call, which may be the first instruction of the next
    // function or line: look the call itself up. A signal trampoline is "returned to" at its
    // first instruction, and the byte before it (glibc's CFI covers a nop there) belongs to no
    // symbol: then the address itself.
    let adjust = u64::from(is_return && file_offset > 0);
    let source = Source::Elf(Elf::new(path));
    let lookup = |adjust: u64| match symbolizer
        .symbolize_single(&source, Input::FileOffset(file_offset - adjust))
    {
        Ok(Symbolized::Sym(sym)) => Ok(Some(frame_from_sym(address, &sym, adjust))),
        Ok(_) => Ok(None),
        Err(e) => Err(UnreadableSymbols(e)),
    };
    let found = match lookup(adjust)? {
        None if adjust > 0 => lookup(0)?,
        found => found,
    };
    let mut frame = found.unwrap_or_else(|| Frame::unsymbolized(address));
    frame.module = module;
    frame.module_offset = Some(file_offset);
    Ok(frame)
}

fn code_location(info: Option<&CodeInfo<'_>>) -> (Option<String>, Option<u32>) {
    match info {
        Some(info) => (Some(info.to_path().display().to_string()), info.line),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with a library, links to it (relative, absolute: resolved in the root), links
    /// that try to leave it (`..`, an absolute path the host has), a FIFO, a directory and a
    /// link loop; both resolvers open exactly the library, and nothing outside the root.
    #[test]
    fn opens_inside_the_root_only() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("usr/lib")).expect("mkdir");
        std::fs::write(root.join("usr/lib/libreal.so"), b"inside").expect("lib");
        symlink("usr/lib", root.join("lib")).expect("link");
        symlink("libreal.so", root.join("usr/lib/librel.so")).expect("link");
        symlink("/lib/libreal.so", root.join("usr/lib/libabs.so")).expect("link");
        symlink("../../../../../../../../etc/hostname", root.join("up")).expect("link");
        symlink("/etc/hostname", root.join("host")).expect("link");
        symlink("loop-b", root.join("loop-a")).expect("link");
        symlink("loop-a", root.join("loop-b")).expect("link");
        let fifo =
            std::ffi::CString::new(root.join("fifo").as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(
            Path::new("/etc/hostname").exists(),
            "the host file the links aim at"
        );
        let root_fd = open_path(
            libc::AT_FDCWD,
            root.to_str().expect("utf-8"),
            libc::O_DIRECTORY,
        )
        .expect("open root");
        for resolver in [Resolver::Kernel, Resolver::UserSpace] {
            for path in [
                "/usr/lib/libreal.so",
                "/lib/libreal.so",
                "/usr/lib/librel.so",
                "/usr/lib/libabs.so",
                "/usr/lib/../lib/./libreal.so",
                "/../../usr/lib/libreal.so",
            ] {
                let mut file = open_under(&root_fd, path, resolver)
                    .unwrap_or_else(|e| panic!("{resolver:?} {path}: {e}"));
                let mut text = String::new();
                std::io::Read::read_to_string(&mut file, &mut text).expect("read");
                assert_eq!(text, "inside", "{resolver:?} {path}");
            }
            for (path, errno) in [
                ("/up", libc::ENOENT),
                ("/host", libc::ENOENT),
                ("/etc/hostname", libc::ENOENT),
                ("/loop-a", libc::ELOOP),
            ] {
                let err = open_under(&root_fd, path, resolver).expect_err(path);
                assert_eq!(
                    err.raw_os_error(),
                    Some(errno),
                    "{resolver:?} {path}: {err}"
                );
            }
            // Found, but not regular files: refused before they are opened.
            for path in ["/fifo", "/usr/lib"] {
                let err = open_under(&root_fd, path, resolver).expect_err(path);
                assert_eq!(
                    err.kind(),
                    io::ErrorKind::InvalidInput,
                    "{resolver:?} {path}"
                );
            }
        }
        // Through /proc/PID/root: this process's own libc, as it sees it.
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let libc_path = maps
            .lines()
            .filter_map(parse_maps_line)
            .find(|l| l.path.contains("/libc.so"))
            .expect("libc mapped")
            .path;
        open_in_root(std::process::id(), libc_path).expect("own libc");
    }

    /// Lines with and without a path parse; permissions and hex fields are read right; a
    /// path keeps its spaces.
    #[test]
    fn parses_maps_lines() {
        let line = "7f2a1c028000-7f2a1c17d000 r-xp 00028000 fe:01 1837 \
                    /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            parse_maps_line(line),
            Some(MapsLine {
                start: 0x7f2a_1c02_8000,
                end: 0x7f2a_1c17_d000,
                executable: true,
                offset: 0x28000,
                inode: 1837,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6",
            })
        );
        let anon = parse_maps_line("7ffd1000-7ffd3000 rw-p 00000000 00:00 0").expect("anon");
        assert_eq!(anon.path, "");
        assert!(!anon.executable);
        let vdso =
            parse_maps_line("7ffd5000-7ffd7000 r-xp 00000000 00:00 0                  [vdso]")
                .expect("vdso");
        assert_eq!(vdso.path, "[vdso]");
        let spaced = parse_maps_line("7f-80 r-xp 0 fe:01 12 /opt/a b.so").expect("spaced");
        assert_eq!(spaced.path, "/opt/a b.so");
        assert_eq!(parse_maps_line("not a maps line"), None);
    }
}
