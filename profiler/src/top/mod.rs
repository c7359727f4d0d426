//! `lockscope top`: a live view of where the threads wait, refreshed every interval over a
//! sliding window, while the probes stay attached.
//!
//! The eBPF recorder runs on a thread of its own (`recorder_thread`), started with the options
//! `record` uses ([`crate::session::ebpf_record_options`]), polled as `record`'s session polls
//! it, and asked every interval for the profile of everything recorded so far
//! (`Recorder::snapshot`). The view keeps the snapshots of one window ([`window::Snapshots`]),
//! takes the window as the difference of two, and summarizes it with the analysis every view
//! shares ([`view::View`]). The screen is ratatui's ([`tui`]); when standard output is not a
//! terminal, a plain text block is printed per interval instead. `q` (or Ctrl-C, SIGTERM, the
//! target's exit in plain mode) detaches every probe before the process exits.
//!
//! The DTrace backend prints its aggregations once, at dtrace's end: it has no snapshot, and
//! `top` says to record and report instead.

mod tui;
pub mod view;
pub mod window;

use crate::session::SessionOptions;
use anyhow::{bail, Context, Result};
use lockscope_probes::Profile;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The live view's options, validated (`TopArgs::to_options`).
#[derive(Clone, Debug)]
pub struct TopOptions {
    /// What to record and with which probes, as `record`'s.
    pub session: SessionOptions,
    /// Time between refreshes.
    pub interval: Duration,
    /// Length of the sliding window.
    pub window: Duration,
    /// Where `w` writes what was seen so far.
    pub output: PathBuf,
    /// Plain text blocks even on a terminal.
    pub plain: bool,
    /// Sites shown per block in plain text.
    pub top: usize,
}

/// One interval's snapshot, as `Recorder::live_snapshot` gives it (the eBPF backend's type is
/// Linux's only).
pub(crate) struct Snapshot {
    /// Everything recorded so far but the stacks and the bottleneck analysis.
    profile: Profile,
    /// The id of `new_stacks`' first.
    first_new_stack: usize,
    /// The stacks first seen since the previous snapshot.
    new_stacks: Vec<lockscope_probes::Stack>,
    /// The bottleneck analysis of the intervals analysed since the previous snapshot.
    bottleneck: Option<lockscope_probes::bottleneck::BottleneckAnalysis>,
}

impl Snapshot {
    /// This snapshot and `later`, the next, as one: `later`'s profile, both snapshots' new
    /// stacks, the bottleneck analysis of both intervals.
    fn followed_by(self, later: Snapshot) -> Snapshot {
        let mut new_stacks = self.new_stacks;
        new_stacks.truncate(later.first_new_stack.saturating_sub(self.first_new_stack));
        new_stacks.extend(later.new_stacks);
        let bottleneck = match (&self.bottleneck, &later.bottleneck) {
            (None, None) => None,
            (earlier, later) => window::merge_bottleneck(earlier.iter().chain(later.iter())),
        };
        Snapshot {
            profile: later.profile,
            first_new_stack: self.first_new_stack,
            new_stacks,
            bottleneck,
        }
    }
}

/// What the recorder's thread reports.
enum Update {
    /// The probes are attached: what is recorded, in words.
    Started(String),
    /// One interval.
    Snapshot(Box<Snapshot>),
    /// Everything recorded so far, whole (asked for with [`Asks::whole`]: the `w` key).
    Whole(Box<Profile>),
    /// The target went away (the recording goes on no longer): why, and the whole profile of
    /// the recording (for `w` after the end; `None` when it could not be read).
    TargetGone(String, Option<Box<Profile>>),
    /// The recorder failed.
    Failed(anyhow::Error),
}

/// How often the recorder is polled between snapshots, as `record`'s session polls it.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What the view asks of the recorder's thread.
#[derive(Default)]
pub(crate) struct Asks {
    /// Stop recording, detaching every probe.
    stop: AtomicBool,
    /// Send everything recorded so far, whole, once ([`Update::Whole`]).
    whole: AtomicBool,
}

/// Runs the live view until `q`, a signal, the duration, or (plain text) the target's exit.
pub fn run(options: &TopOptions) -> Result<()> {
    if options.session.backend == crate::cli::BackendArg::Dtrace {
        bail!(
            "lockscope top needs the ebpf backend (Linux): dtrace prints its aggregations only \
             at its end; use `lockscope record -d 10s` and `lockscope report` instead"
        );
    }
    let asks = Arc::new(Asks::default());
    let (updates, recorder) = start_recorder(options, &asks)?;
    let started = match updates.recv() {
        Ok(Update::Started(what)) => what,
        Ok(Update::Failed(e)) => return Err(e),
        _ => bail!("the recording ended before it started"),
    };
    let result = if options.plain || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        plain(options, &started, &updates, &asks)
    } else {
        tui::run(options, &started, &updates, &asks)
    };
    // Whatever ended the view: the probes are detached before this returns (the channel closed
    // first, so that a recorder sending into a full one is not left waiting).
    asks.stop.store(true, Ordering::Release);
    drop(updates);
    match recorder.join() {
        Ok(()) => {}
        Err(_) => bail!("the recording thread panicked"),
    }
    result
}

