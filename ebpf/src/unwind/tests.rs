//! Unit tests of the unwinder's own bookkeeping (the stores have theirs in their files).

use super::*;

/// A mapping that could not be opened is a failure only while its process still maps it: a
/// process that exited between the read of its maps and the open is not.
#[test]
fn unopened_mappings_of_gone_processes_are_not_failures() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read own maps");
    let line = maps
        .lines()
        .filter_map(parse_maps_line)
        .find(|line| line.executable && line.inode != 0)
        .expect("an executable file mapping");
    let unopened = || {
        vec![Unopened {
            start: line.start,
            end: line.end,
            inode: line.inode,
            path: line.path.to_owned(),
        }]
    };
    let mut exited = std::process::Command::new("true")
        .spawn()
        .expect("run true");
    let gone = exited.id();
    exited.wait().expect("reap true");
    assert_eq!(still_mapped(std::process::id(), unopened()).len(), 1);
    assert!(still_mapped(gone, unopened()).is_empty());
    let mut moved = unopened();
    moved[0].inode += 1;
    assert!(still_mapped(std::process::id(), moved).is_empty());
}
