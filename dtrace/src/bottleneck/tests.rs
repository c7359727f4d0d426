use super::*;
use crate::catalog::TargetOs;
use lockscope_probes::bottleneck::{RawBlame, RootKind, ThreadRef, WaitPart, WokenBy};
use lockscope_probes::TimeClass;

/// A recording of `sleep_under_lock` (built with frame pointers) by DTrace for Linux with
/// the `waitfor` script, cut down to request-2's (tid 30472) intervals: a mutex wait that
/// request-1 ends from `futex_wake`, another, then a `clock_nanosleep` that an hrtimer ends
/// (in the idle task's context, pid 0), with request-1's own switch-outs between.
const CAPTURED: &str = "\
=== wf begin 1301150000000
=== wf out 1301154041439 30470 30472 1 202 request-2
=== ustack
          libc.so.6`0x7fd961c3812b
          sul_fp`request_thread+0x22
          libc.so.6`0x7fd961c3b1f5
=== wf wake 1301156136557 30470 30472 30470 30471 request-1
=== kstack
          0xffffffffc002969c
          0xffffffffc0029212
          vmlinux`bpf_trace_run1+0xfe
          vmlinux`try_to_wake_up+0x3b6
          vmlinux`wake_up_q+0x33
          vmlinux`futex_wake+0x199
          vmlinux`do_futex+0x183
          vmlinux`__x64_sys_futex+0x12d
          vmlinux`do_syscall_64+0x71
          vmlinux`entry_SYSCALL_64_after_hwframe+0x76
=== ustack
          libc.so.6`0x7fd961c38193
          libc.so.6`0x7fd961c3b1f5
=== wf out 1301156260671 30470 30471 1 230 request-1
=== ustack
          libc.so.6`clock_nanosleep+0x65
          sul_fp`request_critical_section+0xe
          sul_fp`request_thread+0x27
          libc.so.6`0x7fd961c3b1f5
=== wf in 1301156269045 30470 30472 30470 30471 request-1
=== wf out 1301156279191 30470 30472 1 202 request-2
=== ustack
          libc.so.6`0x7fd961c3812b
          sul_fp`request_thread+0x22
          libc.so.6`0x7fd961c3b1f5
=== wf wake 1301162803996 30470 30472 30470 30471 request-1
=== kstack
          0xffffffffc002969c
          0xffffffffc0029212
          vmlinux`bpf_trace_run1+0xfe
          vmlinux`try_to_wake_up+0x3b6
          vmlinux`wake_up_q+0x33
          vmlinux`futex_wake+0x199
          vmlinux`do_futex+0x183
          vmlinux`__x64_sys_futex+0x12d
          vmlinux`do_syscall_64+0x71
          vmlinux`entry_SYSCALL_64_after_hwframe+0x76
=== ustack
          libc.so.6`0x7fd961c38193
          libc.so.6`0x7fd961c3b1f5
=== wf out 1301162825501 30470 30471 2 202 request-1
=== ustack
          libc.so.6`0x7fd961c38193
          libc.so.6`0x7fd961c3b1f5
=== wf in 1301162835520 30470 30472 30470 30471 request-1
=== wf out 1301162896472 30470 30472 1 230 request-2
=== ustack
          libc.so.6`clock_nanosleep+0x65
          sul_fp`request_critical_section+0xe
          sul_fp`request_thread+0x27
          libc.so.6`0x7fd961c3b1f5
=== wf wake 1301164962488 30470 30472 0 0 swapper/1
=== kstack
          0xffffffffc002a3e4
          0xffffffffc0029233
          vmlinux`bpf_trace_run1+0xfe
          vmlinux`try_to_wake_up+0x3b6
          vmlinux`hrtimer_wakeup+0x1e
          vmlinux`__hrtimer_run_queues+0x12e
          vmlinux`hrtimer_interrupt+0xf8
          vmlinux`__sysvec_apic_timer_interrupt+0x54
          vmlinux`sysvec_apic_timer_interrupt+0x60
          vmlinux`asm_sysvec_apic_timer_interrupt+0x16
          vmlinux`pv_native_safe_halt+0xb
          vmlinux`default_idle+0x5
