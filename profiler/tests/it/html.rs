//! `lockscope chart` and `lockscope html` on a sweep built from fixture profiles: the chart and
//! the page are self-contained, and the page loads in headless Chromium with no console message
//! (the screenshot is kept for a person to look at; skips loudly without Chromium): the sweep page
//! (a fixture sweep and a real MariaDB sweep), the page of a single recording and that of a diff.

use crate::common;
use crate::common::fixtures;

use common::*;
use lockscope::sweep::{fill_scaling, find_knee, finding, summarize_level, Sweep, SWEEP_VERSION};
use lockscope_probes::{ThreadTime, TimeClass};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the time of `threads` threads went, every thread alike over the whole recording: the
/// per-mille of its wall time in on-CPU, run-queue, lock and condvar (they add up to 1000).
fn thread_times(
    profile: &lockscope_probes::Profile,
    threads: u32,
    per_mille: [u64; 4],
) -> Vec<ThreadTime> {
    let wall_ns = profile.metadata.duration_ns;
    let classes = [
        TimeClass::OnCpu,
        TimeClass::RunQueue,
        TimeClass::Lock,
        TimeClass::Condvar,
    ];
    (0..threads)
        .map(|i| ThreadTime {
            pid: profile.metadata.target.pid,
            tid: 5000 + i,
            wall_ns,
            time_ns: classes
                .iter()
                .zip(per_mille)
                .map(|(&class, p)| (class, wall_ns / 1000 * p))
                .collect(),
            voluntary_switches: 10,
            involuntary_switches: 1,
            woken_ns: Default::default(),
        })
        .collect()
}

/// A sweep directory with three levels: throughput rises, then falls, while mutex waits grow and
/// the threads' time moves from on-CPU to lock; level 5 was recorded without the `offcpu` probe.
fn write_sweep(dir: &Path) -> Sweep {
    let mut levels = Vec::new();
    let shapes = [
        (1u32, 1000.0, 1u64, Some([700, 50, 50, 200])),
        (2, 1800.0, 2, Some([450, 200, 250, 100])),
        (5, 900.0, 6, None),
    ];
    for (c, throughput, factor, breakdown) in shapes {
        let mut profile = fixtures::demo_profile();
        for w in &mut profile.waits {
            if w.kind == lockscope_probes::WaitKind::Mutex {
                w.stats.total_ns *= factor;
                w.stats.count *= factor;
            }
        }
        if let Some(per_mille) = breakdown {
            profile.thread_times = thread_times(&profile, c + 1, per_mille);
        }
        let name = format!("level-{c}.lsp");
        lockscope_probes::write_profile(&profile, &dir.join(&name)).expect("write level profile");
        levels.push(summarize_level(
            c,
            throughput,
            &profile,
            (&name, "level.load.txt"),
        ));
    }
    fill_scaling(&mut levels);
    let knee = find_knee(&levels);
    let sentence = finding(&levels, knee.as_ref());
    let sweep = Sweep {
        sweep_version: SWEEP_VERSION,
        load: "sysbench oltp_read_only --threads={c} run".to_string(),
        server: None,
        pid: 4242,
        target: None,
        duration_ns: 2_000_000_000,
        throughput_parser: "sysbench".to_string(),
        throughput_unit: "transactions/s".to_string(),
        levels,
        knee,
        finding: sentence,
        warnings: vec!["level 5 lost 3 waits while recording: its shares undercount".to_string()],
        probes: None,
        min_block_ns: None,
        syscalls: None,
    };
    std::fs::write(
        dir.join("sweep.json"),
        serde_json::to_string_pretty(&sweep).expect("encode"),
    )
    .expect("write sweep");
    sweep
}

/// Runs `cmd`, fails the test unless it succeeds, and returns its stderr (where lockscope says
/// what it wrote).
fn run_ok_stderr(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run lockscope");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Nothing in `text` makes a browser fetch from the network.
fn assert_self_contained(text: &str) {
    for needle in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "<link",
        "src=\"//",
    ] {
        assert!(!text.contains(needle), "the page fetches: {needle}");
    }
}

