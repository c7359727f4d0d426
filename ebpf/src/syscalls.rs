//! x86_64 errno names, and the system calls' names as the probes use them (the table is
//! `lockscope_probes::linux_syscalls`, shared with the DTrace backend), for decoding what the
//! `syscall`, `lifecycle` and `offcpu` probes record, and for the `offcpu` probe's system-call
//! classes (by name). The errnos are from `asm-generic/errno*.h` (Linux UAPI headers).

use lockscope_probes::linux_syscalls;

/// errno names by number (`None` for unassigned numbers).
const ERRNOS: [Option<&str>; 134] = [
    None,
    Some("EPERM"),
    Some("ENOENT"),
    Some("ESRCH"),
    Some("EINTR"),
    Some("EIO"),
    Some("ENXIO"),
    Some("E2BIG"),
    Some("ENOEXEC"),
    Some("EBADF"),
    Some("ECHILD"),
    Some("EAGAIN"),
    Some("ENOMEM"),
    Some("EACCES"),
    Some("EFAULT"),
    Some("ENOTBLK"),
    Some("EBUSY"),
    Some("EEXIST"),
    Some("EXDEV"),
    Some("ENODEV"),
    Some("ENOTDIR"),
    Some("EISDIR"),
    Some("EINVAL"),
    Some("ENFILE"),
    Some("EMFILE"),
    Some("ENOTTY"),
    Some("ETXTBSY"),
    Some("EFBIG"),
    Some("ENOSPC"),
    Some("ESPIPE"),
    Some("EROFS"),
    Some("EMLINK"),
    Some("EPIPE"),
    Some("EDOM"),
    Some("ERANGE"),
    Some("EDEADLK"),
    Some("ENAMETOOLONG"),
    Some("ENOLCK"),
    Some("ENOSYS"),
    Some("ENOTEMPTY"),
    Some("ELOOP"),
    None,
    Some("ENOMSG"),
    Some("EIDRM"),
    Some("ECHRNG"),
    Some("EL2NSYNC"),
    Some("EL3HLT"),
    Some("EL3RST"),
    Some("ELNRNG"),
    Some("EUNATCH"),
    Some("ENOCSI"),
    Some("EL2HLT"),
    Some("EBADE"),
    Some("EBADR"),
    Some("EXFULL"),
    Some("ENOANO"),
    Some("EBADRQC"),
    Some("EBADSLT"),
    None,
    Some("EBFONT"),
    Some("ENOSTR"),
    Some("ENODATA"),
    Some("ETIME"),
    Some("ENOSR"),
    Some("ENONET"),
    Some("ENOPKG"),
    Some("EREMOTE"),
    Some("ENOLINK"),
    Some("EADV"),
    Some("ESRMNT"),
    Some("ECOMM"),
    Some("EPROTO"),
    Some("EMULTIHOP"),
    Some("EDOTDOT"),
    Some("EBADMSG"),
    Some("EOVERFLOW"),
    Some("ENOTUNIQ"),
    Some("EBADFD"),
    Some("EREMCHG"),
    Some("ELIBACC"),
    Some("ELIBBAD"),
    Some("ELIBSCN"),
    Some("ELIBMAX"),
    Some("ELIBEXEC"),
    Some("EILSEQ"),
    Some("ERESTART"),
    Some("ESTRPIPE"),
    Some("EUSERS"),
    Some("ENOTSOCK"),
    Some("EDESTADDRREQ"),
    Some("EMSGSIZE"),
    Some("EPROTOTYPE"),
    Some("ENOPROTOOPT"),
    Some("EPROTONOSUPPORT"),
    Some("ESOCKTNOSUPPORT"),
    Some("EOPNOTSUPP"),
    Some("EPFNOSUPPORT"),
    Some("EAFNOSUPPORT"),
    Some("EADDRINUSE"),
    Some("EADDRNOTAVAIL"),
    Some("ENETDOWN"),
    Some("ENETUNREACH"),
    Some("ENETRESET"),
    Some("ECONNABORTED"),
    Some("ECONNRESET"),
    Some("ENOBUFS"),
    Some("EISCONN"),
    Some("ENOTCONN"),
    Some("ESHUTDOWN"),
    Some("ETOOMANYREFS"),
    Some("ETIMEDOUT"),
    Some("ECONNREFUSED"),
    Some("EHOSTDOWN"),
    Some("EHOSTUNREACH"),
    Some("EALREADY"),
    Some("EINPROGRESS"),
    Some("ESTALE"),
    Some("EUCLEAN"),
    Some("ENOTNAM"),
    Some("ENAVAIL"),
    Some("EISNAM"),
    Some("EREMOTEIO"),
    Some("EDQUOT"),
    Some("ENOMEDIUM"),
    Some("EMEDIUMTYPE"),
    Some("ECANCELED"),
    Some("ENOKEY"),
    Some("EKEYEXPIRED"),
    Some("EKEYREVOKED"),
    Some("EKEYREJECTED"),
    Some("EOWNERDEAD"),
    Some("ENOTRECOVERABLE"),
    Some("ERFKILL"),
    Some("EHWPOISON"),
];

/// The name of system call `nr` (`openat`), or `syscall_NR` for an unknown number.
pub fn syscall_name(nr: i32) -> String {
    linux_syscalls::syscall_name(i64::from(nr))
        .map_or_else(|| format!("syscall_{nr}"), str::to_owned)
}

pub use linux_syscalls::syscall_number;

/// The name of errno `err` (`ENOENT`), or `E<number>` for an unknown one.
pub fn errno_name(err: i32) -> String {
    usize::try_from(err)
        .ok()
        .and_then(|i| ERRNOS.get(i).copied().flatten())
        .map_or_else(|| format!("E{err}"), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and numbers match the x86_64 ABI (and libc's constants).
    #[test]
    fn names() {
        assert_eq!(syscall_name(libc::SYS_openat as i32), "openat");
        assert_eq!(syscall_name(202), "futex");
        assert_eq!(syscall_name(libc::SYS_fchmodat2 as i32), "fchmodat2");
        assert_eq!(syscall_name(libc::SYS_mseal as i32), "mseal");
        assert_eq!(syscall_name(100_000), "syscall_100000");
        assert_eq!(syscall_number("read"), Some(libc::SYS_read as u32));
        assert_eq!(syscall_number("nosuch"), None);
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(libc::EAGAIN), "EAGAIN");
        assert_eq!(errno_name(9999), "E9999");
    }
}
