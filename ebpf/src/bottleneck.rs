//! The bottleneck stream: the shared `bottleneck_events` ring buffer (`bpf/common.bpf.h`), into which
//! the `offcpu` object writes every off-CPU interval of the target's threads and the `cpu` object
//! every sample, read at each poll of the recorder into the OS-neutral bottleneck [`Engine`]
//! (`lockscope_probes::bottleneck`), which analyses them as the recording goes. The programs wake
//! the recorder only when the ring is a quarter full ([`BottleneckStream::wait`]).

use crate::error::Error;
use crate::object::{comm_str, read_plain, Plain};
use crate::probe::{DrainedBottleneck, StackMapId};
use crate::probes::offcpu_interval;
use crate::shared::SharedMaps;
use crate::skel::offcpu::types::{offcpu_interval as Interval, waker_class};
use crate::skel::shared::types::{lks_cpu_sample, lks_event_type};
use lockscope_probes::bottleneck::{Engine, EngineLimits, ThreadRef};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

/// Size of the ring buffer. An interval takes 144 bytes of it: 8 MiB hold 58,000, 1.35 s of
/// MariaDB under sysbench at 50 threads (43,000 switches a second), 0.29 s at 200,000 (two busy
/// CPUs). The recorder reads it every 100 ms, and at once when it is a quarter full
/// (`lks_stream_submit_flags`), which leaves three quarters for the time it takes to come
/// round. The ring is mapped twice in the recorder (its pages follow each other again for
/// records that wrap), and all of it counts in its resident memory from the start: 16 MiB were
/// 32 MB of it, 32 MiB 64 MB.
pub(crate) const EVENTS_BYTES: u32 = 8 << 20;

// SAFETY: a generated #[repr(C)] struct of integers and a #[repr(transparent)] u32 enum: valid
// for every bit pattern.
unsafe impl Plain for lks_cpu_sample {}

/// A record of the ring, decoded.
enum Event {
    Interval(Interval),
    Sample(lks_cpu_sample),
}

/// The ring buffer's reader and the engine it feeds.
pub(crate) struct BottleneckStream {
    ring: libbpf_rs::RingBuffer<'static>,
    /// What the ring's callback decoded since the last poll.
    received: Rc<RefCell<Vec<Event>>>,
    engine: Engine<StackMapId>,
    /// The programs' wakeups, for [`BottleneckStream::wait`].
    alarm: Alarm,
}

impl BottleneckStream {
    /// Reads the shared ring from now on, for a recording that starts at `start_ns`.
    pub fn open(shared: &SharedMaps, start_ns: u64) -> Result<Self, Error> {
        let map_error = |source| Error::Map {
            map: "bottleneck_events",
            source,
        };
        let map = shared.map("bottleneck_events").ok_or_else(|| {
            map_error(libbpf_rs::Error::from(std::io::Error::from(
                std::io::ErrorKind::NotFound,
            )))
        })?;
        let alarm = Alarm::watch(map.as_fd()).map_err(|e| map_error(libbpf_rs::Error::from(e)))?;
        let received: Rc<RefCell<Vec<Event>>> = Rc::default();
        let sink = Rc::clone(&received);
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(map, move |bytes: &[u8]| {
                let kind = read_plain::<u32>(bytes).map(lks_event_type);
                let event = match kind {
                    Some(lks_event_type::LKS_EVENT_INTERVAL) => {
                        read_plain::<Interval>(bytes).map(Event::Interval)
                    }
                    Some(lks_event_type::LKS_EVENT_CPU_SAMPLE) => {
                        read_plain::<lks_cpu_sample>(bytes).map(Event::Sample)
                    }
                    _ => None,
                };
                if let Some(event) = event {
                    sink.borrow_mut().push(event);
                }
                0
            })
            .map_err(map_error)?;
        Ok(BottleneckStream {
            ring: builder.build().map_err(map_error)?,
            received,
            engine: Engine::new(start_ns, EngineLimits::default()),
            alarm,
        })
    }

