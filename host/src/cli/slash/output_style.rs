//! `/output-style`: the output styles there are, with the one in use
//! marked, and a switch to another (or back to `default`) from the next
//! prompt on.

use crate::agent::output_styles::DEFAULT_STYLE;
use crate::cli::escape;
use crate::cli::setup::Session;

/// Runs `/output-style [NAME]`.
pub fn run(session: &mut Session, argument: &str) {
    if argument.is_empty() {
        show(session);
        return;
    }
    match session.output_styles.pick(argument) {
        Ok(style) => {
            let name = style.map_or(DEFAULT_STYLE, |s| s.file.name.as_str());
            eprintln!(
                "output style: {} from the next prompt on",
                escape::line(name)
            );
            session.agent.set_output_style(style.cloned());
        }
        Err(why) => eprintln!("error: {}", escape::message(&why)),
    }
}

/// Lists the styles, marking the one in use.
fn show(session: &Session) {
    let current = session
        .agent
        .output_style()
        .map(|s| s.file.name.to_lowercase());
    let marker = |name: &str| {
        if current.as_deref().unwrap_or(DEFAULT_STYLE) == name.to_lowercase() {
            "*"
        } else {
            " "
        }
    };
    eprintln!("Output styles (/output-style NAME picks one):");
    eprintln!(
        "{} {DEFAULT_STYLE}: capstan's own prompt",
        marker(DEFAULT_STYLE)
    );
    for style in &session.output_styles.styles {
        let description = if style.file.description.is_empty() {
            String::new()
        } else {
            format!(": {}", escape::line(&style.file.description))
        };
        eprintln!(
            "{} {}{description} ({})",
            marker(&style.file.name),
            escape::line(&style.file.name),
            style.source
        );
    }
}
