//! The `.lsp` profile file format, version [`FORMAT_VERSION`].
//!
//! Layout (documented field by field in `docs/FORMAT.md`):
//!
//! | offset | size | content |
//! |--------|------|---------|
//! | 0      | 8    | magic `\x89LSP\r\n\x1a\n` (PNG-style: catches text-mode transfers) |
//! | 8      | 4    | format version, little-endian `u32` |
//! | 12     | ...  | gzip stream of one UTF-8 JSON document: the [`Profile`] |
//!
//! A reader rejects a foreign file by its magic, a newer format by its version (before touching
//! the body), and a truncated file by gzip's length and CRC trailer.
//!
//! Version 2 added the record kinds of imported samples (`on-cpu`, `event`, `sample`): a
//! version-1 reader cannot parse them, so a profile that has such records is written as version
//! 2 (older readers then ask for an upgrade instead of failing on the JSON), and every other
//! profile still as version 1, which every reader reads ([`version_of`]).
//!
//! Version 3 added the record kind `hold` (lock hold times, which version 2 stored as `mutex`
//! records of the `mutex-hold` probe and readers added to wait time): a profile with holds is
//! written as version 3, and the `mutex-hold` records of older profiles are read as holds
//! ([`upgrade`]).

use crate::catalog::MUTEX_HOLD;
use crate::profile::Profile;
use crate::WaitKind;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use thiserror::Error;

/// Magic bytes at the start of every profile.
pub const MAGIC: [u8; 8] = *b"\x89LSP\r\n\x1a\n";

/// The newest format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 3;

/// The version `profile` is written as: 3 when it has holds, 2 when it has records of imported
/// samples (kinds that only those versions have), else 1, so readers that predate those kinds
/// still read it.
pub fn version_of(profile: &Profile) -> u32 {
    if profile.waits.iter().any(|w| w.kind == WaitKind::Hold) {
        3
    } else if profile.waits.iter().any(|w| w.kind.is_sampled()) {
        2
    } else {
        1
    }
}

/// Brings a profile of format `version` to the current one: before version 3 the `mutex-hold`
/// probe's hold times were stored with the kind `mutex`, as if they were waits.
pub fn upgrade(profile: &mut Profile, version: u32) {
    if version < 3 {
        for w in profile.waits.iter_mut().filter(|w| w.is_from(&MUTEX_HOLD)) {
            w.kind = WaitKind::Hold;
        }
    }
}

/// Why a profile could not be read or written.
#[derive(Debug, Error)]
pub enum FormatError {
    /// The file could not be opened, read or written.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The file does not start with the profile magic.
    #[error("not a lockscope profile (bad magic bytes)")]
    NotAProfile,
    /// The file ends before its header does.
    #[error("truncated profile: the file ends inside its {0}-byte header")]
    TruncatedHeader(usize),
    /// The file was written by a newer lockscope.
    #[error(
        "profile format version {found} is newer than this lockscope reads (up to {supported}); \
         upgrade lockscope"
    )]
    NewerVersion {
        /// Version in the file.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// The body is cut short or damaged.
    #[error("truncated or corrupt profile: {0}")]
    Corrupt(String),
}

/// Writes `profile` to `writer` in the oldest format version that holds it ([`version_of`]).
pub fn write_profile_to(profile: &Profile, writer: impl Write) -> Result<(), FormatError> {
    let mut writer = BufWriter::new(writer);
    writer.write_all(&MAGIC)?;
    writer.write_all(&version_of(profile).to_le_bytes())?;
    // Level 2 (deflate's fast matcher), not the default 6: the 13 MB of a `bottleneck`
    // recording of MariaDB compress in a third of the CPU time, the file half as large again
    // (docs/BENCHMARKS.md: the recorder's own CPU).
    let mut gz = GzEncoder::new(writer, Compression::new(2));
    serde_json::to_writer(&mut gz, profile).map_err(io::Error::from)?;
    gz.finish()?.flush()?;
    Ok(())
}

