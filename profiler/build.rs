//! Finds the report's sections: every `src/report/sections/NAME.rs` but `mod.rs` is one, and
//! declares its `SECTION`. This writes `OUT_DIR/sections.rs`, which `src/report/sections/mod.rs`
//! includes: a `mod NAME` per file and `FILES`, their `NAME::SECTION`s by file name (the report
//! orders them itself, from the catalog). A new section is one more file, found here by its name,
//! as the eBPF crate's build script finds its `*.bpf.c` objects.

use std::env;
use std::path::PathBuf;

/// Where the sections are, from the crate's root.
const SECTIONS_DIR: &str = "src/report/sections";

fn main() {
    // A new or removed file changes the list; cargo scans the whole directory.
    println!("cargo:rerun-if-changed={SECTIONS_DIR}");
    let root =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = root.join(SECTIONS_DIR);
    let names = section_names(&dir);
    let mut code = String::new();
    for name in &names {
        // An absolute path: the included file is in OUT_DIR, the section in the sources.
        let path = dir.join(format!("{name}.rs"));
        code.push_str(&format!(
            "#[path = {:?}]\nmod {name};\n",
            path.display().to_string()
        ));
    }
    code.push_str("/// Each file's section, by file name.\nconst FILES: &[Entry] = &[\n");
    for name in &names {
        code.push_str(&format!("    {name}::SECTION,\n"));
    }
    code.push_str("];\n");
    let generated = out_dir.join("sections.rs");
    if let Err(err) = std::fs::write(&generated, code) {
        panic!("failed to write `{}`: {err}", generated.display());
    }
}

/// The sections' names: every `NAME.rs` in `dir` but `mod.rs`, sorted.
fn section_names(dir: &std::path::Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("failed to list `{}`: {err}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let file = entry.ok()?.file_name().into_string().ok()?;
            file.strip_suffix(".rs").map(str::to_string)
        })
        .filter(|name| name != "mod")
        .collect();
    for name in &names {
        let identifier = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !identifier {
            panic!("section file `{SECTIONS_DIR}/{name}.rs`: its name must be a module name (snake_case)");
        }
    }
    names.sort();
    names
}