/// The chart names every level, marks the knee, labels the scaling, draws average threads waiting
/// (never a percentage of one clock) and, beneath, each level's thread time stacked by class, the
/// level without a breakdown saying so; it reads as XML-ish SVG and matches its golden file; a
/// .png output is a PNG of twice the SVG's size; other extensions are refused.
#[test]
fn chart_of_a_sweep() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep = write_sweep(dir.path());
    assert_eq!(sweep.knee.as_ref().map(|k| k.concurrency), Some(2));
    let svg_path = dir.path().join("scaling.svg");
    run_ok_stderr(
        lockscope()
            .arg("chart")
            .arg(dir.path())
            .arg("-o")
            .arg(&svg_path),
    );
    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(">knee<"));
    for label in [
        ">100%<",
        ">180%<",
        ">90%<",
        ">mutex wait<",
        ">threads waiting (average)<",
        ">Where the threads' time went<",
        ">share of thread time<",
    ] {
        assert!(svg.contains(label), "{label} missing");
    }
    assert!(
        !svg.contains("% of wall time"),
        "no percentage of one clock"
    );
    // Levels 1 and 2 stack their four classes; level 5 has an empty bar that says why.
    for class in ["on-cpu", "run-queue", "lock", "condvar"] {
        assert_eq!(
            svg.matches(&format!("<rect class=\"class-{class}\""))
                .count(),
            2,
            "{class}"
        );
    }
    assert_eq!(
        svg.matches("<rect class=\"class-").count(),
        8,
        "no zero segments"
    );
    assert_eq!(svg.matches("<rect class=\"no-breakdown\"").count(), 1);
    assert!(svg.contains("concurrency 5: no breakdown: recorded without the offcpu probe"));
    assert!(svg.contains("concurrency 2: lock 25.0% of thread time (0.75 threads on average)"));
    assert_self_contained(&svg);
    check_golden("sweep_chart.svg", &svg);
    // PNG: rendered from the same SVG at twice its size.
    let png_path = dir.path().join("scaling.png");
    run_ok_stderr(
        lockscope()
            .arg("chart")
            .arg(dir.path())
            .arg("-o")
            .arg(&png_path),
    );
    let png = std::fs::read(&png_path).expect("png");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    // IHDR: width and height, big-endian, at bytes 16..24.
    let dimension = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!((dimension(16), dimension(20)), (1520, 1600));
    let out = lockscope()
        .arg("chart")
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("scaling.gif"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(".svg or .png (got .gif)"));
}

/// Headless Chromium (for two minutes at most, with a throwaway profile and a 1280×2200 window)
/// on the page `page`, with the `extra` arguments; its output, or why it could not start.
fn run_chromium(page: &Path, extra: &[String]) -> std::io::Result<std::process::Output> {
    let profile_dir = tempfile::tempdir().expect("tempdir");
    Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,2200",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile_dir.path().display()))
        .arg(format!("file://{}", page.display()))
        .output()
}

/// Runs headless Chromium on `page`: returns its stderr, or `None` (printing why) when there is
/// no Chromium here.
fn chromium(page: &Path, screenshot: &Path) -> Option<String> {
    let out = run_chromium(
        page,
        &[
            "--enable-logging=stderr".to_string(),
            "--v=0".to_string(),
            format!("--screenshot={}", screenshot.display()),
        ],
    );
    match out {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stderr).into_owned()),
        Ok(out) => {
            eprintln!(
                "skipped: html_report_in_chromium: chromium failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
            None
        }
        Err(e) => {
            eprintln!("skipped: html_report_in_chromium: no chromium here ({e}); apt-get install chromium");
            None
        }
    }
}