/// Reads a profile of any supported version from `reader`.
pub fn read_profile_from(reader: impl Read) -> Result<Profile, FormatError> {
    let mut reader = BufReader::new(reader);
    let mut header = [0u8; 12];
    let mut filled = 0;
    while filled < header.len() {
        match reader.read(&mut header[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    if filled < MAGIC.len() {
        return Err(if header[..filled] == MAGIC[..filled] && filled > 0 {
            FormatError::TruncatedHeader(header.len())
        } else {
            FormatError::NotAProfile
        });
    }
    if header[..8] != MAGIC {
        return Err(FormatError::NotAProfile);
    }
    if filled < header.len() {
        return Err(FormatError::TruncatedHeader(header.len()));
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version > FORMAT_VERSION {
        return Err(FormatError::NewerVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(FormatError::Corrupt(
            "format version 0 does not exist".into(),
        ));
    }
    let mut json = Vec::new();
    GzDecoder::new(reader)
        .read_to_end(&mut json)
        .map_err(|e| FormatError::Corrupt(e.to_string()))?;
    let mut profile: Profile =
        serde_json::from_slice(&json).map_err(|e| FormatError::Corrupt(e.to_string()))?;
    upgrade(&mut profile, version);
    profile
        .validate()
        .map_err(|e| FormatError::Corrupt(e.to_string()))?;
    // Profiles written before the `offcpu` probe's sleeps had their kinds read the same.
    crate::overlap::classify_offcpu_sleeps(&mut profile);
    Ok(profile)
}

/// Writes `profile` to the file at `path`, atomically: a partial file never replaces a good one.
///
/// The file is readable by its owner only (mode 0600, as perf writes perf.data): a profile holds
/// command lines, paths and addresses. It is written to a new temporary file in the same
/// directory (created exclusively, so a link planted there is never followed) and renamed over
/// `path`, which replaces a link at `path` rather than writing through it.
pub fn write_profile(profile: &Profile, path: &Path) -> Result<(), FormatError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    // tempfile creates it with O_EXCL and mode 0600, and removes it if anything below fails.
    let temp = tempfile::Builder::new()
        .prefix(&format!(".{}.", file_name.to_string_lossy()))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    write_profile_to(profile, temp.as_file())?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| FormatError::from(e.error))?;
    Ok(())
}

/// Reads the profile file at `path`.
pub fn read_profile(path: &Path) -> Result<Profile, FormatError> {
    read_profile_from(std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Log2Histogram;
    use crate::profile::*;
    use crate::wait::WaitKind;

    fn sample() -> Profile {
        let mut histogram = Log2Histogram::new();
        histogram.record(200_000_000);
        let mut frame = Frame::unsymbolized(0x7f00_0000_1234);
        frame.function = Some("pthread_mutex_lock".into());
        frame.module = Some("libc.so.6".into());
        frame.module_offset = Some(0x1234);
        frame.inlined.push(InlinedFrame {
            function: "lll_lock".into(),
            file: Some("lowlevellock.h".into()),
            line: Some(42),
        });
        Profile {
            metadata: Metadata {
                lockscope_version: "0.1.0".into(),
                backend: "ebpf".into(),
                os: "linux".into(),
                kernel_release: "6.18.0".into(),
                hostname: "host".into(),
                cpu_count: 2,
                libc: Some("glibc 2.36".into()),
                target: RecordedTarget {
                    pid: 42,
                    command: vec!["demo".into(), "--fast".into()],
                    launched: true,
                    ..RecordedTarget::default()
                },
                start_unix_ns: 1_700_000_000_000_000_000,
                duration_ns: 1_000_000_000,
                probes: vec![ProbeAttachment {
                    probe: "futex".into(),
                    hook: "tp_btf/sys_enter".into(),
                    status: AttachStatus::FellBack {
                        hook: "raw_tp/sys_enter".into(),
                        reason: "no BTF".into(),
                    },
                }],
                events: 1,
                losses: Losses {
                    user_stack_failures: 1,
                    skipped_runs: 2,
                    out_of_order: 1,
                    ..Losses::default()
                },
                end_reason: "target exited".into(),
                warnings: vec![
                    "pid 42 (demo) has 1 descendant process that is not recorded".into(),
                ],
            },
            threads: vec![ThreadInfo {
                pid: 42,
                tid: 43,
                name: "worker".into(),
            }],
            stacks: vec![Stack {
                space: AddressSpace::User,
                frames: vec![frame],
                truncated: true,
            }],
            waits: vec![WaitRecord {
                probe: "futex".into(),
                kind: WaitKind::Mutex,
                pid: 42,
                tid: 43,
                object: 0x5555_0000,
                operation: "FUTEX_WAIT_PRIVATE".into(),
                user_stack: Some(0),
                kernel_stack: None,
                woken_by: None,
                stats: WaitStats {
                    count: 1,
                    total_ns: 200_000_000,
                    max_ns: 200_000_000,
                    histogram,
                },
            }],
            processes: vec![ProcessInfo {
                pid: 42,
                parent: Some(1),
                name: "demo".into(),
                command: vec!["demo".into(), "--fast".into()],
                cgroup: Some("/system.slice/demo.service".into()),
                start_unix_ns: Some(1_699_999_999_000_000_000),
                exit_unix_ns: Some(1_700_000_000_900_000_000),
                kernel_thread: false,
            }],
            ..Profile::default()
        }
    }

    fn encode(profile: &Profile) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_profile_to(profile, &mut bytes).expect("write");
        bytes
    }

    /// A profile written and read back is identical, through a real file too.
    #[test]
    fn round_trip() {
        let profile = sample();
        let back = read_profile_from(&encode(&profile)[..]).expect("read");
        assert_eq!(back, profile);

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.lsp");
        write_profile(&profile, &path).expect("write file");
        assert_eq!(read_profile(&path).expect("read file"), profile);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            leftovers.len(),
            1,
            "temporary file left behind: {leftovers:?}"
        );
    }

    /// A profile is written 0600 whatever the umask, and a link planted at its path (or an
    /// existing file) is replaced, never written through.
    #[test]
    fn private_and_never_through_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").expect("write victim");
        let path = dir.path().join("run.lsp");
        std::os::unix::fs::symlink(&victim, &path).expect("plant a link");
        write_profile(&sample(), &path).expect("write over the link");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"keep me");
        let meta = std::fs::symlink_metadata(&path).expect("written");
        assert!(
            meta.file_type().is_file(),
            "the link was replaced by the profile"
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(read_profile(&path).expect("read"), sample());
        // An existing world-readable profile becomes private too.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_profile(&sample(), &path).expect("write again");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// A profile written before the process table and the warnings existed (neither field in
    /// its JSON) reads with both empty; one with them writes them.
    #[test]
    fn process_table_is_optional() {
        let mut old = sample();
        old.processes.clear();
        old.metadata.warnings.clear();
        let json = serde_json::to_string(&old).expect("json");
        assert!(
            !json.contains("processes") && !json.contains("warnings"),
            "{json}"
        );
        let back: Profile = serde_json::from_str(&json).expect("old profile reads");
        assert_eq!(back, old);
        let json = serde_json::to_string(&sample()).expect("json");
        assert!(
            json.contains("\"processes\":[{\"pid\":42,\"parent\":1"),
            "{json}"
        );
    }

    /// A profile written before the probes counted skipped program runs and out-of-order
    /// scheduler events reads with both 0; skipped runs count as lost waits (each may have lost
    /// one), out-of-order events do not, nor make the profile incomplete (their sleeps are
    /// recorded, without their waker).
    #[test]
    fn losses_of_unseen_events() {
        let mut old = sample();
        old.metadata.losses = Losses {
            map_full: 3,
            ..Losses::default()
        };
        let json = serde_json::to_string(&old).expect("json");
        assert!(
            !json.contains("skipped_runs") && !json.contains("out_of_order"),
            "{json}"
        );
        let back: Profile = serde_json::from_str(&json).expect("old profile reads");
        assert_eq!(back, old);
        let losses = sample().metadata.losses;
        assert_eq!(losses.lost_events(), 2);
        assert!(!losses.is_zero());
        let recovered = Losses {
            out_of_order: 4,
            ..Losses::default()
        };
        assert!(recovered.is_zero(), "out-of-order events lose no wait");
    }

    /// A file cut anywhere is reported as truncated or corrupt, never read as a shorter profile.
    #[test]
    fn truncation_detected_everywhere() {
        let bytes = encode(&sample());
        for len in 1..bytes.len() {
            let err = read_profile_from(&bytes[..len]).expect_err("truncated file was accepted");
            assert!(
                matches!(
                    err,
                    FormatError::TruncatedHeader(_) | FormatError::Corrupt(_)
                ),
                "cut at {len}: {err}"
            );
        }
        assert!(matches!(
            read_profile_from(&[][..]),
            Err(FormatError::NotAProfile)
        ));
    }

    /// Foreign files and newer versions give their own clear errors.
    #[test]
    fn foreign_and_newer() {
        let err = read_profile_from(&b"#!/bin/sh\necho hello\n"[..]).expect_err("foreign");
        assert_eq!(err.to_string(), "not a lockscope profile (bad magic bytes)");

        let mut bytes = encode(&sample());
        bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
        let err = read_profile_from(&bytes[..]).expect_err("newer");
        assert_eq!(
            err.to_string(),
            "profile format version 7 is newer than this lockscope reads (up to 3); upgrade lockscope"
        );
    }

    /// A profile of waits is still written as version 1 (older readers read it); one with
    /// imported samples as version 2, and read back.
    #[test]
    fn version_follows_the_records() {
        let profile = sample();
        assert_eq!(encode(&profile)[8..12], 1u32.to_le_bytes());
        let mut sampled = sample();
        sampled.waits[0].kind = crate::WaitKind::OnCpu;
        let bytes = encode(&sampled);
        assert_eq!(bytes[8..12], 2u32.to_le_bytes());
        assert_eq!(read_profile_from(&bytes[..]).expect("read"), sampled);
        let mut held = sample();
        held.waits[0].probe = MUTEX_HOLD.name.into();
        held.waits[0].kind = crate::WaitKind::Hold;
        let bytes = encode(&held);
        assert_eq!(bytes[8..12], 3u32.to_le_bytes());
        assert_eq!(read_profile_from(&bytes[..]).expect("read"), held);
    }

    /// The `mutex-hold` records of a profile written before holds had their own kind (as
    /// `mutex`) are read as holds; the same records of any other probe keep their kind.
    #[test]
    fn older_holds_are_read_as_holds() {
        let mut old = sample();
        let mut hold = old.waits[0].clone();
        hold.probe = MUTEX_HOLD.name.into();
        hold.operation = "hold (blocked)".into();
        old.waits.push(hold);
        for version in [1u32, 2] {
            let mut bytes = encode(&old);
            bytes[8..12].copy_from_slice(&version.to_le_bytes());
            let back = read_profile_from(&bytes[..]).expect("read");
            let kinds: Vec<WaitKind> = back.waits.iter().map(|w| w.kind).collect();
            assert_eq!(
                kinds,
                [WaitKind::Mutex, WaitKind::Hold],
                "version {version}"
            );
        }
    }

    /// A record pointing at a missing stack is refused rather than read.
    #[test]
    fn dangling_stack_rejected() {
        let mut profile = sample();
        profile.waits[0].kernel_stack = Some(9);
        let err = read_profile_from(&encode(&profile)[..]).expect_err("dangling");
        assert!(err.to_string().contains("refers to stack 9"), "{err}");
    }
}