    /// Sleeps up to `timeout`, or until the programs say the ring is a quarter full
    /// (`lks_stream_submit_flags`): a burst is then read at once instead of at the next poll,
    /// before it can fill the ring.
    pub fn wait(&self, timeout: Duration) {
        self.alarm.wait(timeout);
    }

    /// Feeds what the ring holds into the engine and lets it analyse up to `now_ns`.
    pub fn consume(&mut self, now_ns: u64) -> Result<(), Error> {
        self.ring.consume().map_err(|source| Error::Map {
            map: "bottleneck_events",
            source,
        })?;
        for event in self.received.borrow_mut().drain(..) {
            match event {
                Event::Interval(e) => {
                    let waker_bytes = e.waker_comm.map(|c| c as u8);
                    let waker = (e.woken_by == waker_class::LKS_WOKEN_BY_OUTSIDE)
                        .then(|| comm_str(&waker_bytes));
                    let holder_bytes = e.holder_comm.map(|c| c as u8);
                    let holder = comm_str(&holder_bytes);
                    self.engine
                        .push(offcpu_interval(&e), waker.as_deref(), Some(&holder));
                }
                Event::Sample(s) => self.engine.push_sample(
                    ThreadRef {
                        pid: s.tgid,
                        tid: s.tid,
                    },
                    s.time_ns,
                    StackMapId::new(s.user_stack_id),
                ),
            }
        }
        self.engine.advance(now_ns);
        Ok(())
    }

    /// Reads what the ring holds and returns the analysis so far, the stream going on (a live
    /// view's snapshot: the intervals still within the engine's lag are not in it yet).
    pub fn so_far(&mut self, now_ns: u64) -> Result<DrainedBottleneck, Error> {
        self.consume(now_ns)?;
        let (counts, blame, sampled) = self.engine.analysed();
        Ok(DrainedBottleneck {
            limits: self.engine.limits(),
            counts,
            blame,
            sampled,
        })
    }

    /// Reads what the ring holds and returns the analysis of the intervals analysed since the
    /// last call (the first call: since the start), the stream going on: a live view's interval.
    pub fn changed(&mut self, now_ns: u64) -> Result<DrainedBottleneck, Error> {
        self.consume(now_ns)?;
        let (counts, blame, sampled) = self.engine.changed();
        Ok(DrainedBottleneck {
            limits: self.engine.limits(),
            counts,
            blame,
            sampled,
        })
    }

    /// Reads what is left (call after the probes are detached) and ends the analysis.
    pub fn finish(mut self, now_ns: u64) -> Result<DrainedBottleneck, Error> {
        self.consume(now_ns)?;
        let limits = self.engine.limits();
        let (counts, blame, sampled) = self.engine.finish();
        Ok(DrainedBottleneck {
            limits,
            counts,
            blame,
            sampled,
        })
    }
}

/// An epoll instance that watches the ring edge-triggered, so that it reports the programs'
/// wakeups only. libbpf's own (level-triggered) reports the ring as long as any record is unread:
/// on a busy server, always, and a wait on it would never sleep.
struct Alarm(OwnedFd);

impl Alarm {
    fn watch(ring: BorrowedFd<'_>) -> io::Result<Self> {
        // SAFETY: no pointer is passed; the result is checked before use.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created, and nothing else owns it.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0,
        };
        // SAFETY: both descriptors are open for the call, and `event` outlives it.
        let added = unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                ring.as_raw_fd(),
                &mut event,
            )
        };
        if added < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Alarm(epoll))
    }

    /// Returns after `timeout` or at a wakeup, whichever comes first (early on a signal too: the
    /// caller polls and checks its stop flags either way).
    fn wait(&self, timeout: Duration) {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `event` has room for the one event `maxevents` allows.
        unsafe { libc::epoll_wait(self.0.as_raw_fd(), &mut event, 1, ms) };
    }
}
