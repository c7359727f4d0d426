//! `lockscope record --backend dtrace` end to end on any host: `--print-script` prints the
//! backend's golden scripts without running anything, and a recording through a fake dtrace
//! (`dtrace/tests/fake-dtrace`, selected with LOCKSCOPE_DTRACE) writes a profile that `report`
//! reads.

mod common;

use common::lockscope;
use std::path::PathBuf;

fn dtrace_tests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dtrace/tests")
}

/// `--print-script -p PID` prints, for each OS, exactly the dtrace crate's golden script for the
/// default probes, and runs nothing (no dtrace is needed).
#[test]
fn print_script_matches_the_golden_scripts() {
    for os in ["macos", "freebsd", "illumos"] {
        let out = lockscope()
            .args([
                "record",
                "--backend",
                "dtrace",
                "--os",
                os,
                "--print-script",
            ])
            .args(["-p", "4242"])
            .env("LOCKSCOPE_DTRACE", "/nonexistent/dtrace")
            .output()
            .expect("run lockscope");
        assert!(
            out.status.success(),
            "{os}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let golden =
            std::fs::read_to_string(dtrace_tests().join(format!("data/{os}-defaults-pid.d")))
                .expect("golden script");
        assert_eq!(String::from_utf8_lossy(&out.stdout), golden, "{os}");
    }
}

/// A macOS recording of a launched command through the fake dtrace: the command gets the
/// introspection libpthread, the profile holds the replayed records, and `report` reads it.
#[test]
fn record_through_a_fake_dtrace() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let lsp = tmp.path().join("mac.lsp");
    let seen = tmp.path().join("seen");
    let out = lockscope()
        .args(["record", "--backend", "dtrace", "--os", "macos", "-o"])
        .arg(&lsp)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "sleep 0.2; echo \"$DYLD_LIBRARY_PATH\" > {}",
            seen.display()
        ))
        .env("LOCKSCOPE_DTRACE", dtrace_tests().join("fake-dtrace"))
        .env(
            "FAKE_DTRACE_STDOUT",
            dtrace_tests().join("data/macos-record.out"),
        )
        .env("FAKE_DTRACE_BEGIN", "1")
        .env("FAKE_DTRACE_FOLLOW", "1")
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("recording with dtrace on macos"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&seen)
            .expect("the command ran")
            .trim(),
        "/usr/lib/system/introspection"
    );

    let out = lockscope()
        .arg("report")
        .arg(&lsp)
        .output()
        .expect("run report");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("launched by lockscope"), "{report}");
    assert!(report.contains("ended: target exited"), "{report}");
    assert!(report.contains("plockstat"), "{report}");
    assert!(
        report.contains("libsystem_kernel.dylib`__psynch_mutexwait"),
        "{report}"
    );
}
