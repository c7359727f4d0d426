//! A persistent cache of unwind tables, so that attaching again to the same program reuses the
//! tables instead of parsing its CFI again (issue 14: a loaded server's tables took seconds).
//!
//! One file per table, named after its key: the file's GNU build-id, else its path, size and
//! modification time. An entry holds a magic, the format version, the architecture, the version
//! of lockscope that built it (a newer table builder may build different rows), the full key,
//! the rows and a CRC-32 of all of it: anything that does not match (corrupt, truncated, foreign,
//! another key that hashed to the same name) is removed and rebuilt, never used. Entries are
//! written to a temporary file in the cache directory and renamed into place, so a reader (also
//! another recorder) sees a whole entry or none. A hit touches the entry's modification time,
//! and after every write the oldest entries go until the directory is within its size bound
//! (least-recently-used eviction).
//!
//! A recorder runs as root: what it reads and writes here never goes through a link someone
//! else planted. The directory is created 0700 and used only while it is this user's and
//! writable by no one else; an entry is read only if it is a regular file of a sane size
//! (opened without following a link or blocking on a FIFO), and written by a rename, which
//! replaces whatever is at its name.

use super::table::{CfaKind, CompactTable, Rule};
use std::fs::{File, FileTimes};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// First bytes of every entry.
const MAGIC: &[u8; 8] = b"LKSUNWT\0";
/// Version of the entry format; entries of another version are rebuilt.
const FORMAT_VERSION: u32 = 1;
/// ELF machine the rows are for (EM_X86_64): the rules are architecture-specific.
const MACHINE: u32 = 62;
/// Suffix of entries (other files in the directory are left alone, except stale temporaries).
const SUFFIX: &str = ".lkt";
/// Prefix of temporary files, before they are renamed into entries.
const TEMP_PREFIX: &str = ".tmp-";
/// A temporary file older than this was left by a recorder that died while writing.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// Bytes of one row in an entry (as in `struct unwind_row`).
const ROW_BYTES: usize = 8;
/// Default size bound of the cache directory.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// Largest entry read: the rows of a table that fills `unwind_rows` (LKS_UNWIND_ROWS of
/// `bpf/unwind.h`), and its key; a file that claims more is not an entry of ours.
const MAX_ENTRY_BYTES: u64 = (1 << 21) * ROW_BYTES as u64 + (1 << 20);

/// What a table is cached under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CacheKey {
    /// The file's GNU build-id.
    BuildId(Vec<u8>),
    /// A file without build-id: its path, size and modification time.
    File {
        /// Path as the process maps it.
        path: String,
        /// Size in bytes.
        size: u64,
        /// Modification time, nanoseconds since the epoch.
        mtime_ns: i128,
    },
}

impl CacheKey {
    /// The key as bytes, stored in the entry and compared on load.
    fn bytes(&self) -> Vec<u8> {
        match self {
            CacheKey::BuildId(id) => [b"b".as_slice(), id].concat(),
            CacheKey::File {
                path,
                size,
                mtime_ns,
            } => [
                b"f".as_slice(),
                &size.to_le_bytes(),
                &mtime_ns.to_le_bytes(),
                path.as_bytes(),
            ]
            .concat(),
        }
    }