=== wf in 1301164993449 30470 30472 0 0 swapper/1
=== wf end 1301170000000
";

const REQUEST_1: ThreadRef = ThreadRef {
    pid: 30470,
    tid: 30471,
};
const REQUEST_2: ThreadRef = ThreadRef {
    pid: 30470,
    tid: 30472,
};

/// The events of `text`, one per event line (a line with its stack lines).
fn blocks(text: &str) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("=== wf ") || out.is_empty() {
            out.push(Vec::new());
        }
        if let Some(last) = out.last_mut() {
            last.push(line);
        }
    }
    out
}

fn stream_of(blocks: &[Vec<&str>]) -> StreamResult {
    let mut stream = BottleneckStream::new(TargetOs::Linux);
    for block in blocks {
        for line in block {
            assert!(stream.feed_line(line), "not taken: {line}");
        }
    }
    stream.finish().expect("the stream began")
}

/// Each kind of line gives its fields: the call by number on Linux (-1, printed unsigned,
/// is none), by name elsewhere (`-`: none), and a name with spaces to the line's end.
#[test]
fn event_lines() {
    let out = parse_event_line(
        "=== wf out 1301162896472 30470 30472 1 230 request-2",
        TargetOs::Linux,
    )
    .expect("out");
    assert_eq!((out.ts, out.thread), (1_301_162_896_472, REQUEST_2));
    assert_eq!(
        out.kind,
        EventKind::Out {
            state: 1,
            call: Some("clock_nanosleep".into()),
            name: "request-2".into()
        }
    );
    let preempted = parse_event_line(
        "=== wf out 5 1 2 2 18446744073709551615 lto cgu.06",
        TargetOs::Linux,
    )
    .expect("out");
    assert_eq!(
        preempted.kind,
        EventKind::Out {
            state: 2,
            call: None,
            name: "lto cgu.06".into()
        }
    );
    let illumos =
        parse_event_line("=== wf out 5 1 2 1 lwp_park java", TargetOs::Illumos).expect("out");
    assert!(matches!(illumos.kind, EventKind::Out { call: Some(ref c), .. } if c == "lwp_park"));
    let none = parse_event_line("=== wf out 5 1 2 1 - java", TargetOs::FreeBsd).expect("out");
    assert!(matches!(none.kind, EventKind::Out { call: None, .. }));
    let wake = parse_event_line(
        "=== wf wake 1301164962488 30470 30472 0 0 swapper/1",
        TargetOs::Linux,
    )
    .expect("wake");
    assert_eq!(
        wake.kind,
        EventKind::Wake {
            waker: ThreadRef { pid: 0, tid: 0 },
            waker_name: "swapper/1".into()
        }
    );
    let switch_in = parse_event_line(
        "=== wf in 1301156269045 30470 30472 30470 30471 request-1",
        TargetOs::Linux,
    )
    .expect("in");
    assert_eq!(switch_in.thread, REQUEST_2);
    assert_eq!(
        switch_in.kind,
        EventKind::In {
            prev: REQUEST_1,
            prev_name: "request-1".into()
        }
    );
    assert_eq!(
        parse_event_line("=== wf new 7 30470 30472", TargetOs::Linux).map(|e| e.kind),
        Some(EventKind::New)
    );
    assert_eq!(
        parse_event_line("=== wf begin 12", TargetOs::Linux).map(|e| (e.ts, e.kind)),
        Some((12, EventKind::Begin))
    );
    assert_eq!(parse_event_line("=== wf out x", TargetOs::Linux), None);
    assert_eq!(
        parse_event_line("=== lockscope done", TargetOs::Linux),
        None
    );
}