/// Starts the recorder's thread; it reports on the returned channel.
fn start_recorder(
    options: &TopOptions,
    asks: &Arc<Asks>,
) -> Result<(mpsc::Receiver<Update>, std::thread::JoinHandle<()>)> {
    // Room for two snapshots: a view that falls behind (a slow terminal, a starved CPU) gets
    // the snapshots it could not take merged into one, so its memory and its lag stay bounded.
    let (sender, receiver) = mpsc::sync_channel(2);
    let session = options.session.clone();
    let interval = options.interval;
    let asks = Arc::clone(asks);
    let handle = std::thread::Builder::new()
        .name("lockscope-top".into())
        .spawn(move || {
            if let Err(e) = record(&session, interval, &asks, &sender) {
                let _ = sender.send(Update::Failed(e));
            }
        })
        .context("failed to start the recording thread")?;
    Ok((receiver, handle))
}

/// The recorder's thread: starts the recorder, polls it, sends a snapshot every `interval`
/// (and the whole profile so far when asked), and detaches every probe when asked to stop or
/// when the target is gone.
#[cfg(target_os = "linux")]
fn record(
    session: &SessionOptions,
    interval: Duration,
    asks: &Asks,
    updates: &mpsc::SyncSender<Update>,
) -> Result<()> {
    use lockscope_ebpf::Recorder;
    let options = crate::session::ebpf_record_options(session)?;
    let mut recorder = Recorder::start(options).context("failed to start recording")?;
    let target = recorder.target();
    let what = if target.all {
        "all processes".to_string()
    } else if let Some(cgroup) = &target.cgroup {
        format!("cgroup {cgroup}")
    } else {
        format!("pid {}", recorder.target_pid())
    };
    let _ = updates.send(Update::Started(what));
    let mut next = Instant::now() + interval;
    let mut unsent: Option<Snapshot> = None;
    let result = loop {
        if asks.stop.load(Ordering::Acquire) {
            break Ok(());
        }
        if asks.whole.swap(false, Ordering::AcqRel) {
            match recorder.snapshot() {
                // Sent even into a full channel: the view asked for it and reads on.
                Ok(profile) => {
                    if updates.send(Update::Whole(Box::new(profile))).is_err() {
                        break Ok(());
                    }
                }
                Err(e) => break Err(anyhow::Error::from(e).context("failed to read the probes")),
            }
        }
        let status = match recorder.poll() {
            Ok(status) => status,
            Err(e) => break Err(anyhow::Error::from(e).context("recording failed")),
        };
        let now = Instant::now();
        if now >= next || status.target_exited {
            match recorder.live_snapshot() {
                Ok(live) => {
                    let snapshot = Snapshot {
                        profile: live.profile,
                        first_new_stack: live.first_new_stack,
                        new_stacks: live.new_stacks,
                        bottleneck: live.bottleneck,
                    };
                    let snapshot = match unsent.take() {
                        Some(earlier) => earlier.followed_by(snapshot),
                        None => snapshot,
                    };
                    match updates.try_send(Update::Snapshot(Box::new(snapshot))) {
                        Ok(()) => {}
                        // The window needs every interval's blame and new stacks: a view that
                        // falls behind gets the snapshots it could not take as one, later.
                        Err(mpsc::TrySendError::Full(Update::Snapshot(snapshot))) => {
                            unsent = Some(*snapshot);
                        }
                        Err(_) => break Ok(()),
                    }
                }
                Err(e) => break Err(anyhow::Error::from(e).context("failed to read the probes")),
            }
            // A snapshot late by more than an interval does not make the next ones hurry.
            next = (next + interval).max(now + interval / 2);
        }
        if status.target_exited {
            let reason = crate::session::target_exit_reason(recorder.target_exit_status());
            let whole = recorder.snapshot().ok().map(Box::new);
            let _ = updates.send(Update::TargetGone(reason, whole));
            break Ok(());
        }
        let poll = if recorder.wants_early_polls() {
            Recorder::EARLY_POLL_INTERVAL
        } else {
            POLL_INTERVAL
        };
        recorder.wait(poll.min(next.saturating_duration_since(Instant::now())));
    };
    // Detach now; dropping the recorder releases every BPF object and ends a launched command.
    recorder.stop();
    drop(recorder);
    result
}

/// The eBPF backend where there is none.
#[cfg(not(target_os = "linux"))]
fn record(
    _session: &SessionOptions,
    _interval: Duration,
    _asks: &Asks,
    _updates: &mpsc::SyncSender<Update>,
) -> Result<()> {
    bail!("lockscope top needs the ebpf backend (Linux)")
}

