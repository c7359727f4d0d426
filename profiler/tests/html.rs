//! `lockscope chart` and `lockscope html` on a sweep built from fixture profiles: the chart and
//! the page are self-contained, and the page loads in headless Chromium with no console message
//! (the screenshot is kept for a person to look at; skips loudly without Chromium).

mod common;
mod fixtures;

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

/// Runs headless Chromium on `page`: returns its stderr, or `None` (printing why) when there is
/// no Chromium here.
fn chromium(page: &Path, screenshot: &Path) -> Option<String> {
    let profile_dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("timeout")
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
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2200",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.path().display()))
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(format!("file://{}", page.display()))
        .output();
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
    let profile_dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("timeout")
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
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.path().display()))
        .arg(format!("file://{}", measured.display()))
        .output();
    let dom = match out {
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

/// `lockscope html` of a sweep and two runs: one self-contained page with the finding, the
/// chart, the level table, every sweep level (a selector linking each level's collapsible
/// section, each with its own flamegraph and histograms), a flamegraph per run and the diffs;
/// it loads in headless Chromium without any console message, and the screenshot is written
/// for a person to check.
#[test]
fn html_report_in_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep_dir = dir.path().join("sweep");
    std::fs::create_dir(&sweep_dir).expect("mkdir");
    let sweep = write_sweep(&sweep_dir);
    let run_a = dir.path().join("a.lsp");
    let run_b = dir.path().join("b.lsp");
    lockscope_probes::write_profile(&fixtures::demo_profile(), &run_a).expect("a");
    lockscope_probes::write_profile(&fixtures::lossy_profile(), &run_b).expect("b");
    let page = dir.path().join("report.html");
    run_ok_stderr(
        lockscope()
            .arg("html")
            .arg(&sweep_dir)
            .arg(&run_a)
            .arg(&run_b)
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).expect("html");
    assert_self_contained(&html);
    assert!(html.contains(&lockscope::chart::xml_escape(&sweep.finding)));
    assert!(html.contains("<svg xmlns"), "the chart is inline");
    assert!(!html.contains("% of wall time") && !html.contains("wait / wall"));
    assert!(html.contains("mutex wait: threads waiting (average), share of thread time"));
    assert!(
        html.contains("<table class=\"time-table\">"),
        "where the time went"
    );
    assert!(html.contains("no breakdown: recorded without the offcpu probe"));
    // The summary comes first, before the contents: target, kernel, machine, knee, finding,
    // losses (the sweep's warning about level 5).
    let summary_at = html.find("<section class=\"summary\"").expect("a summary");
    assert!(summary_at < html.find("<nav>").expect("contents"));
    let summary = &html[summary_at..];
    let summary = &summary[..summary.find("</section>").expect("summary ends")];
    for row in [
        "<th>target</th><td>demo --orders 8 (pid 4242)</td>",
        "<th>kernel</th><td>linux 6.18.0-1-amd64</td>",
        "<th>machine</th><td>buildbox, 2 CPUs, glibc 2.36</td>",
        "<th>knee</th><td>concurrency 2: 1800.0 transactions/s, 180% of the first level</td>",
        "<th>losses</th><td>none; warnings: level 5 lost 3 waits",
    ] {
        assert!(summary.contains(row), "{row} missing from {summary}");
    }
    assert!(summary.contains(&lockscope::chart::xml_escape(&sweep.finding)));
    // Each run's report is tables (waits by kind, top sites), not a text dump: two per run
    // (a, b and the three levels); its text, with the histograms, is folded beneath.
    assert_eq!(
        html.matches("<table class=\"report-table\">").count(),
        2 * 5
    );
    // The diffs (a → b, the sweep's level 1 → 5) too: kinds and sites, wait time in threads.
    assert_eq!(html.matches("<table class=\"diff-table\">").count(), 2 * 2);
    assert!(html.contains("<th>B threads waiting (average)</th>"));
    // Level 1 → 5: the mutex waits grew six-fold, from 0.67 to 3.99 threads waiting.
    assert!(
        html.contains("<td class=\"num\">0.67 threads</td><td class=\"num\">3.99 threads</td><td class=\"num\">+3.33 threads</td>"),
        "the sweep's diff in threads"
    );
    assert_eq!(
        html.matches("<details class=\"text-report\">").count(),
        5 + 2
    );
    assert!(html.contains("<td>mutex</td><td class=\"num\">4</td><td class=\"num\">801 ms</td>"));
    // Flamegraphs: a, b and every level of the sweep; differentials: a→b and the sweep's first
    // level → its last.
    let iframes = html.matches("<iframe class=\"flame\"").count();
    assert_eq!(
        iframes,
        2 + sweep.levels.len() + 2,
        "flamegraphs and differential flamegraphs"
    );
    assert_eq!(sweep.levels.len(), 3);
    let sections = html.matches("<details class=\"level\"").count();
    assert_eq!(sections, sweep.levels.len(), "one section per level");
    for (k, level) in sweep.levels.iter().enumerate() {
        let id = format!("sweep-0-level-{k}");
        let section_start = html
            .find(&format!("<details class=\"level\" id=\"{id}\" open>"))
            .unwrap_or_else(|| panic!("level {} has an open section", level.concurrency));
        let section = &html[section_start..];
        let section = &section[..section.find("</details>").expect("section ends")];
        assert!(
            section.contains(&format!("<summary>Concurrency {}", level.concurrency)),
            "section {id} is level {}",
            level.concurrency
        );
        let label = format!("level {}", level.concurrency);
        assert!(
            section.contains("title=\"flamegraph of ") && section.contains(&label),
            "level {} has its own flamegraph",
            level.concurrency
        );
        assert_eq!(section.matches("<iframe class=\"flame\"").count(), 1);
        assert!(section.contains("Distribution"), "level {k} histograms");
        assert!(
            html.matches(&format!("href=\"#{id}\"")).count() >= 2,
            "the selector and the contents link level {}",
            level.concurrency
        );
    }
    // Each level's flamegraph draws its own profile: the mutex waits grow with the level, so the
    // embedded SVGs differ.
    let svgs: std::collections::BTreeSet<&str> = html
        .split("<details class=\"level\"")
        .skip(1)
        .map(|section| {
            let start = section.find("base64,").expect("an embedded SVG") + "base64,".len();
            &section[start..start + section[start..].find('"').expect("URL ends")]
        })
        .collect();
    assert_eq!(
        svgs.len(),
        sweep.levels.len(),
        "three different flamegraphs"
    );
    assert!(html.contains("Distribution"), "histograms");
    assert!(html.contains("WARNING:"), "the lossy run is flagged");
    assert!(
        html.contains("WARNING: level 5 lost 3 waits"),
        "sweep warnings are shown"
    );
    assert!(html.contains("5 (knee)") || html.contains("2 (knee)"));

    // Kept beside the screenshot for a person to read (the page is self-contained).
    let kept = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-report.html");
    std::fs::write(&kept, &html).expect("keep the page");
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-report.png");
    let _ = std::fs::remove_file(&screenshot);
    let Some(stderr) = chromium(&page, &screenshot) else {
        return;
    };
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    let png = std::fs::read(&screenshot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    assert!(png.len() > 20_000, "a screenshot with content");
    // Laid out, not just present: the summary spans the page, the chart is drawn at its size
    // with the stacked bars of where the time went, and the tables have rows.
    let selectors = [
        "section.summary",
        "div.chart svg",
        "rect.class-on-cpu",
        "table.levels-table",
        "table.time-table",
        "table.report-table",
    ];
    let Some(sizes) = rendered_sizes(&page, &selectors) else {
        return;
    };
    eprintln!("rendered sizes: {selectors:?} = {sizes:?}");
    assert_eq!(sizes.len(), selectors.len());
    let sized: Vec<(u32, u32)> = sizes.iter().map(|s| size(s)).collect();
    assert!(
        sized[0].0 >= 600 && sized[0].1 >= 100,
        "summary {:?}",
        sized[0]
    );
    assert_eq!(sized[1], (760, 800), "the chart at its own size");
    assert!(
        sized[2].0 >= 20 && sized[2].1 >= 50,
        "an on-CPU segment {:?}",
        sized[2]
    );
    for (selector, &(w, h)) in selectors.iter().zip(&sized).skip(3) {
        assert!(w >= 200 && h >= 40, "{selector}: {w}x{h}");
    }
    eprintln!("html report screenshot: {}", screenshot.display());
}
