//! Slash commands of the interactive session that have more to them than a
//! line of dispatch: `/model`, `/context`, `/status`, `/init`,
//! `/resume` and `/output-style`, one module each.

pub mod context;
pub mod init;
pub mod model;
pub mod output_style;
pub mod resume;
pub mod status;
