//! Builds unwind tables off the recording's thread: one builder thread per CPU, taking the most
//! urgent file first (the main executable and libc, where most waits are, before the other
//! libraries). The other libraries' tables are built at a lower priority than the traced process
//! (a loaded server keeps its CPUs while they are built, during the recording); the urgent ones,
//! which the attach waits for, at the process's own priority (a few tens of milliseconds of CPU
//! that, a few nice steps lower, took seconds on a server with 50 busy threads). A table comes from the cache when it has a valid entry, and
//! goes into it when built.

use super::cache::{CacheKey, TableCache};
use super::elf::{ElfImage, ElfSource, LoadSegment};
use super::table::{build_table, CompactTable};
use super::FileKey;
use crate::priority::{process_nice, set_thread_nice, MAX_NICE};
use crate::probe::error_chain;
use std::collections::BinaryHeap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// How much lower than the traced process's priority (nice value) builders run.
const NICE_BELOW_TARGET: i32 = 5;

/// Why a file has no unwind table (its frames are unwound by frame pointers): one line naming
/// the file, as the recording's notes list it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableFailure {
    /// The file is not an ELF image lockscope can read.
    #[error("{name}: {error}")]
    Elf {
        /// The file, as the process maps it.
        name: String,
        /// Why it could not be parsed.
        error: std::io::Error,
    },
    /// Its call frame information could not be turned into a table.
    #[error("{name}: {}", error_chain(.error))]
    Table {
        /// The file, as the process maps it.
        name: String,
        /// Why, with its causes.
        error: super::table::TableError,
    },
    /// The parsers panicked on it (the builder thread and the recording go on).
    #[error("{name}: the table builder failed on it ({why})")]
    Panicked {
        /// The file, as the process maps it.
        name: String,
        /// What the panic said.
        why: String,
    },
}

/// A table built (or loaded from the cache), before it is stored in the BPF arrays.
#[derive(Debug)]
pub(crate) struct BuiltTable {
    pub build_id: Option<Vec<u8>>,
    pub table: CompactTable,
    pub loads: Vec<LoadSegment>,
    pub code_vaddr_minus_offset: Option<i64>,
    /// It came from the cache.
    pub cached: bool,
}

/// The cache key of a file: its build-id, else its path, size and modification time.
fn cache_key(build_id: Option<&[u8]>, file: &File, name: &str) -> Option<CacheKey> {
    if let Some(id) = build_id {
        return Some(CacheKey::BuildId(id.to_vec()));
    }
    let meta = file.metadata().ok()?;
    let mtime_ns = meta
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some(CacheKey::File {
        path: name.to_owned(),
        size: meta.size(),
        mtime_ns: i128::try_from(mtime_ns).ok()?,
    })
}

/// The table of an ELF image: from the cache if it has it, else built with gimli (and cached).
/// A cache that cannot be written costs only the next attach's time. The image is the traced
/// program's word: whatever it holds costs at most its own table, an error naming it (a panic
/// in the parsers is one too: it must not take the builder thread, or the recording, with it).
pub(crate) fn build_image(
    source: ElfSource<'_>,
    name: &str,
    cache: Option<&TableCache>,
) -> Result<BuiltTable, TableFailure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        build_image_unguarded(source, name, cache)
    }))
    .unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(TableFailure::Panicked {
            name: name.to_owned(),
            why,
        })
    })
}

fn build_image_unguarded(
    source: ElfSource<'_>,
    name: &str,
    cache: Option<&TableCache>,
) -> Result<BuiltTable, TableFailure> {
    let file = match &source {
        ElfSource::File(file) => Some(*file),
        ElfSource::Memory(_) => None,
    };
    let image = ElfImage::parse(source).map_err(|error| TableFailure::Elf {
        name: name.to_owned(),
        error,
    })?;
    let build_id = image.build_id();
    let key = match (cache, file) {
        (Some(_), Some(file)) => cache_key(build_id.as_deref(), file, name),
        (Some(_), None) => build_id.clone().map(CacheKey::BuildId),
        (None, _) => None,
    };
    let loaded = cache.zip(key.as_ref()).and_then(|(c, k)| c.load(k));
    let cached = loaded.is_some();
    let table = match loaded {
        Some(table) => table,
        None => {
            let table = build_table(&image).map_err(|error| TableFailure::Table {
                name: name.to_owned(),
                error,
            })?;
            if let Some((cache, key)) = cache.zip(key.as_ref()) {
                let _ = cache.store(key, &table);
            }
            table
        }
    };
    Ok(BuiltTable {
        build_id,
        table,
        loads: image.loads.clone(),
        code_vaddr_minus_offset: image.code_vaddr_minus_offset(),
        cached,
    })
}

