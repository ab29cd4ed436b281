//! The audit log: every capability decision a plugin's call caused — a file
//! opened, a request sent or refused, an environment variable read, a secret
//! injected — appended as JSONL, each record hash-chained to the previous
//! one so an edited or truncated log is detected.
