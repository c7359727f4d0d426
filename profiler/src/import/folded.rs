//! `lockscope import folded`: folded stacks (`frame;frame;leaf VALUE` per line, root first, as
//! stackcollapse-* and `lockscope export --format folded` write). Each line becomes a record with a
//! user stack of those frames and no thread (so exporting it folded gives the same lines back,
//! merged and sorted). [`ImportOptions::folded_values`] says what the values are
//! ([`FoldedValues`]).

use super::{base_metadata, Builder, FoldedValues, ImportError, ImportOptions};
use lockscope_probes::{Profile, WaitKind};

pub(super) fn import_folded(
    text: &str,
    source: &str,
    options: &ImportOptions,
) -> Result<Profile, ImportError> {
    let mut builder = Builder::default();
    let mut lines_read = 0;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let (stack, value) = line
            .rsplit_once(' ')
            .ok_or_else(|| ImportError::FoldedLine {
                input: source.to_string(),
                line: number + 1,
            })?;
        let value: u64 = value
            .trim()
            .parse()
            .map_err(|error| ImportError::FoldedValue {
                input: source.to_string(),
                line: number + 1,
                value: value.to_string(),
                source: error,
            })?;
        lines_read += 1;
        if value == 0 {
            continue;
        }
        let frames: Vec<(String, bool)> = stack
            .split(';')
            .rev()
            .map(|name| (name.to_string(), false))
            .collect();
        let kind = match options.folded_values {
            FoldedValues::Samples => WaitKind::Sample,
            FoldedValues::Events => WaitKind::Event,
            FoldedValues::CpuNs => WaitKind::OnCpu,
            FoldedValues::WaitNs => WaitKind::classify_user_wait(
                frames.iter().map(|(name, _)| name.as_str()),
                WaitKind::Wait,
            ),
        };
        let user = builder.stack(frames);
        let key = ("folded".to_string(), kind, 0, 0, String::new(), user);
        match options.folded_values {
            FoldedValues::Samples | FoldedValues::Events => builder.add(key, value, 0),
            FoldedValues::WaitNs | FoldedValues::CpuNs => builder.add(key, 1, value),
        }
    }
    if lines_read == 0 {
        return Err(ImportError::NoFoldedStacks {
            input: source.to_string(),
        });
    }
    Ok(builder.finish(base_metadata("folded", options.os.as_deref(), source)))
}