/// What a measuring script added to a copy of `page` saw in headless Chromium: the size
/// (`WIDTHxHEIGHT` in CSS pixels, or `missing`) of each element named by a CSS selector, read
/// from the DOM Chromium dumps; `None` (printing why) without Chromium.
fn rendered_sizes(page: &Path, selectors: &[&str]) -> Option<Vec<String>> {
    let html = std::fs::read_to_string(page).expect("page");
    let list = selectors
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(",");
    // Sizes go into an attribute of <body>, which --dump-dom prints: no console message needed.
    let script = format!(
        "<script>document.body.setAttribute('data-sizes', [{list}].map(function (s) {{ \
         var e = document.querySelector(s); if (!e) return 'missing'; \
         var b = e.getBoundingClientRect(); return Math.round(b.width) + 'x' + Math.round(b.height); \
         }}).join(' '));</script>"
    );
    let measured = page.with_extension("measured.html");
    std::fs::write(&measured, html.replace("</body>", &(script + "</body>"))).expect("write");
    let dom = match run_chromium(&measured, &["--dump-dom".to_string()]) {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        other => {
            eprintln!("skipped: rendered sizes: chromium did not run: {other:?}");
            return None;
        }
    };
    let start =
        dom.find("data-sizes=\"").expect("the measuring script ran") + "data-sizes=\"".len();
    let sizes = &dom[start..start + dom[start..].find('"').expect("attribute ends")];
    Some(sizes.split(' ').map(str::to_string).collect())
}

/// `WIDTHxHEIGHT` as numbers; (0, 0) for `missing`.
fn size(text: &str) -> (u32, u32) {
    text.split_once('x')
        .map(|(w, h)| (w.parse().unwrap_or(0), h.parse().unwrap_or(0)))
        .unwrap_or((0, 0))
}

/// The page is a document: self-contained, no `<pre>` text dump, no percentage of one clock,
/// and no share above 100% except scaling (throughput against the
/// first level, where 100% is concurrency one: the chart's point labels, the levels table's
/// scaling column, and "N% of concurrency 1" in sentences).
fn assert_document(html: &str) {
    assert_self_contained(html);
    assert!(!html.contains("<pre"), "a <pre> dump");
    assert!(!html.contains("% of wall time") && !html.contains("wait / wall"));
    let scaling = regex::Regex::new(
        r#"\d+% of (concurrency \d+|the first level|it)|\(\d+% at \d+\)|font-weight="bold">\d+%</text>|<td class="num scaling">\d+%</td>|scaling \d+%"#,
    )
    .expect("regex");
    let rest = scaling.replace_all(html, "");
    let percent = regex::Regex::new(r"(\d+(?:\.\d+)?)%").expect("regex");
    for found in percent.captures_iter(&rest) {
        let value: f64 = found[1].parse().expect("a number");
        let at = found.get(0).expect("match").start();
        assert!(
            value <= 100.0,
            "a share of {value}% in `{}`",
            &rest[at.saturating_sub(160)..(at + 40).min(rest.len())]
        );
    }
}

/// Loads `page` in headless Chromium: no console message, the screenshot `name`.png kept (with
/// the page) in the test's target directory for a person to look at, and the elements named by
/// `selectors` laid out: each at least 200 × 40 CSS pixels unless listed in `small`. `None`
/// (printed) without Chromium.
fn check_in_chromium(page: &Path, name: &str, selectors: &[&str], small: &[&str]) -> Option<()> {
    let kept = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.html"));
    std::fs::copy(page, &kept).expect("keep the page");
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    let stderr = chromium(page, &screenshot)?;
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "{name}: console messages: {console:#?}");
    let png = std::fs::read(&screenshot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    assert!(png.len() > 20_000, "a screenshot with content");
    let sizes = rendered_sizes(page, selectors)?;
    eprintln!(
        "{name}: rendered sizes: {selectors:?} = {sizes:?}; screenshot {}",
        screenshot.display()
    );
    assert_eq!(sizes.len(), selectors.len());
    for (selector, text) in selectors.iter().zip(&sizes) {
        let (w, h) = size(text);
        if small.contains(selector) {
            assert!(w >= 20 && h >= 10, "{name}: {selector}: {w}x{h}");
        } else {
            assert!(w >= 200 && h >= 40, "{name}: {selector}: {w}x{h}");
        }
    }
    Some(())
}

