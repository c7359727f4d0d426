//! Golden D scripts per OS and probe set, checked by a small D validator.

use crate::common::check_golden;
use lockscope_dtrace::catalog::{self, TargetOs};
use lockscope_dtrace::{generate_script, Error, ScriptOptions, ScriptTarget};
use lockscope_probes::catalog::{BOTTLENECK, WAITFOR};
use std::time::Duration;

/// Checks what dtrace's compiler would reject first: unbalanced braces, parentheses, quotes
/// and predicates, clauses without a probe description, providers unknown on the OS, and
/// aggregations printed but never filled (or filled but never printed).
fn validate(script: &str, os: TargetOs) {
    // Strip comments and string literals, keeping their place.
    let mut code = String::new();
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                code.push(' ');
            }
            '"' => {
                let mut escaped = false;
                let mut closed = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        closed = true;
                        break;
                    }
                }
                assert!(closed, "unterminated string literal");
                code.push_str("\"\"");
            }
            c => code.push(c),
        }
    }
    let mut depth = 0i32;
    let mut parens = 0i32;
    let mut clause_start = true;
    let mut description = String::new();
    let mut clauses = 0;
    for line in code.lines() {
        let trimmed = line.trim();
        if depth == 0 {
            // A global declaration (`uint64_t lockscope_offcpu_ts[int];`) between clauses.
            if description.is_empty()
                && trimmed.ends_with("];")
                && trimmed.starts_with("uint64_t lockscope_")
            {
                continue;
            }
            if trimmed.is_empty() || trimmed.starts_with("#pragma D option ") {
                assert!(
                    description.is_empty() || trimmed.is_empty(),
                    "pragma inside a clause head"
                );
                continue;
            }
            if trimmed == "{" {
                assert!(
                    !description.is_empty(),
                    "clause without a probe description"
                );
                for probe in description
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                {
                    let provider = probe.split(':').next().unwrap_or_default();
                    let provider = provider.strip_suffix("$target").unwrap_or(provider);
                    assert!(
                        os.providers().contains(&provider),
                        "provider `{provider}` of `{probe}` is not known on {os}"
                    );
                    assert_eq!(
                        probe.matches(':').count(),
                        3,
                        "`{probe}` is not provider:module:function:name"
                    );
                }
                description.clear();
                clauses += 1;
                depth += 1;
                clause_start = false;
                continue;
            }
            if trimmed.starts_with('/') {
                assert!(
                    trimmed.ends_with('/') && trimmed.len() > 2,
                    "bad predicate `{trimmed}`"
                );
                assert!(
                    !description.is_empty(),
                    "predicate without a probe description"
                );
                continue;
            }
            assert!(
                clause_start || description.is_empty() || description.ends_with(','),
                "two descriptions without a comma"
            );
            description.push_str(trimmed);
            continue;
        }
        for c in trimmed.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                '(' => parens += 1,
                ')' => parens -= 1,
                _ => {}
            }
            assert!(depth >= 0 && parens >= 0, "unbalanced at `{trimmed}`");
        }
        if depth == 0 {
            assert_eq!(parens, 0, "unbalanced parentheses in a clause");
            clause_start = true;
        } else if !trimmed.is_empty() && parens == 0 {
            assert!(
                trimmed.ends_with(';') || trimmed.ends_with('{') || trimmed.ends_with(','),
                "statement without `;`: `{trimmed}`"
            );
        }
    }
    assert_eq!(depth, 0, "unbalanced braces");
    assert!(
        description.is_empty(),
        "probe description without a body: {description}"
    );
    assert!(clauses >= 2, "expected BEGIN and END at least");
    // Aggregations: filled ones and printed ones are the same set.
    let names = |pattern: &str| -> std::collections::BTreeSet<String> {
        script
            .match_indices("@lockscope_")
            .map(|(i, _)| {
                script[i..]
                    .chars()
                    .take_while(|c| *c == '@' || *c == '_' || c.is_ascii_alphanumeric())
                    .collect::<String>()
            })
            .filter(|name| {
                let after = &script[script.find(name.as_str()).unwrap_or(0) + name.len()..];
                pattern.is_empty() || after.starts_with(pattern)
            })
            .collect()
    };
    let filled: std::collections::BTreeSet<String> = script
        .lines()
        .filter(|l| l.contains("] = "))
        .filter_map(|l| l.trim().split('[').next().map(str::to_string))
        .filter(|name| name.starts_with('@'))
        .collect();
    let all = names("");
    assert_eq!(filled, all, "aggregations filled vs mentioned");
    let printa = script.find("dtrace:::END").expect("END clause");
    for name in &all {
        assert!(
            script[printa..].contains(name.as_str()),
            "{name} is never printed"
        );
    }
    assert!(script.contains(&"#pragma D option ustackframes=".to_string()));
    for option in ["aggsize", "dynvarsize", "bufsize"] {
        assert!(
            script.contains(&format!("#pragma D option {option}=")),
            "{option}"
        );
    }
}

