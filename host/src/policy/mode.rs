//! Permission modes: how much runs without asking.

use std::fmt;
use std::str::FromStr;

/// How much the agent may do without asking the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Read-only tools inside the workspace run; everything else asks.
    #[default]
    Default,
    /// Edits inside the workspace run too; tools that reach outside it ask.
    AcceptEdits,
    /// Nothing that changes files runs; read-only tools that reach outside ask.
    Plan,
    /// Everything runs except what a deny rule forbids.
    Bypass,
    /// As default, but what would ask is denied instead: only what the
    /// mode lets run or an allow rule pre-approves runs (Claude Code's
    /// `dontAsk`).
    DontAsk,
}

impl Mode {
    /// Every mode, in the order `/mode` and `--help` list them.
    pub const ALL: [Mode; 5] = [
        Mode::Default,
        Mode::AcceptEdits,
        Mode::Plan,
        Mode::Bypass,
        Mode::DontAsk,
    ];

    /// The kebab-case name, as written in settings and on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AcceptEdits => "accept-edits",
            Mode::Plan => "plan",
            Mode::Bypass => "bypass",
            Mode::DontAsk => "dont-ask",
        }
    }

    /// One line saying what the mode lets run, for `/mode` and `--help`.
    pub fn describe(&self) -> &'static str {
        match self {
            Mode::Default => "read-only tools run; edits and network access ask first",
            Mode::AcceptEdits => {
                "read-only tools and edits inside the workspace run; network access asks first"
            }
            Mode::Plan => "nothing that changes files runs; network reads ask first",
            Mode::Bypass => "everything runs without asking, except what deny rules forbid",
            Mode::DontAsk => {
                "read-only tools and allow-listed calls run; whatever would ask is denied"
            }
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is not one of [`Mode::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown permission mode `{given}`; valid modes are default, accept-edits, plan, bypass, dont-ask"
)]
pub struct ModeError {
    /// The name that was given.
    pub given: String,
}

impl FromStr for Mode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "default" => Ok(Mode::Default),
            "accept-edits" | "acceptEdits" => Ok(Mode::AcceptEdits),
            "plan" => Ok(Mode::Plan),
            "bypass" | "bypassPermissions" => Ok(Mode::Bypass),
            "dont-ask" | "dontAsk" => Ok(Mode::DontAsk),
            _ => Err(ModeError {
                given: s.to_string(),
            }),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Mode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_display() {
        for mode in Mode::ALL {
            assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
            assert!(!mode.describe().is_empty());
        }
        assert_eq!("acceptEdits".parse::<Mode>().unwrap(), Mode::AcceptEdits);
        assert_eq!("bypassPermissions".parse::<Mode>().unwrap(), Mode::Bypass);
        assert_eq!("dontAsk".parse::<Mode>().unwrap(), Mode::DontAsk);
        assert_eq!(Mode::AcceptEdits.to_string(), "accept-edits");
    }

    #[test]
    fn unknown_mode_lists_the_valid_ones() {
        let err = "yolo".parse::<Mode>().unwrap_err().to_string();
        assert!(err.contains("`yolo`"), "{err}");
        for mode in Mode::ALL {
            assert!(err.contains(mode.name()), "{err}");
        }
    }
}
