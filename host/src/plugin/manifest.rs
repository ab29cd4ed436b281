//! `plugin.toml`: a plugin's name, version, components, requested
//! capabilities and limits, validated with errors that name the field and
//! line.
