//! Finds the report's sections: every `src/report/sections/NAME.rs` but `mod.rs` is one, and
//! declares its `SECTION`. This writes `OUT_DIR/sections.rs`, which `src/report/sections/mod.rs`
//! includes: a `mod NAME` per file and `FILES`, their `NAME::SECTION`s by file name (the report
//! orders them itself, from the catalog). A new section is one more file, found here by its name,
//! as the eBPF crate's build script finds its probes' loaders (`probes/dev/module_list.rs`
//! for both).

use std::env;
use std::path::PathBuf;

#[path = "../probes/dev/module_list.rs"]
mod module_list;
use module_list::{module_list, write_generated};

/// Where the sections are, from the crate's root.
const SECTIONS_DIR: &str = "src/report/sections";

fn main() {
    // A new or removed file changes the list; cargo scans the whole directory.
    println!("cargo:rerun-if-changed={SECTIONS_DIR}");
    let root =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let code = module_list(&root.join(SECTIONS_DIR), "const FILES", "Entry", "SECTION");
    write_generated(&out_dir.join("sections.rs"), &code);
}