/// Stack lines go to the event they follow, kernel and user apart; a line that is not the
/// stream's (the target's own output, END's records) ends the event and is left to the
/// caller.
#[test]
fn stacks_and_foreign_lines() {
    let mut parser = StreamParser::new(TargetOs::Linux);
    for line in blocks(CAPTURED)[2].iter() {
        assert!(parser.feed_line(line), "{line}");
    }
    assert!(!parser.feed_line("throughput: 440.3 units/s (1321 units in 3.000 s)"));
    assert!(!parser.feed_line("=== lockscope record probe=futex kind=auto"));
    assert!(
        !parser.feed_line("=== ustack"),
        "a record's stack is not the stream's"
    );
    let events = parser.take_events();
    assert_eq!(events.len(), 1);
    let wake = &events[0];
    assert_eq!(wake.kernel_stack.len(), 10);
    assert_eq!(wake.kernel_stack[5].text, "vmlinux`futex_wake+0x199");
    let user: Vec<&str> = wake.user_stack.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(
        user,
        ["libc.so.6`0x7fd961c38193", "libc.so.6`0x7fd961c3b1f5"]
    );
    assert!(!wake
        .kernel_stack
        .iter()
        .any(|f| is_interrupt_frame(&f.text)));
    let timer = &parse_all(&blocks(CAPTURED)[10..11])[0];
    assert!(timer
        .kernel_stack
        .iter()
        .any(|f| is_interrupt_frame(&f.text)));
}

fn parse_all(blocks: &[Vec<&str>]) -> Vec<Event> {
    let mut parser = StreamParser::new(TargetOs::Linux);
    for line in blocks.iter().flatten() {
        parser.feed_line(line);
    }
    parser.flush();
    parser.take_events()
}

/// request-2's three sleeps become three intervals however the CPUs' buffers interleave
/// them: the two mutex waits woken by request-1 (a thread of the program: followed to it),
/// the nanosleep by an interrupt (pid 0, a timer's stack): its own sleep, `blocked` in
/// clock_nanosleep; every nanosecond of each is blamed once, and the thread's classes add up
/// to its wall time.
#[test]
fn captured_intervals_in_any_order() {
    let blocks = blocks(CAPTURED);
    // As two CPUs' buffers print: the odd events first, then the even ones (begin and end
    // stay first and last).
    let (first, last) = (blocks[0].clone(), blocks[blocks.len() - 1].clone());
    let middle = &blocks[1..blocks.len() - 1];
    let mut shuffled = vec![first];
    shuffled.extend(middle.iter().step_by(2).cloned());
    shuffled.extend(middle.iter().skip(1).step_by(2).cloned());
    shuffled.push(last);
    for order in [blocks.clone(), shuffled] {
        let result = stream_of(&order);
        assert_eq!(result.counts.intervals, 3, "request-2's three ({order:?})");
        assert_eq!(result.counts.lost_intervals, 0);
        // The excerpt leaves out request-1's switch-ins between its two switch-outs: as far
        // as the stream can tell, one was lost (request-1 has no interval to mark).
        assert_eq!(result.inconsistent, 1);
        let mine: Vec<&RawBlame<u32>> = result
            .blame
            .iter()
            .filter(|b| b.wait.thread == REQUEST_2)
            .collect();
        let expected = (1_301_156_269_045 - 1_301_154_041_439)
            + (1_301_162_835_520 - 1_301_156_279_191)
            + (1_301_164_993_449 - 1_301_162_896_472);
        assert_eq!(mine.iter().map(|b| b.total_ns).sum::<u64>(), expected);
        let followed: u64 = mine
            .iter()
            .filter(|b| b.wait.woken_by == Some(WokenBy::Program))
            .map(|b| b.total_ns)
            .sum();
        assert_eq!(
            followed,
            (1_301_156_136_557 - 1_301_154_041_439) + (1_301_162_803_996 - 1_301_156_279_191)
        );
        assert!(mine
            .iter()
            .filter(|b| b.wait.woken_by == Some(WokenBy::Program))
            .all(|b| b.wait.waker == Some(REQUEST_1) && b.depth >= 1));
        let timer: Vec<_> = mine
            .iter()
            .filter(|b| b.wait.woken_by == Some(WokenBy::Interrupt))
            .collect();
        assert_eq!(timer.len(), 1, "{timer:?}");
        assert_eq!(timer[0].root.kind, RootKind::Blocked);
        assert_eq!(timer[0].wait.part, WaitPart::Asleep);
        assert_eq!(
            result
                .calls
                .get(timer[0].root.call as usize)
                .map(String::as_str),
            Some("clock_nanosleep")
        );
        assert_eq!(timer[0].total_ns, 1_301_164_962_488 - 1_301_162_896_472);
        // The runnable part after the timer: the idle CPU's latency (holder tid 0).
        let runnable: Vec<_> = mine
            .iter()
            .filter(|b| {
                b.wait.part == WaitPart::Runnable && b.root.holder.is_some_and(|h| h.tid == 0)
            })
            .collect();
        assert_eq!(
            runnable.iter().map(|b| b.total_ns).sum::<u64>(),
            1_301_164_993_449 - 1_301_164_962_488
        );
        let times = result
            .thread_times
            .iter()
            .find(|t| t.tid == REQUEST_2.tid)
            .expect("request-2's times");
        assert_eq!(times.accounted_ns(), times.wall_ns);
        assert_eq!(times.wall_ns, 1_301_170_000_000 - 1_301_150_000_000);
        assert_eq!(times.voluntary_switches, 3);
        assert!(result.names.contains(&(REQUEST_2, "request-2".to_string())));
    }
}