/// Default and full probe sets on each OS match their golden scripts and validate.
#[test]
fn golden_scripts() {
    for os in TargetOs::ALL {
        let mut defaults = ScriptOptions::new(os);
        defaults.target = ScriptTarget::Pid(4242);
        let script = generate_script(&defaults).expect("defaults");
        validate(&script, os);
        assert!(script.contains("pid == $target"));
        check_golden(&format!("{}-defaults-pid.d", os.name()), &script);

        let mut all = ScriptOptions::new(os);
        all.target = ScriptTarget::Command;
        all.probes = catalog::probes_for(os)
            .map(|p| p.name.to_string())
            .collect();
        all.duration = Some(Duration::from_secs(10));
        all.ustack_frames = 64;
        let script = generate_script(&all).expect("all probes");
        validate(&script, os);
        assert!(script.contains("profile:::tick-10s\n{\n\texit(0);"));
        assert!(script.contains("#pragma D option ustackframes=64"));
        check_golden(&format!("{}-all-command.d", os.name()), &script);
    }
}

/// Each probe alone validates on each OS where it exists.
#[test]
fn every_probe_alone_validates() {
    for os in TargetOs::ALL {
        for probe in catalog::probes_for(os) {
            let mut options = ScriptOptions::new(os);
            options.probes = vec![probe.name.to_string()];
            options.duration = Some(Duration::from_millis(1500));
            let script = generate_script(&options).expect("script");
            validate(&script, os);
            assert!(script.contains("profile:::tick-1500ms"));
        }
    }
}

/// macOS probe names follow the kernel's (no `sys_`, `__` only for __semwait_signal), and
/// plockstat is a default only when lockscope launches the target.
#[test]
fn macos_probe_names() {
    let mut options = ScriptOptions::new(TargetOs::MacOs);
    options.probes = vec!["psynch".into(), "ulock".into(), "semwait".into()];
    let script = generate_script(&options).expect("script");
    for name in [
        "psynch_mutexwait",
        "psynch_cvwait",
        "psynch_rw_rdlock",
        "psynch_rw_wrlock",
        "ulock_wait",
        "ulock_wait2",
        "__semwait_signal",
    ] {
        assert!(script.contains(&format!("syscall::{name}:entry")), "{name}");
    }
    assert!(!script.contains("sys_"));
    let launched = generate_script(&ScriptOptions::new(TargetOs::MacOs)).expect("launched");
    assert!(launched.contains("plockstat$target:::mutex-block"));
    assert!(
        !launched.contains("mutex-spin"),
        "mutex-spin never fires on macOS"
    );
    let mut attached = ScriptOptions::new(TargetOs::MacOs);
    attached.target = ScriptTarget::Pid(1);
    assert!(!generate_script(&attached)
        .expect("attached")
        .contains("plockstat"));
}

/// Unknown probes, probes of another OS, probes the backend offers nowhere (with why) and bad
/// sizes are refused with their name.
#[test]
fn invalid_options() {
    let mut options = ScriptOptions::new(TargetOs::FreeBsd);
    options.probes = vec!["psynch".into()];
    let err = generate_script(&options).expect_err("psynch is macOS only");
    assert!(matches!(err, Error::UnknownProbe { .. }));
    assert!(err.to_string().contains("umtx"), "{err}");
    let wakeup = lockscope_probes::catalog::WAKEUP;
    let mut options = ScriptOptions::new(TargetOs::Illumos);
    options.probes = vec!["offcpu".into(), wakeup.name.into()];
    let err = generate_script(&options).expect_err("no DTrace script records wakers");
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not recorded by the DTrace backend: {}",
            wakeup.name,
            wakeup.dtrace_absence.expect("a reason")
        )
    );
    let mut options = ScriptOptions::new(TargetOs::MacOs);
    options.ustack_frames = 0;
    assert!(matches!(
        generate_script(&options),
        Err(Error::InvalidOption {
            option: "ustack_frames",
            ..
        })
    ));
    let mut options = ScriptOptions::new(TargetOs::MacOs);
    options.duration = Some(Duration::ZERO);
    assert!(generate_script(&options).is_err());
}

