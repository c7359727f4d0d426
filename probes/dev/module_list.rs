//! The module list of a directory whose files are found, not listed: every build script that
//! discovers Rust files (`ebpf/build.rs` its probes' loaders, `profiler/build.rs` the report's
//! sections) includes this file by path, and writes what [`module_list`] returns to a file its
//! crate includes ([`write_generated`]).

use std::path::Path;

/// For every `NAME.rs` of `dir` but `mod.rs` and hidden files (an editor's `.#futex.rs`), sorted
/// by name: `#[path = ABSOLUTE]\nmod NAME;` (a `mod` in an included file is otherwise looked for
/// beside it, in `OUT_DIR`), then `{list}: &[{item_type}] = &[NAME::{item}, ...];`. A file
/// whose name is not a snake_case module name stops the build, naming `dir` and the file.
pub fn module_list(dir: &Path, list: &str, item_type: &str, item: &str) -> String {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("failed to list `{}`: {err}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let file = entry.ok()?.file_name().into_string().ok()?;
            file.strip_suffix(".rs")
                .filter(|name| *name != "mod" && !name.starts_with('.'))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    let mut code = String::new();
    for name in &names {
        let is_module = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !is_module {
            panic!(
                "`{}/{name}.rs`: its name must be a module name (snake_case, `_` for `-`)",
                dir.display()
            );
        }
        let path = dir.join(format!("{name}.rs"));
        let path = path
            .to_str()
            .unwrap_or_else(|| panic!("`{}` is not UTF-8", path.display()));
        code.push_str(&format!("#[path = {path:?}]\nmod {name};\n"));
    }
    code.push_str(&format!(
        "\n/// Each file's `{item}`, in file-name order.\n{list}: &[{item_type}] = &[\n"
    ));
    for name in &names {
        code.push_str(&format!("    {name}::{item},\n"));
    }
    code.push_str("];\n");
    code
}

/// Writes a generated file; a build script that cannot stops the build, naming the file.
pub fn write_generated(path: &Path, contents: &str) {
    if let Err(err) = std::fs::write(path, contents) {
        panic!("failed to write `{}`: {err}", path.display());
    }
}