/// A thread's intervals never overlap, even where events came too late to be acted on in
/// order: its off-CPU time is at most the span its intervals cover.
#[test]
fn intervals_of_a_thread_never_overlap() {
    let far = 600_000_000; // past REORDER_NS: the events before it are acted on
    let lines = [
        "=== wf begin 1000".to_string(),
        "=== wf out 1500 1 2 1 202 worker".into(),
        "=== wf in 1800 1 2 0 0 swapper/0".into(),
        "=== wf out 1900 1 2 1 202 worker".into(),
        format!("=== wf out {far} 1 3 1 202 other"),
        // The worker's switch-in at 1600 and switch-out at 1700 come late.
        "=== wf in 1600 1 2 0 0 swapper/0".into(),
        "=== wf out 1700 1 2 1 202 worker".into(),
        "=== wf in 2000 1 2 0 0 swapper/0".into(),
        format!("=== wf end {}", far + 1000),
    ];
    let mut stream = BottleneckStream::new(TargetOs::Linux);
    for line in &lines {
        assert!(stream.feed_line(line), "{line}");
    }
    let result = stream.finish().expect("began");
    assert!(result.late > 0);
    let times = result
        .thread_times
        .iter()
        .find(|t| t.tid == 2)
        .expect("worker's times");
    let off: u64 = times
        .time_ns
        .iter()
        .filter(|(class, _)| **class != TimeClass::OnCpu)
        .map(|(_, ns)| ns)
        .sum();
    // Off its CPU from 1500 at the earliest to 2000 at the latest, once at a time.
    assert!(off <= 2000 - 1500, "{times:?}");
    assert!(result.inconsistent > 0);
}

/// A lost switch-in (two switch-outs in a row) is counted, and the engine sees a gap in the
/// thread's interval numbers: lost, and unknown to whoever waited on it then; a wakeup of a
/// thread that is not asleep ends nothing; a sleep whose wakeup was not seen is asleep to
/// its end, by an unknown waker.
#[test]
fn lost_and_unmatched_events() {
    let lines = [
        "=== wf begin 1000",
        "=== wf out 1500 1 2 1 202 worker",
        "=== wf in 1800 1 2 0 0 swapper/0",
        "=== wf out 2000 1 2 1 202 worker",
        "=== wf out 3000 1 2 1 202 worker",
        "=== wf in 4000 1 2 1 3 other",
        "=== wf wake 4500 1 2 1 3 other",
        "=== wf out 5000 1 2 1 202 worker",
        "=== wf in 6000 1 2 0 0 swapper/0",
        "=== wf end 7000",
    ];
    let mut stream = BottleneckStream::new(TargetOs::Linux);
    for line in lines {
        assert!(stream.feed_line(line));
    }
    let result = stream.finish().expect("began");
    assert_eq!(result.inconsistent, 1);
    assert_eq!(result.counts.intervals, 3);
    assert_eq!(result.counts.lost_intervals, 1);
    let unseen: Vec<_> = result
        .blame
        .iter()
        .filter(|b| b.wait.part == WaitPart::Asleep)
        .map(|b| (b.wait.woken_by, b.waits, b.total_ns))
        .collect();
    // 300 + 1000 + 1000: each sleep whole, none ended by the wakeup at 4500.
    assert_eq!(unseen, vec![(None, 3, 2300)], "{:?}", result.blame);
}
