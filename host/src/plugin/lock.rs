//! The lockfile: what was installed, from where, the sha256 of every file,
//! and the capabilities the user granted.
