//! The name of a canonical wait site (`clone3;start_thread;…;take_order_lock;pthread_mutex_lock;
//! [kernel wait];[mutex]`, [`crate::analysis::canonical`]) wherever one is shown to people:
//! `diff`'s table, `sweep`'s table and finding, and the HTML's diff, sweep and summary cells.
//! Leaf first from the telling frame ([`frames::site_name_index`]), then the kind
//! (`take_order_lock <- place_order <- … [mutex]`), as docs/FRAMES.md says; the canonical stack
//! stays the site's key, which `--json` and `--folded` write.

use crate::analysis::canonical::KERNEL_WAIT_FRAME;
use crate::analysis::fold::NO_USER_STACK;
use crate::render::frames::{self, StackStyle};

/// A site's name in at most `max` columns: with [`StackStyle::Readable`], its canonical stack
/// leaf first from its telling frame (past the synchronization entry point, the runtime and the
/// generic wait wrappers: [`frames::site_index`]) as far as fits, then its kind, from `leafward`
/// frames nearer the leaf (where two sites would read the same); with [`StackStyle::Full`], the
/// whole canonical stack, root first.
pub fn site_name(site: &str, style: StackStyle, leafward: usize, max: usize) -> String {
    if style == StackStyle::Full {
        return site.to_string();
    }
    let mut frames_leaf_first: Vec<&str> = site.split(';').rev().collect();
    let kind = if frames_leaf_first.len() > 1 {
        frames_leaf_first.remove(0)
    } else {
        ""
    };
    frames_leaf_first.retain(|f| *f != KERNEL_WAIT_FRAME);
    let room = max.saturating_sub(kind.chars().count() + 1).max(1);
    // A wait without a user stack says so first, whatever the frames around the marker.
    let from = if frames_leaf_first.first() == Some(&NO_USER_STACK) {
        0
    } else {
        frames::site_name_index(&frames_leaf_first)
            .unwrap_or(0)
            .saturating_sub(leafward)
    };
    let at = frames::leaf_first_line_from(&frames_leaf_first, from, style, room);
    if at.is_empty() {
        kind.to_string()
    } else {
        format!("{at} {kind}")
    }
}

/// A site's name in its readable form ([`site_name`] from its telling frame), in at most `max`
/// columns: for a sentence or a cell that shows one site (`sweep`'s table and finding, the HTML's
/// cells).
pub fn site_label(site: &str, max: usize) -> String {
    site_name(site, StackStyle::Readable, 0, max)
}

/// The names of `sites` ([`site_name`], in at most `max` columns): a name two different sites
/// would share starts nearer the leaf (the wait's own frames), until they differ or there is
/// nothing nearer. The same site given twice has the same name.
pub fn site_names(sites: &[&str], style: StackStyle, max: usize) -> Vec<String> {
    let mut leafward = vec![0usize; sites.len()];
    let mut names: Vec<String> = sites.iter().map(|s| site_name(s, style, 0, max)).collect();
    for _ in 0..4 {
        let mut changed = false;
        let shared: Vec<bool> = (0..names.len())
            .map(|i| (0..names.len()).any(|j| names[j] == names[i] && sites[j] != sites[i]))
            .collect();
        for i in 0..names.len() {
            if shared[i] {
                let longer = site_name(sites[i], style, leafward[i] + 1, max);
                if longer != names[i] {
                    leafward[i] += 1;
                    names[i] = longer;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site is named leaf first from its telling frame, then its kind; two sites that would
    /// read the same start nearer the leaf, the same site twice reads the same, a site without a
    /// user stack says so first; `--full-stacks` names them by the canonical stack.
    #[test]
    fn sites_are_named_leaf_first_from_the_telling_frame() {
        let mutex = "clone3;start_thread;worker_main;process_order;take_order_lock;\
                     pthread_mutex_lock;[kernel wait];[mutex]";
        assert_eq!(
            site_name(mutex, StackStyle::Readable, 0, 98),
            "take_order_lock <- process_order <- worker_main [mutex]"
        );
        assert_eq!(site_name(mutex, StackStyle::Full, 0, 98), mutex);
        let sleep = "_start;main;std::thread::sleep;nanosleep;[off-cpu]";
        let join = "_start;main;join;[off-cpu]";
        assert_eq!(
            site_names(&[sleep, join, sleep], StackStyle::Readable, 98),
            [
                "std::thread::sleep <- main [off-cpu]",
                "join <- main [off-cpu]",
                "std::thread::sleep <- main [off-cpu]"
            ]
        );
        assert_eq!(
            site_name("[no user stack];[wait]", StackStyle::Readable, 0, 98),
            "[no user stack] [wait]"
        );
        assert_eq!(
            site_name(
                "mariadbd;[no user stack];[off-cpu]",
                StackStyle::Readable,
                0,
                98
            ),
            "[no user stack] <- mariadbd [off-cpu]"
        );
    }

    /// A name cut to fit its columns keeps its kind and stays within them.
    #[test]
    fn a_site_name_fits_its_columns() {
        let deep = "clone3;start_thread;worker_main;handle_request;process_order;\
                    take_order_lock;pthread_mutex_lock;[kernel wait];[mutex]";
        let name = site_name(deep, StackStyle::Readable, 0, 40);
        assert!(name.chars().count() <= 40, "{name}");
        assert!(name.starts_with("take_order_lock"), "{name}");
        assert!(name.ends_with(" [mutex]"), "{name}");
    }
}
