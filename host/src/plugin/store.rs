//! The plugin store under the data folder: one folder per installed
//! plugin version, and each plugin's own data folder.
