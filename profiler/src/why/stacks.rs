//! Stacks as `why` shows them: function names leaf first, places (unnamed frames folded by
//! module) and the few frames of a waiting site worth showing.

use lockscope_probes::{Profile, StackId};

/// Frames of a stack shown in the text and in a chain's hops.
pub(super) const HOP_FRAMES: usize = 4;

/// A stack's function names, leaf first (inlined functions expanded, innermost first).
pub(super) fn stack_names(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    profile
        .stack(id)
        .map(|s| s.frames.iter().flat_map(frame_names).collect())
        .unwrap_or_default()
}

/// A frame's function names, innermost (inlined) first.
fn frame_names(frame: &lockscope_probes::Frame) -> Vec<String> {
    let mut names = frame.names_outermost_first();
    names.reverse();
    names
}

/// A stack as a place where time went, leaf first: [`stack_names`], except that frames no symbol
/// names (a stripped library's inner functions: `libz.so.1.2.13+0x4a08`) are their module in
/// brackets, one for a run of them (`[libz.so.1.2.13]`), as stackcollapse-perf folds them. Two
/// samples a few instructions apart in an unnamed function are then one place, and so one cause,
/// instead of one cause per instruction.
pub(super) fn place_names(profile: &Profile, id: Option<StackId>) -> Vec<String> {
    let Some(stack) = profile.stack(id) else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for frame in &stack.frames {
        if frame.function.is_some() {
            names.extend(frame_names(frame));
            continue;
        }
        let module = format!("[{}]", frame.module.as_deref().unwrap_or("unknown"));
        if names.last() != Some(&module) {
            names.push(module);
        }
    }
    names
}

/// The frames of a waiting site worth showing: from the outermost synchronization entry point
/// (or the leaf) up, a few.
pub(super) fn site_frames(names: &[String]) -> Vec<String> {
    let entry = names
        .iter()
        .rposition(|n| crate::analysis::canonical::sync_entry(n).is_some())
        .unwrap_or(0);
    names.iter().skip(entry).take(HOP_FRAMES).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack as a place: named frames by function (inlined ones too), a run of unnamed frames
    /// of one module as that module once, so that samples in one stripped function are one place.
    #[test]
    fn places_fold_unnamed_frames_by_module() {
        let frame = |function: Option<&str>, module: &str, offset: u64| lockscope_probes::Frame {
            function: function.map(str::to_owned),
            module: Some(module.to_owned()),
            module_offset: Some(offset),
            ..lockscope_probes::Frame::unsymbolized(offset)
        };
        let stack = |leaf: u64| lockscope_probes::Stack {
            space: lockscope_probes::AddressSpace::User,
            frames: vec![
                frame(None, "libz.so.1", leaf),
                frame(None, "libz.so.1", 0x627c),
                frame(Some("deflate"), "libz.so.1", 0x6300),
                frame(None, "pigz", 0x5f05),
                frame(None, "pigz", 0x734e),
                frame(Some("start_thread"), "libc.so.6", 0x8000),
            ],
            truncated: false,
        };
        let profile = Profile {
            stacks: vec![stack(0x4a08), stack(0x4a0e)],
            ..Profile::default()
        };
        let (a, b) = (0, 1);
        let place = place_names(&profile, Some(a));
        assert_eq!(
            place,
            ["[libz.so.1]", "deflate", "[pigz]", "start_thread"].map(String::from)
        );
        assert_eq!(place_names(&profile, Some(b)), place);
        assert_eq!(stack_names(&profile, Some(a))[0], "libz.so.1+0x4a08");
        assert!(place_names(&profile, None).is_empty());
    }
}
