//! Permissions at run time.
