//! Progress of long steps on stderr: plugin builds, toolchain installs and
//! component compiles.
//!
//! On a terminal a step is a spinner (or, for one of several steps, a bar)
//! with the time it has taken so far, redrawn in place and cleared when the
//! step ends. Anywhere else (a pipe, a log, a test) nothing is redrawn: the
//! caller prints plain lines, so the output holds no control characters.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a spinner is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// A step: spinner, label, elapsed time, latest detail.
const SPINNER_TEMPLATE: &str = "  {spinner} {prefix} {elapsed} {wide_msg}";

/// One of several steps: spinner, label, bar, count, elapsed time, detail.
const BAR_TEMPLATE: &str = "  {spinner} {prefix} [{bar:20}] {pos}/{len} {elapsed} {wide_msg}";

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A spinner or bar with the elapsed time, redrawn in place on stderr.
    Bar,
    /// Plain lines on stderr, printed by the caller when a step ends.
    Lines,
    /// Nothing.
    Quiet,
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise.
    pub fn for_stderr() -> Self {
        if std::io::stderr().is_terminal() {
            Self::Bar
        } else {
            Self::Lines
        }
    }

    /// Whether the caller should print plain lines about the step.
    pub fn prints_lines(self) -> bool {
        self != Self::Quiet
    }

    /// Starts a step: on a terminal, a spinner showing `label` and the
    /// elapsed time.
    pub fn start(self, label: &str) -> Step {
        let bar = (self == Self::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(style(SPINNER_TEMPLATE));
            bar.set_prefix(label.to_string());
            bar.enable_steady_tick(TICK);
            bar
        });
        Step::new(self, bar)
    }

    /// Starts step `index` (from 0) of `total`: on a terminal, a bar
    /// filled to the steps already done, with a spinner, `label` and the
    /// elapsed time.
    pub fn start_counted(self, label: &str, index: usize, total: usize) -> Step {
        let bar = (self == Self::Bar).then(|| {
            let total = total.max(1) as u64;
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(style(BAR_TEMPLATE));
            bar.set_prefix(label.to_string());
            bar.set_position((index as u64).min(total));
            bar.enable_steady_tick(TICK);
            bar
        });
        Step::new(self, bar)
    }
}

/// The look of a step; indicatif's default if the template is refused
/// (it is a constant, so that would be a mistake caught by the tests).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .progress_chars("=> ")
        .tick_chars("|/-\\ ")
}

/// A step being shown. Dropping it clears its spinner, so an error path
/// leaves no half-drawn line behind.
#[derive(Debug)]
pub struct Step {
    mode: Progress,
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Step {
    fn new(mode: Progress, bar: Option<ProgressBar>) -> Self {
        Self {
            mode,
            bar,
            started: Instant::now(),
        }
    }

    /// Shows one line a program run by the step printed: beside the
    /// spinner on a terminal, as an indented line on stderr otherwise,
    /// nowhere when quiet.
    pub fn output(&self, line: &str) {
        match self.mode {
            Progress::Bar => self.detail(line),
            Progress::Lines => eprintln!("    {line}"),
            Progress::Quiet => {}
        }
    }

    /// Whether [`Step::output`] lines stay on the screen (so an error need
    /// not repeat them).
    pub fn keeps_output(&self) -> bool {
        self.mode == Progress::Lines
    }

    /// Shows `detail` (such as the latest line an installer printed)
    /// beside the spinner, cut to the terminal's width; does nothing
    /// without a spinner.
    pub fn detail(&self, detail: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(detail.trim().to_string());
        }
    }

    /// Whether a spinner is drawn (so output meant for the user must go
    /// through [`Step::detail`] or [`Step::println`]).
    pub fn is_drawn(&self) -> bool {
        self.bar.is_some()
    }

    /// Prints `line` on stderr, above the spinner if there is one.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// How long the step has taken so far.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Ends the step, clearing its spinner; returns how long it took.
    pub fn finish(self) -> Duration {
        self.elapsed()
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_are_accepted() {
        for template in [SPINNER_TEMPLATE, BAR_TEMPLATE] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn without_a_terminal_nothing_is_drawn() {
        for mode in [Progress::Lines, Progress::Quiet] {
            let step = mode.start("building");
            assert!(!step.is_drawn());
            step.detail("a line that goes nowhere");
            assert!(!mode.start_counted("compiling", 0, 2).is_drawn());
        }
        assert!(Progress::Lines.prints_lines());
        assert!(!Progress::Quiet.prints_lines());
    }
}