/// A file whose table is wanted.
pub(crate) struct Job {
    /// Lower is more urgent.
    pub urgency: u8,
    /// Order of submission (earlier first, among equally urgent jobs).
    pub sequence: u64,
    pub key: FileKey,
    pub file: File,
    pub name: String,
    /// Nice value to build at.
    pub nice: i32,
}

impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        (self.urgency, self.sequence) == (other.urgency, other.sequence)
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Job {
    /// The max-heap pops the most urgent, earliest job.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.urgency, other.sequence).cmp(&(self.urgency, self.sequence))
    }
}

/// A finished job.
#[derive(Debug)]
pub(crate) struct Done {
    pub key: FileKey,
    pub name: String,
    pub result: Result<BuiltTable, TableFailure>,
    /// Wall time from the start of the job to its end.
    pub elapsed: Duration,
}

struct Queue {
    jobs: Mutex<BinaryHeap<Job>>,
    ready: Condvar,
    stop: AtomicBool,
}

/// The builder threads, started on the first job.
pub(crate) struct Builders {
    queue: Arc<Queue>,
    done_tx: Sender<Done>,
    done: Receiver<Done>,
    cache: Option<TableCache>,
    threads: usize,
    started: usize,
    sequence: u64,
}

impl Builders {
    /// Builders with `threads` threads (`None`: one per CPU; `Some(0)`: jobs run when waited
    /// for, on the waiting thread).
    pub fn new(cache: Option<TableCache>, threads: Option<usize>) -> Self {
        let (done_tx, done) = channel();
        Builders {
            queue: Arc::new(Queue {
                jobs: Mutex::new(BinaryHeap::new()),
                ready: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
            done_tx,
            done,
            cache,
            threads: threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
            started: 0,
            sequence: 0,
        }
    }

    /// The cache, for tables built on the caller's thread.
    pub fn cache(&self) -> Option<&TableCache> {
        self.cache.as_ref()
    }

    /// Queues the table of `file`; `urgency` 0 goes first.
    pub fn submit(&mut self, urgency: u8, key: FileKey, file: File, name: String, nice: i32) {
        self.sequence += 1;
        let job = Job {
            urgency,
            sequence: self.sequence,
            key,
            file,
            name,
            nice,
        };
        match self.queue.jobs.lock() {
            Ok(mut jobs) => jobs.push(job),
            Err(poisoned) => poisoned.into_inner().push(job),
        }
        self.queue.ready.notify_one();
        if self.started < self.threads {
            let queue = Arc::clone(&self.queue);
            let done = self.done_tx.clone();
            let cache = self.cache.clone();
            let spawned = std::thread::Builder::new()
                .name("lks-unwind-build".into())
                .spawn(move || work(&queue, &done, cache.as_ref()));
            // Without another thread the ones already started do it; without any, the job
            // runs when waited for (next_done).
            if spawned.is_ok() {
                self.started += 1;
            }
        }
    }

    /// A finished job, waiting at most until `deadline` (`None`: do not wait).
    pub fn next_done(&self, deadline: Option<Instant>) -> Option<Done> {
        if let Ok(done) = self.done.try_recv() {
            return Some(done);
        }
        match deadline {
            None => None,
            // No builder thread: the most urgent job runs here (the wait is then its build).
            Some(_) if self.started == 0 => {
                pop(&self.queue).map(|job| run(job, self.cache.as_ref(), false))
            }
            Some(deadline) => self
                .done
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok(),
        }
    }
}

impl Drop for Builders {
    /// Queued jobs are dropped; a table being built is finished and cached, its thread then
    /// ends (it is not waited for: a large table takes seconds).
    fn drop(&mut self) {
        self.queue.stop.store(true, Ordering::Relaxed);
        match self.queue.jobs.lock() {
            Ok(mut jobs) => jobs.clear(),
            Err(poisoned) => poisoned.into_inner().clear(),
        }
        self.queue.ready.notify_all();
    }
}

fn pop(queue: &Queue) -> Option<Job> {
    match queue.jobs.lock() {
        Ok(mut jobs) => jobs.pop(),
        Err(poisoned) => poisoned.into_inner().pop(),
    }
}

/// A builder thread: runs jobs until the builders are dropped.
fn work(queue: &Queue, done: &Sender<Done>, cache: Option<&TableCache>) {
    loop {
        let job = {
            let Ok(mut jobs) = queue.jobs.lock() else {
                return;
            };
            loop {
                if queue.stop.load(Ordering::Relaxed) {
                    return;
                }
                if let Some(job) = jobs.pop() {
                    break job;
                }
                jobs = match queue.ready.wait(jobs) {
                    Ok(jobs) => jobs,
                    Err(_) => return,
                };
            }
        };
        if done.send(run(job, cache, true)).is_err() {
            return;
        }
    }
}

/// Builds one job's table, on a builder thread at the job's priority (`lower_priority`), else
/// on the caller's thread at its own.
fn run(job: Job, cache: Option<&TableCache>, lower_priority: bool) -> Done {
    if lower_priority {
        set_thread_nice(job.nice);
    }
    let started = Instant::now();
    let result = build_image(ElfSource::File(&job.file), &job.name, cache);
    Done {
        key: job.key,
        name: job.name,
        result,
        elapsed: started.elapsed(),
    }
}

/// The nice value to build a table for process `pid` at: its own for an urgent table, a few
/// steps lower for the others.
pub(crate) fn builder_nice(pid: u32, urgent: bool) -> i32 {
    let target = process_nice(pid).unwrap_or(0);
    if urgent {
        target
    } else {
        (target + NICE_BELOW_TARGET).min(MAX_NICE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::thread_nice;

    fn libc_path() -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .expect("libc mapped")
            .to_owned()
    }

    fn key(n: u64) -> FileKey {
        FileKey::Inode { dev: 0, ino: n }
    }

    /// Jobs leave the queue most urgent first, in submission order among equals.
    #[test]
    fn most_urgent_first() {
        let file = || File::open("/proc/self/exe").expect("open");
        let job = |urgency, sequence| Job {
            urgency,
            sequence,
            key: key(sequence),
            file: file(),
            name: String::new(),
            nice: 0,
        };
        let mut heap: BinaryHeap<Job> = [job(2, 1), job(0, 2), job(2, 3), job(0, 4)].into();
        let order: Vec<_> = std::iter::from_fn(|| heap.pop())
            .map(|j| (j.urgency, j.sequence))
            .collect();
        assert_eq!(order, vec![(0, 2), (0, 4), (2, 1), (2, 3)]);
    }

    /// Builders build libc's table at a lower priority than the target, and a second build of
    /// the same file comes from the cache with the same rows.
    #[test]
    fn builds_in_background_and_caches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = TableCache::new(
            dir.path().to_path_buf(),
            super::super::cache::DEFAULT_MAX_BYTES,
        );
        let mut builders = Builders::new(Some(cache), None);
        let nice = builder_nice(std::process::id(), false);
        assert_eq!(builder_nice(std::process::id(), true), thread_nice());
        assert!(nice > thread_nice() || nice == MAX_NICE);
        let deadline = Instant::now() + Duration::from_secs(60);
        builders.submit(
            0,
            key(1),
            File::open(libc_path()).expect("libc"),
            libc_path(),
            nice,
        );
        let first = builders.next_done(Some(deadline)).expect("built");
        let first = first.result.expect("libc table");
        assert!(!first.cached);
        assert!(first.table.rows.len() > 1000);
        builders.submit(
            0,
            key(1),
            File::open(libc_path()).expect("libc"),
            libc_path(),
            nice,
        );
        let second = builders.next_done(Some(deadline)).expect("built");
        let second = second.result.expect("libc table");
        assert!(second.cached);
        assert_eq!(second.table.rows, first.table.rows);
        assert_eq!(second.build_id, first.build_id);
        // The builder thread really runs at the lower priority.
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            set_thread_nice(nice);
            let _ = tx.send(thread_nice());
        });
        assert_eq!(rx.recv().expect("nice"), nice);
    }
}