/// The sweep page of a fixture sweep (throughput rises to concurrency 2, then falls at 5; level
/// 5 without a breakdown): the summary first says where throughput stops, how the threads' time
/// redistributes and which sites grow across the knee (2 → 5) in threads waiting; then the
/// chart, the level and time tables, what changed across the knee (kinds, growing sites and the
/// differential flamegraph), and every level's section with its flamegraph, sites with SVG
/// histograms and folded stacks. It loads in headless Chromium with no console message, the
/// summary, the stacked chart and the tables laid out.
#[test]
fn sweep_page_in_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep_dir = dir.path().join("sweep");
    std::fs::create_dir(&sweep_dir).expect("mkdir");
    let sweep = write_sweep(&sweep_dir);
    let page = dir.path().join("sweep.html");
    run_ok_stderr(lockscope().arg("html").arg(&sweep_dir).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    assert!(html.contains(&lockscope::render::svg::xml_escape(&sweep.finding)));
    assert!(html.contains("<svg xmlns"), "the chart is inline");
    assert!(html.contains("mutex wait: threads waiting (average), share of thread time"));
    assert!(html.contains("<table class=\"time-table\">"));
    assert!(html.contains("no breakdown: recorded without the offcpu probe"));
    // The summary comes first, before the contents.
    let summary_at = html.find("<section class=\"summary\"").expect("a summary");
    assert!(summary_at < html.find("<nav>").expect("contents"));
    let summary = &html[summary_at..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    for row in [
        "<th>target</th><td>demo --orders 8 (pid 4242)</td>",
        "<th>kernel</th><td>linux 6.18.0-1-amd64</td>",
        "<th>machine</th><td>buildbox, 2 CPUs, glibc 2.36</td>",
        "<th>throughput stops</th><td>at concurrency 2: 1800.0 transactions/s, 180% of concurrency 1 (scaling: concurrency 1 = 100%); at 5: 900.0 transactions/s, 90% of concurrency 1</td>",
        // Level 1: 70% on CPU; level 2: 45% (the fixture's per-mille); level 5 has none.
        "<th>threads&#39; time (share of thread time)</th><td>at 1 (2.00 threads alive): on-cpu 70.0%, condvar 20.0%, run-queue 5.0%; at 2 (knee) (3.00 threads alive): on-cpu 45.0%, lock 25.0%, run-queue 20.0%; at 5: no breakdown",
        // The mutex waits of level 2 (2 × 801 ms over 1.204 s) tripled at level 5.
        "<th>grows from 2 to 5 (threads waiting)</th><td>",
        "<th>losses</th><td>none; warnings: level 5 lost 3 waits",
    ] {
        assert!(summary.contains(row), "{row} missing from {summary}");
    }
    assert!(
        summary.contains("[mutex] +1.33 threads (0.67 → 2.00 threads)"),
        "{summary}"
    );
    // Across the knee: kinds and growing sites in threads, the differential flamegraph.
    let knee_at = html.find("id=\"sweep-0-knee\"").expect("the knee section");
    let knee = &html[knee_at..html.find("<h3 id=\"sweep-0-levels\"").expect("levels")];
    assert!(knee.contains("What changed across the knee: concurrency 2 → 5"));
    assert_eq!(knee.matches("<table class=\"diff-table").count(), 2);
    assert!(knee.contains("<th>at 5 threads waiting (average)</th>"));
    assert!(
        knee.contains(">1.33 threads</td><td class=\"num\" data-v=\"3.994186047\">3.99 threads</td><td class=\"num\" data-v=\"0.4438\">44.4%</td><td class=\"num muted\">-</td><td class=\"num\" data-v=\"2.662790698\">+2.66 threads</td>"),
        "level 2 → 5: the mutex waits grew three-fold, 1.33 → 3.99 threads waiting (44.4% of level 2's thread time; level 5 has no breakdown): {knee}"
    );
    assert_eq!(knee.matches("<iframe class=\"flame\"").count(), 1);
    // Every level: its flamegraph, its sites with histograms drawn and stacks folded.
    assert_eq!(html.matches("<details class=\"level\"").count(), 3);
    for (k, level) in sweep.levels.iter().enumerate() {
        let id = format!("sweep-0-level-{k}");
        let start = html
            .find(&format!("<details class=\"level\" id=\"{id}\" open>"))
            .unwrap_or_else(|| panic!("level {} has an open section", level.concurrency));
        let section = &html[start..];
        let section = &section[..section
            .find("</details>\n<details class=\"level\"")
            .unwrap_or(section.len())];
        assert!(section.contains(&format!("<summary>Concurrency {}", level.concurrency)));
        assert!(section.contains(&format!(
            "title=\"flamegraph of concurrency {}\"",
            level.concurrency
        )));
        assert!(section.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"histogram\""));
        assert!(section.contains("<details class=\"stack\"><summary><code>"));
        assert!(section.contains(
            "<li><code>take_order_lock</code> <span class=\"muted\">inlined, demo.c:40</span></li>"
        ));
        assert!(html.matches(&format!("href=\"#{id}\"")).count() >= 2);
    }
    assert!(html.contains("WARNING: level 5 lost 3 waits"));
    check_in_chromium(
        &page,
        "html-sweep",
        &[
            "section.summary",
            "div.chart svg",
            "rect.class-on-cpu",
            "table.levels-table",
            "table.time-table",
            "table.diff-table",
            "table.sites",
            "svg.histogram",
        ],
        &["rect.class-on-cpu", "svg.histogram"],
    );
}