    /// The entry's file name: the build-id in hex, else a hash of the key (a collision costs a
    /// rebuild: the full key is checked on load).
    fn file_name(&self) -> String {
        match self {
            CacheKey::BuildId(id) => format!("b-{}{SUFFIX}", hex(id)),
            CacheKey::File { .. } => {
                let bytes = self.bytes();
                let mut reversed = bytes.clone();
                reversed.reverse();
                format!(
                    "f-{:08x}{:08x}{SUFFIX}",
                    crc32fast::hash(&bytes),
                    crc32fast::hash(&reversed)
                )
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why an entry could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// The directory is another user's, or others can write it.
    #[error("unwind-table cache `{dir}` is not this user's alone (owner, or group/other write)")]
    NotPrivate {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory or the entry could not be written.
    #[error("failed to write unwind-table cache entry `{path}`")]
    Write {
        /// The entry.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A directory of cached unwind tables.
#[derive(Clone, Debug)]
pub(crate) struct TableCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl TableCache {
    /// The cache in `dir` (created on the first write), holding at most about `max_bytes`.
    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        TableCache { dir, max_bytes }
    }

    fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The table cached under `key`, if there is a valid entry; an invalid one is removed.
    pub fn load(&self, key: &CacheKey) -> Option<CompactTable> {
        if !self.dir_is_private() {
            return None;
        }
        let path = self.path(key);
        // Not through a link, not blocking on a FIFO: only a regular file of at most
        // MAX_ENTRY_BYTES is read. Anything else under the name is removed (the name, not what
        // a link points to).
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path);
        let mut file = match file {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let _ = std::fs::remove_file(&path);
                return None;
            }
            Err(_) => return None,
        };
        let size = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let Some(size) = size.filter(|&size| size <= MAX_ENTRY_BYTES) else {
            let _ = std::fs::remove_file(&path);
            return None;
        };
        let mut bytes = Vec::with_capacity(size as usize);
        Read::by_ref(&mut file)
            .take(MAX_ENTRY_BYTES)
            .read_to_end(&mut bytes)
            .ok()?;
        match decode(&bytes, key) {
            Some(table) => {
                // The modification time is the eviction's recency; failing to touch it only
                // makes the entry look older.
                let _ = file.set_times(FileTimes::new().set_modified(SystemTime::now()));
                Some(table)
            }
            None => {
                // Never trusted: the caller rebuilds and stores a good entry in its place.
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `table` under `key` (atomically: temporary file, then rename), then evicts the
    /// least recently used entries beyond the size bound.
    pub fn store(&self, key: &CacheKey, table: &CompactTable) -> Result<(), CacheError> {
        let path = self.path(key);
        let error = |source| CacheError::Write {
            path: path.clone(),
            source,
        };
        // Created for this user alone; an existing one must be this user's and writable by no
        // one else, or it is not used (another user could plant entries or links in it).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(error)?;
        if !self.dir_is_private() {
            return Err(CacheError::NotPrivate {
                dir: self.dir.clone(),
            });
        }
        let mut temp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(&self.dir)
            .map_err(error)?;
        temp.write_all(&encode(key, table)).map_err(error)?;
        // No fsync: on a loaded machine one can take seconds (ext4 flushes the whole journal),
        // and an entry a crash leaves incomplete fails its checksum and is rebuilt.
        temp.persist(&path).map_err(|e| error(e.error))?;
        self.evict();
        Ok(())
    }

    /// Whether the cache directory is a directory (not a link to one) of this user's that no
    /// one else can write: only then are its entries trusted to be this user's writing.
    fn dir_is_private(&self) -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        std::fs::symlink_metadata(&self.dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == euid && m.mode() & 0o022 == 0)
    }

    /// Removes the least recently used entries until the directory holds at most `max_bytes`,
    /// and temporary files left by recorders that died while writing. Another recorder may
    /// remove the same files at the same time: a file already gone is fine.
    fn evict(&self) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut entries = Vec::new();
        for entry in dir.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with(TEMP_PREFIX) {
                if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                    let _ = std::fs::remove_file(entry.path());
                }
            } else if name.ends_with(SUFFIX) && meta.is_file() {
                entries.push((modified, meta.len(), entry.path()));
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            let _ = std::fs::remove_file(path);
            total -= len;
        }
    }
}

/// The bytes of an entry.
fn encode(key: &CacheKey, table: &CompactTable) -> Vec<u8> {
    let key = key.bytes();
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    let mut out = Vec::with_capacity(64 + key.len() + table.rows.len() * ROW_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&MACHINE.to_le_bytes());
    out.extend_from_slice(&(version.len() as u32).to_le_bytes());
    out.extend_from_slice(version);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(&table.base.to_le_bytes());
    out.extend_from_slice(&(table.rows.len() as u32).to_le_bytes());
    for (pc, rule) in &table.rows {
        out.extend_from_slice(&pc.to_le_bytes());
        out.push(rule.kind as u8);
        out.push(rule.fp_offset8 as u8);
        out.extend_from_slice(&rule.cfa_offset.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads an entry; `None` unless it is whole, checksummed, of this format, architecture and
/// lockscope version, under `key`, with sorted rows of known kinds.
fn decode(bytes: &[u8], key: &CacheKey) -> Option<CompactTable> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let mut r = Reader(body);
    if r.take(MAGIC.len())? != MAGIC
        || r.u32()? != FORMAT_VERSION
        || r.u32()? != MACHINE
        || r.bytes()? != env!("CARGO_PKG_VERSION").as_bytes()
        || r.bytes()? != key.bytes().as_slice()
    {
        return None;
    }
    let base = r.u64()?;
    let count = r.u32()? as usize;
    let rows_bytes = r.take(count.checked_mul(ROW_BYTES)?)?;
    if !r.0.is_empty() {
        return None;
    }
    let mut rows = Vec::with_capacity(count);
    for row in rows_bytes.chunks_exact(ROW_BYTES) {
        let pc = u32::from_le_bytes(row[..4].try_into().ok()?);
        let kind = CfaKind::from_u8(row[4])?;
        let rule = Rule {
            kind,
            fp_offset8: row[5] as i8,
            cfa_offset: i16::from_le_bytes([row[6], row[7]]),
        };
        if rows.last().is_some_and(|&(last, _)| last >= pc) {
            return None;
        }
        rows.push((pc, rule));
    }
    Some(CompactTable { base, rows })
}

/// Reads little-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// A length-prefixed byte string.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// The cache's part of the fuzz target: an entry of any table decodes to that table.
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing {
    use super::*;

    /// Encodes `table` as an entry and decodes it back: the same table.
    pub(crate) fn round_trip(table: &CompactTable) {
        let key = CacheKey::BuildId(vec![1; 20]);
        let back = decode(&encode(&key, table), &key).expect("an entry decodes");
        assert_eq!(back.base, table.base);
        assert_eq!(back.rows, table.rows);
    }
}

/// The directory's entries.
#[cfg(test)]
fn entries(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    found.retain(|p| p.to_string_lossy().ends_with(SUFFIX));
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: u32) -> CompactTable {
        CompactTable {
            base: 0x1000,
            rows: (0..rows)
                .map(|i| {
                    (
                        i * 16,
                        Rule {
                            kind: CfaKind::Sp,
                            cfa_offset: (8 + i % 64) as i16,
                            fp_offset8: -2,
                        },
                    )
                })
                .collect(),
        }
    }

    fn build_id(n: u8) -> CacheKey {
        CacheKey::BuildId(vec![n; 20])
    }

    /// A stored table loads back equal, under its key only.
    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(dir.path().join("cache"), DEFAULT_MAX_BYTES);
        let stored = table(1000);
        cache.store(&build_id(1), &stored).expect("store");
        let loaded = cache.load(&build_id(1)).expect("cached");
        assert_eq!(loaded.base, stored.base);
        assert_eq!(loaded.rows, stored.rows);
        assert!(cache.load(&build_id(2)).is_none());
        let by_file = CacheKey::File {
            path: "/usr/lib/x.so".into(),
            size: 10,
            mtime_ns: 5,
        };
        cache.store(&by_file, &stored).expect("store");
        assert!(cache.load(&by_file).is_some());
        let touched = CacheKey::File {
            path: "/usr/lib/x.so".into(),
            size: 10,
            mtime_ns: 6,
        };
        assert!(cache.load(&touched).is_none(), "a modified file is a miss");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("cache"))
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// A corrupt entry (any byte flipped, truncated) is refused and removed, and an entry of
    /// another key stored under this key's name (a foreign entry) is refused too.
    #[test]
    fn corrupt_and_foreign_entries_are_rebuilt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(dir.path().to_path_buf(), DEFAULT_MAX_BYTES);
        let key = build_id(7);
        cache.store(&key, &table(100)).expect("store");
        let path = cache.path(&key);
        let good = std::fs::read(&path).expect("read");
        for at in [0, 9, 30, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&path, &bad).expect("write");
            assert!(cache.load(&key).is_none(), "byte {at} flipped");
            assert!(!path.exists(), "corrupt entry removed");
        }
        std::fs::write(&path, &good[..good.len() - 3]).expect("write");
        assert!(cache.load(&key).is_none(), "truncated");
        std::fs::write(&path, encode(&build_id(8), &table(100))).expect("write");
        assert!(cache.load(&key).is_none(), "foreign key");
        std::fs::write(&path, &good).expect("write");
        assert_eq!(cache.load(&key).expect("good again").rows.len(), 100);
    }

    /// Beyond the size bound the least recently used entries go: a table loaded since it was
    /// stored stays, the oldest untouched one is evicted.
    #[test]
    fn evicts_least_recently_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let one = encode(&build_id(0), &table(1000)).len() as u64;
        let cache = TableCache::new(dir.path().to_path_buf(), one * 2 + one / 2);
        let old = SystemTime::now() - Duration::from_secs(100);
        for n in 0..2u8 {
            cache.store(&build_id(n), &table(1000)).expect("store");
            let file = File::options()
                .write(true)
                .open(cache.path(&build_id(n)))
                .expect("open");
            file.set_times(FileTimes::new().set_modified(old + Duration::from_secs(n.into())))
                .expect("age");
        }
        // Entry 0 is used again: now the most recent.
        assert!(cache.load(&build_id(0)).is_some());
        cache.store(&build_id(2), &table(1000)).expect("store");
        assert_eq!(entries(dir.path()).len(), 2);
        assert!(
            cache.load(&build_id(1)).is_none(),
            "least recently used evicted"
        );
        assert!(cache.load(&build_id(0)).is_some());
        assert!(cache.load(&build_id(2)).is_some());
    }

