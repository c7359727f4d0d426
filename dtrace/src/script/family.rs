//! One aggregation family ([`Family`]): the aggregations of one probe's waits under one key,
//! the actions that fill them and the `printa()` that prints them in `END`.

use std::fmt::Write as _;

/// One aggregation family: the aggregations of one tag, printed by one `printa()`.
#[derive(Clone, Copy)]
pub(crate) struct Family {
    /// D identifier part: `@lockscope_<tag>_count`.
    pub(crate) tag: &'static str,
    /// Catalog probe name.
    pub(crate) probe: &'static str,
    /// WaitKind name, or `auto`.
    pub(crate) kind: &'static str,
    /// Key by `stack()` too.
    pub(crate) kernel_stack: bool,
    /// Aggregate durations (count, sum, max, quantize) rather than just count.
    pub(crate) timed: bool,
}

impl Family {
    pub(crate) fn keys(&self, op: &str, object: &str) -> String {
        let mut keys = format!("{op}, pid, tid, (uint64_t)({object}), execname, ustack()");
        if self.kernel_stack {
            keys.push_str(", stack()");
        }
        keys
    }

    /// Statements that add one event to the family's aggregations.
    pub(crate) fn aggregate(&self, out: &mut String, op: &str, object: &str, ns: &str) {
        let keys = self.keys(op, object);
        let tag = self.tag;
        let _ = writeln!(out, "\t@lockscope_{tag}_count[{keys}] = count();");
        if self.timed {
            let _ = writeln!(out, "\t@lockscope_{tag}_total[{keys}] = sum({ns});");
            let _ = writeln!(out, "\t@lockscope_{tag}_max[{keys}] = max({ns});");
            let _ = writeln!(out, "\t@lockscope_{tag}_hist[{keys}] = quantize({ns});");
        }
    }

    /// The `printa()` statement of the `END` clause.
    pub(crate) fn printa(&self, out: &mut String) {
        let mut format = format!(
            "\\n=== lockscope record probe={} kind={}\\n=== key op=%s pid=%d tid=%d \
             object=0x%x\\n=== thread %s\\n=== ustack%k",
            self.probe, self.kind
        );
        if self.kernel_stack {
            format.push_str("=== kstack%k");
        }
        format.push_str("=== count %@d\\n");
        let tag = self.tag;
        let mut aggs = format!("@lockscope_{tag}_count");
        if self.timed {
            format.push_str("=== total_ns %@d\\n=== max_ns %@d\\n=== histogram%@d\\n");
            let _ = write!(
                aggs,
                ", @lockscope_{tag}_total, @lockscope_{tag}_max, @lockscope_{tag}_hist"
            );
        }
        format.push_str("=== end\\n");
        let _ = writeln!(out, "\tprinta(\"{format}\",\n\t    {aggs});");
    }
}

pub(crate) fn family_of(
    tag: &'static str,
    probe: &'static str,
    kind: &'static str,
    kernel_stack: bool,
    timed: bool,
) -> Family {
    Family {
        tag,
        probe,
        kind,
        kernel_stack,
        timed,
    }
}
