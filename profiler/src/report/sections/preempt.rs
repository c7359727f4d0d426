//! The `preempt` probe's section, CPU saturation (JSON key `cpu_saturation`): the `offcpu`
//! probe's intervals of threads waiting for a CPU (run queue after a wakeup, preempted), kept out
//! of the waits, per site and per thread.

use super::*;
use lockscope_probes::catalog::offcpu_operation;

/// This file's section, for `build.rs`'s list.
pub(super) const SECTION: Entry = Entry::of::<CpuSaturation>();

/// Threads waiting for a CPU.
#[derive(Serialize)]
pub(super) struct CpuSaturation {
    cpu_count: u32,
    /// Time in the run queue after a wakeup, and preempted, summed over threads.
    run_queue_ns: u64,
    preempted_ns: u64,
    /// The target's threads waiting for a CPU, on average over the recording.
    waiting_threads: f64,
    /// The target's threads on a CPU, on average (from the per-thread times; absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    running_threads: Option<f64>,
    /// Heaviest first, by wait and frame: `frame` is the site of the sleep a run-queue delay
    /// woke from, or where a preempted thread was running (`[preempted]` without the `preempt`
    /// probe's stacks).
    sites: Vec<SiteRow>,
    threads: Vec<SaturationThread>,
}

#[derive(Serialize)]
pub(super) struct SaturationThread {
    pid: u32,
    tid: u32,
    name: String,
    run_queue_ns: u64,
    preempted_ns: u64,
}

fn cpu_saturation(profile: &Profile) -> Option<CpuSaturation> {
    let waits: Vec<&WaitRecord> = profile.waits.iter().filter(|w| w.is_cpu_wait()).collect();
    if waits.is_empty() {
        return None;
    }
    let (mut run_queue_ns, mut preempted_ns) = (0u64, 0u64);
    let mut threads: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
    for w in &waits {
        let entry = threads.entry((w.pid, w.tid)).or_default();
        if w.operation == offcpu_operation::PREEMPTED {
            preempted_ns += w.stats.total_ns;
            entry.1 += w.stats.total_ns;
        } else {
            run_queue_ns += w.stats.total_ns;
            entry.0 += w.stats.total_ns;
        }
    }
    let seconds = profile.metadata.duration_ns as f64 / 1e9;
    let per_second = |ns: u64| {
        if seconds > 0.0 {
            (ns as f64 / 1e9 / seconds * 100.0).round() / 100.0
        } else {
            0.0
        }
    };
    let on_cpu: u64 = profile
        .thread_times
        .iter()
        .map(|t| t.ns(TimeClass::OnCpu))
        .sum();
    let sites = sites_by_frame(site_rows(
        profile,
        waits.iter().map(|&w| (w, None)),
        usize::MAX,
    ));
    let mut thread_rows: Vec<SaturationThread> = threads
        .into_iter()
        .map(
            |((pid, tid), (run_queue_ns, preempted_ns))| SaturationThread {
                pid,
                tid,
                name: thread_label(profile, pid, tid),
                run_queue_ns,
                preempted_ns,
            },
        )
        .collect();
    thread_rows.sort_by_key(|t| (Reverse(t.run_queue_ns + t.preempted_ns), t.pid, t.tid));
    thread_rows.truncate(TOP);
    Some(CpuSaturation {
        cpu_count: profile.metadata.cpu_count,
        run_queue_ns,
        preempted_ns,
        waiting_threads: per_second(run_queue_ns + preempted_ns),
        running_threads: (!profile.thread_times.is_empty()).then(|| per_second(on_cpu)),
        sites,
        threads: thread_rows,
    })
}

/// `rows` merged by wait and frame, heaviest first, the first [`TOP`]: a preemption's stack
/// (the `preempt` probe) differs at almost every pc where threads run, a site is a function.
/// A preemption without a stack is `[preempted]`.
fn sites_by_frame(rows: Vec<SiteRow>) -> Vec<SiteRow> {
    let mut merged: Vec<SiteRow> = Vec::new();
    // Site (wait, frame) -> its index in `merged`: a preempt recording has thousands of rows.
    let mut index: BTreeMap<(String, String), usize> = BTreeMap::new();
    for mut row in rows {
        if row.operation == offcpu_operation::PREEMPTED && row.user_stack.is_none() {
            row.frame = "[preempted]".to_string();
        }
        let key = (row.operation.clone(), row.frame.clone());
        match index.get(&key).map(|&i| &mut merged[i]) {
            // `rows` come heaviest first: the first row of a site keeps its stack.
            Some(site) => {
                site.count += row.count;
                site.total_ns += row.total_ns;
                site.max_ns = site.max_ns.max(row.max_ns);
                for thread in row.threads {
                    if !site.threads.contains(&thread) {
                        site.threads.push(thread);
                    }
                }
            }
            None => {
                index.insert(key, merged.len());
                merged.push(row);
            }
        }
    }
    merged.sort_by_key(|r| (Reverse(r.total_ns), Reverse(r.count)));
    merged.truncate(TOP);
    merged
}

/// Text and JSON only: no table of `lockscope html`.
impl Section for CpuSaturation {
    const SOURCE: Source = Source::Cpu(&catalog::PREEMPT);

    fn build(profile: &Profile) -> Option<CpuSaturation> {
        cpu_saturation(profile)
    }

    fn write_text(&self, out: &mut String, _style: StackStyle) {
        let _ = writeln!(out);
        let title = format!(
            "CPU saturation (offcpu): {} waiting for a CPU ({} in the run queue after a wakeup, \
             {} preempted)",
            format_ns(self.run_queue_ns + self.preempted_ns),
            format_ns(self.run_queue_ns),
            format_ns(self.preempted_ns)
        );
        let _ = writeln!(
            out,
            "{}",
            crate::render::frames::wrap(&title, "", "  ", crate::render::frames::TEXT_WIDTH)
        );
        let running = self
            .running_threads
            .map_or(String::new(), |r| format!(", {r:.2} running"));
        let _ = writeln!(
            out,
            "  threads of the target on average: {:.2} waiting for a CPU{running}, on {} CPUs",
            self.waiting_threads, self.cpu_count
        );
        let _ = writeln!(
            out,
            "  {:<11}{:>8}{:>11}{:>11}  {:<28} threads",
            "wait", "count", "total", "max", "site (woken from/preempted)"
        );
        for r in &self.sites {
            let _ = writeln!(
                out,
                "  {:<11}{:>8}{:>11}{:>11}  {:<28} {}",
                r.operation,
                r.count,
                format_ns(r.total_ns),
                format_ns(r.max_ns),
                crate::render::frames::shorten(&r.frame, 27),
                crate::render::frames::thread_list(&r.threads, 100 - 75)
            );
        }
        let _ = writeln!(
            out,
            "  {:<28}{:>12}{:>12}",
            "thread", "run-queue", "preempted"
        );
        for t in &self.threads {
            let _ = writeln!(
                out,
                "  {:<28}{:>12}{:>12}",
                truncate(&format!("{} (tid {})", t.name, t.tid), 27),
                format_ns(t.run_queue_ns),
                format_ns(t.preempted_ns)
            );
        }
    }
}