/// On Linux, probes that cannot fire on DTrace for Linux (lockstat, plockstat) are left out of
/// the script and named in it with the reason; the others are generated.
#[test]
fn linux_absent_probes_are_named() {
    let mut options = ScriptOptions::new(TargetOs::Linux);
    options.probes = vec!["futex".into(), "klock".into(), "plockstat".into()];
    let absent: Vec<&str> = options
        .absent_probes()
        .iter()
        .map(|(p, _)| p.name)
        .collect();
    assert_eq!(absent, ["plockstat", "klock"]);
    let names: Vec<&str> = options
        .selected_probes()
        .expect("known probes")
        .iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["futex"]);
    let script = generate_script(&options).expect("script");
    validate(&script, TargetOs::Linux);
    assert!(script.contains("/* absent on linux: klock: DTrace for Linux accepts the lockstat"));
    assert!(!script.contains("lockstat:::"));
    assert!(!script.contains("plockstat$target"));
    assert!(script.contains("#pragma D option switchrate=10ms"));
    options.libc_entry_points = false;
    let bare = generate_script(&options).expect("script");
    validate(&bare, TargetOs::Linux);
    assert!(!bare.contains("pid$target::"));
    assert!(bare.contains("strjoin(\"/\", \"0\")"));
}

/// On macOS, whose sched:::wakeup does not say which process the woken thread belongs to, the
/// bottleneck analysis (`waitfor`, the `bottleneck` set) is refused by name, saying what is missing
/// and where it is recorded.
#[test]
fn wait_for_analysis_is_refused_on_macos() {
    for probe in [WAITFOR.name, BOTTLENECK.name] {
        let mut options = ScriptOptions::new(TargetOs::MacOs);
        options.probes = vec![probe.to_string()];
        let err = generate_script(&options).expect_err("no bottleneck analysis on macOS");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "`{probe}` is not recorded by the DTrace backend on macos"
            )) && text.contains("sched:::wakeup passes the waker's process")
                && text.contains("illumos, FreeBSD or Linux"),
            "{text}"
        );
    }
}

/// Where the sched provider has a wakeup probe (illumos, FreeBSD, Linux), `bottleneck` is the
/// OS's default probes and `waitfor`, whose clauses stream every switch-out (with its user stack),
/// switch-in (the next thread of `sched:::off-cpu`), wakeup of a target thread (the waker's
/// kernel stack, and its user stack only for a waker of the target: a `ustack()` in a kernel
/// thread aborts the clause) and the stream's begin and end; one process only.
#[test]
fn wait_for_stream_where_wakeups_exist() {
    for os in [TargetOs::Linux, TargetOs::Illumos, TargetOs::FreeBsd] {
        let mut options = ScriptOptions::new(os);
        options.target = ScriptTarget::Pid(4242);
        options.probes = vec![BOTTLENECK.name.into()];
        let names: Vec<&str> = options
            .selected_probes()
            .expect("bottleneck")
            .iter()
            .map(|p| p.name)
            .collect();
        let mut expected: Vec<&str> = catalog::defaults_for(os, false).map(|p| p.name).collect();
        expected.push(WAITFOR.name);
        assert_eq!(names, expected, "{os}");
        let script = generate_script(&options).expect("script");
        validate(&script, os);
        for line in [
            "printf(\"=== wf begin %d\\n\", timestamp);",
            "printf(\"=== wf end %d\\n\", timestamp);",
            "sched:::off-cpu\n/pid == $target/\n",
            "sched:::off-cpu\n/$target == args[1]->pr_pid/\n",
            "ustack(100);",
            "stack(12);",
            // Read every 10 ms, into 32 MiB per CPU, on every OS.
            "#pragma D option switchrate=10ms",
            "#pragma D option bufsize=32m",
        ] {
            assert!(script.contains(line), "{os}: no `{line}` in\n{script}");
        }
        let wakeup = if os == TargetOs::Linux {
            "rawtp:sched::sched_waking\n/$target == ((struct task_struct *)arg0)->tgid"
        } else {
            "sched:::wakeup\n/$target == args[1]->pr_pid"
        };
        assert_eq!(script.matches(wakeup).count(), 2, "{os}: {script}");
        let kernel_waker = script
            .split(&format!("{wakeup} && pid != $target/"))
            .nth(1)
            .and_then(|rest| rest.split("}\n").next())
            .unwrap_or_else(|| panic!("{os}: no clause for wakers outside the target"));
        assert!(!kernel_waker.contains("ustack"), "{os}: {kernel_waker}");
        assert_eq!(
            script.contains("uregs[R_ERR]"),
            os == TargetOs::Linux,
            "{os}: the call from orig_ax on Linux only"
        );

        options.target = ScriptTarget::Pids {
            pids: vec![1, 2],
            tree: false,
        };
        let err = generate_script(&options).expect_err("one process only");
        assert!(err.to_string().contains("`waitfor`"), "{err}");
    }
}

