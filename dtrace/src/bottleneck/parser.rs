//! [`StreamParser`]: picks the stream's lines out of dtrace's stdout as they come, and gathers
//! each event line with the `=== ustack`/`=== kstack` frame lines that follow it.

use super::event::{parse_event_line, Event};
use crate::catalog::TargetOs;
use crate::parse::ParsedFrame;

/// Which stack the frame lines that follow belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StackPart {
    User,
    Kernel,
}

/// Reads the stream's lines out of dtrace's stdout, as they come.
#[derive(Debug)]
pub struct StreamParser {
    os: TargetOs,
    current: Option<Event>,
    part: Option<StackPart>,
    /// Events parsed, for the stream to act on.
    done: Vec<Event>,
}

impl StreamParser {
    /// A parser for a script written for `os`.
    pub fn new(os: TargetOs) -> Self {
        StreamParser {
            os,
            current: None,
            part: None,
            done: Vec::new(),
        }
    }

    /// Takes `line` (without its newline) when it belongs to the stream: an event line, or a
    /// stack header, frame or empty line of the event being read. False: not the stream's (the
    /// event being read, if any, is complete).
    pub fn feed_line(&mut self, line: &str) -> bool {
        if line.starts_with("=== wf ") {
            self.flush();
            match parse_event_line(line, self.os) {
                Some(event) => self.current = Some(event),
                None => return true,
            }
            return true;
        }
        let Some(event) = self.current.as_mut() else {
            return false;
        };
        if line == "=== ustack" {
            self.part = Some(StackPart::User);
            return true;
        }
        if line == "=== kstack" {
            self.part = Some(StackPart::Kernel);
            return true;
        }
        if line.trim().is_empty() {
            return true;
        }
        if line.starts_with(char::is_whitespace) {
            let frame = ParsedFrame {
                text: line.trim().to_string(),
                annotation: None,
            };
            match self.part {
                Some(StackPart::User) => event.user_stack.push(frame),
                Some(StackPart::Kernel) => event.kernel_stack.push(frame),
                None => return false,
            }
            return true;
        }
        self.flush();
        false
    }

    /// Ends the event being read.
    pub fn flush(&mut self) {
        if let Some(event) = self.current.take() {
            self.done.push(event);
        }
        self.part = None;
    }

    /// The events complete since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.done)
    }
}