/// The state a view keeps between refreshes: the snapshots of one window, and the totals of its
/// intervals (each computed once, as its snapshot comes).
pub(crate) struct Live {
    snapshots: window::Snapshots,
    intervals: std::collections::VecDeque<view::IntervalTotals>,
    /// The intervals' site names, by stack.
    site_names: view::SiteNames,
    /// Intervals in a window (for the trend).
    most: usize,
}

impl Live {
    fn new(options: &TopOptions) -> Live {
        let window_ns = options.window.as_nanos() as u64;
        let interval_ns = options.interval.as_nanos().max(1) as u64;
        Live {
            snapshots: window::Snapshots::new(window_ns),
            intervals: std::collections::VecDeque::new(),
            site_names: view::SiteNames::default(),
            most: (window_ns / interval_ns).clamp(1, 60) as usize,
        }
    }

    fn push(&mut self, snapshot: Snapshot) {
        self.snapshots.push(
            snapshot.profile,
            snapshot.first_new_stack,
            snapshot.new_stacks,
            snapshot.bottleneck,
        );
        let names = &mut self.site_names;
        if let Some(totals) =
            (self.snapshots).with_last_interval(|p| view::IntervalTotals::of(p, names))
        {
            self.intervals.push_back(totals);
            while self.intervals.len() > self.most {
                self.intervals.pop_front();
            }
        }
    }

    /// The view of the current window, `None` before the first snapshot; with `causes`, its
    /// causes too (the window's bottleneck analysis and `why` over it: most of a refresh's cost,
    /// so the screen asks for them only when it shows them).
    fn view(&mut self, sort: view::SortBy, name_width: usize, causes: bool) -> Option<view::View> {
        let so_far = self.snapshots.latest()?.metadata.clone();
        let intervals = self.intervals.make_contiguous();
        let view = self.snapshots.with_window(causes, |window| {
            view::View::build(window, intervals, &so_far, sort, name_width)
        });
        give_back_memory();
        view
    }

    /// The metadata of everything recorded so far.
    fn latest(&self) -> Option<&lockscope_probes::Metadata> {
        self.snapshots.latest().map(|p| &p.metadata)
    }
}

/// Returns the heap's free pages to the system. Each refresh allocates and frees tens of MB
/// (the interval's blame, the window's copy for `why`), in two threads, and glibc's heap kept
/// the freed pages between the live ones: the view's resident memory grew with them.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and may be called at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Writes `profile`, everything recorded so far, as `record` writes a profile; says where.
fn write_so_far(profile: &Profile, path: &std::path::Path) -> Result<String> {
    lockscope_probes::write_profile(profile, path)
        .with_context(|| format!("failed to write profile `{}`", path.display()))?;
    Ok(format!(
        "wrote {} ({} of recording)",
        path.display(),
        lockscope::render::units::format_ns(profile.metadata.duration_ns)
    ))
}

/// Standard output is not a terminal: one text block per interval, until a signal, the
/// duration or the target's exit.
fn plain(
    options: &TopOptions,
    started: &str,
    updates: &mpsc::Receiver<Update>,
    asks: &Asks,
) -> Result<()> {
    use std::io::Write;
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("failed to handle signals")?;
    }
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, text: &str| -> Result<bool> {
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(e).context("failed to write to standard output"),
        }
    };
    if !say(&mut out, &format!("lockscope top: recording {started}\n"))? {
        return Ok(());
    }
    let mut live = Live::new(options);
    loop {
        if interrupted.load(Ordering::Acquire) || asks.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        match updates.recv_timeout(Duration::from_millis(50)) {
            Ok(Update::Snapshot(snapshot)) => {
                live.push(*snapshot);
                if let Some(view) = live.view(view::SortBy::Time, 54, true) {
                    let at = lockscope::render::units::format_ns(view.elapsed_ns);
                    if !say(
                        &mut out,
                        &format!("{}\n", view.text_block(&at, options.top)),
                    )? {
                        return Ok(());
                    }
                }
                if reached(options, &live) {
                    return Ok(());
                }
            }
            Ok(Update::TargetGone(reason, _)) => {
                say(&mut out, &format!("lockscope top: {reason}\n"))?;
                return Ok(());
            }
            Ok(Update::Failed(e)) => return Err(e),
            Ok(Update::Started(_) | Update::Whole(_)) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// Whether the recording reached `-d`'s duration.
fn reached(options: &TopOptions, live: &Live) -> bool {
    options.session.duration.is_some_and(|limit| {
        live.latest()
            .is_some_and(|m| m.duration_ns >= limit.as_nanos() as u64)
    })
}

/// The demo's recording with the bottleneck probes, which the view's and the window's tests
/// read.
#[cfg(test)]
fn demo_profile() -> lockscope_probes::Profile {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/demo/demo-bottleneck.lsp"
    );
    lockscope_probes::read_profile(std::path::Path::new(path)).expect("profile")
}