/// The sweep page of a real MariaDB sweep (sysbench oltp_read_only at 1, 5, 20, 50 threads on 2
/// CPUs, `--probes futex,offcpu`, 5 s per level; `tests/data/mariadb-sweep`, docs/SWEEP.md):
/// the summary says throughput stops at 20 (383% of concurrency 1), the threads' time moves to
/// the run queue (62% at 20, 77% at 50) and the stackless off-CPU time (preempted or queued for a
/// CPU) grows most across the knee, said so; no share above 100% anywhere.
#[test]
fn mariadb_sweep_page() {
    let sweep_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mariadb-sweep");
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("mariadb.html");
    run_ok_stderr(lockscope().arg("html").arg(&sweep_dir).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    let summary = &html[html.find("<section class=\"summary\"").expect("summary")..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    for claim in [
        "<th>throughput stops</th><td>at concurrency 20: 3809.3 transactions/s, 383% of concurrency 1",
        "at 50: 3132.9 transactions/s, 315% of concurrency 1",
        "at 20 (knee) (29.2 threads alive): run-queue 62.0%",
        "at 50 (58.7 threads alive): run-queue 77.0%",
        "<th>grows from 20 to 50 (threads waiting)</th><td>[no user stack] &lt;- mariadbd [off-cpu] +26.9 threads (18.5 → 45.4 threads) [preempted or in the run queue: waiting for a CPU]",
        "tc_acquire_table",
        "led by off-CPU time without a user stack (threads preempted or in the run queue); of the threads&#39; time, run-queue grows most (62.0% → 77.0%).",
    ] {
        assert!(summary.contains(claim), "{claim} missing from {summary}");
    }
    assert!(html.contains(&lockscope::render::svg::xml_escape(NO_STACK_NOTE_START)));
    assert!(html.contains("What changed across the knee: concurrency 20 → 50"));
}

/// The start of the note that explains off-CPU time without a user stack.
const NO_STACK_NOTE_START: &str =
    "Off-CPU time with no user stack is threads preempted or waiting in the run queue for a CPU";

/// The page of a recording with the bottleneck analysis (the two-lock program) says in its summary
/// what `lockscope why` traces the working threads' waits back to: the request lock's critical
/// section, not the background lock that has the most wait time.
#[test]
fn recording_page_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("twolocks.lsp");
    lockscope_probes::write_profile(&fixtures::bottleneck_profile(), &run).expect("write");
    let page = dir.path().join("run.html");
    run_ok_stderr(lockscope().arg("html").arg(&run).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    let summary = &html[html.find("<section class=\"summary\"").expect("summary")..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    let row = "<th>what the waits come down to (lockscope why, share of the working threads&#39; \
               time)</th><td>request-*: `cpu` at `__lll_lock_wake &lt;- pthread_mutex_unlock \
               &lt;- request_critical_section &lt;- request_loop` 41.7%";
    assert!(summary.contains(row), "{row} missing from {summary}");
}

/// The page of a single recording (the demo profile, with the offcpu probe's per-thread
/// times): the summary gives its waits and top sites in threads waiting and where its threads'
/// time went (with each thread group's time stacked); the
/// report is tables (waits by kind, sites with SVG histograms and folded stacks, where each
/// thread group's time went as stacked bars and a table), no text dump. It loads in headless
/// Chromium with no console message, the summary, the bars and the tables laid out.
#[test]
fn single_recording_page_in_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut profile = fixtures::demo_profile();
    profile.thread_times = thread_times(&profile, 2, [600, 100, 200, 100]);
    let run = dir.path().join("demo.lsp");
    lockscope_probes::write_profile(&profile, &run).expect("write");
    let page = dir.path().join("run.html");
    run_ok_stderr(lockscope().arg("html").arg(&run).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    let summary = &html[html.find("<section class=\"summary\"").expect("summary")..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    for row in [
        // 801 ms of mutex wait over 1.204 s: 0.67 threads waiting.
        "<th>waits</th><td>9 waits over 1.20 s; mutex: 0.67 threads waiting on average, condvar: 0.50 threads waiting on average",
        "<th>threads&#39; time (share of thread time)</th><td>2.00 threads alive on average: on-cpu 60.0%, lock 20.0%, run-queue 10.0%, condvar 10.0%",
        // 599.9 ms of condvar wait over 1.204 s at the demo's order queue.
        "<th>top wait sites (threads waiting)</th><td>wait_for_order &lt;- demo [condvar] 0.50 threads; take_order_lock &lt;- process_order &lt;- worker_main [mutex] 0.33 threads; ",
        // Each thread group's time, stacked (the fixture's threads have no names: `[*]`).
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"time-bars\"",
    ] {
        assert!(summary.contains(row), "{row} missing from {summary}");
    }
    assert_eq!(html.matches("<table class=\"report-table").count(), 2);
    assert!(html.contains("<td>mutex</td><td class=\"num\" data-v=\"4\">4</td><td class=\"num\" data-v=\"801500000\">801 ms</td>"));
    assert_eq!(
        html.matches("class=\"histogram\"").count(),
        2 * 4,
        "a cell and a chart per site"
    );
    assert!(html.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"time-bars\""));
    assert!(html.contains("<table class=\"section-table breakdown-table\">"));
    check_in_chromium(
        &page,
        "html-run",
        &[
            "section.summary",
            "table.report-table",
            "table.sites",
            "svg.histogram",
            "svg.time-bars",
            "rect.class-on-cpu",
            "table.breakdown-table",
        ],
        &["svg.histogram", "rect.class-on-cpu"],
    );
}

/// The page of two runs (the demo against the lossy profile, both with per-thread times): the
/// summary names what grew in the second run; the diff stacks both sides' thread time, then
/// tables in threads waiting (kinds, sites with folded canonical stacks) with the mismatch
/// warnings and the differential flamegraph. It loads in headless
/// Chromium with no console message, the tables laid out.
#[test]
fn diff_page_in_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_a = dir.path().join("a.lsp");
    let run_b = dir.path().join("b.lsp");
    let mut a = fixtures::demo_profile();
    a.thread_times = thread_times(&a, 2, [600, 100, 200, 100]);
    let mut b = fixtures::lossy_profile();
    b.thread_times = thread_times(&b, 4, [300, 400, 200, 100]);
    lockscope_probes::write_profile(&a, &run_a).expect("a");
    lockscope_probes::write_profile(&b, &run_b).expect("b");
    let page = dir.path().join("diff.html");
    run_ok_stderr(
        lockscope()
            .arg("html")
            .arg(&run_a)
            .arg(&run_b)
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    let summary = &html[html.find("<section class=\"summary\"").expect("summary")..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    assert!(
        summary.contains("<th>grows from A to B (threads waiting)</th>")
            && summary.contains(&format!(
                "<td>A: run {}; B: run {}</td>",
                run_a.display(),
                run_b.display()
            )),
        "{summary}"
    );
    for row in ["<th>waits in A</th>", "<th>waits in B</th>", "<th>threads&#39; time (share of thread time) in B</th><td>4.00 threads alive on average: run-queue 40.0%, on-cpu 30.0%, lock 20.0%"] {
        assert!(summary.contains(row), "{row} missing from {summary}");
    }
    let diff = &html[html.find("<h2 id=\"diff-0\">").expect("the diff")..];
    let diff = &diff[..diff.find("<h2 id=\"run-0\">").expect("the runs follow")];
    assert_eq!(diff.matches("<table class=\"diff-table").count(), 2);
    assert!(diff.contains("<th>B threads waiting (average)</th>"));
    assert!(
        diff.contains("WARNING: B lost"),
        "the lossy side is flagged"
    );
    assert!(diff.contains("<details class=\"stack\"><summary><code>"));
    assert_eq!(diff.matches("<iframe class=\"flame\"").count(), 1);
    // Both sides' time stacked: A 60% on CPU, B 30% and 40% in the run queue.
    assert!(diff.contains("<title>A (2.00 alive): on-cpu 60.0% of thread time"));
    assert!(diff.contains("<title>B (4.00 alive): run-queue 40.0% of thread time"));
    check_in_chromium(
        &page,
        "html-diff",
        &[
            "section.summary",
            "div.time-bars svg",
            "rect.class-run-queue",
            "table.diff-table",
            "table.sites",
        ],
        &["rect.class-run-queue"],
    );
}

/// The page of two imported perf captures (sampled CPU time, page-fault events) calls nothing a
/// wait (the captures' own frames aside): the records are samples and events, the flamegraphs
/// are drawn (the events' widths are their counts) and the diff is in their units.
#[test]
fn imported_captures_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf");
    let mut runs = Vec::new();
    for capture in ["mt-threads-named-with-spaces.txt", "page-faults.txt"] {
        let lsp = dir.path().join(capture.replace(".txt", ".lsp"));
        run_ok_stderr(
            lockscope()
                .args(["import", "perf-script"])
                .arg(data.join(capture))
                .arg("-o")
                .arg(&lsp),
        );
        runs.push(lsp);
    }
    let page = dir.path().join("imported.html");
    run_ok_stderr(lockscope().arg("html").args(&runs).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    // Everything but the captures' frames (code, embedded flamegraphs) and the stack lists.
    let labels =
        regex::Regex::new(r#"(?s)<code>.*?</code>|src="data:[^"]*"|<ol class="frames">.*?</ol>"#)
            .expect("regex")
            .replace_all(&html, "");
    let wait = regex::Regex::new(r"(?i)\bwaits?\b|wait time|threads waiting").expect("regex");
    if let Some(found) = wait.find(&labels) {
        panic!(
            "`{}` in `{}`",
            found.as_str(),
            &labels[found.start().saturating_sub(200)..(found.end() + 100).min(labels.len())]
        );
    }
    assert!(html.contains("<h3>Samples by kind</h3>") && html.contains("<h3>Events by kind</h3>"));
    assert_eq!(
        html.matches("<iframe class=\"flame\"").count(),
        3,
        "two flamegraphs and the diff"
    );
    assert!(!html.contains("No flamegraph"));
}

/// Two imported CPU captures without a recorded duration are compared by their total CPU time
/// (there is no second to divide by), not as threads on CPU.
#[test]
fn imported_cpu_captures_without_duration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf");
    let lsp = dir.path().join("cpu.lsp");
    run_ok_stderr(
        lockscope()
            .args(["import", "perf-script"])
            .arg(data.join("mt-threads-named-with-spaces.txt"))
            .arg("-o")
            .arg(&lsp),
    );
    let page = dir.path().join("cpu.html");
    run_ok_stderr(
        lockscope()
            .arg("html")
            .arg(&lsp)
            .arg(&lsp)
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).expect("html");
    assert!(html.contains("<th>A CPU time (total)</th>"), "raw totals");
    assert!(!html.contains("threads on CPU"));
    // The capture's 20 samples of 250 µs.
    assert!(html.contains(">5.00 ms</td>"));
}

/// The page of the demo recorded with `--probes bottleneck` (`tests/data/demo`) carries what
/// `lockscope why` says, as tables: a row per cause with its rank, kind, share and time as
/// `why --json` gives them, the waits it explains (a spin: its spinners) and its chain; with the
/// `cpu` probe, the On CPU section's tables and a CPU flamegraph beside the waits' one, whose
/// title names the probes of the waits it draws, not `cpu`. The demo recorded with the default probe says in one line how
/// to record the causes, and has neither. It loads in headless Chromium, the tables laid out.
#[test]
fn recorded_demo_page_carries_why_and_cpu() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/demo");
    let dir = tempfile::tempdir().expect("tempdir");
    let bottleneck = data.join("demo-bottleneck.lsp");
    let page = dir.path().join("bottleneck.html");
    run_ok_stderr(
        lockscope()
            .arg("html")
            .arg(&bottleneck)
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).expect("html");
    assert_document(&html);
    let why: serde_json::Value = serde_json::from_str(&run_ok(
        lockscope().args(["why", "--json"]).arg(&bottleneck),
    ))
    .expect("why JSON");
    let causes = why["causes"].as_array().expect("causes");
    assert!(!causes.is_empty(), "{why}");
    let table = &html[html
        .find("<table class=\"section-table why-causes")
        .expect("causes")..];
    let table = &table[..table.find("</table>").expect("table ends")];
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), causes.len(), "{table}");
    for (row, cause) in rows.iter().zip(causes) {
        for cell in [
            format!("data-v=\"{}\"", cause["rank"]),
            format!("<td>{}</td>", cause["kind"].as_str().expect("kind")),
            format!("data-v=\"{}\"", cause["total_ns"]),
            format!("data-v=\"{}\"", cause["waits"]),
        ] {
            assert!(row.contains(&cell), "{cell} missing from {row}");
        }
        if cause["kind"] == "spin" {
            // A spin is the spinners' own wait, on a CPU: the row names them, no other waits.
            assert!(row.contains("<p class=\"muted\">threads: spinner"), "{row}");
        } else {
            assert!(row.contains("<ul class=\"why-sites\"><li>"), "{row}");
        }
    }
    assert!(html.contains("<table class=\"why-analysed\">"));
    assert!(html.contains("On CPU (cpu probe): "));
    assert!(html.contains("<table class=\"section-table on-cpu\">"));
    let titles: Vec<&str> = html
        .split("<iframe class=\"flame\"")
        .skip(1)
        .map(|f| &f[f.find("title=\"").expect("title") + 7..])
        .map(|f| &f[..f.find('"').expect("title ends")])
        .collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(titles[1].starts_with("CPU flamegraph of"), "{titles:?}");
    // The waits' flamegraph's own title, inside its SVG.
    let src = html
        .split("<iframe class=\"flame\"")
        .nth(1)
        .expect("iframe");
    let src = &src[src.find("base64,").expect("data URL") + 7..];
    let svg = base64_decode(&src[..src.find('"').expect("src ends")]);
    assert!(
        svg.contains("lockscope: offcpu waits of"),
        "the title names cpu"
    );
    check_in_chromium(
        &page,
        "html-run-why",
        &["table.why-causes", "table.on-cpu", "table.on-cpu-stacks"],
        &[],
    );

    let futex = data.join("demo-futex.lsp");
    let page = dir.path().join("futex.html");
    run_ok_stderr(lockscope().arg("html").arg(&futex).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).expect("html");
    assert!(html.contains(
        "No bottleneck analysis in this profile: record it with <code>--probes bottleneck</code>"
    ));
    assert!(!html.contains("why-causes") && !html.contains("On CPU (cpu probe)"));
    assert_eq!(html.matches("<iframe class=\"flame\"").count(), 1);
}

/// Standard base64 (the page's data URLs) decoded to text.
fn base64_decode(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut held = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c).expect("base64") as u32;
        bits = (bits << 6) | v;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
            bits &= (1 << held) - 1;
        }
    }
    String::from_utf8(out).expect("utf-8 SVG")
}