    /// What someone else planted under an entry's name is never followed: a link there is
    /// replaced by the next store (its target untouched), a link or FIFO is not read (a FIFO
    /// would block, a link to /dev/zero never end) and goes, and an oversized file is not read.
    #[test]
    fn planted_links_and_files_are_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(dir.path().join("cache"), DEFAULT_MAX_BYTES);
        let key = build_id(4);
        cache.store(&key, &table(10)).expect("create the directory");
        let path = cache.path(&key);
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").expect("victim");

        std::fs::remove_file(&path).expect("remove");
        std::os::unix::fs::symlink(&victim, &path).expect("plant a link");
        assert!(cache.load(&key).is_none(), "a link is not an entry");
        assert!(
            std::fs::symlink_metadata(&path).is_err(),
            "the link is removed"
        );
        std::os::unix::fs::symlink("/dev/zero", &path).expect("plant a link");
        assert!(cache.load(&key).is_none());
        std::os::unix::fs::symlink(&victim, &path).expect("plant a link");
        cache.store(&key, &table(10)).expect("store over the link");
        assert!(std::fs::symlink_metadata(&path).expect("entry").is_file());
        assert_eq!(std::fs::read(&victim).expect("victim"), b"keep me");
        assert_eq!(cache.load(&key).expect("the stored entry").rows.len(), 10);

