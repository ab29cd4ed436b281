//! `capstan plugin install` on a Claude Code marketplace folder: which of
//! its plugins to install (`--plugin NAME`, `NAME@PATH`, `--all`), and the
//! listing shown when none is picked.

use std::path::PathBuf;

use super::Exit;
use super::escape;
use super::exit::Failure;
use crate::plugin::claude_marketplace::{Marketplace, is_marketplace, is_marketplace_only};

/// The source to install from and the marketplace plugins picked (none
/// for a plugin folder or archive). `NAME@PATH` picks `NAME` from the
/// marketplace at `PATH`; a marketplace folder with nothing picked is
/// listed and the command stops, saying how to pick.
pub fn picks(
    source: PathBuf,
    mut plugins: Vec<String>,
    all: bool,
) -> Result<(PathBuf, Vec<String>), Failure> {
    let mut source = source;
    if !source.exists()
        && let Some((name, path)) = source.to_string_lossy().split_once('@')
        && !name.is_empty()
        && !name.contains('/')
        && is_marketplace(std::path::Path::new(path))
    {
        plugins.push(name.to_string());
        source = PathBuf::from(path);
    }
    let marketplace_only = is_marketplace_only(&source);
    if plugins.is_empty() && !all {
        if marketplace_only {
            let market = load(&source)?;
            print!("{}", escape::text(&market.listing()));
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "nothing installed: pick a plugin with `capstan plugin install {} --plugin NAME` (or NAME@{}), or install them all with --all",
                    source.display(),
                    source.display()
                ),
            ));
        }
        return Ok((source, Vec::new()));
    }
    if !is_marketplace(&source) {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "{} is not a Claude Code marketplace folder (it has no .claude-plugin/marketplace.json); --plugin and --all pick plugins from one",
                source.display()
            ),
        ));
    }
    let market = load(&source)?;
    if all {
        plugins = market.names().into_iter().map(str::to_string).collect();
    }
    for plugin in &plugins {
        market
            .entry(plugin)
            .map_err(|e| Failure::new(Exit::Usage, e))?;
    }
    plugins.dedup();
    Ok((source, plugins))
}

fn load(source: &std::path::Path) -> Result<Marketplace, Failure> {
    Marketplace::load(source).map_err(|e| Failure::new(Exit::Usage, e))
}

/// The exit after installing `picked` plugins of which `failed` were not
/// installed: success when at least one was.
pub fn summary(picked: usize, failed: &[String]) -> Result<Exit, Failure> {
    if failed.is_empty() {
        return Ok(Exit::Success);
    }
    let installed = picked - failed.len();
    if installed == 0 {
        return Err(Failure::new(
            Exit::Error,
            format!(
                "none of the {picked} plugins was installed ({}); see the warnings above",
                failed.join(", ")
            ),
        ));
    }
    eprintln!(
        "installed {installed} of {picked} plugins; not installed: {}",
        failed.join(", ")
    );
    Ok(Exit::Success)
}