/// Several processes, a tree and every process: each OS's default probes validate with the
/// target's predicate in place of `pid == $target` and no `$target` left; a pid set is filled in
/// BEGIN and extended by proc:::create (FreeBSD's `struct proc` names the child `p_pid`); a
/// tree is `progenyof()` of each pid (comments aside: a probe's description may name the
/// providers it uses with one process); every process has no pid predicate; a probe of a
/// per-process provider (plockstat$target) is refused for them, naming it.
#[test]
fn targets_of_several_processes() {
    let code = |script: &str| -> String {
        script
            .lines()
            .filter(|l| !l.starts_with("/*") && !l.starts_with(" *"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for os in TargetOs::ALL {
        let mut pids = ScriptOptions::new(os);
        pids.target = ScriptTarget::Pids {
            pids: vec![12, 34],
            tree: false,
        };
        let script = generate_script(&pids).expect("pids");
        validate(&script, os);
        assert!(!code(&script).contains("$target"), "{os}: {script}");
        assert!(
            script.contains("/(lockscope_traced[pid])"),
            "{os}: {script}"
        );
        assert!(script.contains("\tlockscope_traced[12] = 1;\n\tlockscope_traced[34] = 1;"));
        let child = if os == TargetOs::FreeBsd {
            "p_pid"
        } else {
            "pr_pid"
        };
        assert!(
            script.contains(&format!(
                "proc:::create\n/lockscope_traced[pid]/\n{{\n\tlockscope_traced[args[0]->{child}] = 1;"
            )),
            "{os}: {script}"
        );
        check_golden(&format!("{}-defaults-pids.d", os.name()), &script);

        let mut tree = ScriptOptions::new(os);
        tree.target = ScriptTarget::Pids {
            pids: vec![12, 34],
            tree: true,
        };
        let script = generate_script(&tree).expect("tree");
        validate(&script, os);
        assert!(!code(&script).contains("$target") && !script.contains("lockscope_traced"));
        assert!(
            script.contains("/(progenyof(12) || progenyof(34))"),
            "{os}: {script}"
        );

        let mut all = ScriptOptions::new(os);
        all.target = ScriptTarget::All;
        let script = generate_script(&all).expect("all");
        validate(&script, os);
        assert!(
            !code(&script).contains("$target") && !script.contains("pid == "),
            "{os}: {script}"
        );
        assert!(script.contains("target every process"));
    }
    let mut options = ScriptOptions::new(TargetOs::Illumos);
    options.target = ScriptTarget::All;
    options.probes = vec!["plockstat".into()];
    let err = generate_script(&options).expect_err("plockstat of every process");
    assert!(
        err.to_string()
            .contains("probe `plockstat` needs the per-process provider of one process"),
        "{err}"
    );
    let mut options = ScriptOptions::new(TargetOs::Linux);
    options.target = ScriptTarget::Pids {
        pids: Vec::new(),
        tree: false,
    };
    assert!(generate_script(&options).is_err());
}