        std::fs::remove_file(&path).expect("remove");
        let fifo = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(
            cache.load(&key).is_none(),
            "a FIFO is not read (nor waited on)"
        );
        assert!(
            std::fs::symlink_metadata(&path).is_err(),
            "the FIFO is removed"
        );

        let big = File::create(&path).expect("create");
        big.set_len(MAX_ENTRY_BYTES + 1).expect("grow");
        assert!(cache.load(&key).is_none(), "an oversized file is not read");
        assert!(!path.exists());
    }

    /// A cache directory another user could write is not used: no entry is read from it or
    /// stored in it (a new one is created 0700).
    #[test]
    fn shared_directory_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(dir.path().join("cache"), DEFAULT_MAX_BYTES);
        cache.store(&build_id(5), &table(10)).expect("store");
        let meta = std::fs::metadata(dir.path().join("cache")).expect("created");
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        std::fs::set_permissions(
            dir.path().join("cache"),
            std::fs::Permissions::from_mode(0o777),
        )
        .expect("chmod");
        assert!(cache.load(&build_id(5)).is_none(), "not read from");
        assert!(matches!(
            cache.store(&build_id(6), &table(10)),
            Err(CacheError::NotPrivate { .. })
        ));
        let link = TableCache::new(dir.path().join("link"), DEFAULT_MAX_BYTES);
        std::os::unix::fs::symlink(dir.path().join("cache"), dir.path().join("link"))
            .expect("link");
        assert!(
            link.load(&build_id(5)).is_none(),
            "a link to a directory is not used"
        );
    }

    /// Two writers storing the same entry at once (two recorders) leave one whole entry, and a
    /// reader meanwhile sees a whole entry or none.
    #[test]
    fn concurrent_writers_leave_a_whole_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(dir.path().to_path_buf(), DEFAULT_MAX_BYTES);
        let key = build_id(3);
        let big = table(50_000);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..5 {
                        cache.store(&key, &big).expect("store");
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..50 {
                    if let Ok(bytes) = std::fs::read(cache.path(&key)) {
                        assert_eq!(decode(&bytes, &key).expect("whole").rows.len(), 50_000);
                    }
                }
            });
        });
        assert_eq!(cache.load(&key).expect("cached").rows, big.rows);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
    }
}
