//! The throughput of one level, read from the load tool's output ([`Throughput`]: built-in
//! parsers for sysbench, ab and wrk, or a regular expression), or why there is none
//! ([`ThroughputError`]).

/// Why no throughput was read: a `--throughput-regex` that cannot read one, or an output
/// without one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThroughputError {
    /// The regular expression does not compile.
    #[error("invalid --throughput-regex `{pattern}`")]
    InvalidRegex {
        /// The expression.
        pattern: String,
        /// Why.
        #[source]
        source: regex::Error,
    },
    /// The regular expression has no group to capture the number with.
    #[error("--throughput-regex `{pattern}` has no capture group for the number")]
    NoCaptureGroup {
        /// The expression.
        pattern: String,
    },
    /// The regular expression captured something other than a number.
    #[error("--throughput-regex captured `{text}`, which is not a number")]
    NotANumber {
        /// What it captured.
        text: String,
        /// Why it does not parse.
        #[source]
        source: std::num::ParseFloatError,
    },
    /// The parser found no throughput in the output.
    #[error("no throughput found in the load output by the {parser} parser")]
    NotFound {
        /// The parser ([`Throughput::name`]).
        parser: String,
    },
}

/// Compiles a `--throughput-regex`.
fn compile(pattern: &str) -> Result<regex::Regex, ThroughputError> {
    regex::Regex::new(pattern).map_err(|source| ThroughputError::InvalidRegex {
        pattern: pattern.to_string(),
        source,
    })
}

/// How the throughput is read from the load tool's output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Throughput {
    /// Try sysbench, ab and wrk in turn (the default).
    #[default]
    Auto,
    /// sysbench: `transactions: N (X per sec.)`.
    Sysbench,
    /// ApacheBench: `Requests per second: X [#/sec] (mean)`.
    Ab,
    /// wrk: `Requests/sec: X`.
    Wrk,
    /// A regular expression whose first capture group is the throughput.
    Regex(String),
}

/// A throughput read from a load tool's output.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedThroughput {
    /// Operations per second.
    pub value: f64,
    /// What was counted (`transactions/s`, `requests/s`, `ops/s`).
    pub unit: String,
    /// The parser that found it (`sysbench`, `ab`, `wrk`, `regex`).
    pub parser: String,
}

fn number_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let line = text.lines().find(|l| l.trim_start().starts_with(marker))?;
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.split_whitespace().next()
}

fn parse_sysbench(text: &str) -> Option<ParsedThroughput> {
    // `    transactions:                        1439   (477.55 per sec.)`
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("transactions:"))?;
    let open = line.find('(')?;
    let value = line[open + 1..].split_whitespace().next()?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "transactions/s".to_string(),
        parser: "sysbench".to_string(),
    })
}

fn parse_ab(text: &str) -> Option<ParsedThroughput> {
    let value = number_after(text, "Requests per second:")?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "requests/s".to_string(),
        parser: "ab".to_string(),
    })
}

fn parse_wrk(text: &str) -> Option<ParsedThroughput> {
    let value = number_after(text, "Requests/sec:")?.parse().ok()?;
    Some(ParsedThroughput {
        value,
        unit: "requests/s".to_string(),
        parser: "wrk".to_string(),
    })
}

impl Throughput {
    /// Name on the command line and in the sweep file.
    pub fn name(&self) -> &str {
        match self {
            Throughput::Auto => "auto",
            Throughput::Sysbench => "sysbench",
            Throughput::Ab => "ab",
            Throughput::Wrk => "wrk",
            Throughput::Regex(_) => "regex",
        }
    }

    /// Checks a regular expression: it must compile and have a capture group.
    pub fn validate(&self) -> Result<(), ThroughputError> {
        if let Throughput::Regex(pattern) = self {
            if compile(pattern)?.captures_len() < 2 {
                return Err(ThroughputError::NoCaptureGroup {
                    pattern: pattern.clone(),
                });
            }
        }
        Ok(())
    }

    /// Reads the throughput from a load tool's output.
    pub fn parse(&self, output: &str) -> Result<ParsedThroughput, ThroughputError> {
        let found = match self {
            Throughput::Auto => parse_sysbench(output)
                .or_else(|| parse_ab(output))
                .or_else(|| parse_wrk(output)),
            Throughput::Sysbench => parse_sysbench(output),
            Throughput::Ab => parse_ab(output),
            Throughput::Wrk => parse_wrk(output),
            Throughput::Regex(pattern) => {
                let captured = compile(pattern)?
                    .captures(output)
                    .and_then(|c| c.get(1))
                    .map(|m| m.as_str().to_string());
                match captured {
                    Some(text) => Some(ParsedThroughput {
                        value: text.trim().parse().map_err(|source| {
                            ThroughputError::NotANumber {
                                text: text.clone(),
                                source,
                            }
                        })?,
                        unit: "ops/s".to_string(),
                        parser: "regex".to_string(),
                    }),
                    None => None,
                }
            }
        };
        found.ok_or_else(|| ThroughputError::NotFound {
            parser: self.name().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The built-in parsers read the captured outputs of the real tools; a regex reads anything.
    #[test]
    fn throughput_parsers() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let read = |name: &str| std::fs::read_to_string(data.join(name)).expect("fixture");
        let ab = Throughput::Auto
            .parse(&read("throughput-ab.txt"))
            .expect("ab");
        assert_eq!((ab.value, ab.parser.as_str()), (4928.16, "ab"));
        let wrk = Throughput::Wrk
            .parse(&read("throughput-wrk.txt"))
            .expect("wrk");
        assert_eq!(wrk.value, 11606.55);
        let sb = Throughput::Auto
            .parse(&read("throughput-sysbench.txt"))
            .expect("sysbench");
        assert_eq!((sb.value, sb.unit.as_str()), (477.55, "transactions/s"));
        let re = Throughput::Regex(r"queries:\s+\d+\s+\(([\d.]+) per sec".to_string());
        assert_eq!(
            re.parse(&read("throughput-sysbench.txt"))
                .expect("regex")
                .value,
            7640.82
        );
        assert!(Throughput::Ab.parse(&read("throughput-wrk.txt")).is_err());
        assert!(Throughput::Regex("no group".into()).validate().is_err());
    }
}
