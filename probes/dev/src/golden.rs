//! The golden-file check of every test binary that compares output with a file kept in the
//! repository (`profiler/tests/golden/`, `dtrace/tests/golden/`), the only one: each crate's
//! tests name their own directory.
//!
//! A test compares what it made with the file; `LOCKSCOPE_BLESS=1` writes what it made there
//! instead (then review the diff before committing it).

use std::path::Path;

/// Compares `actual` with the golden file `path`, or rewrites the file when `LOCKSCOPE_BLESS=1`.
pub fn check(path: &Path, actual: &str) {
    if std::env::var_os("LOCKSCOPE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, actual)
            .unwrap_or_else(|e| panic!("cannot write golden file {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden file {}: {e}; run with LOCKSCOPE_BLESS=1 to create it",
            path.display()
        )
    });
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    assert!(
        expected == actual,
        "{name} differs from its golden file {} (LOCKSCOPE_BLESS=1 rewrites it)\n\
         --- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
